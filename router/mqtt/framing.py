"""Cuts an MQTT byte stream into packets: the fixed header's type, flags and length.

Sans-IO: ``feed(bytes)`` returns the whole packets that came, as (type, flags, body);
a partial one waits for the rest. A length over ``max_packet_size`` is refused before
its body is read (MQTT 5.0 answers it with 0x95, packet too large), so a hostile client
cannot make us buffer more than that; ``incoming`` says how long the packet still
arriving is, from its header on, so that the router can stop reading before its body
passes the bytes it may hold (``adaptors/mqtt/edge.py``).

A large PUBLISH's body is a view of the buffer it arrived in, which becomes its own: its
payload is copied once, into the message the network carries, not three times (the buffer,
a body, a payload, then the message held four copies of an 80 MB message at its peak).
"""

from __future__ import annotations

from .codec import MAX_VARINT, MqttError, malformed
from .codes import Reason

Frame = tuple[int, int, bytes]  # (packet type, fixed-header flags, body: a memoryview when ``LARGE``)
LARGE = 1 << 20  # bytes: a PUBLISH this long takes its buffer as its body
PUBLISH = 3


class PacketReader:
    __slots__ = ("buffer", "max_packet_size", "incoming")

    def __init__(self, max_packet_size: int = MAX_VARINT + 5) -> None:
        self.buffer = bytearray()
        self.max_packet_size = max_packet_size
        self.incoming = 0  # the whole length of the packet arriving (what is buffered, its length not yet read)

    def feed(self, data: bytes) -> list[Frame]:
        buf = self.buffer
        buf += data
        out: list[Frame] = []
        pos = 0
        self.incoming = 0
        while True:
            if len(buf) - pos < 2:
                self.incoming = len(buf) - pos
                break
            first = buf[pos]
            length = shift = 0
            i = pos + 1
            while True:
                if i >= len(buf):
                    length = -1  # (the length is still coming)
                    break
                b = buf[i]
                length |= (b & 0x7F) << shift
                i += 1
                if not b & 0x80:
                    break
                shift += 7
                if shift > 21:
                    raise malformed("remaining length longer than four bytes")
            if length < 0:
                self.incoming = len(buf) - pos
                break
            if (i - pos) + length > self.max_packet_size:
                raise MqttError(Reason.PACKET_TOO_LARGE, f"a packet of {(i - pos) + length} bytes (at most "
                                                         f"{self.max_packet_size})")
            if len(buf) - i < length:
                self.incoming = (i - pos) + length
                break
            if length >= LARGE and first >> 4 == PUBLISH:
                rest = bytearray(memoryview(buf)[i + length:])
                del buf[i + length:]
                out.append((PUBLISH, first & 0x0F, memoryview(buf)[i:]))  # type: ignore[arg-type]
                self.buffer = buf = rest
                pos = 0
                continue
            out.append((first >> 4, first & 0x0F, bytes(buf[i:i + length])))
            pos = i + length
        if pos:
            del buf[:pos]
        return out
