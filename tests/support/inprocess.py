"""The in-process adaptors' wires (``once.tools.inprocess``: ``Transport``, ``router``,
``Wire``, ``MqttWire``, ``Link``), and ``RawWire``: hand-made bytes into a client
connection, as ``support.raw.RawPeer`` writes them."""

from __future__ import annotations

from once.router.adaptors.amqp.edge import EdgeConnection
from once.router.server import Router
from once.tools.inprocess import Link, MqttWire, Transport, Wire, router

__all__ = ["Link", "MqttWire", "RawWire", "Transport", "Wire", "router"]


class RawWire:
    """Hand-made bytes into one of ``router``'s client connections, the router's frames back
    (``support.raw.RawPeer``'s reading and writing, on a transport that is not a socket)."""

    def __init__(self, router: Router, peer: tuple[str, int] = ("127.0.0.1", 48000)) -> None:
        from once.router.amqp.frames import FrameReader

        self.transport = Transport(peer)
        self.conn = EdgeConnection(router)
        self.conn.connection_made(self.transport)
        self.reader = FrameReader(1 << 30)
        self.header: bytes | None = None

    def send(self, data: bytes) -> None:
        self.conn.data_received(data)

    def _recv(self) -> bytes:
        return self.transport.take()  # (what the router wrote; it answers within data_received)

    def at_eof(self) -> bool:
        return self.transport.closing


def _raw_methods() -> None:
    """RawWire reads and writes frames as RawPeer does: the same methods, not a copy."""
    from support.raw import RawPeer

    for name in ("send_frame", "read_header", "read_frames", "open_amqp", "begin"):
        setattr(RawWire, name, getattr(RawPeer, name))


_raw_methods()
