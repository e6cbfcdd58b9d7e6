"""The routing header on inter-router data transfers.

A forwarded delivery carries, ahead of the unchanged message bytes, the topic, the
destination routers behind this hop and the original message format. Transfers so
framed use a private message format so they can never be mistaken for a bare message.
"""

from __future__ import annotations

import struct

from .amqp.errors import DecodeError

ONCE_FORMAT = 0x4F4E4301  # "ONC" vendor prefix, version 1
_H = struct.Struct(">BIH")  # flags, inner message format, topic length
PRESETTLED = 0x01


_PACKED: dict[tuple[str, frozenset[str], bool, int], bytes] = {}


def pack(topic: str, dests: frozenset[str], presettled: bool, message_format: int) -> bytes:
    """The header for one forward; the same few (topic, destinations) recur, so cache them."""
    key = (topic, dests, presettled, message_format)
    header = _PACKED.get(key)
    if header is None:
        if len(_PACKED) > 4096:
            _PACKED.clear()
        header = _PACKED[key] = _pack(topic, dests, presettled, message_format)
    return header


def _pack(topic: str, dests: frozenset[str], presettled: bool, message_format: int) -> bytes:
    t = topic.encode()
    parts = [_H.pack(PRESETTLED if presettled else 0, message_format, len(t)), t, bytes((len(dests),))]
    for d in sorted(dests):
        b = d.encode()
        parts.append(bytes((len(b),)))
        parts.append(b)
    return b"".join(parts)


def unpack(payload: bytes) -> tuple[str, frozenset[str], bool, int, bytes]:
    """(topic, destinations, presettled, inner message format, message bytes)."""
    try:
        flags, fmt, tlen = _H.unpack_from(payload, 0)
        p = _H.size
        topic = payload[p:p + tlen].decode()
        p += tlen
        n = payload[p]
        p += 1
        dests = []
        for _ in range(n):
            ln = payload[p]
            dests.append(payload[p + 1:p + 1 + ln].decode())
            p += 1 + ln
        if p > len(payload):
            raise IndexError
    except (struct.error, IndexError, UnicodeDecodeError):
        raise DecodeError("malformed inter-router routing header") from None
    return topic, frozenset(dests), bool(flags & PRESETTLED), fmt, payload[p:]
