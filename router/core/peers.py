"""The peers the core serves, as the core sees them: publishers, subscribers, the data
links to and from neighbour routers, and the stand-ins that wait in a record's place
(other routers' answers, a question to them)."""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Any

from once.records.gid import GidHasher, gid_prefix
from once.records.membership import GroupId
from once.records.table import Record, RecordTable

from .ceiling import Ceiling
from .measures import TopicCounts
from .messages import Copy
from .pace import Pace
from .ports import HopPort, PublisherPort, SubscriberPort, UpstreamPort
from .purse import Purse


class TagInUse(Exception):
    """A publisher reused a delivery tag that is still unsettled (AMQP forbids it)."""


class Publisher:
    __slots__ = ("port", "topic", "container_id", "link_name", "incarnation", "gids", "credit", "live", "retired",
                 "settle_second", "attached", "in_flight", "suspended_until", "group", "window", "sent", "grown_at",
                 "seen", "quiet_since", "bytes", "size", "resumable", "ceiling", "refill_at", "parked", "stream",
                 "resent", "counts", "pace", "user", "purses", "taken_back", "credited")

    def __init__(self, port: PublisherPort, topic: str, container_id: str, link_name: str, incarnation: int,
                 settle_second: bool, ceiling: Ceiling, pace: Pace, counts: TopicCounts | None = None) -> None:
        self.port = port
        self.topic = topic
        self.counts = counts or TopicCounts()  # its topic's (``measures.py``), added to per message
        self.container_id = container_id
        self.link_name = link_name
        self.incarnation = incarnation
        self.gids = GidHasher(gid_prefix(container_id, link_name, incarnation))
        self.credit = 0
        self.live: dict[bytes, CoreRecord] = {}  # unsettled deliveries by tag
        self.retired: OrderedDict[bytes, int] = OrderedDict()  # settled tag -> generation
        self.settle_second = settle_second
        self.attached = True
        self.credited = True  # it sends on credit (a link); an MQTT client's publisher per topic does not
        self.in_flight = 0  # its records still held
        self.suspended_until: float | None = None
        self.group: object = self  # its connection (or itself): the credit one connection holds is capped
        # Credit follows use: ``window`` (what it may hold: credit plus in flight) starts
        # small, doubles each time it has sent half of it, and falls back to 1 when the
        # link sits on credit without sending (``reclaim_idle``).
        self.window = 1
        self.sent = 0  # deliveries that used credit, ever
        self.grown_at = 0  # ``sent`` when the window last grew
        self.ceiling = ceiling  # how much unused credit it may hold (probed: ``ceiling.py``)
        self.pace = pace  # how much it may hold in all (probed, within the queueing allowed: ``pace.py``)
        self.refill_at = 0  # at this much credit left, a grant pass tops it up
        self.parked = False  # grant passes skip it until it sends (``credit.py``)
        # its credit was taken back (its bytes, or the router's, past their bound) and not
        # given again yet: an adaptor without credit of its own stops reading (MQTT)
        self.taken_back = False
        self.seen = 0  # ``sent`` at the last idle sweep
        self.quiet_since = 0.0
        self.bytes = 0  # the message bytes of its records still held
        # A cautious guess of its next message's size (the largest lately, decaying):
        # credit is granted in messages but must stay within bytes. Before its first
        # message nothing is known, and a link is given one credit at a time.
        self.size = 0
        # It carried its own incarnation (our client library does): it resends what it
        # had no outcome for under the same identity, wherever it resumes.
        self.resumable = False
        # Protocol version 3: this attach's stream id (positions to each router count in it)
        self.stream = b""
        # Tags it had in flight when it resumed here that we knew nothing of: it sends them
        # again as new deliveries, which an earlier router may have delivered (marked).
        self.resent: set[bytes] = set()
        # The user its client authenticated as (the adaptor's to say; "anonymous" without
        # one): it travels with every copy, and a destination's policy checks it again.
        self.user = ""
        # The byte budgets of its user and its host that bound it (``purse.py``): none
        # unless the policy sets a ``max_in_flight_bytes`` for either.
        self.purses: tuple[Purse, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.container_id, self.link_name)


class Suspended:
    """The port of a subscriber whose connection vanished: no credit until it resumes."""

    def credit(self) -> int:
        return 0

    def draining(self) -> bool:
        return False

    def settle(self, handle: Any) -> None:
        pass

    def activated(self) -> None:
        pass

    def stolen(self) -> None:
        pass

    def gap(self, router: str) -> None:
        pass

    def stalled(self, why: str) -> None:
        pass


SUSPENDED = Suspended()


class Subscriber:
    __slots__ = ("port", "topic", "container_id", "link_name", "presettled", "queue", "attempts", "attached",
                 "suspended_until", "owner", "group", "resumable", "exclusive", "owed", "gap", "untold", "calm", "sent", "sent_limit", "counts",
                 "answered")

    def __init__(self, port: SubscriberPort, topic: str, container_id: str, link_name: str, presettled: bool,
                 counts: TopicCounts | None = None) -> None:
        self.port = port
        self.topic = topic
        self.counts = counts or TopicCounts()  # its topic's (``measures.py``), added to per message
        self.container_id = container_id
        self.link_name = link_name
        self.presettled = presettled  # the subscriber asked for at-most-once (snd-settle-mode settled)
        self.queue: deque[tuple[CoreRecord, int]] = deque()
        self.attempts: dict[bytes, int] = {}  # gid -> redeliveries so far
        self.attached = True
        self.suspended_until: float | None = None
        self.owner = ""  # the authenticated user that made the subscription ("" when authentication is off)
        self.group: GroupId | None = None  # the consumer group it is a member of
        # It can resume (it said so): a member whose link vanished keeps its deliveries
        # for its grace; one that cannot has them passed on at once.
        self.resumable = False
        self.exclusive = False  # it asked for an exclusive group: one active member, standbys
        self.owed = 0  # when its grace ran out: deliveries it had not accepted (answered without it)
        # It was given up past ``partition_grace`` with a router out of reach, where it may
        # be attached: a gap its live attach must be told of (``docs/protocol.md`` section 7)
        self.gap = False
        self.untold = ""  # the router whose gap it is to be told of when it resumes (suspended when it heard)
        self.calm = -1  # the network's ``RoutesPort.calm`` when it was suspended
        # What went to it unsettled, in the order it went (pruned as it grows): a link that
        # takes this one over gets those again first, in that order (``Failover.take_over``)
        self.sent: dict[CoreRecord, None] = {}
        self.sent_limit = 128  # pruned past this; then twice what stayed (amortised: a full window stays)
        self.answered = 0  # its answers so far (``stalls.py``: one holding deliveries that answers none is stuck)

    @property
    def key(self) -> tuple[str, str]:
        return (self.container_id, self.link_name)

    def __repr__(self) -> str:
        return f"Subscriber({self.container_id}/{self.link_name} on {self.topic!r})"


class Hop:
    """Our data link towards one neighbour router."""

    __slots__ = ("peer", "port", "queue", "attached", "sent")

    def __init__(self, peer: str, port: HopPort) -> None:
        self.peer = peer
        self.port = port
        self.sent = 0  # copies sent on it (an operator's rate per link)
        self.queue: deque[Copy] = deque()  # copies waiting for its credit, in order
        self.attached = True

    def __repr__(self) -> str:
        return f"Hop({self.peer})"


class Upstream:
    """A neighbour router's data link towards us."""

    __slots__ = ("peer", "port", "credit", "attached")

    def __init__(self, peer: str, port: UpstreamPort) -> None:
        self.peer = peer
        self.port = port
        self.credit = 0
        self.attached = True


class _Far:
    """Stands in as a waiter while the root waits for other routers' answers for its remote
    keys (``copies.py``)."""

    def __repr__(self) -> str:
        return "FAR"


FAR = _Far()


class _Asking:
    """Stands in as a waiter while the root asks the other routers whom a message's group
    members were before it chooses them (``inquiry.py``)."""

    def __repr__(self) -> str:
        return "ASKING"


ASKING = _Asking()


# Who a record waits for (the keys of ``Record.states``): local subscribers, and the
# stand-ins for other routers' answers and for a question to them.
Waiter = Subscriber | _Far | _Asking
# A record as the core holds it, and the core's table of them (``records/table.py``).
CoreRecord = Record[Publisher, Waiter]
CoreRecords = RecordTable[Publisher, Waiter]


def keeps_own_tombstone(record: CoreRecord) -> bool:
    """Whether a root, freeing ``record``, keeps what its own keys said of it
    (``Destination.freed``): another root may hold the message and send us a copy, because
    its publisher sent it again after it resumed here, or we took it over from another root
    (both ``resent``), or its publisher left us (it may resume elsewhere); or a root the
    publisher resumes at may ask whom our group members were (``chosen``)."""
    if not record.local:
        return False
    pub = record.publisher
    return bool(record.chosen) or record.resent or pub is None or not pub.attached
