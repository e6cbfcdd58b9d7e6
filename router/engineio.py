"""The asyncio shell every router connection shares: feed the engine, write what it has,
drive its idle timer, stop when the engine is closed.

``EdgeConnection`` (clients) and ``InterRouterConnection`` (neighbour routers) stay
separate classes over the engine; only this plumbing is common.
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


class EngineProtocol(asyncio.Protocol):
    engine: Connection

    def __init__(self, router: RouterContext) -> None:
        self.router = router
        self.transport: asyncio.Transport | None = None
        self.paused = False
        self._timer: asyncio.TimerHandle | None = None
        self._handshake: asyncio.TimerHandle | None = None
        self._gone = False
        self.remote = "?"  # host:port of the other end
        self.host = "?"

    def _note_peer(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        if peer:
            self.host = str(peer[0])
            self.remote = f"{peer[0]}:{peer[1]}"

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

    def dirty(self) -> None:
        """Something was queued on the engine: write it at the end of this batch."""
        self.router.dirty.add(self)

    def write_out(self) -> None:
        if self.transport is None or self._gone:
            return
        data = self.engine.data_to_send()
        if data:
            self.transport.write(data)
        if self.engine.closed:
            self._gone = True
            self.transport.close()

    def close(self, error: Any = None) -> None:
        self.engine.close(error)
        self.dirty()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self.on_writable()
        self.router.flush()

    def on_writable(self) -> None:
        """The socket drained: send what waited for it."""

    def on_tick_failure(self) -> None:
        """The engine closed the connection on a timeout."""

    def _stop_timer(self) -> None:
        self._gone = True
        self._handshake_done()
        if self._timer is not None:
            self._timer.cancel()

    def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        deadline = self.engine.tick(now)
        if self.engine.failed is not None and self.engine.closed and not self._gone:
            self.on_tick_failure()
        self.dirty()
        self.router.flush()
        self._timer = None
        if deadline is not None and not self._gone:
            self._timer = loop.call_at(max(deadline, now + 0.05), self._tick)

    def _rearm(self) -> None:
        """Deadlines changed (the peer's open arrived): look at them again now."""
        if self._timer is not None:
            self._timer.cancel()
        asyncio.get_running_loop().call_soon(self._tick)
