"""What the router reads or changes in a message: its sections stay bytes otherwise.

Only the header is ever rewritten (to mark a redelivery); the body is never decoded.
"""

from __future__ import annotations

from .amqp.codec import decode, dumps
from .amqp.errors import DecodeError
from .amqp.types import Described, ubyte, uint, ulong

HEADER = 0x70
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


def _header_fields(payload: bytes) -> tuple[list, int]:
    """Decode a leading header section's fields; (fields, end) or ([], 0) if there is none."""
    if len(payload) >= 3 and payload[0] == 0x00 and payload[1] == 0x53 and payload[2] == HEADER:
        value, end = decode(payload, 3)
        if isinstance(value, list):
            return value, end
    return [], 0


def mark_redelivered(payload: bytes, extra_deliveries: int) -> bytes:
    """Set first-acquirer false and raise delivery-count by ``extra_deliveries``."""
    fields, end = _header_fields(payload)
    fields = list(fields) + [None] * (5 - len(fields))
    count = fields[4] or 0
    fields[3] = False
    fields[4] = uint(count + extra_deliveries)
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
