"""The one asyncio shell over the sans-IO engine: feed it what the socket reads, write
what it has, drive its idle timer from the deadlines it returns, stop when it is closed.

``EngineShell`` is used by every connection there is: the router's client connections
(``edge.py``) and inter-router links (``interrouter.py``) through ``EngineProtocol``,
which adds the router's batching (one write per connection per batch) and handshake
timer; the bench's and tools' ``router.client.ClientProtocol`` and the client library's
connections (``clientlib/connection.py``), which write at once.
"""

from __future__ import annotations

import asyncio
import sys
import traceback
from typing import TYPE_CHECKING, Any

from .amqp.connection import Connection

if TYPE_CHECKING:
    from .context import RouterContext


def describe_exception() -> str:
    """The exception being handled, in one line: type, message and where it was raised."""
    exc = sys.exc_info()[1]
    if exc is None:
        return "no exception"
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


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

    # ---------------------------------------------------------------- time

    def _note_peer(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        if peer:
            self.host = str(peer[0])
            self.remote = f"{peer[0]}:{peer[1]}"

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
    """A router's connection: writes batched per router turn, a handshake deadline."""

    def __init__(self, router: RouterContext) -> None:
        super().__init__()
        self.router = router
        self._handshake: asyncio.TimerHandle | None = None

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
            self.router.id, self.remote, self.router.settings.handshake_timeout)
        self.on_handshake_timeout()
        self._gone = True
        self.transport.abort()

    def on_handshake_timeout(self) -> None:
        """The handshake timer closed the connection."""

    def _stop_timer(self) -> None:
        super()._stop_timer()
        self._handshake_done()
