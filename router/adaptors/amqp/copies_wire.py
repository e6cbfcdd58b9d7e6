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
header per forwarded message is cheaper than an AMQP map, and no library fits. The parts
that recur (a stream's prefix, a target's router and keys) are length-prefixed, packed
once and read once.
"""

from __future__ import annotations

import struct
from typing import Any, TypeVar, cast

from once.records.membership import GroupId
from once.records.outcomes import Outcome, OutcomeKind
from once.records.owed import Said

from ...amqp.errors import DecodeError
from ...core.messages import Answer, Ask, Control, Copy, CopyTarget, Ended, Forgot, Handed, Note, Routed, Settle, Told

T = TypeVar("T")
COPY_FORMAT = 0x4F4E4304  # "ONC" vendor prefix, version 3 (its second header layout)
_HEAD = struct.Struct(">BI")  # flags, inner message format
_TARGET = struct.Struct(">QQB")  # position, low, redelivery
PRESETTLED = 0x01
RESENT = 0x02  # its publisher sent it again to this root (``Copy.resent``)
_B = struct.Struct(">B")
_H = struct.Struct(">H")
_Q = struct.Struct(">Q")
_QB = struct.Struct(">QB")  # the root's stamp, the number of targets


def _short(value: str | bytes) -> bytes:
    b = value.encode() if isinstance(value, str) else value
    if len(b) > 255:
        raise ValueError(f"router id or stream too long for the routing header: {len(b)} bytes")
    return _B.pack(len(b)) + b


def _long(value: str) -> bytes:
    b = value.encode()
    return _H.pack(len(b)) + b


def _remember(table: dict[Any, T], key: Any, value: T) -> T:
    """Keep ``value`` under ``key`` in one of the caches here (each at most 4096 entries)."""
    if len(table) > 4096:
        table.clear()
    table[key] = value
    return value


# What stays the same from copy to copy of one stream on one path (the flags, the format,
# topic, root, stream, visited routers, chosen members), and each target's router and
# keys, packed once: a copy packs only its stamp, positions and lows.
_PREFIXES: dict[tuple[Any, ...], bytes] = {}
_TARGETS: dict[tuple[str, frozenset[tuple[str, str]]], bytes] = {}


def _prefix(copy: Copy) -> bytes:
    key = (copy.presettled, copy.message_format, copy.topic, copy.root, copy.stream, copy.visited, copy.chosen,
           copy.user, copy.resent)
    prefix = _PREFIXES.get(key)
    if prefix is None:
        flags = (PRESETTLED if copy.presettled else 0) | (RESENT if copy.resent else 0)
        parts = [_HEAD.pack(flags, copy.message_format), _long(copy.topic),
                 _short(copy.root), _short(copy.stream), _B.pack(len(copy.visited))]
        parts += [_short(r) for r in sorted(copy.visited)]
        parts.append(_H.pack(len(copy.chosen)))
        parts += [_long(f"{router}\x00{g.scope}\x00{g.name}\x00{g.pattern}\x00{c}\x00{n}")
                  for (c, n), g, router in copy.chosen]
        parts.append(_long(copy.user))
        body = b"".join(parts)
        prefix = _remember(_PREFIXES, key, _H.pack(len(body)) + body)
    return prefix


def _target(t: CopyTarget) -> bytes:
    key = (t.router, t.keys)
    packed = _TARGETS.get(key)
    if packed is None:
        body = b"".join([_short(t.router), _H.pack(len(t.keys))] + [_long(f"{c}\x00{n}") for c, n in sorted(t.keys)])
        packed = _remember(_TARGETS, key, _H.pack(len(body)) + body)
    return packed


def pack_copy(copy: Copy) -> bytes:
    """The header of one copy (the message bytes follow it)."""
    parts = [_prefix(copy), _Q.pack(copy.born), _B.pack(len(copy.targets))]
    for t in copy.targets:
        parts += [_target(t), _TARGET.pack(t.position, t.low, 1 if t.redelivery else 0)]
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


# What a prefix or a target's router and keys said, by their bytes: the same few recur.
_PREFIX_OF: dict[bytes, tuple[bool, int, str, str, bytes, frozenset[str], tuple[Any, ...], str, bool]] = {}
_TARGET_OF: dict[bytes, tuple[str, frozenset[tuple[str, str]]]] = {}


def _read_prefix(raw: bytes) -> tuple[bool, int, str, str, bytes, frozenset[str], tuple[Any, ...], str, bool]:
    r = _Reader(raw)
    flags, fmt = r.unpack(_HEAD)
    topic = r.long()
    root = r.short().decode()
    stream = r.short()
    visited = frozenset(r.short().decode() for _ in range(r.unpack(_B)[0]))
    chosen = []
    for _ in range(r.unpack(_H)[0]):
        router, scope, name, pattern, c, n = r.long().split("\x00", 5)
        chosen.append(((c, n), GroupId(name, scope, pattern), router))
    user = r.long()
    if r.p != len(raw):
        raise ValueError("trailing bytes in a copy header")
    return bool(flags & PRESETTLED), fmt, topic, root, stream, visited, tuple(chosen), user, bool(flags & RESENT)


def _read_target(raw: bytes) -> tuple[str, frozenset[tuple[str, str]]]:
    r = _Reader(raw)
    router = r.short().decode()
    keys = frozenset(tuple(r.long().split("\x00", 1)) for _ in range(r.unpack(_H)[0]))
    if any(len(k) != 2 for k in keys) or r.p != len(raw):
        raise ValueError("a malformed target")
    return router, keys  # type: ignore[return-value]


def unpack_copy(gid: bytes, payload: bytes) -> Copy:
    # (offsets and ``unpack_from`` rather than a ``_Reader``: this runs for every copy a
    # router relays or takes, and the parts that need reading are cached by their bytes)
    try:
        (n,) = _H.unpack_from(payload, 0)
        p = 2 + n
        raw = payload[2:p]
        if len(raw) != n:
            raise IndexError
        fields = _PREFIX_OF.get(raw) or _remember(_PREFIX_OF, raw, _read_prefix(raw))
        presettled, fmt, topic, root, stream, visited, chosen, user, resent = fields
        born, count = _QB.unpack_from(payload, p)
        p += 9
        targets = []
        for _ in range(count):
            (n,) = _H.unpack_from(payload, p)
            p += 2
            seg = payload[p:p + n]
            if len(seg) != n:
                raise IndexError
            p += n
            router, keys = _TARGET_OF.get(seg) or _remember(_TARGET_OF, seg, _read_target(seg))
            position, low, redelivery = _TARGET.unpack_from(payload, p)
            p += 17
            targets.append(CopyTarget(router, keys, position, low, bool(redelivery)))
        message = payload[p:]
    except (struct.error, IndexError, UnicodeDecodeError, ValueError):
        raise DecodeError("malformed inter-router copy header (protocol version 3)") from None
    return Copy(gid, topic, message, presettled, fmt, root, stream, born, tuple(targets), visited, chosen, user,
                resent)


# ------------------------------------------------------------------ control

ROUTED = 0x78  # the control message's descriptor (the link-state messages' is 0x77)
_RHEAD = struct.Struct(">B")
_POS = struct.Struct(">Q")
_I = struct.Struct(">I")
_QH = struct.Struct(">QH")  # a run's first position and length
_SAID_CODE = {said: i for i, said in enumerate(Said)}
_SAID_OF = list(Said)


def pack_items(items: tuple[Control, ...]) -> bytes:
    """Answers and settlements, packed like the copy header (they are many and small).

    The usual batch is a run of answers "every key accepted" for consecutive positions of
    one stream, and a run of settlements: each run goes as one item (``R``: the stream,
    the first position, the gids; ``T``: the gids), so the router reading it makes one
    pass over plain gids (an ``A`` item each cost three times as much to read)."""
    parts: list[bytes] = []
    i, n = 0, len(items)
    while i < n:
        item = items[i]
        if type(item) is Answer:
            j = i + 1
            if not item.said:
                stream, position = item.stream, item.position
                while (j < n and type(nxt := items[j]) is Answer and not nxt.said and nxt.stream == stream
                       and nxt.position == position + (j - i) and j - i < 0xFFFF):
                    j += 1
            if j - i > 1:
                parts += [b"R", _short(item.stream), _POS.pack(item.position), _H.pack(j - i)]
                parts += [_short(cast(Answer, a).gid) for a in items[i:j]]  # (all Answers: the loop above)
                i = j
                continue
            parts += [b"A", _short(item.gid), _short(item.stream), _POS.pack(item.position), _H.pack(len(item.said))]
            for (c, nm), said, error in item.said:
                parts += [_long(f"{c}\x00{nm}"), _B.pack(_SAID_CODE[said])]
                if said is Said.REJECTED:
                    parts += [_long(error.condition if error else ""), _long(error.description if error else "")]
            i += 1
        elif type(item) is Ask:  # (rare: a root that took a resent message over asks)
            parts += [b"Q", _short(item.gid), _long(item.topic), _Q.pack(item.stamp)]
            i += 1
        elif type(item) is Told:
            parts += [b"K", _short(item.gid), _B.pack(item.unsure | item.taken << 1), _H.pack(len(item.members))]
            if item.taken:
                parts.append(_Q.pack(item.stamp))
            for (c, nm), group, router, had in item.members:
                parts += [_long(f"{c}\x00{nm}"), _long(group.name), _long(group.scope), _long(group.pattern),
                          _short(router), _B.pack(had)]
            i += 1
        elif type(item) is Note:  # (an adaptor's: MQTT sessions)
            parts += [b"N", _short(item.channel), _I.pack(len(item.body)), item.body]
            i += 1
        elif type(item) is Forgot:  # (rare: a router that restarted, about its old life's copy)
            parts += [b"F", _short(item.gid)]
            i += 1
        elif type(item) is Ended:  # (rare: a group member closed)
            c, nm = item.key
            parts += [b"E", _long(f"{c}\x00{nm}"), _Q.pack(item.since)]
            i += 1
        elif type(item) is Handed:  # (rare: a router leaving hands over what members that ended there had)
            c, nm = item.key
            g = item.group
            parts += [b"H", _long(f"{c}\x00{nm}"), _long(g.name), _long(g.scope), _long(g.pattern),
                      _Q.pack(item.since), _I.pack(min(0xFFFFFFFF, max(0, int(item.ttl * 1000)))),
                      _I.pack(len(item.gids))] + [_short(gid) for gid in item.gids]
            i += 1
        else:
            j = i + 1
            while j < n and type(items[j]) is Settle and j - i < 0xFFFF:
                j += 1
            parts += [b"T", _H.pack(j - i)] + [_short(cast(Settle, s).gid) for s in items[i:j]]
            i = j
    return b"".join(parts)


def _gids(blob: bytes, p: int, count: int) -> tuple[list[bytes], int]:
    """``count`` short-prefixed gids from ``p``; and where they end."""
    out = []
    for _ in range(count):
        n = blob[p]
        gid = blob[p + 1:p + 1 + n]
        if len(gid) != n:
            raise IndexError
        out.append(gid)
        p += 1 + n
    return out, p


def unpack_items(blob: bytes) -> tuple[Control, ...]:
    out: list[Control] = []
    p, end = 0, len(blob)
    while p < end:
        kind = blob[p]
        p += 1
        if kind == 0x52:  # R: answers "every key accepted", consecutive positions of one stream
            n = blob[p]
            stream = blob[p + 1:p + 1 + n]
            p += 1 + n
            first, count = _QH.unpack_from(blob, p)
            gids, p = _gids(blob, p + 10, count)
            out += [Answer(gid, stream, first + k, ()) for k, gid in enumerate(gids)]
        elif kind == 0x54:  # T: settlements
            (count,) = _H.unpack_from(blob, p)
            gids, p = _gids(blob, p + 2, count)
            out += [Settle(gid) for gid in gids]
        elif kind == 0x46 or kind == 0x53:  # F: a router that restarted holds nothing of it; S: one settlement
            (gid,), p = _gids(blob, p, 1)
            out.append(Forgot(gid) if kind == 0x46 else Settle(gid))
        elif kind == 0x41:  # A: one answer, naming what each key did
            r = _Reader(blob)
            r.p = p
            gid, stream = r.short(), r.short()
            (position,) = r.unpack(_POS)
            said = []
            for _ in range(r.unpack(_H)[0]):
                c, nm = r.long().split("\x00", 1)
                s = _SAID_OF[r.unpack(_B)[0]]
                error = Outcome(OutcomeKind.REJECTED, r.long(), r.long()) if s is Said.REJECTED else None
                said.append(((c, nm), s, error))
            out.append(Answer(gid, stream, position, tuple(said)))
            p = r.p
        elif kind == 0x51:  # Q: a root asks whom a message's group members were
            r = _Reader(blob)
            r.p = p
            gid, topic = r.short(), r.long()
            (stamp,) = r.unpack(_Q)
            out.append(Ask(gid, topic, stamp))
            p = r.p
        elif kind == 0x4B:  # K: what a router knows of them
            r = _Reader(blob)
            r.p = p
            gid = r.short()
            (flags,) = r.unpack(_B)
            (count,) = r.unpack(_H)
            (held,) = r.unpack(_Q) if flags & 2 else (0,)
            members = []
            for _ in range(count):
                c, nm = r.long().split("\x00", 1)
                name, scope, pattern = r.long(), r.long(), r.long()
                router = r.short().decode()
                (had,) = r.unpack(_B)
                members.append(((c, nm), GroupId(name, scope, pattern), router, had))
            out.append(Told(gid, tuple(members), bool(flags & 1), bool(flags & 2), held))
            p = r.p
        elif kind == 0x4E:  # N: a note for an adaptor's component
            n = blob[p]
            channel = blob[p + 1:p + 1 + n].decode()
            p += 1 + n
            (size,) = _I.unpack_from(blob, p)
            body = blob[p + 4:p + 4 + size]
            if len(body) != size:
                raise IndexError
            out.append(Note(channel, body))
            p += 4 + size
        elif kind == 0x45:  # E: a group member's subscription ended at the sender
            r = _Reader(blob)
            r.p = p
            c, nm = r.long().split("\x00", 1)
            (since,) = r.unpack(_Q)
            out.append(Ended((c, nm), since))
            p = r.p
        elif kind == 0x48:  # H: what members that ended at a router leaving the network had
            r = _Reader(blob)
            r.p = p
            c, nm = r.long().split("\x00", 1)
            name, scope, pattern = r.long(), r.long(), r.long()
            (since,) = r.unpack(_Q)
            (ttl_ms,) = r.unpack(_I)
            (count,) = r.unpack(_I)
            gids, p = _gids(blob, r.p, count)
            out.append(Handed((c, nm), GroupId(name, scope, pattern), tuple(gids), ttl_ms / 1000, since))
        else:
            raise ValueError(kind)
    if p != end:
        raise IndexError
    return tuple(out)


def routed_to_bytes(msg: Routed) -> bytes:
    """``msg`` as the body of a control transfer: who to, who from, hops left, the items
    (packed once, by the router they come from; a router in the middle passes them on)."""
    return b"".join((_RHEAD.pack(msg.ttl), _short(msg.to), _short(msg.frm), msg.blob or pack_items(msg.items)))


def routed_from_bytes(body: bytes, me: str) -> Routed:
    """A control transfer's ``Routed``: its items read only if they are for ``me``."""
    try:
        r = _Reader(body)
        (ttl,) = r.unpack(_RHEAD)
        to, frm = r.short().decode(), r.short().decode()
        blob = body[r.p:]
        if to != me:
            return Routed(to, frm, (), ttl, blob)
        return Routed(to, frm, unpack_items(blob), ttl)
    except (struct.error, IndexError, UnicodeDecodeError, ValueError):
        raise DecodeError("malformed inter-router control message (protocol version 3)") from None
