"""A thin asyncio shell around a client-mode engine (used by the bench and the tools).

``ClientProtocol`` feeds received bytes to the engine and hands the events to a
handler; the handler acts on ``protocol.engine`` and calls ``protocol.flush()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from .amqp.connection import Connection, Mode
from .amqp.sasl import SaslClientConfig

EventHandler = Callable[["ClientProtocol", list[Any]], None]


class ClientProtocol(asyncio.Protocol):
    def __init__(self, container_id: str, handler: EventHandler, *, mode: Mode = Mode.CLIENT,
                 sasl: SaslClientConfig | None = None, max_frame_size: int = 65536) -> None:
        self.engine = Connection(mode, container_id, sasl_client=sasl, max_frame_size=max_frame_size)
        self.handler = handler
        self.transport: asyncio.Transport | None = None
        self.closed = asyncio.get_event_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.engine.mode is Mode.CLIENT:
            self.engine.open()
        self.handler(self, [])
        self.flush()

    def data_received(self, data: bytes) -> None:
        self.handler(self, self.engine.receive_data(data))
        self.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(exc)

    def flush(self) -> None:
        data = self.engine.data_to_send()
        if data and self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)
        if self.engine.closed and self.transport is not None:
            self.transport.close()


async def connect(host: str, port: int, container_id: str, handler: EventHandler, **kw: Any) -> ClientProtocol:
    loop = asyncio.get_running_loop()
    _, protocol = await loop.create_connection(lambda: ClientProtocol(container_id, handler, **kw), host, port)
    return protocol
