"""The forwarding core: topics, publishers, subscribers, acceptance, the in-flight window.

The core knows no protocol (``ports.py``: outcomes and ports; a test keeps protocol
modules out). Adaptors call it through this interface and it calls back through small
ports:

``PublisherPort``: ``grant(credit)`` (absolute credit for the link) and
``outcome(handle, outcome, settle)`` (tell the publisher the aggregate ``Outcome``).

``SubscriberPort``: ``credit() -> int``, ``deliver(record, settled, redelivery) -> handle``,
``settle(handle)`` and ``drained()``.

``HopPort`` (a neighbour router's data link, downstream): ``credit()``,
``forward(record, dests, settled) -> handle``, ``settle(handle)``, ``marker(msg)``
(a hand-over marker, sent only after everything queued ahead of it). Upstream hops
(a neighbour forwarding to us) use the ``PublisherPort`` shape.

Network rules (seed 002): the root forwards one copy per next hop, carrying the set of
destination routers behind that hop; a router answers its upstream once its local
subscribers and its own downstream hops have all answered; settlement flows back down.
A gid already known is answered from its record and never delivered twice. Deliveries
forwarded to us draw on a separate transit window, so two routers publishing towards
each other can never hold each other's credit (a cycle would deadlock).

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

import bisect
import math
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from records.gid import RETIRED_TAGS, gid_from_prefix
from records.placeholders import Placeholders
from records.table import Record, RecordTable, SubState

from ..config import Settings
from ..journal import Event, Journal
from .credit import CreditWindow
from .peers import PARKED, SUSPENDED, HeldFor, Hop, Publisher, Subscriber, TagInUse, Upstream
from .ports import (
    ACCEPTED,
    ALONE,
    Conditions,
    HopPort,
    Outcome,
    OutcomeKind,
    PublisherPort,
    RoutesPort,
    SubscriberPort,
    rejected,
)

_ACCEPTED_KIND = OutcomeKind.ACCEPTED
_REJECTED_KIND = OutcomeKind.REJECTED
_RELEASED_KIND = OutcomeKind.RELEASED
_MODIFIED_KIND = OutcomeKind.MODIFIED


def _first(item: tuple) -> Any:
    return item[0]


def _rejection(state: Outcome) -> Outcome:
    """A subscriber's rejection as the publisher will hear it (a condition is always named)."""
    return state if state.condition else rejected(Conditions.REJECTED_BY_SUBSCRIBER, state.description
                                                  or "rejected by a subscriber")


class Core:
    def __init__(self, router_id: str, settings: Settings, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], int] = lambda: time.time_ns() // 1000, routes: RoutesPort = ALONE,
                 unsynced: bool = False) -> None:
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
        self.hops: dict[str, Hop] = {}
        self.upstreams: dict[str, Upstream] = {}
        self.parked: dict[Record, None] = {}  # in publish order: re-tried in that order
        # destination router -> {neighbour: deliveries in flight there}, oldest path first
        self.pins: dict[str, dict[str, int]] = {}
        # Until the network has told us who subscribes where (the first sync from a
        # neighbour), a publish here could be accepted for want of subscribers we do not
        # know of yet: publishers get no credit until then (the network layer clears this).
        self.unsynced = unsynced
        # subscriber key -> (topic, the router it moved to, until when late copies follow it)
        self.moved_away: dict[str, dict[tuple[str, str], tuple[str, float]]] = {}  # by topic
        # destination -> what waits here for it (``_pinned``), in publish order, as (stamp,
        # record, the neighbour it came from and waits on, keys); hand-over markers last
        self.held: dict[str, list[tuple[float, Any, str | None, frozenset | None]]] = {}
        self.local_count = 0  # records we are root for
        self.stats = {"published": 0, "delivered": 0, "accepted": 0, "rejected": 0, "redelivered": 0}
        self.journal: Journal | None = None  # delivery events, when the operator asked for them

    # ----------------------------------------------------------- publishers

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
        if incarnation is None:
            incarnation = secrets.randbits(63) or 1
        pub = Publisher(port, topic, container_id, link_name, incarnation, settle_second)
        if group is not None:
            pub.group = group
        pub.window = max(1, min(self.settings.initial_credit, self.settings.link_credit))
        pub.quiet_since = self.clock()
        old = self.suspended_publishers.get(pub.key)
        if old is not None and old.incarnation != incarnation:
            # A fresh link under the old name: the old one never resumes. (A resuming one
            # takes its records over one by one as they are resent; what it does not
            # resend is released when the old link's grace runs out.)
            del self.suspended_publishers[pub.key]
            self._release_publisher(old)
        self.publishers.append(pub)
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

    def publisher_credit_changed(self, pub: Publisher, credit: int) -> None:
        """The publisher drained: its unused credit is gone."""
        if self.credit.lowered(pub, credit):
            self.replenish()

    def publish(self, pub: Publisher, tag: bytes, payload: bytes, settled: bool, handle: Any,
                message_format: int = 0, resumed: bool = False) -> Record | None:
        """A publisher's delivery. ``resumed``: a transfer with resume=true (it used no credit).

        Returns None for a resumed delivery we know nothing of (AMQP: ignored).
        """
        if tag in pub.live:
            raise TagInUse(f"delivery tag {tag!r} reused while its delivery is unsettled")
        generation = 0
        if pub.retired:
            previous = pub.retired.pop(tag, None)
            if previous is not None:
                generation = previous + 1
        gid = gid_from_prefix(pub.prefix, tag, generation)
        known = self.records.records.get(gid)
        if known is not None:
            return self._adopt(pub, known, settled, handle, resumed)
        if resumed and not payload:
            return None
        record = Record(gid, pub.topic, payload, pub, tag, generation, settled, message_format, self.clock())
        record.born = self._stamp()
        record.root = self.router_id
        if pub.credit > 0 and not resumed:
            pub.credit -= 1
            credit = self.credit
            credit.outstanding -= 1
            pub.sent += 1
            if pub.credit * 4 <= pub.window:
                credit.dirty = True  # its window may grow: look again after this batch
        self.records.add(record)
        self.stats["published"] += 1
        if self.journal is not None:
            self.journal.add(Event.RECEIVED, gid, record.topic, "client")
        if not settled:
            record.publisher_handle = handle
            pub.live[tag] = record
        self.local_count += 1
        pub.in_flight += 1
        size = len(payload)
        pub.bytes += size
        self.credit.guess_size(pub, size)
        if pub.credit and (pub.bytes > self.settings.link_in_flight_bytes
                           or self.records.bytes > self.settings.max_in_flight_bytes):
            self.credit.take_back(pub)
        self._fan_out(record, self.remote_routers(pub.topic), None, local=True)
        return record

    def _stamp(self) -> int:
        """Strictly increasing here even if the wall clock steps back."""
        t = self.wall()
        if t <= self._born:
            t = self._born + 1
        self._born = t
        return t

    def _adopt(self, pub: Publisher, record: Record, settled: bool, handle: Any, resumed: bool) -> Record:
        """A resent delivery whose gid we hold: become its root, never deliver it twice.

        The record is ours already (the publisher resumed on this router), or it was
        forwarded to us by a root that died or lost the publisher: we answer the
        publisher from now on, and send it wherever the old root had not.
        """
        if pub.credit > 0 and not resumed:
            pub.credit -= 1
            self.credit.outstanding -= 1
        old = record.publisher
        if record.local:
            if old is not pub and isinstance(old, Publisher):
                if old.live.get(record.tag) is record:
                    del old.live[record.tag]
                old.in_flight -= 1
                pub.in_flight += 1
                old.bytes -= len(record.payload)
                pub.bytes += len(record.payload)
        else:
            record.local = True
            record.orphan_since = None
            self.local_count += 1
            pub.in_flight += 1
            pub.bytes += len(record.payload)
        record.publisher = pub
        if settled:  # the publisher adopted the outcome we told it, and settles
            record.publisher_handle = None
            if not record.presettled:
                pub.live[record.tag] = record
                self.publisher_settled(pub, record)
            return record
        pub.live[record.tag] = record
        record.publisher_handle = handle
        new = set(self.remote_routers(record.topic)) - record.covered() - {self.router_id}
        if new:
            record.outcome_sent = False
            self._forward(record, new, None)
        if record.root != self.router_id:
            # The old root delivered to its own subscribers itself; those of them that
            # moved (it died) are owed this now, and from us: we answer the publisher.
            owed = self._owed_elsewhere(record, {record.root})
            if owed:
                record.outcome_sent = False
                self._send_owed(record, owed)
        if record.pending == 0:
            record.outcome_sent = False
            self._complete(record)
        return record

    def publisher_resume_map(self, pub: Publisher, theirs: dict[bytes, Any]) -> dict[bytes, Any]:
        """Our side of a resuming publisher's unsettled map: tag -> outcome, or None while
        in doubt. Tags we hold no record of are left out: the publisher resends those."""
        out: dict[bytes, Any] = {}
        for tag in theirs:
            if not isinstance(tag, bytes):
                continue
            record = self.records.records.get(gid_from_prefix(pub.prefix, tag, 0))
            if record is None or record.presettled:
                continue
            record.orphan_since = None  # about to be adopted: keep it
            # A copy forwarded to us is complete when our part of the network accepted it;
            # the old root's own subscribers and other branches are not in it. In doubt,
            # then: the publisher sends it again and we take it over (``_adopt``).
            out[tag] = self._outcome(record) if record.pending == 0 and record.local else None
        return out

    def resume_subscriber(self, sub: Subscriber, theirs: dict[bytes, Any], until: float) -> dict[bytes, Any]:
        """Take a resuming subscriber's unsettled map: what it already accepted (or
        rejected) is its answer and is never sent again; a gid we have not seen yet gets a
        placeholder until ``until``, so a copy arriving later is not delivered either.
        Returns our map for the attach answer."""
        out: dict[bytes, Any] = {}
        for gid, state in theirs.items():
            if not isinstance(gid, bytes) or not isinstance(state, Outcome) or state.kind not in (
                    _ACCEPTED_KIND, _REJECTED_KIND):
                continue
            out[gid] = state
            record = self.records.records.get(gid)
            if record is None or sub not in record.states:
                self.placeholders.add(sub.key, gid, until)
                continue
            if record.states[sub] is SubState.IN_DOUBT:
                if state.kind is _ACCEPTED_KIND:
                    done = record.resolve(sub, SubState.ACCEPTED)
                else:
                    done = record.resolve(sub, SubState.REJECTED, _rejection(state))
                self._answered(record, done)
        return out

    def _enqueue(self, record: Record, sub: Subscriber, redelivery: int) -> bool:
        """Make ``sub`` a waiter of ``record`` and queue it, unless a placeholder says it
        already accepted it (it told us when it resumed)."""
        if self.placeholders and self.placeholders.take(sub.key, record.gid):
            if sub not in record.states:
                record.states[sub] = SubState.ACCEPTED
            return False
        record.add_waiter(sub)
        sub.queue.append((record, redelivery))
        return True

    def _fan_out(self, record: Record, remote: set[str] | frozenset[str], exclude: str | None, local: bool,
                 keys: frozenset | None = None) -> None:
        targets = self._local_targets(record, keys) if local else []
        if targets:
            redelivery = 1 if keys is not None else 0
            targets = [sub for sub in targets if self._enqueue(record, sub, redelivery)]
        dests = set(remote)
        dests.discard(self.router_id)
        if dests:
            self._forward(record, dests, exclude, keys)
        if local and keys is None and not record.local and self.moved_away:
            owed = self._moved_away_owed(record)
            if owed:
                self._send_owed(record, owed)
        for sub in targets:
            self.pump(sub)
        if record.pending == 0 and not record.outcome_sent:
            self._complete(record)

    def _moved_away_owed(self, record: Record) -> dict[str, set]:
        """Subscribers that just moved from here to another router, for a delivery routed to
        us by a root that had not heard of the move yet: it follows them there. Answered
        here without them, it would be lost to them. (A copy the root sent there directly
        as well is recognised there by its gid and not delivered twice.)"""
        moved = self.moved_away.get(record.topic)
        if not moved:
            return {}
        now = self.clock()
        out: dict[str, set] = {}
        here = self.topics.get(record.topic, ())
        for key, (where, until) in list(moved.items()):
            if until <= now:
                del moved[key]
                if not moved:
                    del self.moved_away[record.topic]
            elif key not in here:
                done = record.followed
                if done is None or (where, key) not in done:
                    out.setdefault(where, set()).add(key)
                    if done is None:
                        record.followed = done = set()
                    done.add((where, key))
        return out

    def _local_targets(self, record: Record, keys: frozenset | None) -> list[Subscriber]:
        """Local subscribers for a record: all of them, or only the keys it was re-targeted to."""
        subscribers = self.topics.get(record.topic)
        if not subscribers:
            return []
        if keys is None:
            return list(subscribers.values())
        return [s for k, s in subscribers.items() if k in keys and s not in record.states]

    def _forward(self, record: Record, dests: set[str], exclude: str | None,
                 keys: frozenset | None = None) -> list[Hop]:
        """Send ``record`` towards ``dests``; return the hops it was queued on. A keyed copy
        (re-targeted to subscribers that moved) goes even where the record already went:
        it is for someone new there."""
        by_hop, stuck = self.route(dests, exclude)
        if stuck and exclude is not None and exclude in self.hops:
            # Only reachable back through where it came from (the routes changed under it):
            # it goes back, and that router takes those destinations over (``forwarded``).
            # Parked here it would wait for a route change that may never come.
            back, stuck = self.route(stuck, None)
            if back:
                by_hop = {peer: set(ds) for peer, ds in by_hop.items()}
                for ds in back.values():
                    by_hop.setdefault(exclude, set()).update(ds)
        by_hop, hold = self._pinned(by_hop, exclude)
        if hold:
            for d in hold:
                record.add_waiter(HeldFor(d))
                # In publish order: one that came back to us is older than what waits for it.
                bisect.insort(self.held.setdefault(d, []), (record.born, record, exclude, keys), key=_first)
        touched = []
        full = record.covered() if keys is not None else None
        for peer, ds in by_hop.items():
            hop = self.hops.get(peer)
            if hop is None:
                stuck |= ds
                continue
            fds = frozenset(ds)
            if hop in record.hop_dests:
                before = record.hop_dests[hop]
                if keys is None:
                    fds = fds - before if not record.keyed_only else fds - (before - record.keyed_only)
                if not fds:
                    continue
                # A record counts once in the pins of a hop while that hop is in doubt
                # (``_unpin`` takes all its destinations off when it answers).
                pinned = fds - before if record.states.get(hop) is SubState.IN_DOUBT else before | fds
                record.hop_dests[hop] = before | fds
                record.reopen(hop)  # its earlier answer did not cover these destinations
                # Nor does an answer still to come for the earlier copy: only the newest
                # copy's answer speaks for everything sent on this hop (``hop_update``).
                record.unsettled.pop(hop, None)
            else:
                record.hop_dests[hop] = pinned = fds
                record.add_waiter(hop)
            hop.queue.append((record, fds, keys))
            touched.append(hop)
            if keys is not None:
                # A keyed copy covers these destinations only for its keys (``covered``).
                only = fds - full  # type: ignore[operator]
                if only:
                    record.keyed_only = (record.keyed_only or set()) | only
            elif record.keyed_only:
                record.keyed_only -= fds
            for d in pinned:
                pin = self.pins.get(d)
                if pin is None:
                    self.pins[d] = {peer: 1}
                else:
                    pin[peer] = pin.get(peer, 0) + 1
        owed = None
        if stuck:
            keys_at = self.routes.keys_at
            parked_keys = record.parked_keys
            if parked_keys is None:
                record.parked_keys = parked_keys = {}
            for d in stuck:
                if d not in parked_keys:
                    parked_keys[d] = keys_at(record.topic, d)
            record.parked |= stuck
            record.add_waiter(PARKED)
            self.parked[record] = None
            # Subscribers of an unreachable router that already attached elsewhere get it
            # there now: waiting for the next change of the graph would stall them, and
            # let newer deliveries reach them first.
            owed = self._owed_elsewhere(record, stuck)
        for hop in touched:
            self.pump_hop(hop)
        if owed:
            self._send_owed(record, owed)
        return touched

    def publisher_settled(self, pub: Publisher, record: Record) -> None:
        """The publisher settled (receiver-settle-mode second): relay settlement on."""
        if record.publisher_settled:
            return
        self._publisher_settled(record)
        self._maybe_free(record)

    def _publisher_settled(self, record: Record) -> None:
        """Settlement starts at the root: retire the tag, relay it to the subscribers."""
        record.publisher_settled = True
        if self.journal is not None:
            self.journal.add(Event.SETTLED, record.gid, record.topic)
        self._retire(record)
        self._settle_subscribers(record)

    # ------------------------------------------------------------- network

    def _pinned(self, by_hop: dict[str, set[str]], exclude: str | None) -> tuple[dict[str, set[str]], set[str] | None]:
        """Keep each destination on the neighbour it already has deliveries in flight through;
        return the routes and the destinations to hold here for now.

        When a route changes under load, switching at once would let newer deliveries
        overtake older ones on the old path: per-publisher order would break at the far
        end. A destination moves to its new route only once the old paths have drained;
        with several in flight (a reroute that could not use the old one), the oldest wins.
        The one path a delivery may not take is back where it came from: if the older
        ones for that destination went back there (its routes changed under it), the
        newer one waits here until they have come back through us or been answered
        (``_release_held``); going on at once, it would overtake them.
        """
        pins = self.pins
        held = self.held
        if not pins and not held:
            return by_hop, None
        moved = None
        hold = None
        for peer, ds in by_hop.items():
            for d in ds:
                pin = pins.get(d)
                if d in held or pin is not None and exclude in pin and exclude in self.hops and not any(
                        p in self.hops and p != exclude for p in pin) and peer != exclude:
                    if hold is None:
                        hold = set()
                    hold.add(d)
                    continue
                if pin is None or peer in pin and len(pin) == 1:
                    continue
                target = next((p for p in pin if p in self.hops and p != exclude), None)
                if target is not None and target != peer:
                    if moved is None:
                        moved = []
                    moved.append((peer, d, target))
        if moved is None and hold is None:
            return by_hop, None  # the usual case: every destination already on its routed neighbour
        out = {peer: set(ds) for peer, ds in by_hop.items()}
        for peer, d, target in moved or ():
            out[peer].discard(d)
            out.setdefault(target, set()).add(d)
        for ds in out.values():
            ds -= hold or set()
        return {peer: ds for peer, ds in out.items() if ds}, hold

    def _release_held(self, dest: str) -> None:
        """What waits here for ``dest`` goes, in order, once nothing older for it is still out
        with the neighbours it waited on."""
        queue = self.held.get(dest)
        if not queue:
            return
        pin = self.pins.get(dest) or {}
        if any(on in pin and on in self.hops for _, _, on, _ in queue):
            return
        del self.held[dest]
        for _, item, exclude, keys in queue:
            if type(item) is not Record:
                self.reroute_marker(item)
                continue
            item.drop_waiter(HeldFor(dest))
            self._forward(item, {dest}, exclude, keys)
            if item.pending == 0 and not item.outcome_sent:
                self._complete(item)

    def _unpin(self, hop: Hop, record: Record) -> None:
        self._unpin_dests(hop.peer, record.hop_dests.get(hop, ()))

    def _unpin_dests(self, peer: str, dests: Iterable[str], release: bool = True) -> None:
        for d in dests:
            pin = self.pins.get(d)
            if pin is not None and peer in pin:
                pin[peer] -= 1
                if pin[peer] <= 0:
                    del pin[peer]
                    if not pin:
                        del self.pins[d]
                    if release and self.held:
                        self._release_held(d)

    def forwarded(self, up: Upstream, handle: Any, gid: bytes, topic: str, payload: bytes, dests: frozenset[str],
                  presettled: bool, message_format: int, keys: frozenset | None = None, born: int = 0,
                  root: str = "") -> Record | None:
        """A neighbour forwarded a delivery to us, for ``dests`` (which may include us).

        ``keys``: the delivery was re-targeted to subscribers that moved (their router
        died): only they get it, marked as a redelivery since they may have seen it.
        """
        if up.credit > 0:
            up.credit -= 1
            self.credit.transit_outstanding -= 1
            if not up.credit & 7 and up.credit * 2 <= self.settings.link_credit:
                # Look again after this batch (every 8th credit once half is used): a copy
                # of a record we hold frees nothing when answered, so nothing else would
                # (the in-process network's seed 627 stalled: a neighbour's re-forwards
                # used up its credit for good).
                self.credit.dirty = True
        record = self.records.get(gid)
        if record is not None:
            if keys is not None:
                self._keyed_copy(record, up, handle, dests, keys, presettled)
                return record
            # Seen before (a re-forward after rerouting): answer from the record, never deliver twice.
            if not presettled:
                record.upstreams[up] = handle
                record.orphan_since = None
            new = set(dests) - record.covered() - {self.router_id}
            fresh = self._fan_out_late(record) if self.router_id in dests else None
            back = self.hops.get(up.peer)
            if back is not None and record.states.get(back) is SubState.IN_DOUBT and not presettled:
                # It comes back from a router we forwarded it to: that router became its
                # root (the publisher resumed there), or it found the way to some of its
                # destinations now leads back through us. Those destinations are ours
                # again; and waiting for it while it waits for us would hang both: answer
                # it for everything but itself.
                bounced = record.hop_dests.get(back, frozenset()) & set(dests)
                if bounced:
                    self._unpin_dests(back.peer, bounced, release=False)
                    record.hop_dests[back] = record.hop_dests[back] - bounced
                    new |= bounced - {self.router_id}
                touched = self._forward(record, new, up.peer) if new else []
                for d in bounced:  # what waited behind it goes after it
                    self._release_held(d)
                if record.keyed is None:
                    record.keyed = {}
                # Sent back the way it came (each of us routes those destinations through
                # the other until the routes converge): then our answer waits for that
                # router's too. Answering for the rest alone told it "delivered" while
                # nobody had: the in-process network's seed 941 lost 8 messages that way.
                bounced_back = back in touched
                record.keyed[up] = (handle, [w for w in record.states if w is not back or bounced_back])
                self._answer_keyed(record)
                return record
            if new:
                # New destinations: the answer must wait for them, this upstream's and the earlier ones.
                record.outcome_sent = False
                self._forward(record, new, up.peer)
            elif record.outcome_sent and not presettled and not fresh:
                up.port.outcome(handle, self._outcome(record), False)
            if fresh:
                for sub in fresh:
                    self.pump(sub)
                if record.pending == 0 and not record.outcome_sent:
                    self._complete(record)
            return record
        record = Record(gid, topic, payload, None, gid, 0, presettled, message_format, self.clock())
        record.local = False
        record.born = born or self._stamp()
        record.root = root or up.peer
        self.records.add(record)
        if self.journal is not None:
            self.journal.add(Event.RECEIVED, gid, topic, up.peer)
        if not presettled:
            record.upstreams[up] = handle
        self._fan_out(record, dests, up.peer, local=self.router_id in dests, keys=keys)
        return record

    def _fan_out_late(self, record: Record) -> list[Subscriber] | None:
        """The first copy of ``record`` here was keyed (for subscribers that moved here
        alone): the full copy that comes after it is for every local subscriber. Those it
        has not reached yet get it now (queued; the caller pumps), and the answer waits
        for them. (Taken for a mere repeat, it was answered without them: the in-process
        network's seed 367 lost 13 messages at a subscriber that never moved.)"""
        subs = self.topics.get(record.topic)
        if not subs:
            return None
        fresh = [s for s in subs.values() if s not in record.states and self._enqueue(record, s, 0)]
        if fresh:
            record.outcome_sent = False
        return fresh

    def _keyed_copy(self, record: Record, up: Upstream, handle: Any, dests: frozenset[str], keys: frozenset,
                    presettled: bool) -> None:
        """A record we already have, handed to us again for subscribers that moved (keys).

        The upstream may itself be one of this record's downstream hops (it handed back
        what it held for a subscriber that left it): answering it only with the whole
        record would make each wait for the other. It is answered for those keys alone.
        """
        targets: list[Any] = []
        if self.router_id in dests:
            for sub in self._local_targets(record, keys):
                self._enqueue(record, sub, 1)
            # The answer waits for every one of those keys here, also those already
            # waited for (an earlier copy reached them): an empty list would answer at once.
            subs = self.topics.get(record.topic) or {}
            targets += [s for k, s in subs.items() if k in keys and s in record.states]
        onward = set(dests) - {self.router_id}
        if onward:
            before = set(record.states)
            touched = self._forward(record, onward, None, keys)
            # Also a hop that had answered an earlier copy and now carries this one: its
            # new answer is what this hand-back waits for (the in-process network's seed
            # 627: answered at once, the publisher heard accepted before the moved
            # subscriber had accepted, and the settlement that followed lost its answer).
            targets += [w for w in record.states if w not in before or w in touched]
        if not presettled:
            if record.keyed is None:
                record.keyed = {}
            record.keyed[up] = (handle, targets)
        for sub in targets:
            if isinstance(sub, Subscriber):
                self.pump(sub)
        self._answer_keyed(record)

    def _answer_keyed(self, record: Record) -> None:
        keyed = record.keyed
        if not keyed:
            return
        for up, (handle, waiters) in list(keyed.items()):
            states = [record.states.get(w) for w in waiters]
            if any(st is SubState.IN_DOUBT for st in states):
                continue
            del keyed[up]
            rejected = any(st is SubState.REJECTED for st in states)
            if up.attached:
                up.port.outcome(handle, record.rejection if rejected and record.rejection else ACCEPTED, False)

    def upstream_settled(self, up: Upstream, record: Record) -> None:
        """The upstream settled its delivery: relay settlement down and forget the record."""
        if up not in record.upstreams:
            return  # a hand-over's (or a looped-back copy's) settlement concerns only its own answer
        del record.upstreams[up]
        if record.publisher_settled:
            return
        if record.local and (record.publisher is None or record.publisher.attached):
            return  # a root record is settled by its publisher, not by a hop that looped back
        # (A root whose publisher is suspended follows the router it resumed on.)
        record.publisher_settled = True
        if self.journal is not None:
            self.journal.add(Event.SETTLED, record.gid, record.topic)
        self._settle_subscribers(record)
        self._maybe_free(record)

    def hop_update(self, hop: Hop, record: Record, handle: Any, state: Any, settled: bool) -> None:
        """A downstream router's answer for its whole subtree."""
        if record.unsettled.get(hop) != handle:
            # An earlier copy's answer: a newer copy (a reroute, a hand-over) went on this
            # hop since, for more than that answer covers. Taking it would count the newer
            # one as delivered while it still sits in the queue or on the wire.
            return
        if settled:
            record.unsettled.pop(hop, None)
        kind = state.kind if state is not None else None
        final = kind is not None and kind is not OutcomeKind.RECEIVED
        done = False
        if final and record.states.get(hop) is SubState.IN_DOUBT:
            self._unpin(hop, record)  # any terminal answer: it resolves the hop below
        if kind is _ACCEPTED_KIND:
            done = record.resolve(hop, SubState.ACCEPTED)
        elif kind is _REJECTED_KIND:
            done = record.resolve(hop, SubState.REJECTED, state)
        elif final:
            done = record.resolve(hop, SubState.REJECTED, rejected(
                Conditions.HOP_ANSWERED_ODDLY, f"router {hop.peer} answered {kind.value if kind else None}"))
        if record.publisher_settled:
            self._settle_late(record, hop, handle)
        self._answered(record, done)

    def _settle_late(self, record: Record, waiter: Any, handle: Any) -> None:
        """An answer to a copy sent after the record was settled (a redelivery to a
        subscriber that came back, a re-forward): settle it now, nobody else will (the
        in-process network's seed 78 kept such records for good)."""
        if record.unsettled.get(waiter) is handle and record.states.get(waiter) is not SubState.IN_DOUBT:
            del record.unsettled[waiter]
            waiter.port.settle(handle)

    def add_hop(self, peer: str, port: HopPort) -> Hop:
        hop = Hop(peer, port)
        self.hops[peer] = hop
        return hop

    def add_upstream(self, peer: str, port: PublisherPort) -> Upstream:
        up = Upstream(peer, port)
        self.upstreams[peer] = up
        self.replenish_transit()
        return up

    def hop_lost(self, peer: str) -> None:
        """The data link to ``peer`` is gone: re-route everything it had not answered."""
        hop = self.hops.pop(peer, None)
        if hop is None:
            return
        hop.attached = False
        markers = [m for m, dests, _ in hop.queue if dests is None]
        hop.queue.clear()
        for d in [d for d, pin in self.pins.items() if peer in pin]:
            del self.pins[d][peer]
            if not self.pins[d]:
                del self.pins[d]
        for record in [r for r in self.records.records.values() if hop in r.states]:
            record.unsettled.pop(hop, None)
            dests = record.hop_dests.pop(hop, frozenset())
            if record.states.get(hop) is SubState.IN_DOUBT:
                exclude = next(iter(record.upstreams)).peer if record.upstreams else None
                self._forward(record, set(dests), exclude)
                if record.drop_waiter(hop) and not record.outcome_sent:
                    self._complete(record)
                elif record.keyed:
                    self._answer_keyed(record)
            else:
                record.states.pop(hop, None)
                self._maybe_free(record)
        for d in list(self.held):  # newer than what the lost hop had: after it
            self._release_held(d)
        for marker in markers:  # behind the deliveries it vouches for, re-routed just now
            self.reroute_marker(marker)

    def upstream_lost(self, peer: str) -> None:
        up = self.upstreams.pop(peer, None)
        if up is None:
            return
        up.attached = False
        self.credit.transit_outstanding -= up.credit
        up.credit = 0
        now = self.clock()
        for record in self.records.records.values():
            if up in record.upstreams:
                del record.upstreams[up]
                if not record.upstreams and not record.local and not record.publisher_settled:
                    record.orphan_since = now  # kept for a re-forward; collected by expire()

    def retry_parked(self) -> None:
        """The graph or the subscriber table changed: route what had no route."""
        for record in list(self.parked):
            wanted = self.remote_routers(record.topic)
            dests = {d for d in record.parked if d in wanted}
            # Subscribers of a dead router that attached elsewhere: follow them there, to
            # them alone, also while others are still waited for at the dead router.
            retarget = self._owed_elsewhere(record, record.parked)
            record.parked = frozenset()
            record.parked_keys = None
            self.parked.pop(record, None)
            # Stop waiting on PARKED first: re-forwarding may park again, and only then may
            # the record complete (the other order let a still-unroutable record complete).
            record.drop_waiter(PARKED)
            if dests:
                # No split horizon on a retry: the routes have changed, and a destination
                # now behind our upstream goes back to it, which takes it over (see
                # ``forwarded``). Held here, it would wait for a route that never comes.
                self._forward(record, dests, None)
            self._send_owed(record, retarget)
            if record.pending == 0 and not record.outcome_sent:
                self._complete(record)
            elif record.keyed:
                # A hand-back may have waited only for what was parked: answer it now, or
                # it and we would each wait for the other's answer for good.
                self._answer_keyed(record)

    def follow_moved(self, reachable: set[str]) -> None:
        """Root: subscribers of a dead router attached elsewhere: send them what they were
        owed now, from here, before anything newer.

        The router holding those deliveries for the dead one hands them over too, but
        its copies can arrive after newer deliveries that went to the new place straight
        from here: per-publisher order would break. Ours go first on the same path as
        the newer ones; the later copies find the subscriber served (``_keyed_copy``).
        """
        if not self.local_count:
            return
        for record in list(self.records.records.values()):  # publish order
            if not record.local or record.outcome_sent or record.presettled:
                continue
            gone = {d for hop, ds in record.hop_dests.items() if record.states.get(hop) is SubState.IN_DOUBT
                    for d in ds if d not in reachable}
            if record.root not in reachable:  # adopted from a root that died: its subscribers too
                gone.add(record.root)
            if gone:
                self._send_owed(record, self._owed_elsewhere(record, gone))

    def _owed_elsewhere(self, record: Record, gone: Iterable[str]) -> dict[str, set]:
        """Where the subscribers of the unreachable routers ``gone`` attached since, with
        their keys, leaving out those this record already followed (marked as followed)."""
        retarget: dict[str, set] = {}
        parked_keys = record.parked_keys
        for d in gone:
            owed = self.moved(record.topic, d)
            if parked_keys and parked_keys.get(d):
                # The subscribers it had when this record parked for it may have left it
                # since, and it may have forgotten them (they attached elsewhere while we
                # were cut off: the in-process network's seed 7625 lost 27).
                for where, keys in self.routes.homes(parked_keys[d]).items():
                    if where != d:
                        owed = dict(owed)
                        owed[where] = frozenset(owed.get(where, frozenset()) | keys)
            for where, keys in owed.items():
                done = record.followed
                new = {k for k in keys if done is None or (where, k) not in done}
                if new:
                    retarget.setdefault(where, set()).update(new)
                    if done is None:
                        record.followed = done = set()
                    done.update((where, k) for k in new)
        return retarget

    def _send_owed(self, record: Record, retarget: dict[str, set]) -> None:
        for where, keys in retarget.items():
            if where == self.router_id:
                self._enqueue_owed(record, frozenset(keys))
            else:
                # No split horizon for a keyed copy: it is consumed where it goes, and the
                # way there may well be back through the upstream (or be the upstream).
                self._forward(record, {where}, None, frozenset(keys))

    def _enqueue_owed(self, record: Record, keys: frozenset) -> None:
        """Queue a record owed to subscribers that moved here, in publish order: it may be
        older than what they were queued since they attached."""
        for sub in self._local_targets(record, keys):
            if self._enqueue(record, sub, 1):
                queue = sub.queue
                if len(queue) > 1 and queue[-2][0].born > record.born:
                    self._order_queue(sub)
                self.pump(sub)

    @staticmethod
    def _order_queue(sub: Subscriber) -> None:
        sub.queue = deque(sorted(sub.queue, key=lambda item: item[0].born))

    def attach_completed(self, sub: Subscriber) -> None:
        """The network has handed over everything it held for ``sub`` (it moved here, or
        resumed): what reached it by several paths goes out in publish order."""
        queue = sub.queue
        if any(queue[i][0].born > queue[i + 1][0].born for i in range(len(queue) - 1)):
            self._order_queue(sub)
        self.pump(sub)

    # --------------------------------------------------------------- markers

    def marker_hops(self, target: str) -> list[Hop]:
        """Every neighbour a delivery towards ``target`` may be queued or in flight on:
        those with deliveries pinned there, and the current route."""
        peers = dict.fromkeys(self.pins.get(target, ()))
        by_hop, _ = self.route({target}, None)
        peers.update(dict.fromkeys(by_hop))
        return [self.hops[p] for p in peers if p in self.hops]

    def queue_marker(self, hop: Hop, marker: Any) -> None:
        hop.queue.append((marker, None, None))
        self.pump_hop(hop)

    def hold_marker(self, target: str, marker: Any) -> bool:
        """Keep a marker behind deliveries held here for ``target``, if there are any."""
        queue = self.held.get(target)
        if not queue:
            return False
        queue.append((math.inf, marker, None, None))
        return True

    def expire(self, now: float, orphan_ttl: float) -> int:
        """Free forwarded records whose upstream vanished and never came back."""
        gone = [r for r in self.records.records.values()
                if r.orphan_since is not None and now - r.orphan_since > orphan_ttl and r.pending == 0]
        for r in gone:
            r.publisher_settled = True
            self._settle_subscribers(r)
            self._maybe_free(r)
        return len(gone)

    def pump_hop(self, hop: Hop) -> None:
        queue = hop.queue
        if not queue:
            return
        port = hop.port
        credit = port.credit()
        while credit > 0 and queue:
            record, dests, keys = queue.popleft()
            if dests is None:
                port.marker(record)
                continue
            if record.states.get(hop) is not SubState.IN_DOUBT:
                continue
            handle = port.forward(record, dests, record.presettled, keys)
            credit -= 1
            if self.journal is not None:
                self.journal.add(Event.FORWARDED, record.gid, record.topic, hop.peer)
            if record.presettled:
                self._unpin(hop, record)
                self._sent_settled(record, hop)
            else:
                record.unsettled[hop] = handle

    def _sent_settled(self, record: Record, waiter: Any) -> None:
        """A pre-settled send is that waiter's final state: at-most-once, nothing comes back."""
        self._answered(record, record.resolve(waiter, SubState.ACCEPTED))

    def _outcome(self, record: Record) -> Outcome:
        return ACCEPTED if record.rejection is None else record.rejection

    # ---------------------------------------------------------- subscribers

    def add_subscriber(self, port: SubscriberPort, topic: str, container_id: str, link_name: str,
                       presettled: bool) -> tuple[Subscriber, Subscriber | None]:
        """Attach a subscriber; return it and the subscriber it displaced (same key), if any.

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
        if old is not None and old.topic == topic:
            self._take_over(old, sub)
        self.topics.setdefault(topic, {})[sub.key] = sub
        return sub, old

    def _take_over(self, old: Subscriber, new: Subscriber) -> None:
        old.attached = False
        queued = {id(r) for r, _ in old.queue}
        in_doubt = SubState.IN_DOUBT
        for record in self.records.records.values():  # publish order
            state = record.states.pop(old, None)
            if state is None:
                continue
            record.states[new] = state
            was_sent = record.unsettled.pop(old, None) is not None or (state is in_doubt and id(record) not in queued)
            if state is in_doubt:
                new.queue.append((record, 1 if was_sent else 0))
        new.attempts = old.attempts
        old.queue.clear()

    def subscriber_moved(self, sub: Subscriber, where: str) -> None:
        """A suspended subscriber's key attached at router ``where``: hand its deliveries over.

        Everything it had not accepted goes there, to that key alone, marked; only when
        that router answers does the record stop waiting for it. Dropping them here (as the
        grace expiry would) would lose them.
        """
        if not sub.attached or sub.suspended_until is None:
            return
        held = [r for r in self.records.records.values() if r.states.get(sub) is SubState.IN_DOUBT]
        sub.suspended_until = None
        self._unlink(sub)
        sub.attached = False
        sub.queue.clear()
        # Roots that have not heard of the move still route its deliveries here: for a
        # moment usually (the flood and the transit take well under the time a dead link
        # takes), but a root that was cut off sends what it parked for this router when
        # it comes back, before it hears of the move. That can be late: up to the grace
        # a subscription has anyway (the in-process network's seed 7625 lost 27 after 3 s).
        s = self.settings
        until = self.clock() + max(s.router_dead_after, s.subscriber_grace)
        self.moved_away.setdefault(sub.topic, {})[sub.key] = (where, until)
        for record in held:
            self._forward(record, {where}, None, frozenset({sub.key}))
            if record.drop_waiter(sub) and not record.outcome_sent:
                self._complete(record)
        for record in [r for r in self.records.records.values() if sub in r.states]:
            record.states.pop(sub, None)
            record.unsettled.pop(sub, None)
            self._maybe_free(record)

    def adopt_subscriber(self, topic: str, container_id: str, link_name: str, until: float, owner: str = "") -> None:
        """A subscriber of ours from before we restarted: suspended here until it resumes
        (here, or elsewhere and moved) or its grace ends; deliveries for it wait."""
        subs = self.topics.setdefault(topic, {})
        key = (container_id, link_name)
        if key in subs:
            return
        sub = Subscriber(SUSPENDED, topic, container_id, link_name, False)  # type: ignore[arg-type]
        sub.suspended_until = until
        sub.owner = owner
        subs[key] = sub

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
        for topic, moved in list(self.moved_away.items()):
            for key in [k for k, (_, until) in moved.items() if until <= now]:
                del moved[key]
            if not moved:
                del self.moved_away[topic]
        gone = [s for subs in self.topics.values() for s in subs.values()
                if s.suspended_until is not None and s.suspended_until <= now]
        for s in gone:
            self.remove_subscriber(s)
        return gone

    def _unlink(self, sub: Subscriber) -> None:
        subs = self.topics.get(sub.topic)
        if subs is not None and subs.get(sub.key) is sub:
            del subs[sub.key]
            if not subs:
                del self.topics[sub.topic]

    def remove_subscriber(self, sub: Subscriber) -> None:
        if not sub.attached:
            return
        sub.attached = False
        self._unlink(sub)
        sub.queue.clear()
        for record in [r for r in self.records.records.values() if sub in r.states]:
            self._answered(record, record.drop_waiter(sub))
        self.replenish()

    def pump(self, sub: Subscriber) -> None:
        """Send queued records to ``sub`` while it has credit."""
        queue = sub.queue
        if not queue:
            if sub.port.draining():
                sub.port.drained()
            return
        port = sub.port
        credit = port.credit()
        in_doubt = SubState.IN_DOUBT
        while credit > 0 and queue:
            record, redelivery = queue.popleft()
            if record.states.get(sub) is not in_doubt:
                continue
            settled = record.presettled or sub.presettled
            handle = port.deliver(record, settled, redelivery)
            credit -= 1
            self.stats["delivered"] += 1
            if settled:
                self._sent_settled(record, sub)
            else:
                record.unsettled[sub] = handle
        if not queue and port.draining():
            port.drained()

    def subscriber_update(self, sub: Subscriber, record: Record, handle: Any, state: Any, settled: bool) -> None:
        """The subscriber's disposition for our delivery of ``record``."""
        if settled:
            record.unsettled.pop(sub, None)
        kind = state.kind if state is not None else None
        done = False
        if kind is _ACCEPTED_KIND:
            done = record.resolve(sub, SubState.ACCEPTED)
            self.stats["accepted"] += 1
        elif kind is _REJECTED_KIND:
            done = record.resolve(sub, SubState.REJECTED, _rejection(state))  # type: ignore[arg-type]
            self.stats["rejected"] += 1
        elif kind is _RELEASED_KIND or kind is _MODIFIED_KIND:
            if kind is _MODIFIED_KIND and state.undeliverable_here:  # type: ignore[union-attr]
                done = record.resolve(sub, SubState.REJECTED, rejected(
                    Conditions.UNDELIVERABLE_HERE,
                    f"subscriber {sub.container_id}/{sub.link_name} declined the message"))
            else:
                done = self._redeliver(sub, record, handle, settled)
        # (received: progress only; None: settlement alone)
        if record.publisher_settled:
            self._settle_late(record, sub, handle)
        self._answered(record, done)

    def _redeliver(self, sub: Subscriber, record: Record, handle: Any, settled: bool) -> bool:
        if record.states.get(sub) is not SubState.IN_DOUBT:
            return False
        tries = sub.attempts.get(record.gid, 0) + 1
        if tries > self.settings.max_redeliveries:
            sub.attempts.pop(record.gid, None)
            return record.resolve(sub, SubState.REJECTED, rejected(
                Conditions.REDELIVERY_LIMIT,
                f"subscriber {sub.container_id}/{sub.link_name} released it {tries - 1} times"))
        sub.attempts[record.gid] = tries
        if not settled:
            sub.port.settle(handle)
        record.unsettled.pop(sub, None)
        sub.queue.append((record, tries))
        self.stats["redelivered"] += 1
        self.pump(sub)
        return False

    # -------------------------------------------------------------- records

    def _complete(self, record: Record) -> None:
        """Every waiter reached a terminal state: answer the publisher."""
        record.outcome_sent = True
        if self.journal is not None and not record.presettled:
            self.journal.add(Event.REJECTED if record.rejection is not None else Event.ACCEPTED, record.gid, record.topic)
        for sub in record.states:
            if isinstance(sub, Subscriber):
                sub.attempts.pop(record.gid, None)
        if record.upstreams and not record.presettled:
            outcome = self._outcome(record)
            for up, handle in list(record.upstreams.items()):
                if up.attached:
                    up.port.outcome(handle, outcome, False)  # the upstream settles, then we relay it
        if not record.local:
            self._maybe_free(record)
            return
        pub: Publisher = record.publisher
        if not record.presettled and record.publisher_handle is not None and pub.attached:
            outcome = self._outcome(record)
            settle = not pub.settle_second
            pub.port.outcome(record.publisher_handle, outcome, settle)
            if settle:
                self._publisher_settled(record)
        self._maybe_free(record)

    def _retire(self, record: Record) -> None:
        pub: Publisher = record.publisher
        if pub is None:
            return
        if pub.live.get(record.tag) is record:
            del pub.live[record.tag]
            pub.retired[record.tag] = record.generation
            if len(pub.retired) > RETIRED_TAGS:
                pub.retired.popitem(last=False)

    def _settle_subscribers(self, record: Record) -> None:
        if record.unsettled:
            for sub, handle in record.unsettled.items():
                sub.port.settle(handle)
            record.unsettled.clear()

    def _answered(self, record: Record, done: bool) -> None:
        """After a waiter's answer (``done``: it was the last one in doubt): the publisher
        hears the outcome, or else the record goes if nothing holds it any more."""
        if done and not record.outcome_sent:
            self._complete(record)
        else:
            self._maybe_free(record)

    def _maybe_free(self, record: Record) -> None:
        if record.keyed:
            self._answer_keyed(record)
        if self.records.finished(record):
            if record.gid in self.records:
                self.records.free(record)
                record.publisher_handle = None  # (it points back at the record: no cycle left behind)
                if record.local:
                    self.local_count -= 1
                    record.publisher.in_flight -= 1
                    record.publisher.bytes -= len(record.payload)
                self.parked.pop(record, None)
                self.credit.dirty = True

    # --------------------------------------------------------------- credit

    def after_batch(self) -> None:
        credit = self.credit
        if credit.dirty:
            credit.dirty = False
            self.replenish()
            self.replenish_transit()

    def replenish_transit(self) -> None:
        """Credit for neighbours forwarding to us, from the transit window."""
        ups = [u for u in self.upstreams.values() if u.attached]
        self.credit.grant_transit(ups, len(self.records) - self.local_count, self.records.bytes)

    def replenish(self) -> None:
        """Top up publisher credit within the room the window has left (``credit.py``)."""
        if not self.unsynced:
            self.credit.grant(self.publishers, self.local_count, self.records.bytes)

    def reclaim_idle(self, now: float) -> int:
        """Cut back links that hold credit without sending; how many were cut."""
        cut = self.credit.reclaim(self.publishers, now)
        if cut:
            self.replenish()
        return cut

    @property
    def outstanding(self) -> int:
        return self.credit.outstanding
