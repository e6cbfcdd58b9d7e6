"""Inter-router forwarding: the copies a record sends towards other routers, their
answers and settlement, per-destination order (pins and the held queue), parked
records and their retries, keyed copies for subscribers that moved, hop loss.

Network rules (seed 002): the root forwards one copy per next hop, carrying the set of
destination routers behind that hop; a router answers its upstream once its local
subscribers and its own downstream hops have all answered; settlement flows back down.
A gid already known is answered from its record and never delivered twice. Deliveries
forwarded to us draw on a separate transit window, so two routers publishing towards
each other can never hold each other's credit (a cycle would deadlock).

A part of ``Core`` (``facade.py``) with its own state: the hops and upstreams, the
parked records, per-destination order. It calls the other parts through ``parts.py``.
Hand-over markers travel here too: they go behind what was forwarded on a hop.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from once.records.order import DestinationOrder, HeldDelivery, HeldMarker
from once.records.table import IN_DOUBT, SUB_ACCEPTED, SUB_REJECTED, OwedAnswers, Record

from ..journal import Event
from .credit import CreditWindow
from .parts import DeliveryPart, FailoverPart, GroupsPart
from .peers import PARKED, CoreRecord, CoreRecords, Forward, HeldFor, Hop, QueuedMarker, Subscriber, Upstream
from .ports import ACCEPTED, Conditions, HopPort, OutcomeKind, PublisherPort, RoutesPort, rejected
from .tables import ACCEPTED_KIND, REJECTED_KIND, CoreTables, Key


def _born(record: CoreRecord) -> int:
    return record.born


class Forwarding:
    __slots__ = ("router_id", "records", "topics", "journal", "clock", "credit", "routes",
                 "route", "hops", "upstreams", "parked", "order", "delivery", "failover", "groups")

    def __init__(self, tables: CoreTables, credit: CreditWindow, routes: RoutesPort) -> None:
        self.router_id = tables.router_id
        self.records: CoreRecords = tables.records
        self.topics = tables.topics
        self.journal = tables.journal
        self.clock = tables.clock
        self.credit = credit
        self.routes = routes
        self.route = routes.route  # (bound once: every forward asks)
        self.hops: dict[str, Hop] = {}
        self.upstreams: dict[str, Upstream] = {}
        self.parked: dict[CoreRecord, float] = {}  # -> parked since; in publish order: re-tried in that order
        # per-destination order across route changes: pins and the held queue
        self.order = DestinationOrder()
        self.delivery: DeliveryPart
        self.failover: FailoverPart
        self.groups: GroupsPart

    def connect(self, delivery: DeliveryPart, failover: FailoverPart, groups: GroupsPart) -> None:
        self.delivery = delivery
        self.failover = failover
        self.groups = groups

    def forward(self, record: CoreRecord, dests: set[str], exclude: str | None,
                keys: frozenset[Key] | None = None) -> list[Hop]:
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
        order = self.order
        if order.pins or order.held:  # (attributes, not bool(order): this runs per forward)
            by_hop, hold = order.steer(by_hop, exclude, self.hops)
            if hold:
                for d in hold:
                    record.add_waiter(HeldFor(d))
                    order.hold(d, HeldDelivery(record.born, record, exclude, keys))
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
                was_in_doubt = record.states.get(hop) is IN_DOUBT
                if keys is None:
                    fds = fds - before if not record.keyed_only else fds - (before - record.keyed_only)
                if not fds:
                    continue
                # A record counts once in the pins of a hop while that hop is in doubt
                # (``_unpin`` takes all its destinations off when it answers).
                pinned = fds - before if was_in_doubt else before | fds
                record.hop_map()[hop] = before | fds
                record.reopen(hop)  # its earlier answer did not cover these destinations
                # Nor does an answer still to come for the earlier copy: only the newest
                # copy's answer speaks for everything sent on this hop (``hop_update``)...
                prev = record.unsettled.pop(hop, None)
                if keys is None:
                    if record.earlier:
                        record.earlier.pop(hop, None)
                elif prev is not None and was_in_doubt and not record.presettled:
                    # ...unless it is keyed: it speaks for its keys alone, and the earlier
                    # copy's answer is still owed (the in-process network's seeds 425 and
                    # 1348 left records behind, 2722 lost 6, on the keyed copy's answer).
                    self._owe_earlier(record, hop, prev)
            else:
                record.hop_map()[hop] = pinned = fds
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
                order.pin(d, peer)
        owed: dict[str, set[Key]] = {}
        if stuck and keys is None:
            # A destination with no subscribers any more (they all moved: the copy came
            # from a router that had not heard yet) is not waited for: parked, it would
            # wait for a change of routes that need not come (a moved subscriber stalled
            # the real mesh3 failover test now and then; the in-process network showed why).
            gone = stuck - self.groups.wanted(record)
            if gone:
                stuck = stuck - gone
                owed = self.failover.owed_elsewhere(record, gone)
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
            self.parked.setdefault(record, self.clock())  # (since when: groups pass on after the grace)
            # Subscribers of an unreachable router that already attached elsewhere get it
            # there now: waiting for the next change of the graph would stall them, and
            # let newer deliveries reach them first.
            for where, keys_there in self.failover.owed_elsewhere(record, stuck).items():
                owed.setdefault(where, set()).update(keys_there)
        for hop in touched:
            self.pump_hop(hop)
        if owed:
            self.failover.send_owed(record, owed)
        return touched

    def _release_held(self, dest: str) -> None:
        """What waits here for ``dest`` goes, in order, once nothing older for it is still out
        with the neighbours it waited on (``records/order.py`` decides)."""
        for entry in self.order.release(dest, self.hops):
            if isinstance(entry, HeldMarker):
                self.routes.reroute_marker(entry.marker)
                continue
            record = entry.record
            record.drop_waiter(HeldFor(dest))
            self.forward(record, {dest}, entry.came_from, entry.keys)
            if record.pending == 0 and not record.outcome_sent:
                self.delivery.complete(record)

    def _unpin(self, hop: Hop, record: CoreRecord) -> None:
        self._unpin_dests(hop.peer, record.hop_dests.get(hop, ()))

    def _unpin_dests(self, peer: str, dests: Iterable[str], release: bool = True) -> None:
        cleared = self.order.unpin(peer, dests)
        if release and self.order.held:
            for d in cleared:
                self._release_held(d)

    def forwarded(self, up: Upstream, handle: Any, gid: bytes, topic: str, payload: bytes, dests: frozenset[str],
                  presettled: bool, message_format: int, keys: frozenset[Key] | None = None, born: int = 0,
                  root: str = "", chosen: dict[Key, Any] | None = None) -> CoreRecord | None:
        """A neighbour forwarded a delivery to us, for ``dests`` (which may include us).

        ``keys``: the delivery was re-targeted to subscribers that moved (their router
        died): only they get it, marked as a redelivery since they may have seen it.
        """
        if up.credit > 0:
            self.credit.transit_used(up)
        record = self.records.get(gid)
        if record is not None:
            if chosen:
                record.chosen = self.groups.merge_chosen(record, chosen, keys)
            if keys is not None:
                self._keyed_copy(record, up, handle, dests, keys, presettled)
                return record
            # Seen before (a re-forward after rerouting): answer from the record, never deliver twice.
            if not presettled:
                record.upstream_map()[up] = handle
                record.orphan_since = None
            new = set(dests) - record.covered() - {self.router_id}
            fresh = self._fan_out_late(record) if self.router_id in dests else None
            back = self.hops.get(up.peer)
            if back is not None and record.states.get(back) is IN_DOUBT and not presettled:
                # It comes back from a router we forwarded it to: that router became its
                # root (the publisher resumed there), or it found the way to some of its
                # destinations now leads back through us. Those destinations are ours
                # again; and waiting for it while it waits for us would hang both: answer
                # it for everything but itself.
                bounced = record.hop_dests.get(back, frozenset()) & set(dests)
                if bounced:
                    self._unpin_dests(back.peer, bounced, release=False)
                    record.hop_map()[back] = record.hop_dests[back] - bounced
                    new |= bounced - {self.router_id}
                touched = self.forward(record, new, up.peer) if new else []
                for d in bounced:  # what waited behind it goes after it
                    self._release_held(d)
                if record.keyed is None:
                    record.keyed = {}
                # Sent back the way it came (each of us routes those destinations through
                # the other until the routes converge): then our answer waits for that
                # router's too. Answering for the rest alone told it "delivered" while
                # nobody had: the in-process network's seed 941 lost 8 messages that way.
                bounced_back = back in touched
                record.keyed[handle] = (up, [w for w in record.states if w is not back or bounced_back])
                self.answer_keyed(record)
                return record
            if new:
                # New destinations: the answer must wait for them, this upstream's and the earlier ones.
                record.outcome_sent = False
                self.forward(record, new, up.peer)
                if record.pending == 0 and not fresh:
                    # Nothing to wait for after all (their subscribers had moved, and got it
                    # or had it): answered now, or never (the in-process network's seed 1120).
                    self.delivery.complete(record)
            elif record.outcome_sent and not presettled and not fresh:
                up.port.outcome(handle, self.delivery.outcome(record), False)
            if fresh:
                for sub in fresh:
                    self.delivery.pump(sub)
                if record.pending == 0 and not record.outcome_sent:
                    self.delivery.complete(record)
            return record
        record = Record(gid, topic, payload, None, gid, 0, presettled, message_format)
        record.local = False
        record.born = born or self.delivery.stamp()
        record.root = root or up.peer
        record.chosen = chosen
        self.records.add(record)
        if self.journal is not None:
            self.journal.add(Event.RECEIVED, gid, topic, up.peer)
        if not presettled:
            record.upstream_map()[up] = handle
        self.delivery.fan_out(record, dests, up.peer, local=self.router_id in dests, keys=keys)
        return record

    def _fan_out_late(self, record: CoreRecord) -> list[Subscriber] | None:
        """The first copy of ``record`` here was keyed (for subscribers that moved here
        alone): the full copy that comes after it is for every local subscriber. Those it
        has not reached yet get it now (queued; the caller pumps), and the answer waits
        for them. (Taken for a mere repeat, it was answered without them: the in-process
        network's seed 367 lost 13 messages at a subscriber that never moved.)"""
        if record.topic not in self.topics:
            return None
        delivery = self.delivery
        fresh = [s for s in delivery.local_targets(record, None) if s not in record.states and delivery.enqueue(record, s, 0)]
        if fresh:
            record.outcome_sent = False
        return fresh

    def _keyed_copy(self, record: CoreRecord, up: Upstream, handle: Any, dests: frozenset[str], keys: frozenset[Key],
                    presettled: bool) -> None:
        """A record we already have, handed to us again for subscribers that moved (keys).

        The upstream may itself be one of this record's downstream hops (it handed back
        what it held for a subscriber that left it): answering it only with the whole
        record would make each wait for the other. It is answered for those keys alone.
        """
        targets: list[Any] = []
        if self.router_id in dests:
            for sub in self.delivery.local_targets(record, keys):
                self.delivery.enqueue(record, sub, 1)
            # The answer waits for every one of those keys here, also those already
            # waited for (an earlier copy reached them): an empty list would answer at once.
            subs = self.topics.get(record.topic) or {}
            targets += [s for k, s in subs.items() if k in keys and s in record.states]
        onward = set(dests) - {self.router_id}
        if onward:
            before = set(record.states)
            touched = self.forward(record, onward, None, keys)
            # Also a hop that had answered an earlier copy and now carries this one: its
            # new answer is what this hand-back waits for (the in-process network's seed
            # 627: answered at once, the publisher heard accepted before the moved
            # subscriber had accepted, and the settlement that followed lost its answer).
            targets += [w for w in record.states if w not in before or w in touched]
        if not presettled:
            if record.keyed is None:
                record.keyed = {}
            # By the copy's handle: each copy is answered (a later one from the same
            # neighbour does not take the place of an earlier one it still waits for).
            record.keyed[handle] = (up, targets)
        for sub in targets:
            if isinstance(sub, Subscriber):
                self.delivery.pump(sub)
        self.answer_keyed(record)

    def answer_keyed(self, record: CoreRecord) -> None:
        keyed = record.keyed
        if not keyed:
            return
        for handle, (up, waiters) in list(keyed.items()):
            states = [record.states.get(w) for w in waiters]
            if any(st is IN_DOUBT for st in states):
                continue
            del keyed[handle]
            rejected = any(st is SUB_REJECTED for st in states)
            if up.attached:
                up.port.outcome(handle, record.rejection if rejected and record.rejection else ACCEPTED, False)

    def upstream_settled(self, up: Upstream, record: CoreRecord) -> None:
        """The upstream settled its delivery: relay settlement down and forget the record."""
        if up not in record.upstreams:
            return  # a hand-over's (or a looped-back copy's) settlement concerns only its own answer
        del record.upstream_map()[up]
        if record.publisher_settled:
            return
        if record.local and (record.publisher is None or record.publisher.attached):
            return  # a root record is settled by its publisher, not by a hop that looped back
        # (A root whose publisher is suspended follows the router it resumed on.)
        record.publisher_settled = True
        if self.journal is not None:
            self.journal.add(Event.SETTLED, record.gid, record.topic)
        self.delivery.settle_subscribers(record)
        self.delivery.maybe_free(record)

    def hop_update(self, hop: Hop, record: CoreRecord, handle: Any, state: Any, settled: bool) -> None:
        """A downstream router's answer for its whole subtree."""
        owed = record.earlier.get(hop) if record.earlier else None
        kind = state.kind if state is not None else None
        final = kind is not None and kind is not OutcomeKind.RECEIVED
        if owed is not None:
            # A keyed copy followed copies not answered yet: all their answers resolve the hop.
            if handle in owed.handles:
                if not final:
                    return
                owed.handles.remove(handle)
                if kind is not ACCEPTED_KIND and owed.refusal is None:
                    owed.refusal = state
            elif record.unsettled.get(hop) == handle:
                if not final:
                    return
                owed.newest = state
            else:
                return
            if owed.handles or owed.newest is None:
                self.delivery.maybe_free(record)  # (a hand-back may wait for something else that went)
                return
            del record.earlier[hop]  # type: ignore[union-attr]
            state = owed.refusal or owed.newest
            kind = state.kind
        elif record.unsettled.get(hop) != handle:
            # An earlier copy's answer: a newer copy (a reroute, a hand-over) went on this
            # hop since, for more than that answer covers. Taking it would count the newer
            # one as delivered while it still sits in the queue or on the wire.
            return
        if settled:
            record.unsettled.pop(hop, None)
        done = False
        if final and record.states.get(hop) is IN_DOUBT:
            self._unpin(hop, record)  # any terminal answer: it resolves the hop below
        if kind is ACCEPTED_KIND:
            done = record.resolve(hop, SUB_ACCEPTED)
        elif kind is REJECTED_KIND:
            done = record.resolve(hop, SUB_REJECTED, state)
        elif final:
            done = record.resolve(hop, SUB_REJECTED, rejected(
                Conditions.HOP_ANSWERED_ODDLY, f"router {hop.peer} answered {kind.value if kind else None}"))
        if record.publisher_settled:
            self.delivery.settle_late(record, hop, handle)
        self.delivery.answered(record, done)

    def add_hop(self, peer: str, port: HopPort) -> Hop:
        hop = Hop(peer, port)
        self.hops[peer] = hop
        return hop

    def add_upstream(self, peer: str, port: PublisherPort) -> Upstream:
        up = Upstream(peer, port)
        self.upstreams[peer] = up
        self.replenish_transit()
        return up

    def replenish_transit(self) -> None:
        """Credit for neighbours forwarding to us, from the transit window."""
        ups = [u for u in self.upstreams.values() if u.attached]
        self.credit.grant_transit(ups, len(self.records) - self.delivery.root_records(), self.records.bytes)

    def hop_lost(self, peer: str) -> None:
        """The data link to ``peer`` is gone: re-route everything it had not answered."""
        hop = self.hops.pop(peer, None)
        if hop is None:
            return
        hop.attached = False
        markers = [e.marker for e in hop.queue if type(e) is QueuedMarker]
        hop.queue.clear()
        self.order.drop_peer(peer)
        for record in [r for r in self.records.records.values() if hop in r.states]:
            record.unsettled.pop(hop, None)
            if record.earlier:
                record.earlier.pop(hop, None)
            dests = record.hop_map().pop(hop, frozenset()) if hop in record.hop_dests else frozenset()
            if record.states.get(hop) is IN_DOUBT:
                exclude = next(iter(record.upstreams)).peer if record.upstreams else None
                self.forward(record, set(dests), exclude)
                if record.drop_waiter(hop) and not record.outcome_sent:
                    self.delivery.complete(record)
                elif record.keyed:
                    self.answer_keyed(record)
            else:
                record.states.pop(hop, None)
                self.delivery.maybe_free(record)
        for d in list(self.order.held):  # newer than what the lost hop had: after it
            self._release_held(d)
        for marker in markers:  # behind the deliveries it vouches for, re-routed just now
            self.routes.reroute_marker(marker)

    def upstream_lost(self, peer: str) -> None:
        up = self.upstreams.pop(peer, None)
        if up is None:
            return
        up.attached = False
        self.credit.upstream_gone(up)
        now = self.clock()
        for record in self.records.records.values():
            if up in record.upstreams:
                del record.upstream_map()[up]
                if not record.upstreams and not record.local and not record.publisher_settled:
                    record.orphan_since = now  # kept for a re-forward; collected by expire()

    def retry_parked(self) -> None:
        """The graph or the subscriber table changed: route what had no route."""
        # In publish order (the root's stamps): a hop lost parks its older records after
        # newer ones that had parked already (the seed-13 scenario reordered 8 that way).
        for record in sorted(self.parked, key=_born):
            wanted = self.groups.wanted(record)
            dests = {d for d in record.parked if d in wanted}
            # Subscribers of a dead router that attached elsewhere: follow them there, to
            # them alone, also while others are still waited for at the dead router.
            retarget = self.failover.owed_elsewhere(record, record.parked)
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
                self.forward(record, dests, None)
            self.failover.send_owed(record, retarget)
            if record.pending == 0 and not record.outcome_sent:
                self.delivery.complete(record)
            elif record.keyed:
                # A hand-back may have waited only for what was parked: answer it now, or
                # it and we would each wait for the other's answer for good.
                self.answer_keyed(record)

    def pump_hop(self, hop: Hop) -> None:
        queue = hop.queue
        if not queue:
            return
        port = hop.port
        credit = port.credit()
        while credit > 0 and queue:
            entry = queue.popleft()
            if isinstance(entry, QueuedMarker):
                port.marker(entry.marker)
                continue
            record, dests, keys = cast(Forward, entry)  # (protocol 3's Copies are pumped by ``Relay``)
            if record.states.get(hop) is not IN_DOUBT:
                continue
            handle = port.forward(record, dests, record.presettled, keys)
            credit -= 1
            if self.journal is not None:
                self.journal.add(Event.FORWARDED, record.gid, record.topic, hop.peer)
            if record.presettled:
                self._unpin(hop, record)
                self.delivery.sent_settled(record, hop)
            else:
                if keys is not None:
                    prev = record.unsettled.get(hop)
                    if prev is not None:  # sent from this queue ahead of it, not answered
                        self._owe_earlier(record, hop, prev)
                record.unsettled[hop] = handle

    @staticmethod
    def _owe_earlier(record: CoreRecord, hop: Hop, handle: Any) -> None:
        """The copy ``handle`` on ``hop`` is still owed an answer after a keyed one goes."""
        if any(up.peer == hop.peer for up in record.upstreams):
            return  # it sent us this record too: each waits for the other (``forwarded``)
        if record.earlier is None:
            record.earlier = {}
        owed = record.earlier.get(hop)
        if owed is None:
            record.earlier[hop] = OwedAnswers(handle)
        elif owed.newest is None:
            owed.handles.append(handle)
        else:  # the newest has answered already: the copy going now is the newest
            if owed.newest.kind is not ACCEPTED_KIND and owed.refusal is None:
                owed.refusal = owed.newest
            owed.newest = None

    def expire(self, now: float, orphan_ttl: float) -> int:
        """Free forwarded records whose upstream vanished and never came back."""
        gone = [r for r in self.records.records.values()
                if r.orphan_since is not None and now - r.orphan_since > orphan_ttl and r.pending == 0]
        for r in gone:
            r.publisher_settled = True
            self.delivery.settle_subscribers(r)
            self.delivery.maybe_free(r)
        return len(gone)

    # ------------------- protocol version 3's hooks (``copies.py``): nothing here

    def answer_ready(self, record: CoreRecord) -> None:
        pass

    def settled(self, record: CoreRecord) -> None:
        pass

    def freed(self, record: CoreRecord) -> None:
        pass

    def adopted(self, record: CoreRecord) -> None:
        pass

    # ------------------------------------------------------- parked records

    def forget_parked(self, record: CoreRecord) -> None:
        """``record`` was freed while parked."""
        self.parked.pop(record, None)

    def parked_since(self) -> list[tuple[CoreRecord, float]]:
        return list(self.parked.items())

    def parked_given_up(self, record: CoreRecord, keep: frozenset[str]) -> None:
        """Some of a parked record's destinations are no longer waited for (``groups.py``):
        it stays parked for ``keep``, or is parked no more."""
        record.parked = keep
        if not keep:
            del self.parked[record]
            self.delivery.answered(record, record.drop_waiter(PARKED))

    # ---------------------------------------------------- hand-over markers

    def marker_hops(self, target: str) -> list[Hop]:
        """Every neighbour a delivery towards ``target`` may be queued or in flight on:
        those with deliveries pinned there, and the current route."""
        peers = dict.fromkeys(self.order.paths(target))
        by_hop, _ = self.route({target}, None)
        peers.update(dict.fromkeys(by_hop))
        return [self.hops[p] for p in peers if p in self.hops]

    def queue_marker(self, hop: Hop, marker: Any) -> None:
        hop.queue.append(QueuedMarker(marker))
        self.pump_hop(hop)

    def hold_marker(self, target: str, marker: Any) -> bool:
        """Keep a marker behind deliveries held here for ``target``, if there are any."""
        return self.order.hold_marker(target, marker)
