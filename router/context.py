"""What a connection may use of its router: the one narrow interface that client
connections, inter-router links and the control plane are given.

``server.Router`` provides it; nothing here imports the server, so the server depends
on its connections and never the other way round (no import circle in ``router/``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from once.linkstate.messages import Subscription

    from .config import Settings, Topology
    from .core import Core
    from .core.lifecycle import LinkLifecycle
    from .security.limits import AuthFailures, ConnectionLimits, RateLimitedLog
    from .security.quotas import Quotas
    from .security.tls import RouterTls


class NeighbourLink(Protocol):
    """A connection to a neighbour router as the control plane sees it (``interrouter``
    over TCP; the in-process network's links in the tests)."""

    hop: Any  # the core's Hop and Upstream for it, set when the link comes up
    upstream: Any

    def hop_port(self) -> Any: ...  # a HopPort: our data link towards the neighbour
    def upstream_port(self) -> Any: ...  # a PublisherPort: the neighbour's data link towards us
    def send_control(self, msg: object) -> None: ...
    def close(self) -> None: ...


class NetworkPort(Protocol):
    """The control plane as connections see it."""

    links: dict[str, Any]  # neighbour -> its link, while up

    def subscribe(self, sub: Subscription, attached: bool, on_complete: Callable[[], None] | None = None) -> None: ...
    def follow_moved_subscribers(self) -> None: ...
    def key_owners(self, key: tuple[str, str]) -> set[str]: ...
    def newest_attach(self, key: tuple[str, str]) -> int: ...
    def link_up(self, peer: str, conn: Any) -> None: ...
    def link_down(self, peer: str, conn: Any) -> None: ...
    def receive(self, peer: str, msg: object) -> None: ...
    def reachable(self) -> set[str]: ...
    def listen(self, channel: str, reader: Callable[[str, bytes], None]) -> None: ...
    def send_note(self, router: str, channel: str, body: bytes) -> bool: ...


class RouterContext(Protocol):
    id: str
    container_id: str
    settings: Settings
    topology: Topology
    core: Core
    lifecycle: LinkLifecycle
    network: NetworkPort
    tls: RouterTls | None  # the topology's ``tls``: amqps and mutual TLS between routers
    limits: ConnectionLimits
    auth_failures: AuthFailures
    guard_log: RateLimitedLog
    quotas: Quotas  # what each user and source host holds, against the policy's limits
    neighbour_ids: set[str]
    connections: set[Any]
    serials: int  # the last client connection number given
    inter_connections: set[Any]
    dirty: set[Any]  # connections with something to write at the end of this batch
    waiting_for_room: set[Any]  # connections not read until the bytes bound leaves room (``room_changed``)
    stopping: bool
    management: Any  # the ``$management`` node (``adaptors/amqp/management.py``)

    def flush(self) -> None:
        """The end of a batch: the core's effects go out (``Core.after_batch``), then every
        touched connection writes what it has to send."""

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> Any:
        """Run ``callback(*args)`` in ``delay`` seconds, as a batch of its own (``flush``
        after it); returns a handle with ``cancel()``."""

    def call_soon(self, callback: Callable[..., object], *args: Any) -> Any:
        """Run ``callback(*args)`` after the current batch, as a batch of its own."""
