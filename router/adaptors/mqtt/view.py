"""An MQTT client connection as its parts see it (``ports.py``, ``inbound.py``,
``outbound.py``): what they read and call of ``edge.MqttEdgeConnection``, named here so
that none of them imports the connection (no import circle in ``router/``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from once.records.table import Record

    from ...context import RouterContext
    from ...core import Core, Publisher, Subscriber
    from ...core.lifecycle import LinkLifecycle
    from ...mqtt.connection import MqttConnection
    from .sessions import Session, SessionStore


class InboundSide(Protocol):
    releasing: dict[int, tuple[str, bytes]]

    def settled(self, topic: str, tag: bytes) -> None: ...
    def gid(self, topic: str, tag: bytes) -> bytes: ...
    def answered(self, packet_id: int) -> None: ...


class OutboundSide(Protocol):
    def deliver(self, port: Any, record: Record, settled: bool, redelivery: int) -> Any: ...
    def settled(self, sent: Any) -> None: ...


class ConnectionView(Protocol):
    router: RouterContext
    core: Core
    lifecycle: LinkLifecycle
    engine: Any
    client_id: str
    user: str
    host: str  # (the client's address: the policy's per-host limits)
    incarnation: int
    session: Session | None
    sessions: SessionStore | None
    subscribers: dict[str, Subscriber]
    paused: bool
    ready: bool
    tell_gid: bool
    inbound: InboundSide
    outbound: OutboundSide

    @property
    def mqtt(self) -> MqttConnection: ...
    def dirty(self) -> None: ...
    def pause(self, why: str) -> None: ...
    def resume(self, why: str) -> None: ...
    def drop_all(self, taken: bool = False) -> None: ...
    def unauthorized(self, action: str, name: str) -> str | None: ...
    def too_many_links(self, refuse: bool = True) -> str: ...
    def past_bounds(self, pub: Publisher) -> bool: ...
    def wait_for_room(self) -> None: ...
