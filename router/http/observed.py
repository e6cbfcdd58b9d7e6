"""What the HTTP endpoint reads of its router: a narrow interface, so that the endpoint
depends on no server module (``server.Router`` provides it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..config import Settings, Topology
    from ..core import Core
    from ..core.stalls import Stalls
    from ..network import Network
    from ..security.quotas import Quotas


class Observed(Protocol):
    id: str
    version: str
    started: float  # monotonic seconds
    settings: Settings
    topology: Topology
    core: Core
    network: Network
    connections: set[Any]  # client connections (``adaptors/amqp/edge.py``)
    neighbour_ids: set[str]
    quotas: Quotas  # what each user and source host holds, and the policy's refusals
    stalls: Stalls  # when each subscriber holding deliveries last answered (``core/stalls.py``)
    ready: Any  # None until the router is listening
    draining: str | None  # who drains it (``drain``), or None

    def reload(self) -> None: ...  # what SIGHUP takes up (``server.Router.reload``)
    def drain(self, user: str) -> int: ...  # no new clients, the others closed; it stops once empty
    def expire_subscribers(self, now: float) -> list[Any]: ...  # suspended ones past their grace go (logged)
