"""What the router reads or changes in a message: its sections stay bytes otherwise.

Only the header is ever rewritten (to mark a redelivery); the body is never decoded.
``check`` runs when a message arrives from a publisher: whatever the router may later
have to parse is validated there, so a message that reaches a subscriber can always be
redelivered (a header the router cannot rewrite would otherwise surface only when a
subscriber releases the message or resumes, long after the publisher was answered).
"""

from __future__ import annotations

from typing import Any

from ...amqp.codec import decode, dumps
from ...amqp.errors import DecodeError
from ...amqp.types import Described, symbol, ubyte, uint, ulong

HEADER = 0x70
HEADER_SYMBOL = symbol("amqp:header:list")
MAX_UINT = 0xFFFFFFFF
# header fields: (name, kind, upper bound for integers)
_HEADER_FIELDS = (("durable", bool, 0), ("priority", int, 0xFF), ("ttl", int, MAX_UINT),
                  ("first-acquirer", bool, 0), ("delivery-count", int, MAX_UINT))
SECTION_NAMES = {0x70: "header", 0x71: "delivery-annotations", 0x72: "message-annotations", 0x73: "properties",
                 0x74: "application-properties", 0x75: "data", 0x76: "amqp-sequence", 0x77: "amqp-value",
                 0x78: "footer"}


def sections(payload: bytes) -> list[tuple[int, int, int]]:
    """(descriptor code, start, end) of each section; raises DecodeError if malformed."""
    out = []
    pos = 0
    while pos < len(payload):
        start = pos
        if payload[pos] != 0x00:
            raise DecodeError(f"message section at offset {pos} is not described")
        descriptor, pos = decode(payload, pos + 1)
        if not isinstance(descriptor, int) or descriptor not in SECTION_NAMES:
            raise DecodeError(f"unknown message section {descriptor!r}")
        _, pos = _skip(payload, pos)
        out.append((descriptor, start, pos))
    return out


def _skip(payload: bytes, pos: int) -> tuple[None, int]:
    _, end = decode(payload, pos)
    return None, end


def _header_fields(payload: bytes) -> tuple[list[Any], int]:
    """Decode a leading header section's fields; (fields, end) or ([], 0) if there is none.

    Raises DecodeError when the header is there but is not a list of valid fields.
    """
    n = len(payload)
    if not n or payload[0] != 0x00 or (n > 1 and payload[1] == 0x53 and (n < 3 or payload[2] != 0x70)):
        return [], 0  # (the common case, a section other than the header, costs no decode)
    descriptor, pos = decode(payload, 1)
    if type(descriptor) is bool or descriptor not in (HEADER, HEADER_SYMBOL):
        return [], 0
    value, end = decode(payload, pos)
    if not isinstance(value, list):
        raise DecodeError(f"message header is a {type(value).__name__}, not a list")
    if len(value) > len(_HEADER_FIELDS):
        raise DecodeError(f"message header has {len(value)} fields, at most {len(_HEADER_FIELDS)} are defined")
    for field, (name, kind, top) in zip(value, _HEADER_FIELDS):
        if field is None:
            continue
        if kind is bool:
            if type(field) is not bool:
                raise DecodeError(f"message header {name} is {type(field).__name__}, not boolean")
        elif type(field) is bool or not isinstance(field, int) or not 0 <= field <= top:
            raise DecodeError(f"message header {name} is {field!r}, not an unsigned integer up to {top}")
    return value, end


def check(payload: bytes, message_format: int = 0) -> None:
    """Raise DecodeError if the router could not carry ``payload`` safely (see the module doc).

    Only the standard format (0) is read; other formats pass through untouched.
    """
    if message_format == 0:
        _header_fields(payload)


def mark_redelivered(payload: bytes, extra_deliveries: int) -> bytes:
    """Set first-acquirer false and raise delivery-count by ``extra_deliveries``."""
    fields, end = _header_fields(payload)
    fields = list(fields) + [None] * (5 - len(fields))
    count = fields[4] or 0
    fields[3] = False
    fields[4] = uint(min(count + extra_deliveries, MAX_UINT))
    if fields[1] is not None:
        fields[1] = ubyte(fields[1])
    if fields[2] is not None:
        fields[2] = uint(fields[2])
    while fields and fields[-1] is None:
        fields.pop()
    return dumps(Described(ulong(HEADER), fields)) + payload[end:]


def delivery_count(payload: bytes) -> int:
    fields, _ = _header_fields(payload)
    return int(fields[4]) if len(fields) > 4 and fields[4] is not None else 0
