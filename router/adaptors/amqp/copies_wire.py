"""Protocol version 3 on the inter-router AMQP links (``docs/protocol.md``, section 2).

A ``Copy`` is a pre-settled transfer on the data link, its delivery tag the gid, in a
private message format (``COPY_FORMAT``): a header, then the message bytes unchanged.
The header: flags, the inner message format, the root's stamp, the topic, root, stream,
the routers visited, the targets (router, position, low, redelivery, keys) and the
consumer group members the root chose. Strings are length-prefixed (one byte for router
ids, two for everything else); a header that does not parse is a ``DecodeError`` (the
connection shell closes the link with ``amqp:decode-error``; nothing else is touched).

``Routed`` control items travel on the control link as AMQP lists (``routed_to_list``),
like the link-state messages' maps. Written by hand like ``wire.py``: a fixed binary
header per forwarded message is cheaper than an AMQP map, and no library fits.
"""

from __future__ import annotations

import struct
from typing import Any

from once.records.membership import GroupId
from once.records.outcomes import Outcome, OutcomeKind
from once.records.owed import Said

from ...amqp.errors import DecodeError
from ...core.messages import Answer, Control, Copy, Routed, Settle, Target

COPY_FORMAT = 0x4F4E4303  # "ONC" vendor prefix, version 3
_HEAD = struct.Struct(">BIQ")  # flags, inner message format, root stamp
_TARGET = struct.Struct(">QQB")  # position, low, redelivery
PRESETTLED = 0x01
_B = struct.Struct(">B")
_H = struct.Struct(">H")


def _short(value: str | bytes) -> bytes:
    b = value.encode() if isinstance(value, str) else value
    if len(b) > 255:
        raise ValueError(f"router id or stream too long for the routing header: {len(b)} bytes")
    return _B.pack(len(b)) + b


def _long(value: str) -> bytes:
    b = value.encode()
    return _H.pack(len(b)) + b


def pack_copy(copy: Copy) -> bytes:
    """The header of one copy (the message bytes follow it)."""
    parts = [_HEAD.pack(PRESETTLED if copy.presettled else 0, copy.message_format, copy.born),
             _long(copy.topic), _short(copy.root), _short(copy.stream), _B.pack(len(copy.visited))]
    parts += [_short(r) for r in sorted(copy.visited)]
    parts.append(_B.pack(len(copy.targets)))
    for t in copy.targets:
        parts += [_short(t.router), _TARGET.pack(t.position, t.low, 1 if t.redelivery else 0), _H.pack(len(t.keys))]
        parts += [_long(f"{c}\x00{n}") for c, n in sorted(t.keys)]
    parts.append(_H.pack(len(copy.chosen)))
    parts += [_long(f"{router}\x00{g.scope}\x00{g.name}\x00{c}\x00{n}") for (c, n), g, router in copy.chosen]
    return b"".join(parts)


class _Reader:
    __slots__ = ("data", "p")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.p = 0

    def take(self, n: int) -> bytes:
        if self.p + n > len(self.data):
            raise IndexError
        out = self.data[self.p:self.p + n]
        self.p += n
        return out

    def unpack(self, s: struct.Struct) -> tuple[Any, ...]:
        return s.unpack(self.take(s.size))

    def short(self) -> bytes:
        return self.take(self.unpack(_B)[0])

    def long(self) -> str:
        return self.take(self.unpack(_H)[0]).decode()


def unpack_copy(gid: bytes, payload: bytes) -> Copy:
    try:
        r = _Reader(payload)
        flags, fmt, born = r.unpack(_HEAD)
        topic = r.long()
        root = r.short().decode()
        stream = r.short()
        visited = frozenset(r.short().decode() for _ in range(r.unpack(_B)[0]))
        targets = []
        for _ in range(r.unpack(_B)[0]):
            router = r.short().decode()
            position, low, redelivery = r.unpack(_TARGET)
            keys = frozenset(tuple(r.long().split("\x00", 1)) for _ in range(r.unpack(_H)[0]))
            if any(len(k) != 2 for k in keys):
                raise ValueError("a subscriber key without its link name")
            targets.append(Target(router, keys, position, low, bool(redelivery)))  # type: ignore[arg-type]
        chosen = []
        for _ in range(r.unpack(_H)[0]):
            router, scope, name, c, n = r.long().split("\x00", 4)
            chosen.append(((c, n), GroupId(name, scope), router))
        message = payload[r.p:]
    except (struct.error, IndexError, UnicodeDecodeError, ValueError):
        raise DecodeError("malformed inter-router copy header (protocol version 3)") from None
    return Copy(gid, topic, message, bool(flags & PRESETTLED), fmt, root, stream, born, tuple(targets), visited,
                tuple(chosen))


# ------------------------------------------------------------------ control

ROUTED = "Routed"


def routed_to_list(msg: Routed) -> list[Any]:
    items: list[Any] = []
    for item in msg.items:
        if type(item) is Answer:
            said = [[c, n, s.value, e.condition if e else None, e.description if e else None]
                    for (c, n), s, e in item.said]
            items.append(["A", item.gid, item.stream, item.position, said])
        else:
            items.append(["S", item.gid])
    return [ROUTED, msg.to, msg.frm, msg.ttl, items]


def routed_from_list(value: list[Any]) -> Routed:
    try:
        _, to, frm, ttl, raw = value
        items: list[Control] = []
        for item in raw:
            if item[0] == "A":
                _, gid, stream, position, said = item
                answers = tuple(((str(c), str(n)), Said(s), Outcome(OutcomeKind.REJECTED, cond or "", desc or "")
                                 if cond is not None or Said(s) is Said.REJECTED else None)
                                for c, n, s, cond, desc in said)
                items.append(Answer(bytes(gid), bytes(stream), int(position), answers))
            elif item[0] == "S":
                items.append(Settle(bytes(item[1])))
            else:
                raise ValueError(item[0])
        return Routed(str(to), str(frm), tuple(items), int(ttl))
    except (TypeError, ValueError, IndexError):
        raise DecodeError("malformed inter-router control message (protocol version 3)") from None
