"""Adaptors driven in-process: a router built as ``once router`` builds it (its core,
network, lifecycle, quotas), never started, and its connections fed over transports that
are not sockets (as uvicorn's protocol tests drive ``data_received``). Bytes move when a
test says so; nothing sleeps and no port is taken.

``Wire`` joins a client engine (``once.router.amqp``, client mode) to a router's
``EdgeConnection``; ``MqttWire`` an MQTT client (the router's own codec) to its
``MqttEdgeConnection``; ``Link`` two routers by an ``InterRouterConnection`` each. Their
``pump()``/``read()`` move bytes until neither side has more, yielding to the event loop
between moves so that the callbacks the routers scheduled (``call_soon``) run; no time
passes. The tests of the adaptors use them (``tests/adaptors``), and ``once house`` walks
one message through them."""

from __future__ import annotations

import asyncio
from typing import Any

from once.router.adaptors.amqp.edge import EdgeConnection
from once.router.amqp.connection import Connection, Mode
from once.router.amqp.sasl import SaslClientConfig
from once.router.config import load_topology
from once.router.server import Router
from once.topologies import resolve


class Transport(asyncio.Transport):
    """A socket that is not one: what the connection writes is kept, closing is noted."""

    def __init__(self, peer: tuple[str, int] = ("127.0.0.1", 45000)) -> None:
        super().__init__()
        self.peer = peer
        self.written = bytearray()
        self.closing = False
        self.reading = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def take(self) -> bytes:
        out = bytes(self.written)
        self.written.clear()
        return out

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": self.peer, "sockname": ("127.0.0.1", 5672)}.get(name, default)

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading

    def get_write_buffer_size(self) -> int:
        return 0


def router(topology: str = "single.yaml", router_id: str = "A") -> Router:
    """One router of a shipped topology, built but not started (no listener, no dial)."""
    return Router(load_topology(resolve(topology)), router_id)


class Wire:
    """A client engine on one of ``router``'s client connections."""

    def __init__(self, router: Router, container_id: str = "client", peer: tuple[str, int] = ("127.0.0.1", 45000),
                 sasl: SaslClientConfig | None = None) -> None:
        self.router = router
        self.client = Connection(Mode.CLIENT, container_id, sasl_client=sasl or SaslClientConfig("ANONYMOUS"))
        self.transport = Transport(peer)
        self.conn = EdgeConnection(router)
        self.conn.connection_made(self.transport)
        self.events: list[Any] = []

    async def pump(self) -> list[Any]:
        """Move bytes both ways until quiet; the client's new events."""
        new: list[Any] = []
        for _ in range(1000):
            out = self.client.data_to_send()
            if out:
                self.conn.data_received(out)
            await asyncio.sleep(0)  # (the router's call_soon callbacks run: no time passes)
            back = self.transport.take()
            if back:
                new += self.client.receive_data(back)
            if not out and not back:
                break
        self.events += new
        return new

    def lose(self) -> None:
        """The socket went without a close (the client crashed, the network cut it)."""
        self.transport.closing = True
        self.conn.connection_lost(ConnectionResetError("gone"))


class MqttWire:
    """An MQTT client (packets encoded and decoded by ``once.router.mqtt``) on one of
    ``router``'s MQTT connections."""

    def __init__(self, router: Router, version: Any = None, peer: tuple[str, int] = ("127.0.0.1", 46000)) -> None:
        from once.router.adaptors.mqtt.edge import MqttEdgeConnection
        from once.router.mqtt.codes import Version
        from once.router.mqtt.framing import PacketReader

        self.version = version or Version.V5
        self.transport = Transport(peer)
        self.conn = MqttEdgeConnection(router)
        self.conn.connection_made(self.transport)
        self.reader = PacketReader()
        self.received: list[Any] = []

    async def send(self, *packets: Any) -> list[Any]:
        """Send ``packets``; what the router sent back once quiet (decoded)."""
        from once.router.mqtt.codec import encode

        self.conn.data_received(b"".join(encode(p, self.version) for p in packets))
        return await self.read()

    async def read(self) -> list[Any]:
        """What the router sent this client since the last read (decoded), once quiet."""
        from once.router.mqtt.codec import decode

        new: list[Any] = []
        for _ in range(1000):
            await asyncio.sleep(0)  # (a yield: the router's call_soon callbacks run, no time passes)
            out = self.transport.take()
            if not out:
                break
            new += [decode(t, f, b, self.version) for t, f, b in self.reader.feed(out)]
        self.received += new
        return new


class Link:
    """An inter-router connection between two in-process routers (``dialler`` dials, as the
    lower id does), over transports that are not sockets."""

    def __init__(self, dialler: Router, acceptor: Router) -> None:
        from once.router.adaptors.amqp.interrouter import InterRouterConnection

        self.out = Transport(("127.0.0.1", 47000))
        self.back = Transport(("127.0.0.1", 15672))
        self.a = InterRouterConnection(dialler, acceptor.id)
        self.b = InterRouterConnection(acceptor, None)
        dialler.inter_connections.add(self.a)
        acceptor.inter_connections.add(self.b)
        self.b.connection_made(self.back)
        self.a.connection_made(self.out)

    async def pump(self) -> int:
        """Move bytes both ways until quiet; how many chunks moved."""
        moved = 0
        for _ in range(1000):
            await asyncio.sleep(0)  # (a yield: the routers' call_soon callbacks run, no time passes)
            ab, ba = self.out.take(), self.back.take()
            if ab:
                self.b.data_received(ab)
            if ba:
                self.a.data_received(ba)
            if not ab and not ba:
                # Quiet: as much time has passed as a settled network takes, so a hold-down
                # on routes is over (``Network.routes_now``); what that sends moves on.
                for r in (self.a.router, self.b.router):
                    r.network.routes_now()
                    r.flush()
                if not (self.out.written or self.back.written):
                    break
                continue
            moved += 1
        return moved
