"""The forwarding core: topics, publishers, subscribers, acceptance, the in-flight window.

The core knows no protocol (``ports.py``: outcomes and ports; a test keeps protocol
modules out). Adaptors call ``Core`` and it calls back through small ports, all passed
in: ``PublisherPort`` (``grant``, ``outcome``), ``SubscriberPort`` (``credit``,
``deliver``, ``settle``, ``drained``), ``HopPort`` (a neighbour router's data link,
downstream: ``credit``, ``forward``, ``settle``, ``marker``; an upstream neighbour uses
the ``PublisherPort`` shape) and, at construction, ``RoutesPort`` (the network).

``Core`` is this facade (attaching and detaching publishers and subscribers) and three
parts by job, mixins over the tables in ``state.py``: ``delivery`` (the local hot path,
answers, settlement, credit hooks), ``forwarding`` (copies to other routers, order per
destination, parked records, hop loss) and ``failover`` (resume, adopt, move, owed
deliveries, hand-over markers). ``credit.py`` is the window; ``treatments.py`` chooses
which local subscribers a delivery goes to.

Semantics (single router; README "Delivery semantics" is the user-facing version):

* A publisher's unsettled delivery is answered only when every subscriber attached to
  the topic at arrival reached a terminal state: all accepted -> ``accepted``; any
  rejection (or a redelivery limit hit) -> ``rejected`` carrying the first error.
  No subscriber -> ``accepted`` (vacuously delivered to all of none).
* ``released`` and ``modified`` (without undeliverable-here) redeliver to that
  subscriber, marked, up to ``max_redeliveries`` times.
* Pre-settled publishes fan out pre-settled: at most once.
* Per-publisher order: each subscriber has one FIFO queue fed in arrival order.
* Memory: at most ``max_in_flight`` records; publisher credit never exceeds the room
  left, so a slow subscriber slows its publishers instead of growing the router.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any

from once.records.membership import Chooser, GroupId
from once.records.order import DestinationOrder
from once.records.placeholders import Placeholders
from once.records.table import Record, RecordTable, SubState

from ..config import Settings
from ..journal import Journal
from .ceiling import FIRST_CEILING, Ceiling
from .credit import CreditWindow
from .delivery import Delivery
from .failover import Failover
from .forwarding import Forwarding
from .groups import Groups
from .peers import SUSPENDED, Hop, Publisher, Subscriber, Upstream
from .ports import ALONE, PublisherPort, RoutesPort, SubscriberPort
from .treatments import FAN_OUT, Treatment

__all__ = ["Core", "Hop", "Publisher", "Subscriber", "Upstream"]


class Core(Delivery, Forwarding, Failover, Groups):
    def __init__(self, router_id: str, settings: Settings, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], int] = lambda: time.time_ns() // 1000, routes: RoutesPort = ALONE,
                 unsynced: bool = False, treatment: Treatment = FAN_OUT,
                 message_key: Callable[[bytes], bytes | None] = lambda payload: None) -> None:
        self.router_id = router_id
        self.settings = settings
        self.clock = clock
        self.wall = wall  # microseconds: the stamps of the records we are root for
        self._born = 0
        self.records = RecordTable()
        self.topics: dict[str, dict[tuple[str, str], Subscriber]] = {}
        self.publishers: list[Publisher] = []
        self.suspended_publishers: dict[tuple[str, str], Publisher] = {}
        # (subscriber key, gid) -> expiry: a resuming subscriber said it already accepted
        # that delivery, which has not reached us (yet): never deliver it to that key.
        self.placeholders = Placeholders()
        self.credit = CreditWindow(settings)
        # Where other subscribers are and how to reach them (bound once: the hot path calls them).
        self.remote_routers: Callable[[str], set[str]] = routes.remote_routers
        self.route = routes.route
        self.moved: Callable[[str, str], dict[str, frozenset]] = routes.moved
        self.reroute_marker: Callable[[Any], None] = routes.reroute_marker
        self.routes = routes
        self.group_members = routes.group_members
        self.treatment = treatment
        self.hops: dict[str, Hop] = {}
        self.upstreams: dict[str, Upstream] = {}
        self.parked: dict[Record, float] = {}  # -> parked since; in publish order: re-tried in that order
        # per-destination order across route changes: pins and the held queue
        self.order = DestinationOrder()
        # Until the network has told us who subscribes where (the first sync from a
        # neighbour), a publish here could be accepted for want of subscribers we do not
        # know of yet: publishers get no credit until then (the network layer clears this).
        self.unsynced = unsynced
        # topic -> {subscriber key: (the router it moved to, until when late copies follow it)}
        self.moved_away: dict[str, dict[tuple[str, str], tuple[str, float]]] = {}  # by topic
        self.local_count = 0  # records we are root for
        self.stats = {"published": 0, "delivered": 0, "accepted": 0, "rejected": 0, "redelivered": 0,
                      "expired_owed": 0}
        self.journal: Journal | None = None  # delivery events, when the operator asked for them
        # Consumer groups (``groups.py``): our members per topic and group, the root's
        # load per member, and the key a message is sharded by (the adaptor reads it).
        self.local_groups = {}
        self.chooser = Chooser()
        self.message_key = message_key
        self._group_views = {}
        self._local_version = 0
        self.active_members: set[tuple[str, str]] = set()  # ours that are active in an exclusive group

    @property
    def pins(self) -> dict[str, dict[str, int]]:
        return self.order.pins

    @property
    def held(self) -> dict:
        return self.order.held

    def add_publisher(self, port: PublisherPort, topic: str, container_id: str, link_name: str,
                      settle_second: bool, incarnation: int | None = None, grant: bool = True,
                      group: object = None) -> Publisher:
        """Attach a publisher. ``incarnation``: the one a resuming link carries; None starts anew.

        A fresh attach starts a new incarnation, because its tags may restart at 0 (Proton
        does). It is random (63 bits), not a per-router counter: after a failover two
        routers counting on their own would hand the same number to two different
        attaches of one link name, and a reused tag would then merge a new message into
        the record of an old one (lost). A resuming client carries its incarnation back
        (attach property ``once:incarnation``), so any router computes the same gids.
        """
        resumable = incarnation is not None
        if incarnation is None:
            incarnation = secrets.randbits(63) or 1
        now = self.clock()
        ceiling = Ceiling(FIRST_CEILING, 2 * self.settings.initial_credit, self.settings.link_credit, now)
        pub = Publisher(port, topic, container_id, link_name, incarnation, settle_second, ceiling)
        pub.resumable = resumable
        if group is not None:
            pub.group = group
        pub.window = max(1, min(self.settings.initial_credit, self.settings.link_credit))
        pub.quiet_since = now
        old = self.suspended_publishers.get(pub.key)
        if old is not None and old.incarnation != incarnation:
            # A fresh link under the old name: the old one never resumes. (A resuming one
            # takes its records over one by one as they are resent; what it does not
            # resend is released when the old link's grace runs out.)
            del self.suspended_publishers[pub.key]
            self._release_publisher(old)
        self.publishers.append(pub)
        self.credit.attached(pub)
        if grant:  # (an adaptor that must answer the attach first grants afterwards)
            self.replenish()
        return pub

    def remove_publisher(self, pub: Publisher) -> None:
        if not pub.attached:
            return
        self._detach_publisher(pub)
        self._release_publisher(pub)

    def _detach_publisher(self, pub: Publisher) -> None:
        pub.attached = False
        self.publishers.remove(pub)
        self.credit.detached(pub)
        for record in pub.live.values():
            record.publisher_handle = None

    def suspend_publisher(self, pub: Publisher, until: float) -> None:
        """Its connection vanished without a closing detach: it may resume (here or elsewhere).

        Its unsettled records stay unsettled until then, so that a resent delivery
        (same gid) merges with its record instead of reaching the subscribers again.
        """
        if not pub.attached:
            return
        self._detach_publisher(pub)
        pub.suspended_until = until
        earlier = self.suspended_publishers.get(pub.key)
        if earlier is not None:
            self._release_publisher(earlier)
        self.suspended_publishers[pub.key] = pub
        self.replenish()

    def _release_publisher(self, pub: Publisher) -> None:
        # Nobody is left to answer: the records live on until their subscribers finish.
        pub.suspended_until = None
        for record in list(pub.live.values()):
            record.publisher_handle = None
            record.publisher_settled = True
            self._settle_subscribers(record)
            self._maybe_free(record)
        pub.live.clear()
        self.replenish()

    def add_subscriber(self, port: SubscriberPort, topic: str, container_id: str, link_name: str,
                       presettled: bool, group: GroupId | None = None, since: int = 0,
                       resumable: bool = False, exclusive: bool = False) -> tuple[Subscriber, Subscriber | None]:
        """Attach a subscriber; return it and the subscriber it displaced (same key), if any.
        ``group``: it is a member of that consumer group (``groups.py``); ``since``: when it
        attached (the wall clock, microseconds, as the network announces it).

        The same key on the same topic takes the old subscription over (a resume, or a
        second link stealing the first): whatever the old one had not accepted is
        delivered again, marked as a redelivery when it had been sent. A standard client
        resumes with no unsettled map, so this is at-least-once with duplicates marked.
        """
        key = (container_id, link_name)
        old = None
        for other_topic, other in list(self.topics.items()):
            if key in other:
                old = other[key]
                if other_topic != topic:
                    self.remove_subscriber(old)  # a different subscription under the same name
        sub = Subscriber(port, topic, container_id, link_name, presettled)
        sub.group = group
        sub.resumable = resumable
        sub.exclusive = exclusive
        if old is not None and old.topic == topic:
            if old.group != group:
                self._leave(old)
            self._take_over(old, sub)
        self.topics.setdefault(topic, {})[sub.key] = sub
        if group is not None:
            self._join(sub, since)
        return sub, old

    def adopt_subscriber(self, topic: str, container_id: str, link_name: str, until: float, owner: str = "",
                         group: GroupId | None = None, since: int = 0, exclusive: bool = False) -> None:
        """A subscriber of ours from before we restarted: suspended here until it resumes
        (here, or elsewhere and moved) or its grace ends; deliveries for it wait."""
        subs = self.topics.setdefault(topic, {})
        key = (container_id, link_name)
        if key in subs:
            return
        sub = Subscriber(SUSPENDED, topic, container_id, link_name, False)  # type: ignore[arg-type]
        sub.suspended_until = until
        sub.owner = owner
        sub.group = group
        sub.exclusive = exclusive
        sub.resumable = True  # it was suspended in our earlier life, so it could resume
        subs[key] = sub
        if group is not None:
            self._join(sub, since)

    def key_owner(self, key: tuple[str, str]) -> str | None:
        """Who made the subscription ``key`` here (attached or suspended); None if there is none."""
        for subs in self.topics.values():
            sub = subs.get(key)
            if sub is not None:
                return sub.owner
        return None

    def suspended(self) -> list[Subscriber]:
        return [s for subs in self.topics.values() for s in subs.values() if s.suspended_until is not None]

    def suspend_subscriber(self, sub: Subscriber, until: float) -> None:
        """Its connection vanished without a closing detach: keep the subscription, stop sending."""
        sub.port = SUSPENDED  # type: ignore[assignment]
        sub.suspended_until = until

    def expire_suspended(self, now: float) -> list[Subscriber]:
        """Drop subscribers suspended for longer than their grace; return them. Publishers
        that did not resume in time and stale placeholders go too."""
        for key, pub in list(self.suspended_publishers.items()):
            if pub.suspended_until is not None and pub.suspended_until <= now:
                del self.suspended_publishers[key]
                self._release_publisher(pub)
        self.placeholders.expire(now)
        if self.parked and (self.local_groups or any(r.chosen for r in self.parked)):
            self._pass_on_unreachable(now)
        for topic, moved in list(self.moved_away.items()):
            for key in [k for k, (_, until) in moved.items() if until <= now]:
                del moved[key]
            if not moved:
                del self.moved_away[topic]
        gone = [s for subs in self.topics.values() for s in subs.values()
                if s.suspended_until is not None and s.suspended_until <= now]
        for s in gone:
            # (an operator must see it: the publisher heard accepted for these without it)
            s.owed = sum(1 for r in self.records.records.values() if r.states.get(s) is SubState.IN_DOUBT)
            self.stats["expired_owed"] += s.owed
            self.remove_subscriber(s)
        return gone

    def _unlink(self, sub: Subscriber) -> None:
        subs = self.topics.get(sub.topic)
        if subs is not None and subs.get(sub.key) is sub:
            del subs[sub.key]
            if not subs:
                del self.topics[sub.topic]
            if sub.group is not None:
                self._leave(sub)

    def remove_subscriber(self, sub: Subscriber) -> None:
        if not sub.attached:
            return
        sub.attached = False
        self._unlink(sub)
        sub.queue.clear()
        member = sub.group is not None
        for record in [r for r in self.records.records.values() if sub in r.states]:
            self._answered(record, self._member_gone(sub, record) if member else record.drop_waiter(sub))
        self.replenish()
