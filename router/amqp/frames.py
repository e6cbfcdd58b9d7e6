"""Frame layer: protocol headers, frame splitting and frame building.

A frame is ``size:uint32 doff:uint8 type:uint8 channel:uint16 [ext] body``. The
reader works on a growing buffer and returns every complete frame at once, so a burst
of small transfers costs one call (batch parsing is what keeps the router fast).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from . import codec
from .errors import DecodeError, FramingError
from .performatives import ACCEPTED, Disposition, Role, Transfer

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
HEADER_SIZE = 8
MIN_MAX_FRAME_SIZE = 512

_HDR = struct.Struct(">IBBH")
EMPTY_FRAME = _HDR.pack(8, 2, 0, 0)


class FrameType(IntEnum):
    AMQP = 0
    SASL = 1


_FRAME_TYPES = (FrameType.AMQP, FrameType.SASL)  # indexed: no enum call per frame


@dataclass(slots=True)  # (not frozen: one per frame, and frozen fields cost three times as much to set)
class Frame:
    type: FrameType
    channel: int
    body: Any  # a performative, or None for an empty (heartbeat) frame
    payload: bytes = b""


class FrameReader:
    """Split a byte stream into frames; enforce the frame size we advertised."""

    __slots__ = ("_buf", "max_frame_size")

    def __init__(self, max_frame_size: int = MIN_MAX_FRAME_SIZE) -> None:
        self._buf = bytearray()
        self.max_frame_size = max_frame_size

    def feed(self, data: bytes) -> None:
        self._buf += data

    def take(self, n: int) -> bytes | None:
        """Take ``n`` raw bytes (a protocol header) if they are all there."""
        if len(self._buf) < n:
            return None
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def pending(self) -> int:
        return len(self._buf)

    def frames(self) -> Iterator[Frame]:
        buf = self._buf
        pos = 0
        n = len(buf)
        try:
            while n - pos >= 8:
                size, doff, ftype, channel = _HDR.unpack_from(buf, pos)
                if size < 8:
                    raise FramingError(f"frame size {size} is below the 8-byte header")
                if size > self.max_frame_size:
                    raise FramingError(f"frame of {size} bytes exceeds max-frame-size {self.max_frame_size}")
                if doff < 2 or doff * 4 > size:
                    raise FramingError(f"invalid data offset {doff} for a frame of {size} bytes")
                if ftype > 1:
                    raise FramingError(f"unknown frame type {ftype}")
                if n - pos < size:
                    break
                start = pos + doff * 4
                end = pos + size
                pos = end
                if start == end:
                    yield Frame(_FRAME_TYPES[ftype], channel, None)
                    continue
                try:
                    if ftype == 0 and end - start > 3 and buf[start] == 0 and buf[start + 1] == 0x53 \
                            and buf[start + 2] == 0x14:
                        # A transfer's payload is copied out of the read buffer once, straight into
                        # the bytes the record keeps (no copy of the whole body, then of its tail).
                        fast = _fast_transfer_at(buf, start, end)
                        if fast is not None:
                            t, p = fast
                            if p == end:
                                payload = b""
                            else:
                                with memoryview(buf) as mv:
                                    payload = mv[p:end].tobytes()
                            yield Frame(FrameType.AMQP, channel, t, payload)
                            continue
                    with memoryview(buf) as mv:
                        body = mv[start:end].tobytes()
                    frame = _decode_body(_FRAME_TYPES[ftype], channel, body)
                except (IndexError, ValueError, TypeError, KeyError, struct.error) as e:
                    # Whatever the peer's bytes make a decoder trip over is the peer's decode error.
                    raise DecodeError(f"malformed frame body ({type(e).__name__})") from None
                yield frame
        finally:
            del buf[:pos]


def _decode_body(ftype: FrameType, channel: int, body: bytes) -> Frame:
    # (a transfer's fast path was tried on the read buffer already: ``frames``)
    if ftype is FrameType.AMQP and len(body) > 3 and body[:3] == b"\x00\x53\x15":
        disp = _fast_disposition(body)
        if disp is not None:
            return Frame(ftype, channel, disp)
    if body[0] != 0x00:
        raise DecodeError("frame body is not a described performative")
    performative, end = codec.decode(body, 0)
    if not hasattr(performative, "DESCRIPTOR"):
        raise DecodeError(f"unknown performative {getattr(performative, 'descriptor', performative)!r}")
    code = performative.DESCRIPTOR
    if ftype is FrameType.AMQP and not 0x10 <= code <= 0x18:
        raise DecodeError(f"{performative.NAME} is not an AMQP performative")
    if ftype is FrameType.SASL and not 0x40 <= code <= 0x44:
        raise DecodeError(f"{performative.NAME} is not a SASL frame")
    payload = body[end:] if end < len(body) else b""
    if payload and code != 0x14:
        raise DecodeError(f"{performative.NAME} frame carries {len(payload)} unexpected payload bytes")
    return Frame(ftype, channel, performative, payload)


def build_frame(channel: int, performative: Any, payload: bytes | memoryview = b"", ftype: FrameType = FrameType.AMQP) -> bytearray:
    out = bytearray(8)
    performative.amqp_encode(out)
    out += payload
    _HDR.pack_into(out, 0, len(out), 2, ftype, channel)
    return out



_I = struct.Struct(">I")


def _fast_transfer_at(body: bytes | bytearray, s: int, n: int) -> tuple[Transfer, int] | None:
    """Decode the common shapes of a transfer without the generic decoder, from the frame
    body at ``body[s:n]`` (the reader's buffer: nothing is copied but the tag); returns the
    transfer and where its payload starts.

    Returns None for anything unusual (a delivery state, wide or odd encodings); the
    generic path then decodes it, with its full checks. Truncation here is impossible to
    mistake: every read is bounds-checked against the list's end.
    """
    if n - s < 6:
        return None
    code = body[s + 3]
    if code == 0xC0:
        size = body[s + 4]
        count = body[s + 5]
        p = s + 6
        end = s + 5 + size
    else:
        return None
    if end > n or count > 11:
        return None
    values: list = [None] * 11
    for i in range(count):
        if p >= end:
            return None
        c = body[p]
        if c == 0x40:
            p += 1
        elif c == 0x43:
            values[i] = 0
            p += 1
        elif c == 0x52:
            if p + 2 > end:
                return None
            values[i] = body[p + 1]
            p += 2
        elif c == 0x70:
            if p + 5 > end:
                return None
            values[i] = _I.unpack_from(body, p + 1)[0]
            p += 5
        elif c == 0x41:
            values[i] = True
            p += 1
        elif c == 0x42:
            values[i] = False
            p += 1
        elif c == 0xA0 and i == 2:
            if p + 2 > end:
                return None
            ln = body[p + 1]
            if p + 2 + ln > end:
                return None
            values[i] = bytes(body[p + 2:p + 2 + ln])
            p += 2 + ln
        else:
            return None
    if p != end:
        return None
    handle, did, tag, fmt, settled, more, rsm, _state, resume, aborted, batchable = values
    if handle is None or type(handle) is bool or (tag is not None and type(tag) is not bytes):
        return None
    for flag in (settled, more, resume, aborted, batchable):
        if flag is not None and type(flag) is not bool:
            return None
    for num in (did, fmt):
        if num is not None and type(num) is not int:
            return None
    if rsm is not None:
        return None
    t = Transfer(handle, did, tag, fmt, settled, bool(more), None, None, bool(resume), bool(aborted), bool(batchable))
    return t, end


_ACCEPTED_STATE = b"\x00\x53\x24\x45"


def _fast_disposition(body: bytes) -> Disposition | None:
    """Decode the common disposition shape (role, first, last, settled, accepted or none)."""
    n = len(body)
    if n < 6 or body[3] != 0xC0:
        return None
    end = 5 + body[4]
    count = body[5]
    if end != n or count > 6 or count < 2:
        return None
    p = 6
    c = body[p]
    if c == 0x41:
        role = Role.RECEIVER
    elif c == 0x42:
        role = Role.SENDER
    else:
        return None
    p += 1
    nums: list[int | None] = []
    for _ in range(min(count - 1, 2)):
        if p >= end:
            return None
        c = body[p]
        if c == 0x43:
            nums.append(0)
            p += 1
        elif c == 0x52 and p + 2 <= end:
            nums.append(body[p + 1])
            p += 2
        elif c == 0x70 and p + 5 <= end:
            nums.append(_I.unpack_from(body, p + 1)[0])
            p += 5
        elif c == 0x40 and nums:
            nums.append(None)
            p += 1
        else:
            return None
    first = nums[0]
    last = nums[1] if len(nums) > 1 else None
    settled = False
    state = None
    if count >= 4:
        if p >= end:
            return None
        c = body[p]
        if c == 0x41:
            settled = True
        elif c not in (0x42, 0x40):
            return None
        p += 1
    if count >= 5:
        if p >= end:
            return None
        if body[p:p + 4] == _ACCEPTED_STATE:
            state = ACCEPTED
            p += 4
        elif body[p] == 0x40:
            p += 1
        else:
            return None
    batchable = False
    if count == 6:
        if p >= end or body[p] not in (0x40, 0x41, 0x42):
            return None
        batchable = body[p] == 0x41
        p += 1
    if p != end or first is None:
        return None
    return Disposition(role, first, last, settled, state, batchable)
