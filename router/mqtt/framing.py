"""Cuts an MQTT byte stream into packets: the fixed header's type, flags and length.

Sans-IO: ``feed(bytes)`` returns the whole packets that came, as (type, flags, body);
a partial one waits for the rest. A length over ``max_packet_size`` is refused before
its body is read (MQTT 5.0 answers it with 0x95, packet too large), so a hostile client
cannot make us buffer more than that.
"""

from __future__ import annotations

from .codec import MAX_VARINT, MqttError, malformed
from .codes import Reason

Frame = tuple[int, int, bytes]  # (packet type, fixed-header flags, body)


class PacketReader:
    __slots__ = ("buffer", "max_packet_size")

    def __init__(self, max_packet_size: int = MAX_VARINT + 5) -> None:
        self.buffer = bytearray()
        self.max_packet_size = max_packet_size

    def feed(self, data: bytes) -> list[Frame]:
        buf = self.buffer
        buf += data
        out: list[Frame] = []
        pos = 0
        while True:
            if len(buf) - pos < 2:
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
                break
            if (i - pos) + length > self.max_packet_size:
                raise MqttError(Reason.PACKET_TOO_LARGE, f"a packet of {(i - pos) + length} bytes (at most "
                                                         f"{self.max_packet_size})")
            if len(buf) - i < length:
                break
            out.append((first >> 4, first & 0x0F, bytes(buf[i:i + length])))
            pos = i + length
        if pos:
            del buf[:pos]
        return out
