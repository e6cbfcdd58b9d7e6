"""The few message sections the client library writes and reads.

A message goes out as a properties section (message-id) and one data section; on the
way in, any body section is accepted, and the header tells whether it is a redelivery.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from once.router.adaptors.amqp.message import sections
from once.router.amqp.codec import decode, dumps
from once.router.amqp.types import Described, ulong

_PROPERTIES, _DATA, _SEQUENCE, _VALUE, _HEADER, _APPLICATION = 0x73, 0x75, 0x76, 0x77, 0x70, 0x74
_GROUP_ID = 10  # (its place in the properties section's list)


def _str(s: str) -> bytes:
    b = s.encode()
    return (b"\xa1" + len(b).to_bytes(1, "big") if len(b) < 256 else b"\xb1" + len(b).to_bytes(4, "big")) + b


def _fast(body: bytes, message_id: str, group_id: str | None) -> bytes:
    """``encode`` for the common message (a string id, perhaps a group id, a body), its
    bytes written out: the outbox relay encodes each of its rows, and the general encoder
    costs it more than the rest of the send (``test_message.py`` holds the two equal)."""
    items = _str(message_id) + (b"\x40" * 9 + _str(group_id) if group_id is not None else b"")
    count = 11 if group_id is not None else 1
    if len(items) + 1 < 256:
        props = b"\x00\x53\x73\xc0" + (len(items) + 1).to_bytes(1, "big") + count.to_bytes(1, "big") + items
    else:
        props = b"\x00\x53\x73\xd0" + (len(items) + 4).to_bytes(4, "big") + count.to_bytes(4, "big") + items
    n = len(body)
    data = b"\x00\x53\x75\xa0" + n.to_bytes(1, "big") if n < 256 else b"\x00\x53\x75\xb0" + n.to_bytes(4, "big")
    return props + data + bytes(body)


def encode(body: bytes, message_id: str | None = None, *, group_id: str | None = None,
           application: dict[str, str] | None = None) -> bytes:
    """``group_id``: the key a consumer group shards by; ``application``: string
    application properties."""
    if isinstance(message_id, str) and not application:
        return _fast(body, message_id, group_id)
    out = b""
    if message_id is not None or group_id is not None:
        fields: list[Any] = [message_id]
        if group_id is not None:
            fields += [None] * (_GROUP_ID - 1) + [group_id]
        out += dumps(Described(ulong(_PROPERTIES), fields))
    if application:
        out += dumps(Described(ulong(_APPLICATION), dict(application)))
    return out + dumps(Described(ulong(_DATA), bytes(body)))


@dataclass(frozen=True, slots=True)
class Decoded:
    body: Any
    message_id: Any
    delivery_count: int
    first_acquirer: bool


def decode_message(payload: bytes) -> Decoded:
    body: Any = None
    message_id: Any = None
    count = 0
    first = True
    for code, start, _end in sections(payload):
        value, _ = decode(payload, start)
        fields = value.value if isinstance(value, Described) else None
        if code == _HEADER and isinstance(fields, list):
            if len(fields) > 3 and fields[3] is not None:
                first = bool(fields[3])
            if len(fields) > 4 and fields[4] is not None:
                count = int(fields[4])
        elif code == _PROPERTIES and isinstance(fields, list) and fields:
            message_id = fields[0]
        elif code == _DATA:
            body = fields if body is None else body + fields
        elif code in (_VALUE, _SEQUENCE):
            body = fields
    return Decoded(body, message_id, count, first)
