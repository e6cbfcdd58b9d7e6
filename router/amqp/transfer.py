"""Hand-built encodings of the per-message frames: transfer and disposition.

These two frames are written once per message (or per range of messages), so they skip
the generic dataclass encoder. ``tests/amqp/test_transfer.py`` checks that they decode
to the same performatives the generic encoder writes.
"""

from __future__ import annotations

import struct
from typing import Any

from . import codec

_HDR = struct.Struct(">IBBH")
_I = struct.Struct(">I")
_NULL = b"\x40"
_TRUE = b"\x41"
_FALSE = b"\x42"


def _uint(v: int) -> bytes:
    if v == 0:
        return b"\x43"
    if v < 256:
        return b"\x52" + bytes((v,))
    return b"\x70" + _I.pack(v)


def _state(state: Any) -> bytes:
    out = bytearray()
    codec.encode(state, out)
    return bytes(out)


def _frame(channel: int, descriptor: bytes, fields: list[bytes], payload_size: int = 0) -> bytearray:
    """The frame; with ``payload_size``, its head, for a payload the caller writes after it."""
    while fields and fields[-1] is _NULL:
        fields.pop()
    body = b"".join(fields)
    size = len(body) + 1
    if size < 256:
        head = bytes((0xC0, size, len(fields)))
    else:
        head = b"\xd0" + _I.pack(size + 3) + _I.pack(len(fields))
    out = bytearray(_HDR.pack(8 + len(descriptor) + len(head) + len(body) + payload_size, 2, 0, channel))
    out += descriptor
    out += head
    out += body
    return out


def encode_transfer(
    channel: int, handle: int, delivery_id: int | None, tag: bytes | None, message_format: int, settled: bool,
    more: bool, state: Any, resume: bool, aborted: bool, payload: bytes | memoryview,
) -> bytes | bytearray:
    out = transfer_head(channel, handle, delivery_id, tag, message_format, settled, more, state, resume, aborted,
                        len(payload))
    out += payload
    return out


# The shape of nearly every transfer (one frame, no state): header, descriptor, list8 of
# handle, delivery-id, tag, format, settled, the numbers as fixed-width uints so the head
# is two packs around the tag instead of a field list joined per message.
_SIMPLE = struct.Struct(">IBBH3sBBBBIBIBB")
_SIMPLE_TAIL = struct.Struct(">BIB")
_TRANSFER = b"\x00\x53\x14"


def transfer_head(
    channel: int, handle: int, delivery_id: int | None, tag: bytes | None, message_format: int, settled: bool,
    more: bool, state: Any, resume: bool, aborted: bool, payload_size: int,
) -> bytes | bytearray:
    """A transfer frame without its payload (the caller writes the payload right behind it)."""
    if delivery_id is not None and tag is not None and state is None and not (more or resume or aborted):
        n = len(tag)
        size = 19 + n  # the list's bytes after its size byte: count, five fields
        return (_SIMPLE.pack(13 + size + payload_size, 2, 0, channel, _TRANSFER, 0xC0, size, 5, 0x70, handle, 0x70,
                             delivery_id, 0xA0, n)
                + tag + _SIMPLE_TAIL.pack(0x70, message_format, 0x41 if settled else 0x42))
    fields = [
        _uint(handle),
        _NULL if delivery_id is None else _uint(delivery_id),
        _NULL if tag is None else bytes((0xA0, len(tag))) + tag,
        _NULL if delivery_id is None else _uint(message_format),
        _TRUE if settled else _FALSE,
        _TRUE if more else _NULL,
        _NULL,
        _NULL if state is None else _state(state),
        _TRUE if resume else _NULL,
        _TRUE if aborted else _NULL,
    ]
    return _frame(channel, b"\x00\x53\x14", fields, payload_size)


def transfer_overhead(tag: bytes, state: Any) -> int:
    """Upper bound of a transfer frame's size without its payload."""
    return 44 + len(tag) + (1 if state is None else len(_state(state)))  # (8 header, 3 descriptor, 33 fields)


def encode_disposition(channel: int, receiver: bool, first: int, last: int, settled: bool, state: Any) -> bytearray:
    """``receiver``: the role of the endpoint writing the frame (true for a receiver)."""
    fields = [
        _TRUE if receiver else _FALSE,
        _uint(first),
        _NULL if last == first else _uint(last),
        _TRUE if settled else _NULL,
        _NULL if state is None else (_ACCEPTED if type(state).__name__ == "Accepted" else _state(state)),
    ]
    return _frame(channel, b"\x00\x53\x15", fields)


_ACCEPTED = b"\x00\x53\x24\x45"
