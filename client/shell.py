"""A client-mode engine on the shared asyncio shell (``engineio.EngineShell``), for the
bench and the tools: events go to a handler, which acts on ``protocol.engine`` and calls
``protocol.flush()``.
"""

from __future__ import annotations

from collections.abc import Callable
from ssl import SSLContext
from typing import Any

from once.router.amqp.connection import Connection, Mode
from once.router.amqp.sasl import SaslClientConfig
from once.router.engineio import EngineShell
from once.router.listeners import Kind, dial

EventHandler = Callable[["ClientProtocol", list[Any]], None]


class ClientProtocol(EngineShell):
    def __init__(self, container_id: str, handler: EventHandler, *, mode: Mode = Mode.CLIENT,
                 sasl: SaslClientConfig | None = None, max_frame_size: int = 65536) -> None:
        super().__init__()
        self.engine = Connection(mode, container_id, sasl_client=sasl, max_frame_size=max_frame_size)
        self.handler = handler
        self.closed = self.lost

    def on_connected(self) -> None:
        if self.engine.mode is Mode.CLIENT:
            self.engine.open()
        self.handler(self, [])

    def on_events(self, events: list[Any]) -> None:
        self.handler(self, events)


async def connect(host: str, port: int, container_id: str, handler: EventHandler, *, ssl: SSLContext | None = None,
                  **kw: Any) -> ClientProtocol:
    """``ssl``: over TLS (an ``amqps`` listener), with this client context."""
    return await dial(Kind.AMQPS if ssl is not None else Kind.AMQP, lambda: ClientProtocol(container_id, handler, **kw),
                      host, port, ssl=ssl)
