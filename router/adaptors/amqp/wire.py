"""The routing header on inter-router data transfers.

A forwarded delivery carries, ahead of the unchanged message bytes, the topic, the
destination routers behind this hop, the original message format, the root router
and its stamp (publish order, see ``Record.born``). Transfers so
framed use a private message format so they can never be mistaken for a bare message.
"""

from __future__ import annotations

import struct

from once.records.membership import GroupId

from ...amqp.errors import DecodeError

ONCE_FORMAT = 0x4F4E4302  # "ONC" vendor prefix, version 2 (version 1 had no stamp)
_H = struct.Struct(">BIH")  # flags, inner message format, topic length
_BORN = struct.Struct(">Q")
PRESETTLED = 0x01
REDELIVERY = 0x02  # re-targeted to subscribers that moved here: they may have seen it
KEYS = 0x04  # only these subscriber keys, not every local subscriber
CHOSEN = 0x08  # the consumer group members the root chose (``Record.chosen``)


Keys = frozenset[tuple[str, str]]
_PACKED: dict[tuple[str, frozenset[str], bool, int, str], bytes] = {}


Chosen = dict[tuple[str, str], tuple[GroupId, str]]


def pack(topic: str, dests: frozenset[str], presettled: bool, message_format: int, root: str, born: int,
         keys: Keys | None = None, chosen: Chosen | None = None) -> bytes:
    """The header for one forward; the same few (topic, destinations, root) recur, so cache them."""
    if keys is not None or chosen:
        return _pack(topic, dests, presettled, message_format, root, keys, chosen) + _BORN.pack(born)
    key = (topic, dests, presettled, message_format, root)
    header = _PACKED.get(key)
    if header is None:
        if len(_PACKED) > 4096:
            _PACKED.clear()
        header = _PACKED[key] = _pack(topic, dests, presettled, message_format, root, None)
    return header + _BORN.pack(born)


def _strings(values: list[str]) -> list[bytes]:
    out = [bytes((len(values),))]
    for v in values:
        b = v.encode()
        out.append(bytes((len(b),)))
        out.append(b)
    return out


def _pack(topic: str, dests: frozenset[str], presettled: bool, message_format: int, root: str,
          keys: Keys | None, chosen: Chosen | None = None) -> bytes:
    t = topic.encode()
    flags = ((PRESETTLED if presettled else 0) | (REDELIVERY | KEYS if keys is not None else 0)
             | (CHOSEN if chosen else 0))
    parts = [_H.pack(flags, message_format, len(t)), t, *_strings(sorted(dests)), *_strings([root])]
    if keys is not None:
        parts += _strings([f"{c}\x00{n}" for c, n in sorted(keys)])
    if chosen:
        parts += _strings([f"{router}\x00{g.scope}\x00{g.name}\x00{g.pattern}\x00{c}\x00{n}"
                           for (c, n), (g, router) in sorted(chosen.items())])
    return b"".join(parts)


def _read_strings(payload: bytes, p: int) -> tuple[list[str], int]:
    n = payload[p]
    p += 1
    out = []
    for _ in range(n):
        ln = payload[p]
        if p + 1 + ln > len(payload):
            raise IndexError
        out.append(payload[p + 1:p + 1 + ln].decode())
        p += 1 + ln
    return out, p


# The last plain header read (no keys, no chosen members) up to its stamp, and what it
# said. Every field before the stamp is length-prefixed, so a payload that starts with
# these bytes has exactly this header: the few headers that recur are parsed once.
_last_head: bytes | None = None
_last_fields: tuple[str, frozenset[str], bool, int, str] = ("", frozenset(), False, 0, "")


def unpack(payload: bytes) -> tuple[str, frozenset[str], bool, int, bytes, Keys | None, str, int, Chosen | None]:
    """(topic, destinations, presettled, inner message format, message bytes, target keys, root, root stamp,
    chosen group members)."""
    global _last_head, _last_fields
    if _last_head is not None and payload.startswith(_last_head):
        p = len(_last_head)
        if len(payload) >= p + 8:
            topic, dests, presettled, fmt, root = _last_fields
            return topic, dests, presettled, fmt, payload[p + 8:], None, root, _BORN.unpack_from(payload, p)[0], None
    try:
        flags, fmt, tlen = _H.unpack_from(payload, 0)
        p = _H.size
        if p + tlen > len(payload):
            raise IndexError
        topic = payload[p:p + tlen].decode()
        p += tlen
        listed, p = _read_strings(payload, p)
        roots, p = _read_strings(payload, p)
        if len(roots) != 1:
            raise IndexError
        keys = None
        if flags & KEYS:
            raw, p = _read_strings(payload, p)
            # (a key is a (container-id, link) pair: one without its separator is malformed)
            keys = frozenset((c, nm) for c, nm in (k.split("\x00", 1) for k in raw))
        chosen: Chosen | None = None
        if flags & CHOSEN:
            raw, p = _read_strings(payload, p)
            chosen = {}
            for item in raw:
                router, scope, name, pattern, c, n = item.split("\x00", 5)
                chosen[(c, n)] = (GroupId(name, scope, pattern), router)
        (born,) = _BORN.unpack_from(payload, p)
    except (struct.error, IndexError, UnicodeDecodeError, ValueError):
        raise DecodeError("malformed inter-router routing header") from None
    fields = (topic, frozenset(listed), bool(flags & PRESETTLED), fmt, roots[0])
    if keys is None and chosen is None:
        _last_head = bytes(payload[:p])
        _last_fields = fields
    return fields[0], fields[1], fields[2], fmt, payload[p + _BORN.size:], keys, fields[4], born, chosen
