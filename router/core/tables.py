"""What every part of the core reads: the router's identity, settings and clocks, the
record table, the local subscribers by topic and pattern, the counters and the journal; and the
small rules the parts share.

``Core`` builds one ``CoreTables`` and hands it to each part (``facade.py``). The
attributes are set once, at construction; what changes is the tables' contents.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from once.records.table import RecordTable

from .effects import Effects
from .measures import Measures
from .ports import Conditions, Outcome, OutcomeKind, rejected
from .reserve import Reserve
from .topics import TopicIndex

if TYPE_CHECKING:
    from ..config import Settings
    from ..journal import Journal
    from .peers import CoreRecords

# The kinds as module constants for the per-message code (a global is cheaper than an
# enum's attribute on Python 3.11).
ACCEPTED_KIND = OutcomeKind.ACCEPTED
REJECTED_KIND = OutcomeKind.REJECTED
RELEASED_KIND = OutcomeKind.RELEASED
MODIFIED_KIND = OutcomeKind.MODIFIED

Key = tuple[str, str]  # a subscriber's (container-id, link name)


def rejection(state: Outcome) -> Outcome:
    """A subscriber's rejection as the publisher will hear it (a condition is always named)."""
    return state if state.condition else rejected(Conditions.REJECTED_BY_SUBSCRIBER, state.description
                                                  or "rejected by a subscriber")


class CoreTables:
    __slots__ = ("router_id", "settings", "clock", "wall", "records", "topics", "stats", "measures", "journal",
                 "admit", "born", "effects", "reserve")

    def __init__(self, router_id: str, settings: Settings, clock: Callable[[], float], wall: Callable[[], int],
                 journal: Journal | None, admit: Callable[[str, str], str | None] | None = None) -> None:
        self.router_id = router_id
        self.settings = settings
        self.clock = clock
        self.wall = wall  # microseconds: the stamps of the records we are root for
        self.records: CoreRecords = RecordTable()
        # bytes adaptors hold on their way to the records, bounded with them (``reserve.py``)
        self.reserve = Reserve()
        # the local subscribers (attached or suspended) by name, and those a topic reaches
        self.topics = TopicIndex()
        # The router's counters (what ``/metrics`` shows: ``router/http/metrics.py``), plain
        # integers: ``published`` from our publishers, ``delivered``/``accepted``/... by our
        # subscribers, ``forwarded`` copies sent to neighbours; ``duplicates`` resent
        # deliveries merged with the record we held (a gid that arrived again);
        # ``placeholder_hits`` deliveries a resuming subscriber had already accepted (never
        # sent again); ``marked`` deliveries sent marked as possibly seen before;
        # ``expired_subscribers``/``expired_with_owed``/``expired_owed``: subscribers whose
        # grace ran out, those of them still owed deliveries, and how many (a loss made visible);
        # ``gaps``: of those, given up past ``partition_grace`` with a router out of reach;
        # ``gaps_told``: subscriptions here ended because another router gave them up so;
        # ``passed_on``: messages a group member of ours released, for another member;
        # ``presettled_late``: pre-settled copies dropped here, come after newer messages of
        # their publisher (at most once, and never out of its order: ``Destination.arrive``);
        # ``stalled_subscribers``: those treated as gone past ``subscriber_stall`` (``stalls.py``);
        # ``told_accepted``/``told_rejected``: outcomes our publishers heard (``accepted`` and
        # ``rejected`` are subscribers' answers here).
        self.stats = {"published": 0, "told_accepted": 0, "told_rejected": 0,
                      "delivered": 0, "accepted": 0, "rejected": 0, "released": 0, "redelivered": 0,
                      "passed_on": 0,
                      "forwarded": 0, "duplicates": 0, "placeholder_hits": 0, "marked": 0, "resumed_publishers": 0,
                      "resumed_subscribers": 0, "expired_subscribers": 0, "expired_with_owed": 0, "expired_owed": 0,
                      "gaps": 0, "gaps_told": 0, "presettled_late": 0, "stalled_subscribers": 0}
        self.measures = Measures()
        self.journal = journal  # delivery events, when the operator asked for them
        # (user, topic) -> why that user may not publish there by this router's policy, or
        # None: a copy from another router is checked again here (None: no policy)
        self.admit = admit
        self.born = 0  # the last stamp given (``stamp``)
        # what every part leaves for the ports, drained as the batch ends (``effects.py``)
        self.effects = Effects()

    def stamp(self) -> int:
        """The router's stamp clock (records we are root for, questions we ask, streams we
        number): the wall clock, strictly increasing here even if it steps back."""
        t = self.wall()
        if t <= self.born:
            t = self.born + 1
        self.born = t
        return t

    def past(self, stamp: int) -> None:
        """Our next stamp goes past ``stamp`` (another router's, on a clock ahead of ours)."""
        if stamp > self.born:
            self.born = stamp
