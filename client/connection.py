"""One client link's connection, failing over between a list of routers.

``FailoverConnection`` keeps one AMQP connection up to some router of its list: it
tries them in turn (a refused or dropped connection moves to the next one at once, a
full round without success backs off up to one second), opens one session, and asks
its owner (a Publisher or Subscriber) to attach its link. The owner sees the engine's
events and is told when the connection goes down; it never deals with sockets.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from ssl import SSLContext, create_default_context
from typing import Any
from urllib.parse import urlsplit

from once.router.amqp.connection import Connection, Mode
from once.router.amqp.endpoints import Session
from once.router.amqp.events import ConnectionClosed, ConnectionFailed, SessionBegun
from once.router.amqp.sasl import SaslClientConfig
from once.router.engineio import EngineShell
from once.router.listeners import Kind, dial

log = logging.getLogger("once.client")

# Conditions a router closes a connection with that no other router of the list would
# answer otherwise: the network's credentials are one users file (and one policy)
_FINAL = frozenset({"amqp:unauthorized-access"})


class RouterRefused(ConnectionError):
    """A router refused the connection for good (its credentials: SASL authentication
    failed, or the policy does not let it in): the client stops trying, and every call
    that waits on the network raises this."""


def parse_router(url: str) -> tuple[str, int]:
    """``amqp://host:port``, ``amqps://host:port`` (TLS, port 5671), ``host:port`` or ``host`` (port 5672)."""
    parts = urlsplit(url if "://" in url else f"amqp://{url}")
    if parts.scheme not in ("amqp", "amqps", ""):
        raise ValueError(f"router address {url!r}: expected amqp:// or amqps://")
    if not parts.hostname:
        raise ValueError(f"router address {url!r} has no host")
    return parts.hostname, parts.port or (5671 if parts.scheme == "amqps" else 5672)


class _Protocol(EngineShell):
    def __init__(self, owner: FailoverConnection, engine: Connection) -> None:
        super().__init__()
        self.owner = owner
        self.engine = engine

    def on_connected(self) -> None:
        self.engine.open()

    def on_events(self, events: list[Any]) -> None:
        self.owner._events(self, events)


class FailoverConnection:
    def __init__(self, routers: Sequence[str], container_id: str, *,
                 on_session: Callable[[Connection, Session], None],
                 on_events: Callable[[Connection, list[Any]], None],
                 on_down: Callable[[], None],
                 sasl: SaslClientConfig | None = None, idle_timeout: float = 10.0,
                 connect_timeout: float = 2.0, ssl: SSLContext | None = None,
                 on_refused: Callable[[RouterRefused], None] | None = None) -> None:
        """``ssl``: the TLS context for ``amqps://`` routers (None: the system's CAs, host
        names checked). ``on_refused``: a router refused the connection for good (wrong
        credentials): nothing more is tried (a client with a wrong password kept trying,
        and its application was never told)."""
        if not routers:
            raise ValueError("give at least one router address")
        self.routers = [parse_router(u) for u in routers]
        self.tls = [u.startswith("amqps://") for u in routers]
        self.ssl = ssl
        self.container_id = container_id
        self.on_session = on_session
        self.on_events = on_events
        self.on_down = on_down
        self.on_refused = on_refused
        self.refused: RouterRefused | None = None
        self.sasl = sasl
        self.idle_timeout = idle_timeout
        self.connect_timeout = connect_timeout
        self.protocol: _Protocol | None = None
        self.current: tuple[str, int] | None = None
        self.up = asyncio.Event()  # a session is open (the owner is attaching or attached)
        self.connects = 0  # successful connections so far
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._hold_until = 0.0  # (loop time) no new connection before then: ``hold``

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    @property
    def engine(self) -> Connection | None:
        return self.protocol.engine if self.protocol is not None else None

    def flush(self) -> None:
        if self.protocol is not None:
            self.protocol.flush()

    async def close(self, timeout: float = 2.0) -> None:
        self._closing = True
        proto = self.protocol
        if proto is not None and proto.transport is not None:
            proto.engine.close()
            proto.flush()
            try:
                await asyncio.wait_for(asyncio.shield(proto.lost), timeout)
            except TimeoutError:
                proto.transport.abort()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def hold(self, seconds: float) -> None:
        """Make the next connection wait ``seconds`` (its owner cannot use one now)."""
        self._hold_until = asyncio.get_running_loop().time() + seconds

    def abort_for_good(self) -> None:
        """Drop the connection without a close frame and never connect again."""
        self._closing = True
        self.abort()
        if self._task is not None:
            self._task.cancel()

    def abort(self) -> None:
        """Drop the connection without a close frame (for tests: as if the client died)."""
        if self.protocol is not None and self.protocol.transport is not None:
            self.protocol.transport.abort()

    async def _run(self) -> None:
        index = 0
        failures = 0
        while not self._closing:
            wait = self._hold_until - asyncio.get_running_loop().time()
            if wait > 0:
                await asyncio.sleep(wait)
            host, port = self.routers[index % len(self.routers)]
            tls = self.tls[index % len(self.routers)]
            engine = Connection(Mode.CLIENT, self.container_id, sasl_client=self.sasl,
                                idle_timeout=self.idle_timeout)
            context = (self.ssl or create_default_context()) if tls else None
            try:
                proto = await dial(Kind.AMQPS if tls else Kind.AMQP, lambda e=engine: self._made(_Protocol(self, e)),  # type: ignore[misc]
                                   host, port, self.connect_timeout, ssl=context)
            except (OSError, TimeoutError) as e:
                self.protocol = None
                log.debug("router %s:%d: %s", host, port, e)
                index += 1
                failures += 1
                if failures % len(self.routers) == 0:  # a whole round failed: back off
                    await asyncio.sleep(min(1.0, 0.05 * 2 ** (failures // len(self.routers))))
                continue
            failures = 0
            self.current = (host, port)
            self.connects += 1
            if self.connects > 1:  # (an operator wants to see a failover: the first connect is the start)
                log.info("%s: connected to %s:%d (connection %d)", self.container_id, host, port, self.connects)
            try:
                await proto.lost
            finally:
                self.protocol = None
                self.current = None
                self.up.clear()
                if not self._closing:
                    log.info("%s: lost the connection to %s:%d; trying the routers in turn", self.container_id,
                             host, port)
                    self.on_down()
            index += 1  # the router we lost may be dead: try the next one first

    def _made(self, proto: _Protocol) -> _Protocol:
        """The connection's protocol, known from the moment it exists: the whole handshake,
        the attach and the first credit can come before ``dial`` returns to ``_run`` (the
        loop busy elsewhere, an outbox relay's database read), and the owner sends on that
        credit through ``engine`` at once. (Set only after ``dial``, it was None then, the
        credit went unused, and nothing came to use it later: an outbox relay stalled with
        320 rows, 1 run in 20 on PostgreSQL.)"""
        self.protocol = proto
        return proto

    def _events(self, proto: _Protocol, events: list[Any]) -> None:
        engine = proto.engine
        if engine.remote_open is not None and not engine.sessions and not engine.closed:
            engine.begin()
        mine = []
        for ev in events:
            t = type(ev)
            if t is SessionBegun:
                self.up.set()
                self.on_session(engine, ev.session)
            elif t is ConnectionFailed or t is ConnectionClosed:
                why = getattr(ev, "description", "") or getattr(ev, "error", None)
                if why is None and self._closing:  # (our own close, answered: nothing to say)
                    log.debug("connection to %s:%s closed", *(self.current or ("?", 0)))
                else:
                    log.info("connection to %s:%s ended: %s", *(self.current or ("?", 0)),
                             why if why is not None else "the router closed it")
                condition = getattr(ev, "condition", None) or getattr(getattr(ev, "error", None), "condition", None)
                if condition in _FINAL and self.refused is None:
                    host, port = self.current or ("?", 0)
                    why = getattr(ev, "description", "") or getattr(getattr(ev, "error", None), "description", "")
                    self.refused = RouterRefused(f"{host}:{port} refused the connection: {why} ({condition})")
                    self._closing = True  # (no other router of the network answers these otherwise)
                    if self.on_refused is not None:
                        self.on_refused(self.refused)
            else:
                mine.append(ev)
        if mine:
            self.on_events(engine, mine)
