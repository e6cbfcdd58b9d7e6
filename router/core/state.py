"""What the parts of the core share: its tables (declared here, built by ``Core``) and the
small rules they all use. The parts (``delivery``, ``forwarding``, ``failover``) are
mixins of one ``Core``: a method of one may call another's through ``self``; they import
none of each other, only this."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from once.records.placeholders import Placeholders
from once.records.table import RecordTable

from .ports import Conditions, Outcome, OutcomeKind, RoutesPort, rejected

if TYPE_CHECKING:
    from once.records.order import DestinationOrder
    from once.records.table import Record

    from ..config import Settings
    from ..journal import Journal
    from .credit import CreditWindow
    from .peers import Hop, Publisher, Subscriber, Upstream
    from .treatments import Treatment

ACCEPTED_KIND = OutcomeKind.ACCEPTED
REJECTED_KIND = OutcomeKind.REJECTED
RELEASED_KIND = OutcomeKind.RELEASED
MODIFIED_KIND = OutcomeKind.MODIFIED


def first(item: tuple) -> Any:
    return item[0]


def rejection(state: Outcome) -> Outcome:
    """A subscriber's rejection as the publisher will hear it (a condition is always named)."""
    return state if state.condition else rejected(Conditions.REJECTED_BY_SUBSCRIBER, state.description
                                                  or "rejected by a subscriber")


class CoreState:
    """The core's tables; ``Core.__init__`` builds them (see there what each holds)."""

    router_id: str
    settings: Settings
    clock: Callable[[], float]
    wall: Callable[[], int]
    _born: int
    records: RecordTable
    topics: dict[str, dict[tuple[str, str], Subscriber]]
    publishers: list[Publisher]
    suspended_publishers: dict[tuple[str, str], Publisher]
    placeholders: Placeholders
    credit: CreditWindow
    routes: RoutesPort
    remote_routers: Callable[[str], set[str]]
    route: Callable[[set[str], str | None], tuple[dict[str, set[str]], set[str]]]
    moved: Callable[[str, str], dict[str, frozenset]]
    reroute_marker: Callable[[Any], None]
    group_members: Callable[[str], Any]
    treatment: Treatment
    hops: dict[str, Hop]
    upstreams: dict[str, Upstream]
    parked: dict[Record, float]
    order: DestinationOrder
    unsynced: bool
    moved_away: dict[str, dict[tuple[str, str], tuple[str, float]]]
    local_count: int
    stats: dict[str, int]
    journal: Journal | None
