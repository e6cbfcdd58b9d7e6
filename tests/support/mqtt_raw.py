"""Hand-made MQTT 5.0 packets over a plain socket: for tests that act as no client library
would (a hostile client, or one with 10,000 topics), byte for byte."""

from __future__ import annotations

import socket


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n % 128, n // 128
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def packet(first: int, body: bytes) -> bytes:
    return bytes([first]) + varint(len(body)) + body


def string(v: str) -> bytes:
    return len(v.encode()).to_bytes(2, "big") + v.encode()


def connect(client_id: str, will: int = 0) -> bytes:
    """A CONNECT, clean start; with a will to ``hoard`` at QoS 1 whose properties hold
    ``will`` bytes (a will's payload is at most 65,535 bytes: the bulk goes in user
    properties)."""
    tail, flags = b"", 0x02
    if will:
        flags |= 0x04 | 0x08
        pad = b"\x26" + string("pad") + string("p" * 65000)
        props = pad * (will // len(pad))
        tail = varint(len(props)) + props + string("hoard") + (4).to_bytes(2, "big") + b"bye!"
    return packet(0x10, string("MQTT") + bytes([5, flags]) + (60).to_bytes(2, "big") + b"\x00" + string(client_id) + tail)


def publish(topic: str, payload: bytes, qos: int, packet_id: int = 0) -> bytes:
    head = string(topic) + (packet_id.to_bytes(2, "big") if qos else b"")
    return packet(0x30 | qos << 1, head + b"\x00" + payload)


def read_packet(sock: socket.socket) -> tuple[int, bytes]:
    """The next packet the router sends: (its first byte, its body)."""
    def exactly(n: int) -> bytes:
        got = b""
        while len(got) < n:
            chunk = sock.recv(n - len(got))
            if not chunk:
                raise ConnectionError("closed")
            got += chunk
        return got
    first = exactly(1)[0]
    length = shift = 0
    while True:
        b = exactly(1)[0]
        length |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    return first, exactly(length)
