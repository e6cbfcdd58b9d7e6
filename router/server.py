"""One router: listeners, connections, the core; startup and shutdown."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from .amqp.sasl import SaslServerConfig, users_authenticator
from .config import Address, Topology
from .core import Core
from .edge import EdgeConnection

log = logging.getLogger("once.router")


@dataclass(frozen=True, slots=True)
class Ready:
    """Readiness: listeners bound (the network issue adds: neighbours connected)."""

    router_id: str
    amqp: Address

    def line(self) -> str:
        return f"router {self.router_id} ready amqp://{self.amqp}"


class Router:
    def __init__(self, topology: Topology, router_id: str) -> None:
        if router_id not in topology.routers:
            raise KeyError(f"{topology.path}: no router {router_id!r} (have {', '.join(sorted(topology.routers))})")
        self.topology = topology
        self.id = router_id
        self.spec = topology.routers[router_id]
        self.settings = topology.settings
        self.container_id = f"once-router-{router_id}"
        auth = topology.auth
        self.sasl = SaslServerConfig(
            mechanisms=tuple(m for m in auth.mechanisms if m != "ANONYMOUS" or auth.allow_anonymous),
            authenticate=users_authenticator(auth.users, auth.allow_anonymous),
            allow_bare=auth.allow_anonymous,
        )
        self.core = Core(router_id, self.settings)
        self.connections: set[EdgeConnection] = set()
        self.dirty: set[EdgeConnection] = set()
        self._servers: list[asyncio.AbstractServer] = []
        self.ready: Ready | None = None

    async def start(self) -> Ready:
        loop = asyncio.get_running_loop()
        listen = self.spec.listen
        server = await loop.create_server(lambda: EdgeConnection(self), listen.host, listen.port, reuse_address=True)
        self._servers.append(server)
        host, port = server.sockets[0].getsockname()[:2]
        self.ready = Ready(self.id, Address(host, port))
        return self.ready

    def flush(self) -> None:
        """Write what every touched connection has to send, once per batch."""
        while self.dirty:
            conns = self.dirty
            self.dirty = set()
            for conn in conns:
                conn.write_out()

    async def stop(self, grace: float = 2.0) -> None:
        for server in self._servers:
            server.close()
        for conn in list(self.connections):
            conn.close()
        self.flush()
        deadline = asyncio.get_running_loop().time() + grace
        while self.connections and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.abort()
        for server in self._servers:
            await server.wait_closed()
