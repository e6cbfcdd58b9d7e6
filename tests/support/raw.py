"""A raw TCP peer that writes hand-made bytes and reads the router's frames back."""

from __future__ import annotations

import socket
from typing import Any

from once.router.amqp.frames import AMQP_HEADER, SASL_HEADER, Frame, FrameReader, FrameType, build_frame
from once.router.amqp.performatives import Begin, Open


class RawPeer:
    def __init__(self, host: str, port: int, timeout: float = 5.0, source: str | None = None) -> None:
        """``source``: the local address to connect from (127.0.0.x poses as another host)."""
        self.sock = socket.create_connection((host, port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.reader = FrameReader(1 << 30)
        self.header: bytes | None = None

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frame(self, performative: Any, channel: int = 0, payload: bytes = b"", sasl: bool = False) -> None:
        self.send(bytes(build_frame(channel, performative, payload, FrameType.SASL if sasl else FrameType.AMQP)))

    def _recv(self) -> bytes:
        try:
            return self.sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            return b""

    def read_header(self) -> bytes:
        buf = b""
        while len(buf) < 8:
            chunk = self._recv()
            if not chunk:
                break
            buf += chunk
        self.header = buf[:8]
        self.reader.feed(buf[8:])
        return self.header

    def read_frames(self, until: type | None = None) -> list[Frame]:
        """Read frames until one of type ``until`` arrives (or, without it, until EOF)."""
        frames: list[Frame] = []
        while True:
            for f in self.reader.frames():
                frames.append(f)
                if until is not None and isinstance(f.body, until):
                    return frames
            chunk = self._recv()
            if not chunk:
                return frames
            self.reader.feed(chunk)

    def at_eof(self, timeout: float = 5.0) -> bool:
        """True once the router has closed the connection (False if it is still open after ``timeout``)."""
        self.sock.settimeout(timeout)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def open_amqp(self) -> None:
        """Bare AMQP header, open and begin, as a client without SASL."""
        self.send(AMQP_HEADER)
        self.send_frame(Open(container_id="raw"))
        assert self.read_header() == AMQP_HEADER
        self.read_frames(until=Open)

    def begin(self) -> None:
        self.send_frame(Begin(next_outgoing_id=0, incoming_window=100, outgoing_window=100))
        self.read_frames(until=Begin)

    def close(self) -> None:
        self.sock.close()


__all__ = ["RawPeer", "AMQP_HEADER", "SASL_HEADER"]
