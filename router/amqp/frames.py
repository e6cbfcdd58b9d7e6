"""Frame layer: protocol headers, frame splitting and frame building.

A frame is ``size:uint32 doff:uint8 type:uint8 channel:uint16 [ext] body``. The
reader works on a growing buffer and returns every complete frame at once, so a burst
of small transfers costs one call (batch parsing is what keeps the router fast).
"""

from __future__ import annotations

import struct
from collections.abc import Generator
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
_AMQP = FrameType.AMQP  # (a global: an enum member lookup is slow on Python 3.11)


# (not frozen: one per frame, and frozen fields cost three times as much to set; its
# ``__init__`` written out: compiled, a dataclass's generated one still runs as Python)
@dataclass(slots=True, init=False)
class Frame:
    type: FrameType
    channel: int
    body: Any  # a performative, or None for an empty (heartbeat) frame
    payload: bytes

    def __init__(self, type: FrameType, channel: int, body: Any, payload: bytes = b"") -> None:
        self.type = type
        self.channel = channel
        self.body = body
        self.payload = payload


class FrameReader:
    """Split a byte stream into frames; enforce the frame size we advertised."""

    __slots__ = ("_buf", "max_frame_size")

    def __init__(self, max_frame_size: int = MIN_MAX_FRAME_SIZE) -> None:
        self._buf = bytearray()
        self.max_frame_size = max_frame_size

    def feed(self, data: bytes | bytearray) -> None:  # (Proton's transport hands out bytearrays)
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

    def frames(self) -> Generator[Frame, None, None]:
        buf = self._buf
        pos = 0
        n = len(buf)
        mv = memoryview(buf)  # one view per call: the buffer cannot be resized until it is released
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
                            yield Frame(_AMQP, channel, t, mv[p:end].tobytes() if p < end else b"")
                            continue
                    frame = _decode_body(_FRAME_TYPES[ftype], channel, mv[start:end].tobytes())
                except (IndexError, ValueError, TypeError, KeyError, struct.error) as e:
                    # Whatever the peer's bytes make a decoder trip over is the peer's decode error.
                    raise DecodeError(f"malformed frame body ({type(e).__name__})") from None
                yield frame
        finally:
            mv.release()
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

    Field by field, each read as the type its place allows (handle, delivery-id and format
    uints; the tag a vbin8; the flags booleans), so nothing needs checking afterwards.
    Returns None for anything unusual (a delivery state, a settle mode, wide or odd
    encodings); the generic path then decodes it, with its full checks. A field read past
    the list's end cannot pass: the end must be met exactly.
    """
    if n - s < 7 or body[s + 3] != 0xC0:
        return None
    end = s + 5 + body[s + 4]
    count = body[s + 5]
    if end > n or count > 11 or count < 1:
        return None
    p = s + 6
    # (the three uint fields are read written out, not through a helper: a call each would
    # add ~0.1 us per message on the hottest path there is)
    try:
        c = body[p]  # handle (mandatory)
        if c == 0x43:
            handle = 0
            p += 1
        elif c == 0x52:
            handle = body[p + 1]
            p += 2
        elif c == 0x70:
            handle = _I.unpack_from(body, p + 1)[0]
            p += 5
        else:
            return None
        did = tag = fmt = settled = None
        more = resume = aborted = batchable = False
        if count > 1:
            c = body[p]
            if c == 0x43:
                did = 0
                p += 1
            elif c == 0x52:
                did = body[p + 1]
                p += 2
            elif c == 0x70:
                did = _I.unpack_from(body, p + 1)[0]
                p += 5
            elif c == 0x40:
                p += 1
            else:
                return None
        if count > 2:
            c = body[p]
            if c == 0xA0:
                ln = body[p + 1]
                tag = bytes(body[p + 2:p + 2 + ln])
                p += 2 + ln
            elif c == 0x40:
                p += 1
            else:
                return None
        if count > 3:
            c = body[p]
            if c == 0x43:
                fmt = 0
                p += 1
            elif c == 0x52:
                fmt = body[p + 1]
                p += 2
            elif c == 0x70:
                fmt = _I.unpack_from(body, p + 1)[0]
                p += 5
            elif c == 0x40:
                p += 1
            else:
                return None
        for i in range(4, count):  # settled, more, rcv-settle-mode, state, resume, aborted, batchable
            c = body[p]
            p += 1
            if c == 0x40:
                continue
            if c != 0x41 and c != 0x42 or i == 6 or i == 7:
                return None
            flag = c == 0x41
            if i == 4:
                settled = flag
            elif i == 5:
                more = flag
            elif i == 8:
                resume = flag
            elif i == 9:
                aborted = flag
            else:
                batchable = flag
    except (IndexError, struct.error):
        return None
    if p != end:
        return None
    return Transfer(handle, did, tag, fmt, settled, more, None, None, resume, aborted, batchable), end


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
