"""An edge router (issue 51): outside the routing protocol, it carries its clients to an
interior router over its uplink.

An edge is a router entry with ``uplink: [A, B, ...]``: interior routers of the same file,
in order of preference. It takes AMQP (and, with ``mqtt``, MQTT) client connections and
relays each one, byte for byte, to the current uplink's matching listener, so the interior
holds the client's links, its subscriptions and its records exactly as if the client had
connected there: exactly-once is the interior's, unchanged, and no edge appears in link
state (a network of a few interiors may carry thousands of edges). The edge keeps no state
of its own beyond the bytes of a connection's start, kept until the uplink answers.

* **Which uplink.** A new client connection goes to the current uplink; one that refuses,
  or accepts and says nothing for ``handshake_timeout`` once the client has spoken (a
  paused router), is left for the next in the list, and the connection's first bytes go
  there again. The uplink that answered is the current one from then on (one line in the
  log): it stays until it fails, so the edge's clients share one interior.
* **An uplink lost.** The client's connection is closed after what the interior sent is
  written (its own close frame, if it sent one): the client resumes as after a router's
  death, through the edge again (to the next uplink) or at another router of its list.
  A client lost: its uplink connection closes, and the interior suspends its links.

Why not one multiplexed uplink connection: the interior keys subscriptions, resumes and
ownership by the client's container-id, user and link names; relayed connection by
connection, the interior authenticates and authorizes each client itself (SASL and policy
unchanged), where a shared connection would need the edge trusted to speak for them.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .config import Address, Topology
from .listeners import Kind
from .listeners import listen as listen_on
from .logs import fields

log = logging.getLogger("once.edge")


class EdgeRouter:
    """An edge's listeners, its uplinks and the relays under way."""

    def __init__(self, topology: Topology, router_id: str) -> None:
        self.id = router_id
        self.topology = topology
        spec = topology.routers[router_id]
        self.spec = spec
        self.uplinks = list(spec.uplink)
        self.current = 0  # index into ``uplinks``: where new connections go first
        self.handshake = topology.settings.handshake_timeout
        self.relays: set[Relay] = set()
        self._servers: list[asyncio.AbstractServer] = []
        self.amqp: Address | None = None
        self.mqtt: Address | None = None

    def address(self, uplink: str, kind: str) -> Address | None:
        spec = self.topology.routers[uplink]
        return spec.listen if kind == "amqp" else spec.mqtt

    def answered(self, index: int, kind: str) -> None:
        """Uplink ``index`` answered a client connection: the current one from now on."""
        if index != self.current:
            was = self.uplinks[self.current]
            self.current = index
            log.warning("router %s: uplink now %s (%s did not answer)", self.id, self.uplinks[index], was,
                        extra=fields("edge.uplink", uplink=self.uplinks[index], was=was, kind=kind))

    async def start(self) -> str:
        """Listen; returns the ready line."""
        spec = self.spec
        server, host, port = await listen_on(Kind.AMQP, lambda: Relay(self, "amqp"), spec.listen.host, spec.listen.port)
        self._servers.append(server)
        self.amqp = Address(host, port)
        line = f"router {self.id} ready amqp://{self.amqp}"
        if spec.mqtt is not None:
            server, host, port = await listen_on(Kind.MQTT, lambda: Relay(self, "mqtt"), spec.mqtt.host, spec.mqtt.port)
            self._servers.append(server)
            self.mqtt = Address(host, port)
            line += f" mqtt://{self.mqtt}"
        log.info("router %s: an edge: clients go to %s (in that order of preference)", self.id,
                 ", ".join(self.uplinks), extra=fields("edge.ready", uplinks=self.uplinks))
        return line + f" (edge: uplinks {', '.join(self.uplinks)})"

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        for relay in list(self.relays):
            relay.close()
        for server in self._servers:
            await server.wait_closed()


class Relay(asyncio.Protocol):
    """One client connection and its connection to the uplink."""

    def __init__(self, edge: EdgeRouter, kind: str) -> None:
        self.edge = edge
        self.kind = kind
        self.client: asyncio.Transport | None = None
        self.upstream: asyncio.Transport | None = None
        self.start = bytearray()  # what the client sent before the uplink answered: sent again to the next one
        self.spoke = asyncio.Event()  # the client sent something
        self.heard = asyncio.Event()  # the uplink sent something back
        self.task: asyncio.Task[None] | None = None
        self.flushed = False  # ``start`` went to the uplink being tried: what comes now goes straight on
        self.closed = False

    # ------------------------------------------------------------ client side

    def connection_made(self, transport: Any) -> None:
        self.client = transport
        self.edge.relays.add(self)
        self.task = asyncio.get_running_loop().create_task(self._dial())

    def data_received(self, data: bytes) -> None:
        if not self.heard.is_set():
            self.start += data
            self.spoke.set()
        if self.upstream is not None and self.flushed:
            self.upstream.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.edge.relays.discard(self)
        if self.task is not None:
            self.task.cancel()
        if self.upstream is not None:
            self.upstream.close()  # (the interior sees the client go, and suspends its links)

    def pause_writing(self) -> None:
        if self.upstream is not None:
            self.upstream.pause_reading()

    def resume_writing(self) -> None:
        if self.upstream is not None:
            self.upstream.resume_reading()

    def close(self) -> None:
        if self.client is not None:
            self.client.close()

    # ------------------------------------------------------------ uplink side

    async def _dial(self) -> None:
        edge, loop = self.edge, asyncio.get_running_loop()
        n = len(edge.uplinks)
        for step in range(n):
            index = (edge.current + step) % n
            name = edge.uplinks[index]
            where = edge.address(name, self.kind)
            if where is None:
                continue
            try:
                transport, _ = await asyncio.wait_for(
                    loop.create_connection(lambda: _Upstream(self), where.host, where.port), edge.handshake)
            except (TimeoutError, OSError) as e:
                log.info("router %s: uplink %s at %s: %s", edge.id, name, where, e or "no answer",
                         extra=fields("edge.dial_failed", uplink=name))
                continue
            self.upstream = transport
            try:
                await self.spoke.wait()
                transport.write(bytes(self.start))
                self.flushed = True
                await asyncio.wait_for(self.heard.wait(), edge.handshake)
            except TimeoutError:
                log.info("router %s: uplink %s said nothing for %gs: trying the next", edge.id, name, edge.handshake,
                         extra=fields("edge.uplink_silent", uplink=name))
                self.upstream, self.flushed = None, False
                transport.abort()
                continue
            edge.answered(index, self.kind)
            return
        log.warning("router %s: no uplink answered (%s): a client connection closed", edge.id, ", ".join(edge.uplinks),
                    extra=fields("edge.no_uplink", uplinks=edge.uplinks))
        if self.client is not None:
            self.client.abort()

    def from_upstream(self, up: asyncio.Transport, data: bytes) -> None:
        if up is not self.upstream or self.client is None:
            return
        if not self.heard.is_set():
            self.heard.set()
            self.start = bytearray()
        self.client.write(data)

    def upstream_lost(self, up: asyncio.Transport) -> None:
        if up is not self.upstream:
            return  # (one given up for silence, closing)
        if self.client is not None and not self.closed:
            self.client.close()  # (after what the interior sent: its close frame, if any)


class _Upstream(asyncio.Protocol):
    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.relay.from_upstream(self.transport, data)

    def connection_lost(self, exc: Exception | None) -> None:
        assert self.transport is not None
        self.relay.upstream_lost(self.transport)

    def pause_writing(self) -> None:
        if self.relay.client is not None:
            self.relay.client.pause_reading()

    def resume_writing(self) -> None:
        if self.relay.client is not None:
            self.relay.client.resume_reading()
