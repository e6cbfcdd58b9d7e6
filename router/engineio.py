"""The asyncio shell every router connection shares: feed the engine, write what it has,
drive its idle timer, stop when the engine is closed.

``EdgeConnection`` (clients) and ``InterRouterConnection`` (neighbour routers) stay
separate classes over the engine; only this plumbing is common.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .amqp.connection import Connection

if TYPE_CHECKING:
    from .server import Router


class EngineProtocol(asyncio.Protocol):
    engine: Connection

    def __init__(self, router: Router) -> None:
        self.router = router
        self.transport: asyncio.Transport | None = None
        self.paused = False
        self._timer: asyncio.TimerHandle | None = None
        self._gone = False

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
