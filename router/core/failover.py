"""Failover: a resuming publisher (its resume map, adopting records), a resuming
subscriber (its map, its take-over), and what subscribers that moved are owed.

A part of ``Core`` (``facade.py``) with its own state: the placeholders of resuming
subscribers. It calls the other parts through ``parts.py``. (A suspended subscriber that
attached elsewhere is handed over by ``copies.py``: as root it sends what the key is
owed there; as a destination it answers ``moved``.)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from once.records.placeholders import Placeholders
from once.records.table import SubState

from .parts import CopiesPart, DeliveryPart, DestinationPart, GroupsPart
from .peers import CoreRecord, CoreRecords, Publisher, Subscriber
from .ports import Outcome, RoutesPort
from .tables import ACCEPTED_KIND, REJECTED_KIND, CoreTables, Key, rejection


class Failover:
    __slots__ = ("router_id", "settings", "records", "topics", "clock", "routes", "placeholders",
                 "delivery", "copies", "dest", "groups", "stats", "effects")

    def __init__(self, tables: CoreTables, routes: RoutesPort, placeholders: Placeholders) -> None:
        self.router_id = tables.router_id
        self.effects = tables.effects  # (what is queued for a subscriber goes as the batch ends)
        self.settings = tables.settings
        self.records: CoreRecords = tables.records
        self.topics = tables.topics
        self.clock = tables.clock
        self.stats = tables.stats
        self.routes = routes
        self.placeholders = placeholders
        self.delivery: DeliveryPart
        self.copies: CopiesPart
        self.dest: DestinationPart
        self.groups: GroupsPart

    def connect(self, delivery: DeliveryPart, copies: CopiesPart, dest: DestinationPart, groups: GroupsPart) -> None:
        self.delivery = delivery
        self.copies = copies
        self.dest = dest
        self.groups = groups

    def adopt(self, pub: Publisher, record: CoreRecord, settled: bool, handle: Any, resumed: bool) -> CoreRecord:
        """A resent delivery whose gid we hold: become its root, never deliver it twice.

        The record is ours already (the publisher resumed on this router), or it was
        forwarded to us by a root that died or lost the publisher: we answer the
        publisher from now on, and send it wherever the old root had not.
        """
        delivery = self.delivery
        self.stats["duplicates"] += 1
        pub.resent.discard(record.tag)  # (taken over: the tag is no longer one sent before)
        ours = record.local
        if not ours:
            # Its old root may have had it delivered anywhere, and may send it again: what
            # we send of it goes marked, and we keep what our keys said of it (as for a
            # message resent to us: ``Destination.freed``). The streams it came in are
            # behind what we deliver of its publisher from now on.
            record.resent = True
            self.dest.behind(record)
        delivery.take_over(pub, record, resumed)
        self.copies.adopted(record)
        if not ours:
            # Our records in the order they came is the order a resuming subscriber
            # here gets them again (``take_over``): as root we have it now, after what
            # came before. (Not one that was ours already: it keeps its place, or a
            # subscriber resuming here before the publisher resent the rest would get
            # them first: ``test_a_message_the_root_held_already_keeps_its_place_when_it_is_resent``.)
            records = self.records.records
            records[record.gid] = records.pop(record.gid)
        if settled:  # the publisher adopted the outcome we told it, and settles
            record.publisher_handle = None
            if not record.presettled:
                pub.live[record.tag] = record
                delivery.publisher_settled(pub, record)
            return record
        pub.live[record.tag] = record
        record.publisher_handle = handle
        if record.root != self.router_id and self.groups.ask(record):
            # The old root's choice of group members did not come with its copy (it was
            # still asking, ``inquiry.py``), or a member it names is gone (it may have chosen
            # again since): we ask (seeds 278 and 1048 of
            # ``test_a_root_that_takes_a_message_over_asks_whom_its_members_were_before_it_chooses``).
            record.outcome_sent = False
        new = set(self.groups.wanted(record)) - {self.router_id}
        if new:
            record.outcome_sent = False
            self.copies.forward(record, new, None)
        if record.root != self.router_id:
            # The old root delivered to its own subscribers itself; those of them that
            # moved (it died) are owed this now, and from us: we answer the publisher.
            owed = self.owed_elsewhere(record, {record.root})
            if owed:
                record.outcome_sent = False
                self.send_owed(record, owed)
            # Our own subscribers that the copy forwarded to us did not reach (they came
            # here since, from the old root or from a router its other copy never got to)
            # get it from us now: nobody else holds it for them any more, and the table may
            # have forgotten where they came from (``test_historical_seed_is_clean_on_version_3``,
            # seeds 1545, 1963, 2804).
            subs = self.topics.get(record.topic)
            late = frozenset(k for k, s in subs.items() if s not in record.states) if subs else None
            if late:
                record.outcome_sent = False
                self.enqueue_owed(record, late)
        if record.pending == 0:
            record.outcome_sent = False
            delivery.complete(record)
        return record

    def publisher_resume_map(self, pub: Publisher, theirs: dict[bytes, Any]) -> dict[bytes, Any]:
        """Our side of a resuming publisher's unsettled map: tag -> outcome, or None while
        in doubt. Tags we hold no record of are left out: the publisher resends those."""
        out: dict[bytes, Any] = {}
        # The publisher sends the tags we name again at once, the rest when it has credit.
        # A tag named after one we do not know would overtake it, and the root numbers its
        # copies in the order they come: once one is unknown, no later one is named in
        # doubt (it comes with the fresh ones, in order, and is taken over).
        gap = False
        for tag in theirs:
            if not isinstance(tag, bytes):
                continue
            # Sent before: if it comes again when we no longer hold it (a copy we held was
            # freed meanwhile), it is a resent message all the same, marked
            # (``test_a_member_chosen_after_asking_gets_the_message_marked``, seed 3689).
            pub.resent.add(tag)
            record = self.records.records.get(pub.gids.gid(tag))
            if record is None or record.presettled:
                gap = True
                continue
            if record.local:
                # (members it gave up to another root's question: we ask again, the newest
                # root; in doubt until we chose)
                self.groups.reopen(record)
            if gap and not (record.pending == 0 and record.local):
                continue
            # A copy forwarded to us is complete when our part of the network accepted it;
            # the old root's own subscribers and other branches are not in it. In doubt,
            # then: the publisher sends it again and we take it over (``_adopt``).
            out[tag] = self.delivery.outcome(record) if record.pending == 0 and record.local else None
        return out

    def resume_subscriber(self, sub: Subscriber, theirs: dict[bytes, Any], until: float) -> dict[bytes, Any]:
        """Take a resuming subscriber's unsettled map: what it already accepted (or
        rejected) is its answer and is never sent again; a gid we have not seen yet gets a
        placeholder until ``until``, so a copy arriving later is not delivered either.
        Returns our map for the attach answer."""
        out: dict[bytes, Any] = {}
        for gid, state in theirs.items():
            if not isinstance(gid, bytes) or not isinstance(state, Outcome) or state.kind not in (
                    ACCEPTED_KIND, REJECTED_KIND):
                continue
            out[gid] = state
            record = self.records.records.get(gid)
            if record is None or sub not in record.states:
                self.placeholders.add(sub.key, gid, until)
                continue
            if record.states[sub] is SubState.IN_DOUBT:
                if state.kind is ACCEPTED_KIND:
                    done = record.resolve(sub, SubState.ACCEPTED)
                else:
                    done = record.resolve(sub, SubState.REJECTED, rejection(state))
                self.delivery.answered(record, done)
        if out and sub.group is not None:
            self.groups.member_resumed(sub, out)
        return out

    def owed_elsewhere(self, record: CoreRecord, gone: Iterable[str]) -> dict[str, set[Key]]:
        """Where the subscribers of the unreachable routers ``gone`` attached since, with
        their keys, leaving out those this record already followed (marked as followed)."""
        retarget: dict[str, set[Key]] = {}
        for d in gone:
            owed = self.routes.moved(record.topic, d)
            for where, keys in owed.items():
                done = record.followed
                new = {k for k in keys if done is None or (where, k) not in done}
                if new:
                    retarget.setdefault(where, set()).update(new)
                    if done is None:
                        record.followed = done = set()
                    done.update((where, k) for k in new)
        return retarget

    def send_owed(self, record: CoreRecord, retarget: Mapping[str, set[Key]]) -> None:
        # (Members not chosen are left out whether or not we have members of its groups: a
        # copy that named only plain subscribers, re-rooted here, must not reach the old
        # root's moved members while we ask whom it went to;
        # ``test_a_new_root_sends_the_old_roots_moved_members_nothing_before_it_chose``.)
        retarget = self.groups.members_not_chosen_out(record, retarget)
        for where, keys in retarget.items():
            if where == self.router_id:
                self.enqueue_owed(record, frozenset(keys))
            else:
                # No split horizon for a keyed copy: it is consumed where it goes, and the
                # way there may well be back through the upstream (or be the upstream).
                self.copies.forward(record, {where}, None, frozenset(keys))

    def send_back(self, record: CoreRecord, key: Key, router: str) -> None:
        """A member that released ``record`` gets it again (``Answers.send_back``)."""
        self.copies.send_back(record, key, router)

    def enqueue_owed(self, record: CoreRecord, keys: frozenset[Key]) -> None:
        """Queue a record owed to subscribers that moved here, in publish order: it may be
        older than what they were queued since they attached."""
        delivery, effects = self.delivery, self.effects
        for sub in delivery.local_targets(record, keys):
            if delivery.enqueue(record, sub, 1):
                effects.pump(sub)

    def attach_completed(self, sub: Subscriber) -> None:
        """``sub``'s attach is effective (``docs/protocol.md``): what is queued for it goes
        out, in each stream's sequence as it came (the roots' stamps are not that order once
        a publisher resumed at another root)."""
        self.effects.pump(sub)

    def take_over(self, old: Subscriber, new: Subscriber) -> None:
        old.attached = False
        queued = {id(r) for r, _ in old.queue}
        in_doubt = SubState.IN_DOUBT
        for record in self.records.records.values():  # publish order
            state = record.states.pop(old, None)
            if state is None:
                continue
            record.states[new] = state
            was_sent = record.unsettled.pop(old, None) is not None or (state is in_doubt and id(record) not in queued)
            if state is in_doubt and was_sent:
                new.queue.append((record, 1))
        # What was sent goes again first, in the order it went; then the queue as it
        # stood, in its order (the order copies came in their streams: our records'
        # order is not that once some came earlier for other keys).
        again = new.queue
        order = {id(r): i for i, r in enumerate(old.sent)}
        new.queue = deque(sorted(again, key=lambda item: order.get(id(item[0]), -1)))
        # A subscription that was suspended while a router was out of reach may have been
        # attached there meanwhile, unheard of, and handed there what waited for it here (a
        # root that did not hear where it was sent it there too): what it is given now may
        # be a repeat, and goes marked (groups seed 633058668223: a member moved on across
        # two dead routers and came back, and a message handed to it, marked, at the router
        # it moved to came again here unmarked). With every router reachable throughout, an
        # attach elsewhere would have been heard (and what waited here moved there).
        calm = self.routes.calm()
        mark = 1 if old.suspended_until is not None and (calm < 0 or calm != old.calm) else 0
        late = []
        for r, n in old.queue:
            if r.states.get(new) is in_doubt:
                if mark and r.presettled:
                    # ... and a pre-settled one may come after newer messages it was handed
                    # there (never sent there itself: nothing owed it): at most once, it is
                    # dropped (fresh plain seed 681861948778 of ``--presettled``: back after
                    # a root cut off from here, three came after the root's newer ones)
                    late.append(r)
                else:
                    new.queue.append((r, max(n, mark)))
        old.sent = {}
        new.attempts = old.attempts
        old.queue.clear()
        for r in late:
            self.stats["presettled_late"] += 1
            self.delivery.answered(r, r.drop_waiter(new))
