"""The forwarding core: topics, publishers, subscribers, acceptance, the in-flight window.

The core knows no protocol (``ports.py``: outcomes and ports; a test keeps protocol
modules out). Adaptors call ``Core``; what their calls decide reaches them through small
ports, all passed in, only when they end their batch with ``after_batch``
(``effects.py``: no entry call calls a port): ``PublisherPort`` (``grant``, ``outcome``), ``SubscriberPort`` (``credit``,
``deliver``, ``settle``, ``drained``), ``HopPort`` (a neighbour router's data link
away from us: ``credit``, ``copy``), ``UpstreamPort`` (one towards us: ``grant``) and,
at construction, ``RoutesPort`` (the network).

``Core`` is this facade (attaching and detaching publishers and subscribers, the
periodic expiry) over four parts it holds as objects, each with its own declared state
and the narrow interfaces of ``parts.py`` to the others: ``LocalDelivery``
(``delivery.py``: the local hot path, answers, settlement, credit hooks), ``Copies``
(``copies.py``: the acceptance protocol, ``docs/protocol.md``: the root's copies to other
routers and their answers, the relay's data links, the destination's part), ``Failover``
(``failover.py``: resume, adoption, owed deliveries) and ``Groups`` (``groups.py``:
consumer groups). What they all read is in
``tables.py``; ``credit.py`` is the window; ``treatments.py`` chooses which local
subscribers a delivery goes to; the record's own rules are ``records/table.py``'s.
Adaptors call the link lifecycle (``lifecycle.py``) to attach and detach, and the
methods bound below for deliveries and answers.

Semantics (single router; ``docs/semantics.md`` is the user-facing version):

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

import math
import secrets
import time
from collections.abc import Callable, Iterable
from typing import Any

from once.records.membership import GroupId
from once.records.placeholders import Placeholders
from once.records.table import SubState

from ..config import Settings
from ..journal import Journal
from .ceiling import FIRST_CEILING, Ceiling
from .copies import Copies
from .credit import CreditWindow
from .delivery import LocalDelivery
from .effects import Notice
from .failover import Failover
from .groups import Groups
from .pace import Pace
from .peers import SUSPENDED, CoreRecords, Hop, Publisher, Subscriber, Upstream
from .ports import ALONE, PublisherPort, RoutesPort, SubscriberPort
from .purse import Purse
from .reserve import Reserve
from .tables import CoreTables, Key
from .topics import TopicIndex
from .treatments import FAN_OUT, TopicTreatment, Treatment

__all__ = ["Core", "Hop", "Publisher", "Subscriber", "Upstream"]


class Core:
    __slots__ = ("tables", "router_id", "settings", "clock", "wall", "routes", "credit", "placeholders", "publishers",
                 "suspended_publishers", "delivery", "copies", "failover", "groups", "effects", "draining",
                 # the parts' entry points adaptors call, bound once (the per-message ones among them)
                 "publish", "pump", "subscriber_update", "publisher_settled", "publisher_credit_changed",
                 "replenish", "pump_hop", "add_hop", "add_upstream", "hop_lost", "upstream_lost", "expire",
                 "resume_subscriber", "attach_completed", "follow_moved", "membership_changed", "last_member",
                 "is_active", "group_view", "copy_arrived", "control")

    def __init__(self, router_id: str, settings: Settings, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], int] = lambda: time.time_ns() // 1000, routes: RoutesPort = ALONE,
                 unsynced: bool = False, treatment: Treatment = FAN_OUT,
                 message_key: Callable[[bytes], bytes | None] = lambda payload: None,
                 journal: Journal | None = None, admit: Callable[[str, str], str | None] | None = None) -> None:
        """``admit(user, topic)``: why a copy another router forwards may not be delivered
        here (its publisher's user may not publish to its topic by this router's policy), or
        None; the copy is answered rejected with ``amqp:unauthorized-access``."""
        self.router_id = router_id
        self.settings = settings
        self.clock = clock
        self.wall = wall
        self.routes = routes  # where other subscribers are and how to reach them (the network)
        self.tables = tables = CoreTables(router_id, settings, clock, wall, journal, admit)
        # what entry calls leave for the ports, drained by ``after_batch`` (``effects.py``)
        self.effects = effects = tables.effects
        self.draining = False
        self.credit = credit = CreditWindow(settings, effects)
        self.placeholders = placeholders = Placeholders()
        self.publishers: dict[Publisher, None] = {}  # (attached; a dict: 10,000 MQTT topics leave in O(1) each)
        self.suspended_publishers: dict[Key, Publisher] = {}
        self.groups = groups = Groups(tables, routes, message_key, effects)
        self.delivery = delivery = LocalDelivery(tables, credit, placeholders, routes,
                                                 TopicTreatment(treatment, groups.local_groups, groups.patterns),
                                                 unsynced, effects)
        # the acceptance protocol (``docs/protocol.md``): copies to destinations, answers to the root
        self.copies = copies = Copies(tables, credit, routes, routes.send_to, effects)
        self.failover = failover = Failover(tables, routes, placeholders)
        delivery.connect(copies, copies.dest, failover, groups)
        copies.connect(delivery, failover, groups)
        failover.connect(delivery, copies, copies.dest, groups)
        groups.connect(failover, copies.inquiry, copies.endings)
        copies.inquiry.connect(delivery, failover, groups, placeholders)
        copies.endings.connect(placeholders)
        self.publish = delivery.publish
        self.pump = delivery.pump
        self.subscriber_update = delivery.subscriber_update
        self.publisher_settled = delivery.publisher_settled
        self.publisher_credit_changed = delivery.publisher_credit_changed
        self.replenish = delivery.replenish
        self.copy_arrived = copies.copy_arrived
        self.control = copies.control
        self.follow_moved = copies.table_changed
        relay = copies.relay
        self.pump_hop = relay.pump_hop
        self.add_hop = relay.add_hop
        self.add_upstream = relay.add_upstream
        self.hop_lost = relay.hop_lost
        self.upstream_lost = relay.upstream_lost
        self.expire = copies.expire
        self.resume_subscriber = failover.resume_subscriber
        self.attach_completed = failover.attach_completed
        self.membership_changed = groups.membership_changed
        self.last_member = groups.last_member
        self.is_active = groups.is_active
        self.group_view = groups.group_view

    # ------------------------------------------------- what others may read

    @property
    def records(self) -> CoreRecords:
        return self.tables.records

    @property
    def reserve(self) -> Reserve:
        """Bytes adaptors hold on their way to the records (``reserve.py``)."""
        return self.tables.reserve

    @property
    def topics(self) -> TopicIndex:
        return self.tables.topics

    @property
    def stats(self) -> dict[str, int]:
        return self.tables.stats

    @property
    def journal(self) -> Journal | None:
        return self.tables.journal

    @property
    def local_count(self) -> int:
        return self.delivery.local_count

    @property
    def unsynced(self) -> bool:
        return self.delivery.unsynced

    @property
    def outstanding(self) -> int:
        return self.credit.outstanding

    @property
    def hops(self) -> dict[str, Hop]:
        return self.copies.hops

    @property
    def upstreams(self) -> dict[str, Upstream]:
        return self.copies.upstreams

    @property
    def held(self) -> dict[str, list[Any]]:
        """Copies a destination holds behind a gap in their stream, by root."""
        return self.copies.held_copies()

    def after_batch(self) -> None:
        """The end of an adaptor's batch, and the only place the core calls ports: what the
        entry calls recorded (``effects.py``) goes out, subscribers and neighbours' data links
        send what they can, credit passes, and the control items gathered go to their routers.
        Sending may answer more (a pre-settled send is final at once), so this repeats until
        nothing is left. A port that calls the core meanwhile adds to what is drained."""
        effects, credit, copies = self.effects, self.credit, self.copies
        if self.draining or not (effects.pumps or effects.outcomes or effects.settles or effects.grants
                                 or effects.hops or effects.notices or credit.dirty or copies.outgoing):
            return
        self.draining = True
        try:
            delivery, relay = self.delivery, copies.relay
            hops = effects.hops
            while True:
                if effects.settles or effects.outcomes or effects.notices:
                    effects.answer()
                while effects.pumps:
                    subs, effects.pumps = effects.pumps, {}
                    for sub in subs:
                        delivery.send(sub)
                    if effects.settles or effects.outcomes or effects.notices:
                        effects.answer()
                if hops:
                    out = list(hops)
                    hops.clear()
                    for hop in out:
                        relay.send(hop)
                if credit.take_pass():  # (publishers' credit, then neighbours' transit credit)
                    delivery.replenish()
                    relay.replenish_transit()
                if effects.grants:
                    effects.send_grants()
                if copies.outgoing:
                    copies.flush()
                if not (effects.pumps or effects.outcomes or effects.settles or effects.grants or hops or effects.notices
                        or credit.dirty):
                    break
        finally:
            self.draining = False

    def synced(self) -> None:
        """The network has told us who subscribes where (a neighbour's first sync)."""
        self.delivery.synced()

    def subscribed(self, topic: str, key: Key) -> bool:
        """Whether subscriber ``key`` of ``topic`` is here (attached or suspended)."""
        subs = self.tables.topics.own.get(topic)
        return subs is not None and key in subs

    def live_here(self, key: Key) -> bool:
        """Whether subscriber ``key`` is attached here, not suspended."""
        sub = self.tables.topics.find(key)
        return sub is not None and sub.suspended_until is None

    def reclaim_idle(self, now: float) -> int:
        """Cut back links that hold credit without sending; how many were cut. (A pass
        follows every time: a publisher that its pace stopped starts none, ``pace.py``.)"""
        cut = self.credit.reclaim(self.publishers, now)
        self.replenish()
        return cut

    def add_publisher(self, port: PublisherPort, topic: str, container_id: str, link_name: str,
                      settle_second: bool, incarnation: int | None = None, grant: bool = True,
                      group: object = None, credited: bool = True) -> Publisher:
        """Attach a publisher. ``incarnation``: the one a resuming link carries; None starts anew.
        ``credited``: it sends on credit (AMQP); an MQTT client's publisher has none (its
        adaptor stops reading the client past the byte bounds: ``adaptors/mqtt/edge.py``),
        and credit passes never look at it.

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
        pace = Pace(2 * self.settings.initial_credit, self.settings.link_credit, self.settings.queue_target, now)
        pub = Publisher(port, topic, container_id, link_name, incarnation, settle_second, ceiling, pace,
                        self.tables.measures.topic(topic))
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
        self.publishers[pub] = None
        pub.credited = credited
        if credited:
            self.credit.attached(pub)
        if grant:  # (an adaptor that must answer the attach first grants afterwards)
            self.replenish()
        return pub

    def remove_publisher(self, pub: Publisher) -> None:
        if not pub.attached:
            return
        self._detach_publisher(pub)
        self._release_publisher(pub)

    def rebudget(self, budgets: Iterable[tuple[Publisher, tuple[Purse, ...]]]) -> None:
        """SIGHUP gave users or hosts byte budgets they lacked (``purse.py``): each publisher
        takes its new ones. What its records hold counts in them from now on, and its
        credit, given without them, is taken back; then credit is given again within them
        (all publishers first: one granted credit before another's bytes were counted
        would overdraw the budget they share)."""
        changed = []
        for pub, purses in budgets:
            new = tuple(purse for purse in purses if purse not in pub.purses)
            if not new:
                continue
            for purse in new:
                purse.bytes += pub.bytes
            pub.purses += new
            changed.append(pub)
        for pub in changed:
            if pub.credit and pub.attached:
                self.credit.take_back(pub)
        if changed:
            self.replenish()

    def _detach_publisher(self, pub: Publisher) -> None:
        pub.attached = False
        del self.publishers[pub]
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

    def publisher_resume_map(self, pub: Publisher, theirs: dict[bytes, Any]) -> dict[bytes, Any]:
        """Our side of a resuming publisher's unsettled map (``Failover.publisher_resume_map``);
        what it will send again that we know nothing of is asked about now (``Inquiry.ask_early``)."""
        ours = self.failover.publisher_resume_map(pub, theirs)
        if pub.resent:
            self.copies.inquiry.ask_early(pub)
        return ours

    def _release_publisher(self, pub: Publisher) -> None:
        # Nobody is left to answer: the records live on until their subscribers finish.
        pub.suspended_until = None
        self.copies.inquiry.forget_early(pub)
        delivery = self.delivery
        for record in list(pub.live.values()):
            record.publisher_handle = None
            record.publisher_settled = True
            delivery.settle_subscribers(record)
            if record.far is not None:
                self.copies.settled(record)
            delivery.maybe_free(record)
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
        group = _of_name(group, topic)
        old = self.tables.topics.find(key)  # (a key is under one name at a time)
        if old is not None and old.topic != topic:
            self.remove_subscriber(old)  # a different subscription under the same name
        sub = Subscriber(port, topic, container_id, link_name, presettled, self.tables.measures.topic(topic))
        sub.group = group
        sub.resumable = resumable
        sub.exclusive = exclusive
        if old is not None and old.topic == topic:
            if old.group != group:
                self.groups.leave(old)
            self.failover.take_over(old, sub)
            sub.untold = old.untold
        self.tables.topics.add(sub)
        if group is not None:
            self.groups.join(sub, since)
        return sub, old

    def adopt_subscriber(self, topic: str, container_id: str, link_name: str, until: float, owner: str = "",
                         group: GroupId | None = None, since: int = 0, exclusive: bool = False) -> None:
        """A subscriber of ours from before we restarted: suspended here until it resumes
        (here, or elsewhere and moved) or its grace ends; deliveries for it wait."""
        key = (container_id, link_name)
        if self.subscribed(topic, key):
            return
        group = _of_name(group, topic)
        sub = Subscriber(SUSPENDED, topic, container_id, link_name, False, self.tables.measures.topic(topic))  # type: ignore[arg-type]
        sub.suspended_until = until
        sub.owner = owner
        sub.group = group
        sub.exclusive = exclusive
        sub.resumable = True  # it was suspended in our earlier life, so it could resume
        self.tables.topics.add(sub)
        self.tables.topics.suspended[sub] = None
        if group is not None:
            self.groups.join(sub, since)

    def key_owner(self, key: tuple[str, str]) -> str | None:
        """Who made the subscription ``key`` here (attached or suspended); None if there is none."""
        sub = self.tables.topics.find(key)
        return sub.owner if sub is not None else None

    def suspended(self) -> list[Subscriber]:
        return [s for s in self.tables.topics.suspended if s.suspended_until is not None]

    def suspend_subscriber(self, sub: Subscriber, until: float) -> None:
        """Its connection vanished without a closing detach: keep the subscription, stop sending."""
        sub.port = SUSPENDED  # type: ignore[assignment]
        sub.suspended_until = until
        self.tables.topics.suspended[sub] = None
        sub.calm = self.routes.calm()

    def expire_suspended(self, now: float) -> list[Subscriber]:
        """Drop subscribers suspended for longer than their grace; return them. Publishers
        that did not resume in time and stale placeholders go too."""
        for key, pub in list(self.suspended_publishers.items()):
            if pub.suspended_until is not None and pub.suspended_until <= now:
                del self.suspended_publishers[key]
                self._release_publisher(pub)
        self.placeholders.expire(now)
        tables = self.tables
        gone = [s for subs in tables.topics.values() for s in subs.values()
                if s.suspended_until is not None and s.suspended_until <= now and self._given_up(s, now)]
        for s in gone:
            # (an operator must see it: the publisher heard accepted for these without it)
            s.owed = sum(1 for r in tables.records.records.values() if r.states.get(s) is SubState.IN_DOUBT)
            stats = tables.stats
            stats["expired_subscribers"] += 1
            if s.owed:
                stats["expired_with_owed"] += 1
                stats["expired_owed"] += s.owed
            if s.gap:
                # What waited for it waits for its key wherever it attaches next (it may be
                # attached behind the partition): as when it moves, to a home not known yet;
                # the roots send it there, marked, once they learn it. What is published from
                # now on is accepted without it (the gap its attach is told of).
                s.owed = 0
                self.copies.subscriber_moved(s, self.router_id, self._unlink, now + self.settings.partition_grace)
                self.replenish()
            else:
                self.remove_subscriber(s)
        return gone

    def gap_heard(self, key: Key, frm: str) -> list[Subscriber]:
        """Router ``frm`` gave subscriber ``key`` up as a gap (``docs/protocol.md`` section
        7): ours of the key missed what its roots accepted without it. Returns the live
        ones, to be told now (``LinkLifecycle.tell_gap``); a suspended one is told when it
        resumes."""
        out = []
        for subs in self.tables.topics.values():
            sub = subs.get(key)
            if sub is None or not sub.attached:
                continue
            if sub.suspended_until is None:
                out.append(sub)
            else:
                sub.untold = frm  # (told when it resumes: ``LinkLifecycle.attach_subscriber``)
        return out

    def tell_gap(self, sub: Subscriber, frm: str) -> None:
        """End ``sub``'s link with the gap router ``frm`` made; it stays suspended for its
        grace (the caller tells the network), so the client's next attach continues it."""
        sub.untold = ""
        self.effects.notice(sub.port, Notice.GAP, frm)
        self.tables.stats["gaps_told"] += 1
        self.suspend_subscriber(sub, self.clock() + self.settings.subscriber_grace)

    def _given_up(self, sub: Subscriber, now: float) -> bool:
        """Whether a subscriber past its grace may be given up now (``docs/protocol.md``
        section 7): on evidence that its key is attached nowhere else (every router reachable,
        none holds it attached: ``RoutesPort.gone_everywhere``); past ``partition_grace`` more
        anyway, as a gap (``sub.gap``) its live attach, wherever it is, will be told of."""
        routes = self.routes
        if routes.gone_everywhere(sub.key):
            return True
        assert sub.suspended_until is not None
        # (with every router reachable, the evidence is on its way: a roll call, or the key
        # attached elsewhere, where it moves; only a router out of reach makes a gap)
        if sub.suspended_until + self.settings.partition_grace <= now and not routes.reachable() >= routes.all_routers():
            sub.gap = True
            self.tables.stats["gaps"] += 1
            return True
        return False

    def _unlink(self, sub: Subscriber) -> None:
        if self.tables.topics.discard(sub):
            if sub.group is not None:
                self.groups.leave(sub)

    def remove_subscriber(self, sub: Subscriber) -> None:
        if not sub.attached:
            return
        sub.attached = False
        self._unlink(sub)
        sub.queue.clear()
        self.copies.subscriber_closed(sub.key)
        member = sub.group is not None
        delivery, groups, copies = self.delivery, self.groups, self.copies
        for record in [r for r in self.tables.records.records.values() if sub in r.states]:
            copies.dest.keep_said(record, sub)
            # (A destination answers ``closed`` for a member: its root passes it on.)
            passed_on = member and (record.local or record.far is None)
            delivery.answered(record, groups.member_gone(sub, record) if passed_on else record.drop_waiter(sub))
        self.replenish()

    def ended_here(self, key: Key, until: float, had: tuple[GroupId, tuple[bytes, ...]] | None = None) -> None:
        """Subscription ``key`` ended here before we restarted (our journal says so): copies
        for it are answered ``closed`` until then; a root that asks whom a message's group
        members were hears what it ``had`` (``inquiry.py``)."""
        self.copies.dest.closed[key] = until
        if had is not None:
            self.copies.endings.left(key, had[0], had[1], until)

    def member_had(self, key: Key) -> tuple[GroupId, tuple[bytes, ...]] | None:
        """Group member ``key`` ends here: its group and what it answered of the messages we
        hold (our journal keeps them with its end: a restart must not forget them)."""
        return self.copies.endings.member_had(key)

    def hand_over(self) -> None:
        """We leave the network: what only we know that other routers may need goes to them
        (``Inquiry.hand_over``)."""
        self.copies.endings.hand_over()

    def router_left(self, router: str) -> None:
        """``router`` stopped cleanly and left the network: as a root it settles nothing more,
        so the tombstones kept for it take their usual grace from now (``Destination.root_left``)."""
        self.copies.dest.root_left(router)

    def router_back(self, router: str) -> None:
        """A later life of ``router``, which had left: as a root it settles again."""
        self.copies.dest.left_roots.discard(router)

    def stand_in(self, sub: Subscriber) -> None:
        """Keep the last member of a durable group, suspended for good: the group goes on
        being chosen, and its messages wait here until a member attaches again (then they
        go to it, marked) or the subscription is closed."""
        self.suspend_subscriber(sub, math.inf)

    def ended_elsewhere(self) -> list[Subscriber]:
        """Subscribers of ours from before we restarted that another router said closed
        there after they attached here (``Inquiry.ended``): moved there, their deliveries
        handed over (``subscriber_moved``). The network ends them here, as moved."""
        if not self.copies.endings.moved_on:
            return []
        out = []
        for key, where in self.copies.endings.take_moved_on().items():
            for subs in list(self.tables.topics.values()):  # (moving it may drop its topic)
                sub = subs.get(key)
                if sub is not None and sub.suspended_until is not None:
                    self.subscriber_moved(sub, where)
                    out.append(sub)
        return out

    def subscriber_moved(self, sub: Subscriber, where: str) -> None:
        """A suspended subscriber's key attached at router ``where``: hand its deliveries over."""
        self.copies.subscriber_moved(sub, where, self._unlink)


def _of_name(group: GroupId | None, topic: str) -> GroupId | None:
    """A member's group as the name it attached under makes it: of a pattern, another group
    than one of a topic (``GroupId.pattern``; adaptors name the group, the core the pattern)."""
    if group is None:
        return None
    wanted = GroupId.of(group.name, group.scope, topic)
    return group if wanted == group else wanted
