"""The one asyncio shell over the sans-IO engine: feed it what the socket reads, write
what it has, drive its idle timer from the deadlines it returns, stop when it is closed.

``EngineShell`` is used by every connection there is: the router's client connections
(``edge.py``) and inter-router links (``interrouter.py``) through ``EngineProtocol``,
which adds the router's batching (one write per connection per batch) and handshake
timer; the bench's and tools' ``once.client.shell.ClientProtocol`` and the client library's
connections (``client/connection.py``), which write at once.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import traceback
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, cast

from .amqp.connection import Connection
from .amqp.errors import AMQPError, Condition, condition_value
from .amqp.performatives import Error
from .logs import fields

if TYPE_CHECKING:
    from .context import RouterContext

log = logging.getLogger("once.connections")


def describe_exception() -> str:
    """The exception being handled, in one line: type, message and where it was raised."""
    exc = sys.exc_info()[1]
    if exc is None:
        return "no exception"
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


def admitted(router: RouterContext, host: str, remote: str, what: str) -> bool:
    """Whether an accepted socket from ``host`` fits the router's connection limits (then
    counted: ``limits.release`` when it goes); a refusal is logged once a while per host.
    Refused before a byte is read: a flood of sockets costs one descriptor each for an
    instant, and never the service of the clients already here."""
    refusal = router.limits.admit(host)
    if refusal is None:
        return True
    router.guard_log.warning(("refused", what.split(" ", 1)[0], host, refusal.limit), asyncio.get_running_loop().time(),
                             "router %s: refused %s: %s", router.id, what, refusal.line(),
                             extra=fields("connection.refused", peer=remote, host=host, limit=refusal.limit))
    return False


class EngineShell(asyncio.Protocol):
    """Subclasses set ``engine`` and override the ``on_*`` hooks they need."""

    engine: Connection

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.paused = False
        self._timer: asyncio.TimerHandle | None = None
        self._gone = False
        self._opened = False
        self.remote = "?"  # host:port of the other end
        self.host = "?"
        # Over TLS: the peer's certificate, verified (``getpeercert()``'s dict), or None
        # when it offered none; ``tls`` says whether the socket is TLS at all.
        self.tls = False
        self.peercert: dict[str, Any] | None = None
        self.lost: asyncio.Future[Exception | None] = asyncio.get_event_loop().create_future()

    # ------------------------------------------------------------ asyncio

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._note_peer(transport)
        self.on_connected()
        self.dirty()
        self.end_batch()
        self._tick()

    def data_received(self, data: bytes) -> None:
        self.on_events(self.engine.receive_data(data))
        if not self._opened and self.engine.remote_open is not None:
            # The peer's open sets the deadlines (its idle timeout: our heartbeats).
            self._opened = True
            self._rearm()
        self.dirty()
        self.end_batch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        self.on_lost(exc)
        if not self.lost.done():
            self.lost.set_result(exc)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self.on_writable()
        self.end_batch()

    # -------------------------------------------------------------- hooks

    def on_connected(self) -> None:
        """The socket is up (a client engine opens here)."""

    def on_events(self, events: list[Any]) -> None:
        """What the engine made of the bytes just read."""

    def on_lost(self, exc: Exception | None) -> None:
        """The socket is gone."""

    def on_writable(self) -> None:
        """The socket drained: send what waited for it."""

    def on_tick_failure(self) -> None:
        """The engine closed the connection on a timeout."""

    # ------------------------------------------------------------ writing

    def dirty(self) -> None:
        """Something was queued on the engine. Here: write it now (the router batches)."""
        self.write_out()

    def end_batch(self) -> None:
        """A batch of work is done (the router writes every touched connection now)."""

    def write_out(self) -> None:
        transport = self.transport
        if transport is None or self._gone:
            return
        data = self.engine.data_to_send()
        if data and not transport.is_closing():
            transport.write(data)
        if self.engine.closed:
            self._gone = True
            transport.close()

    def flush(self) -> None:
        self.write_out()

    def close(self, error: Any = None) -> None:
        self.engine.close(error)
        self.dirty()

    def detached_by_admin(self, name: str, why: str) -> bool:
        """An admin detaches this connection's link ``name``: False where a kind has no such
        thing (an MQTT client's subscriptions end with its connection)."""
        return False

    def closed_by_admin(self, why: str) -> None:
        """An admin closes this client connection (``http/manage.py``): it ends as if the
        network had dropped it, saying why in the protocol's words (each kind's own)."""
        self.close()

    # ---------------------------------------------------------------- time

    def _note_peer(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        if peer:
            self.host = str(peer[0])
            self.remote = f"{peer[0]}:{peer[1]}"
        if transport.get_extra_info("ssl_object") is not None:
            self.tls = True
            self.peercert = transport.get_extra_info("peercert") or None

    def _stop_timer(self) -> None:
        self._gone = True
        if self._timer is not None:
            self._timer.cancel()

    def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        deadline = self.engine.tick(now)
        if self.engine.failed is not None and self.engine.closed and not self._gone:
            self.on_tick_failure()
        self.dirty()
        self.end_batch()
        self._timer = None
        if deadline is not None and not self._gone:
            self._timer = loop.call_at(max(deadline, now + 0.05), self._tick)

    def _rearm(self) -> None:
        """Deadlines changed (the peer's open arrived): look at them again now."""
        if self._timer is not None:
            self._timer.cancel()
        asyncio.get_running_loop().call_soon(self._tick)


class EngineProtocol(EngineShell):
    """A router's connection (a client's, or a neighbour router's): admission against the
    router's connection limits, one error catch around every batch of events, writes
    batched per router turn, a handshake deadline. Written once for every kind; a kind
    says what it is (``describe``), whether it counts against the limits, and handles
    events (``HANDLERS``) and the end (``on_lost``)."""

    def __init__(self, router: RouterContext) -> None:
        super().__init__()
        self.router = router
        self._handshake: asyncio.TimerHandle | None = None
        self.admitted = False  # counted in the router's connection limits (released when lost)
        self.refused = False  # turned away at connect: it never had links
        self._held: bytearray | None = None  # read while waiting for its host's turn (``held_for_turn``)
        self._turn_taken = False  # it waited for its host's turn (once per attempt: a connection)
        self.holding = 0  # message bytes it holds on the router's account (``hold_bytes``)

    def hold_bytes(self, n: int) -> None:
        """It holds ``n`` message bytes on their way to the records (arriving, or waiting in
        its adaptor), bounded with them by ``max_in_flight_bytes`` (``core/reserve.py``).
        What it lets go may be room for publishers' credit."""
        if n != self.holding:
            less = n < self.holding
            self.holding = n
            core = self.router.core
            core.reserve.hold(self, n)
            if less:
                core.replenish()

    # ------------------------------------------------------------- the kind's

    def describe(self) -> str:
        """What this connection is, for log lines ("connection from HOST:PORT")."""
        return f"connection from {self.remote}"

    def counts_against_limits(self) -> bool:
        """Whether it is admitted against the router's connection limits (accepted sockets)."""
        return True

    def on_admitted(self) -> None:
        """It was admitted (a dialler opens here)."""

    def on_bytes(self, data: bytes) -> None:
        """Bytes read: feed them (a kind may hold them back first)."""
        self.feed(data)

    def held_for_turn(self, data: bytes) -> bool:
        """Before it authenticates: a host that keeps failing to authenticate waits for its
        turn before its next attempt is even read (``AuthFailures``), once per attempt (a
        connection), not once per read of it. True when ``data`` is held until then (what
        comes meanwhile joins it; fed at the turn)."""
        if self._held is not None:
            self._held += data
            return True
        if self._turn_taken:
            return False
        self._turn_taken = True
        loop = asyncio.get_running_loop()
        now = loop.time()
        turn = self.router.auth_failures.turn(self.host, now)
        if turn <= now:
            return False
        self._held = bytearray(data)
        assert self.transport is not None
        self.transport.pause_reading()
        loop.call_at(turn, self._feed_held)
        return True

    def _feed_held(self) -> None:
        data = bytes(self._held or b"")
        self._held = None
        if self._gone or self.transport is None:
            return
        self.transport.resume_reading()
        self.on_bytes(data)

    def auth_failed(self, how: str, mechanism: str, user: str) -> None:
        """An authentication failed: counted against its host (its next attempts wait their
        turn) and logged, at most once a while per host (a guesser writes no flood)."""
        router = self.router
        now = asyncio.get_running_loop().time()
        failures = router.auth_failures.failed(self.host, now)
        who = f" as {user!r}" if user else ""
        router.guard_log.warning(("auth", self.host), now,
                                 "router %s: %s authentication failed%s from %s (%d failures from that host "
                                 "in %gs)", router.id, how, who, self.remote, failures,
                                 router.auth_failures.window,
                                 extra=fields("auth.failed", peer=self.remote, host=self.host, mechanism=mechanism,
                                              user=user, failures=failures))

    # event type -> its handler (called with the connection and the event): a kind fills
    # it with its own methods, in its class body. A table, not a method that dispatches:
    # there is an event per delivery and per answer.
    HANDLERS: ClassVar[Mapping[type, Callable[[Any, Any], None]]] = {}

    def on_batch_failed(self) -> None:
        """A batch raised and the connection is being closed: what its links held is
        suspended (never ended: an ended subscription would count as done)."""

    # ------------------------------------------------------------ asyncio

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._note_peer(transport)
        # (a TLS socket was admitted before its handshake: ``tls_accept.py``)
        if self.counts_against_limits() and not self.admitted:
            if not admitted(self.router, self.host, self.remote, self.describe()):
                self.refused = self._gone = True
                cast(asyncio.Transport, transport).abort()  # (a socket transport: it has abort)
                return
            self.admitted = True
        self.on_admitted()
        self._start_handshake_timer()
        self.dirty()
        self._tick()

    def data_received(self, data: bytes) -> None:
        self.on_bytes(data)

    def feed(self, data: bytes) -> None:
        """The engine reads ``data``; its events are handled in one batch, and whatever a
        handler raises loses this connection, never the router."""
        handlers = self.HANDLERS
        try:
            for event in self.engine.receive_data(data):
                handler = handlers.get(type(event))
                if handler is not None:
                    handler(self, event)
        except AMQPError as e:  # the peer sent something we cannot take (the engine's own are events)
            log.warning("router %s: %s: %s (closed it)", self.router.id, self.describe(), e,
                        extra=fields("connection.protocol_error", peer=self.remote, condition=str(e.condition),
                                     description=e.description))
            self.engine.close(Error(condition=condition_value(e.condition), description=e.description))
            self.on_batch_failed()
        except Exception:  # a bug of ours
            log.error("router %s: internal error on %s: %s (closed it)", self.router.id, self.describe(),
                      describe_exception())
            log.debug("internal error", exc_info=True)
            self.engine.close(Error(condition=Condition.INTERNAL_ERROR.value, description="internal error"))
            self.on_batch_failed()
        self.dirty()
        self.router.flush()  # (the batch ends: the core's effects, then the writes)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        if self.admitted:
            self.admitted = False
            self.router.limits.release(self.host)
        if not self.refused and self.transport is not None:  # (a TLS socket whose handshake failed never was)
            self.on_lost(exc)
            self.router.flush()
        if not self.lost.done():
            self.lost.set_result(exc)

    # ------------------------------------------------------------ batching

    def dirty(self) -> None:
        """Something was queued on the engine: write it at the end of this batch."""
        self.router.dirty.add(self)

    def end_batch(self) -> None:
        self.router.flush()

    def _start_handshake_timer(self) -> None:
        """A peer has this long from accept to its open (SASL included), or is closed."""
        timeout = self.router.settings.handshake_timeout
        if timeout > 0:
            self._handshake = asyncio.get_running_loop().call_later(timeout, self._handshake_expired)

    def _handshake_done(self) -> None:
        if self._handshake is not None:
            self._handshake.cancel()
            self._handshake = None

    def _handshake_expired(self) -> None:
        self._handshake = None
        if self._gone or self.engine.remote_open is not None or self.transport is None:
            return
        self.router.guard_log.warning(
            ("handshake", self.host), asyncio.get_running_loop().time(),
            "router %s: closed connection from %s: no AMQP open within %gs of connecting (handshake timeout)",
            self.router.id, self.remote, self.router.settings.handshake_timeout,
            extra=fields("connection.handshake_timeout", peer=self.remote, host=self.host))
        self.on_handshake_timeout()
        self._gone = True
        self.transport.abort()

    def on_handshake_timeout(self) -> None:
        """The handshake timer closed the connection."""

    def _stop_timer(self) -> None:
        super()._stop_timer()
        self._handshake_done()
