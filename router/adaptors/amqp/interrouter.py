"""Inter-router connections: one AMQP connection per neighbour, on our engine.

The lower router id dials the higher one's ``inter_router`` address and reconnects with
backoff. With the topology's ``tls``, the link is mutual TLS: each router presents its
certificate, which must name its router id, and checks its neighbour's against the CA;
the dialler then authenticates with SASL EXTERNAL as ``router:ID``, which the certificate
must bear out. Without TLS, both sides authenticate with SASL PLAIN as ``router:ID`` and
the topology's shared secret, so a client cannot pose as a router. Each side attaches two sending links
on one session: ``once-control`` (pre-settled control messages) and ``once-data``
(copies of messages, sent settled: a copy's answer goes to its root over the control
links, ``docs/protocol.md``).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import ssl
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from once.linkstate.messages import coalesce, from_dict, to_dict

from ...amqp.codec import decode, dumps
from ...amqp.connection import Connection, Mode, State
from ...amqp.endpoints import Delivery, Link
from ...amqp.errors import DecodeError
from ...amqp.events import (
    ConnectionClosed,
    ConnectionFailed,
    ConnectionOpened,
    DeliveriesReceived,
    LinkAttached,
    LinkDetached,
    LinkFlow,
    SaslDone,
    SessionBegun,
    SessionEnded,
)
from ...amqp.performatives import Role, Source, Target
from ...amqp.sasl import SaslClientConfig, SaslServerConfig, SaslStep
from ...amqp.types import Described, symbol, ulong
from ...core import Hop, Upstream
from ...core.messages import Copy, Routed
from ...engineio import EngineProtocol
from ...listeners import Kind
from ...listeners import dial as connect
from ...logs import fields
from ...security.tls import describe_router_ids, router_ids
from .copies_wire import COPY_FORMAT, ROUTED, pack_copy, routed_from_bytes, routed_to_bytes, unpack_copy

if TYPE_CHECKING:
    from ...config import Address
    from ...context import RouterContext

log = logging.getLogger("once.interrouter")
CONTROL = "once-control"
DATA = "once-data"
CONTROL_CREDIT = 100_000
PRE_AUTH = (State.START, State.SASL)


def router_sasl_server(secret: str, may_link: Callable[[str], bool]) -> SaslServerConfig:
    expected = secret.encode()

    def authenticate(mechanism: str, response: bytes) -> str | SaslStep | None:
        parts = response.split(b"\x00")
        if mechanism != "PLAIN" or len(parts) != 3:
            return None
        user = parts[1].decode(errors="replace")
        # (compared in constant time: a guesser learns nothing from how long a refusal takes)
        if not hmac.compare_digest(parts[2], expected) or not user.startswith("router:") or not may_link(user[7:]):
            return SaslStep(claimed=user)  # (refused, the name it claimed kept for the log line)
        return user

    return SaslServerConfig(("PLAIN",), authenticate, allow_bare=False)


def router_external_server(conn: InterRouterConnection, may_link: Callable[[str], bool]) -> SaslServerConfig:
    """Over mutual TLS: a neighbour is the router its verified certificate names, and it
    may only claim to be that one."""
    def authenticate(mechanism: str, response: bytes) -> str | None:
        claimed = response.decode(errors="replace")
        if mechanism != "EXTERNAL" or not claimed.startswith("router:"):
            return None
        rid = claimed[7:]
        if not may_link(rid) or rid not in router_ids(conn.peercert):
            log.warning("router %s: refused an inter-router link claiming to be router %s: its certificate %s",
                        conn.router.id, rid, describe_router_ids(conn.peercert),
                        extra=fields("neighbour.refused", neighbour=rid))
            return None
        return claimed

    return SaslServerConfig(("EXTERNAL",), authenticate, allow_bare=False)


def may_link(router: RouterContext) -> Callable[[str], bool]:
    """Which routers may link to us: our neighbours in the topology, and a router the file
    does not name (it joins the network: ``once router --join``); never one the file names
    and does not link to us (a link removed by SIGHUP stays removed)."""
    def check(rid: str) -> bool:
        return rid != router.id and (rid in router.neighbour_ids or rid not in router.topology.routers
                                     or rid in router.topology.joins_to(router.id))

    return check


class HopLink:
    """The core's port onto our data link towards the neighbour."""

    __slots__ = ("conn",)

    def __init__(self, conn: InterRouterConnection) -> None:
        self.conn = conn

    def credit(self) -> int:
        link = self.conn.data_out
        if link is None or not link.attached or self.conn.paused:
            return 0
        return link.credit

    def copy(self, copy: Copy) -> None:
        """A copy goes settled: its root sends it again if it is lost."""
        conn = self.conn
        link = conn.data_out
        assert link is not None  # (the core sends on a hop only while it is up)
        conn.engine.send(link, copy.gid, pack_copy(copy) + copy.payload, settled=True, message_format=COPY_FORMAT)
        conn.dirty()


class UpstreamLink:
    """The core's port onto the neighbour's data link towards us."""

    __slots__ = ("conn",)

    def __init__(self, conn: InterRouterConnection) -> None:
        self.conn = conn

    def grant(self, credit: int) -> None:
        link = self.conn.data_in
        if link is not None and link.attached:
            self.conn.engine.flow(link, credit)
            self.conn.dirty()


class InterRouterConnection(EngineProtocol):
    def __init__(self, router: RouterContext, peer: str | None, dialling: bool = False) -> None:
        super().__init__(router)
        # known when we dial a neighbour; learnt from SASL when we accept, from the peer's
        # open when we dial an address to join through (``dial_to_join``)
        self.peer = peer
        s = router.settings
        secret = router.topology.auth.router_secret or ""
        tls = router.tls is not None
        if peer is not None or dialling:
            sasl_c = SaslClientConfig("EXTERNAL", f"router:{router.id}") if tls else \
                SaslClientConfig("PLAIN", f"router:{router.id}", secret)
            mode, sasl_s = Mode.CLIENT, None
        else:
            sasl_s = router_external_server(self, may_link(router)) if tls else \
                router_sasl_server(secret, may_link(router))
            mode, sasl_c = Mode.SERVER, None
        self.engine = Connection(mode, f"once-router-{router.id}", sasl_client=sasl_c, sasl_server=sasl_s,
                                 idle_timeout=s.router_dead_after, max_frame_size=s.max_frame_size)
        self.control_out: Link | None = None
        self.data_out: Link | None = None
        self.data_in: Link | None = None
        self.control_queue: deque[bytes] = deque()
        self.state_batch: list[object] = []  # link-state messages of this turn, sent as one (``send_control``)
        self.hop: Hop | None = None
        self.upstream: Upstream | None = None
        self.up = False

    # ----------------------------------------------------- the shell's hooks

    def dirty(self) -> None:
        """(As ``EdgeConnection.dirty``: compiled here, per message.)"""
        self.router.dirty.add(self)

    def describe(self) -> str:
        return f"the inter-router link to {self.peer}" if self.peer else f"inter-router connection from {self.remote}"

    def counts_against_limits(self) -> bool:
        # Accepted inter-router sockets count against the router's connection limits
        # too: a flood of them must not take the descriptors clients need.
        return self.engine.mode is Mode.SERVER

    def on_admitted(self) -> None:
        if self.engine.mode is Mode.CLIENT:
            # (one we join through is checked when its open names it: ``_joined_peer``)
            if self.router.tls is not None and self.peer is not None and self.peer not in router_ids(self.peercert):
                # (the CA signed it, but for another router, or for a client: we reached the wrong one)
                log.warning("router %s: the inter-router link to %s reached a peer whose certificate %s, not %s: "
                            "closed", self.router.id, self.peer, describe_router_ids(self.peercert), self.peer,
                            extra=fields("neighbour.refused", neighbour=self.peer or "?"))
                if self.transport is not None:
                    self.transport.abort()
                return
            self.engine.open()

    def on_bytes(self, data: bytes) -> None:
        # An accepted connection that keeps failing to authenticate (a secret guesser)
        # waits for its host's turn, as a client does (``EngineProtocol.held_for_turn``)
        if self.engine.state in PRE_AUTH and self.engine.mode is Mode.SERVER and self.held_for_turn(data):
            return  # (past the SASL exchange the first test fails: one tuple lookup per read)
        self.feed(data)

    def on_sasl(self, event: SaslDone) -> None:
        if not event.ok and self.engine.mode is Mode.SERVER:
            self.auth_failed("inter-router SASL PLAIN", event.mechanism, event.requested or "")

    def on_lost(self, exc: Exception | None) -> None:
        self.router.inter_connections.discard(self)
        self._down()

    def hop_port(self) -> HopLink:
        return HopLink(self)

    def upstream_port(self) -> UpstreamLink:
        return UpstreamLink(self)

    def on_writable(self) -> None:
        if self.hop is not None:
            self.router.core.pump_hop(self.hop)

    # ------------------------------------------------------------- control

    def send_control(self, msg: object) -> None:
        """Link-state messages wait for the end of the loop's turn and go as one transfer
        (a list of them): booting N routers, each router's news of a turn is one message
        per link, not one per origin (``python -m once.linkstate.simulate`` counts them so).
        A routed item goes after what waits, in order."""
        if type(msg) is Routed:
            self._pack_state()
            self.control_queue.append(dumps(Described(ulong(ROUTED), routed_to_bytes(msg))))
            self._flush_control()
        else:
            self.state_batch.append(msg)
            self.dirty()

    def write_out(self) -> None:
        if self.state_batch:
            self._pack_state()
            self._flush_control()
        super().write_out()

    def _pack_state(self) -> None:
        batch = self.state_batch
        if not batch:
            return
        self.state_batch = []
        items = [_amqp_map(to_dict(m)) for m in coalesce(batch)]  # type: ignore[arg-type]
        value = items[0] if len(items) == 1 else items
        self.control_queue.append(dumps(Described(ulong(0x77), value)))

    def _flush_control(self) -> None:
        link = self.control_out
        if link is None or not link.attached:
            return
        while self.control_queue and link.credit > 0:
            self.engine.send(link, b"", self.control_queue.popleft(), settled=True)
        self.dirty()

    # ------------------------------------------------------------- events

    def on_event(self, ev: Any) -> None:
        t = type(ev)
        engine = self.engine
        if t is DeliveriesReceived:
            if ev.link is self.data_in:
                for d in ev.deliveries:
                    self._on_data(d)
            else:
                for d in ev.deliveries:
                    self._on_control(d)
        elif t is LinkFlow:
            if ev.link is self.control_out:
                self._flush_control()
            elif ev.link is self.data_out and self.hop is not None:
                self.router.core.pump_hop(self.hop)
        elif t is ConnectionOpened:
            if self.peer is None and engine.mode is Mode.CLIENT and not self._joined_peer():
                return
            self._handshake_done()
            self._rearm()  # heartbeats and the dead-link timeout start with the open exchange
            if engine.mode is Mode.CLIENT:
                engine.begin()  # the dialler opens the one session; both sides attach their senders on it
        elif t is SessionBegun:
            if self.peer is None:
                user = engine.user or ""
                self.peer = user[7:] if user.startswith("router:") else None
            self._attach_senders(ev.session)
        elif t is LinkAttached:
            link = ev.link
            if ev.reply_needed:
                engine.attach(link.session, link.name, link.role, link=link, source=ev.attach.source, target=ev.attach.target)
                if link.name == DATA:
                    self.data_in = link
                else:
                    engine.flow(link, CONTROL_CREDIT)
            self._maybe_up()
        elif t in (LinkDetached, SessionEnded, ConnectionClosed):
            self.engine.close()
            self.dirty()
        elif t is ConnectionFailed:
            log.warning("router %s: inter-router link to %s failed: %s: %s", self.router.id, self.peer or "?",
                        ev.condition, ev.description, extra=fields("neighbour.failed", neighbour=self.peer or "?",
                                                                   condition=str(ev.condition),
                                                                   description=ev.description))

    def _joined_peer(self) -> bool:
        """We dialled an address to join through: the router there is the one its open
        names (``once-router-ID``; under TLS its certificate must name it too)."""
        container = self.engine.remote_open.container_id if self.engine.remote_open else ""
        rid = container.removeprefix("once-router-")
        tls = self.router.tls is not None
        if container == rid or not may_link(self.router)(rid) or (tls and rid not in router_ids(self.peercert)):
            log.warning("router %s: the router joined through (%s) is %r, not a router of this network that may "
                        "link to us: closed", self.router.id, self.remote, container,
                        extra=fields("neighbour.refused", neighbour=rid))
            self.engine.close()
            self.dirty()
            return False
        if rid in self.router.network.links or (rid in self.router.neighbour_ids and self.router.id < rid):
            # (already linked, or a neighbour the file has us dial: one link each, not two
            # replacing each other for ever)
            log.info("router %s: %s (joined through at %s) is linked already: this second link closed",
                     self.router.id, rid, self.remote)
            self.engine.close()
            self.dirty()
            return False
        self.peer = rid
        return True

    def _attach_senders(self, session: Any) -> None:
        if self.control_out is None:
            self.control_out = self.engine.attach(session, CONTROL, Role.SENDER, source=Source(address=CONTROL),
                                                  target=Target(address=CONTROL))
            self.data_out = self.engine.attach(session, DATA, Role.SENDER, source=Source(address=DATA),
                                               target=Target(address=DATA))

    def _maybe_up(self) -> None:
        if self.up or self.peer is None:
            return
        links = (self.control_out, self.data_out, self.data_in)
        if not all(lk is not None and lk.attached for lk in links):
            return
        self.up = True
        self.router.network.link_up(self.peer, self)

    def _down(self) -> None:
        if self.up and self.peer is not None:
            self.up = False
            self.router.network.link_down(self.peer, self)

    def _on_control(self, d: Delivery) -> None:
        link = d.link
        if link.credit < CONTROL_CREDIT // 2:
            self.engine.flow(link, CONTROL_CREDIT)
        if not self.up or self.peer is None:
            return
        value, _ = decode(d.payload, 0)
        if isinstance(value, Described) and value.descriptor == ROUTED and isinstance(value.value, bytes):
            self.router.network.receive(self.peer, routed_from_bytes(value.value, self.router.id))
            return
        body = _py(value.value if isinstance(value, Described) else value)
        network = self.router.network
        for item in body if isinstance(body, list) else (body,):  # (a turn's link-state messages: ``send_control``)
            network.receive(self.peer, from_dict(item))

    def _on_data(self, d: Delivery) -> None:
        if self.upstream is None:
            return
        if d.message_format != COPY_FORMAT:
            raise DecodeError(f"inter-router message format {d.message_format:#x}, this router speaks "
                              f"{COPY_FORMAT:#x} (a router of another version?)")
        self.router.core.copy_arrived(self.upstream, unpack_copy(d.tag, d.payload))


# (set after the class: compiled, a class body's dict cannot name its methods)
InterRouterConnection.HANDLERS = {**dict.fromkeys(
    (DeliveriesReceived, LinkFlow, ConnectionOpened, SessionBegun, LinkAttached, LinkDetached,
     SessionEnded, ConnectionClosed, ConnectionFailed), InterRouterConnection.on_event),
    SaslDone: InterRouterConnection.on_sasl}


def _amqp_map(value: Any) -> Any:
    """Control dicts travel as AMQP maps with symbol keys."""
    if isinstance(value, dict):
        return {symbol(str(k)) if isinstance(k, str) else k: _amqp_map(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_amqp_map(v) for v in value]
    return value


def _py(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _py(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_py(v) for v in value]
    return value


async def dial_to_join(router: RouterContext, addr: Address) -> None:
    """Join the network through the router at ``addr`` (``once router --join``): keep a
    link to it up, as ``dial`` keeps one to a neighbour, whoever it turns out to be."""
    delay = 0.05
    while not router.stopping:
        tls = router.tls
        try:
            conn = await connect(Kind.INTER_ROUTER, lambda: InterRouterConnection(router, None, dialling=True),
                                 addr.host, addr.port, ssl=tls.dialling if tls is not None else None)
        except OSError:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
            continue
        router.inter_connections.add(conn)
        await conn.lost
        if conn.up:
            delay = 0.05
        await asyncio.sleep(delay)
        delay = min(delay * 2, 2.0)


async def dial(router: RouterContext, peer: str) -> None:
    """Keep a connection to ``peer`` up: connect, wait for loss, back off, again (while
    the topology links us: a SIGHUP may remove the link)."""
    addr = router.topology.routers[peer].inter_router
    assert addr is not None
    delay = 0.05
    said = ""
    while not router.stopping and peer in router.neighbour_ids:
        tls = router.tls
        try:
            conn = await connect(Kind.INTER_ROUTER, lambda: InterRouterConnection(router, peer), addr.host, addr.port,
                                 ssl=tls.dialling if tls is not None else None)
        except OSError as e:
            if isinstance(e, ssl.SSLError) and str(e) != said:
                # (once per distinct failure: a neighbour with a certificate we do not
                # trust is retried with backoff, not logged at every attempt)
                said = str(e)
                log.warning("router %s: the inter-router link to %s failed its TLS handshake: %s", router.id, peer,
                            getattr(e, "reason", None) or e, extra=fields("neighbour.failed", neighbour=peer))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
            continue
        router.inter_connections.add(conn)
        await conn.lost
        if conn.up or conn.engine.remote_open is not None:
            delay = 0.05
        await asyncio.sleep(delay)
        delay = min(delay * 2, 2.0)
