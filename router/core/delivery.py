"""The local delivery hot path: a publish, the queue and pump of each subscriber, their
answers, the publisher's outcome, settlement and the end of a record; and the credit
window's hooks (``credit.py`` decides).

A part of ``Core`` (``facade.py``) with its own state: the count of records we are root
for, the root's stamp clock, whether the network has synced us yet. The record's own
rules (when it completes, what settlement reaches, when it is freed) are the record
table's (``records/table.py``); this part applies them to the ports.
"""

from __future__ import annotations

from typing import Any

from once.records.gid import RETIRED_TAGS
from once.records.placeholders import Placeholders
from once.records.table import IN_DOUBT, SUB_ACCEPTED, SUB_REJECTED, Record

from ..journal import Event
from .credit import CreditWindow
from .effects import Effects
from .parts import CopiesPart, DestinationPart, FailoverPart, GroupsPart
from .peers import CoreRecord, CoreRecords, Publisher, Subscriber, TagInUse, Waiter, keeps_own_tombstone
from .ports import ACCEPTED, Conditions, Outcome, Refused, RoutesPort, rejected
from .tables import (
    ACCEPTED_KIND,
    MODIFIED_KIND,
    REJECTED_KIND,
    RELEASED_KIND,
    CoreTables,
    Key,
    rejection,
)
from .treatments import TopicTreatment

_PRESETTLED = 1 << 63  # the generations of pre-settled deliveries' gids (``publish``)


class LocalDelivery:
    __slots__ = ("tables", "router_id", "settings", "wall", "records", "reserve", "topics", "stats", "observe_latency",
                 "observe_held", "clock", "journal", "credit", "placeholders", "treatment", "remote_routers",
                 "group_members", "local_count", "stamp", "unsynced", "copies", "failover", "groups", "effects", "dest",
                 "router_bytes")

    def __init__(self, tables: CoreTables, credit: CreditWindow, placeholders: Placeholders, routes: RoutesPort,
                 treatment: TopicTreatment, unsynced: bool, effects: Effects) -> None:
        self.tables = tables
        self.router_id = tables.router_id
        self.router_bytes = b"\0" + tables.router_id.encode()  # (in a pre-settled gid: ``publish``)
        self.settings = tables.settings
        self.wall = tables.wall
        self.records: CoreRecords = tables.records
        self.reserve = tables.reserve  # (held on the way to the records: bounded with them)
        self.topics = tables.topics
        self.stats = tables.stats
        # (bound once: each is called once per message published here)
        self.observe_latency = tables.measures.accept_latency.observe
        self.observe_held = tables.measures.held_time.observe
        self.clock = tables.clock
        self.journal = tables.journal
        self.credit = credit
        # (subscriber key, gid) -> expiry: a resuming subscriber said it already accepted
        # that delivery, which has not reached us (yet): never deliver it to that key.
        self.placeholders = placeholders
        self.treatment = treatment
        # Where other subscribers are (bound once: every publish asks).
        self.remote_routers = routes.remote_routers
        self.group_members = routes.group_members
        self.local_count = 0  # records we are root for
        self.stamp = tables.stamp  # (bound once: every publish takes one)
        # Until the network has told us who subscribes where (the first sync from a
        # neighbour), a publish here could be accepted for want of subscribers we do not
        # know of yet: publishers get no credit until then (``synced``).
        self.unsynced = unsynced
        self.effects = effects  # what reaches the ports at the end of the batch (``effects.py``)
        self.copies: CopiesPart
        self.dest: DestinationPart
        self.failover: FailoverPart
        self.groups: GroupsPart

    def connect(self, copies: CopiesPart, dest: DestinationPart, failover: FailoverPart, groups: GroupsPart) -> None:
        self.copies = copies
        self.dest = dest
        self.failover = failover
        self.groups = groups

    # ------------------------------------------------------------- publish

    def publish(self, pub: Publisher, tag: bytes, payload: bytes, settled: bool, handle: Any,
                message_format: int = 0, resumed: bool = False) -> CoreRecord | None:
        """A publisher's delivery. ``resumed``: a transfer with resume=true (it used no credit).

        Returns None for a resumed delivery we know nothing of (AMQP: ignored).
        """
        if tag in pub.live:
            raise TagInUse(f"delivery tag {tag!r} reused while its delivery is unsettled")
        generation = 0
        if settled and not resumed:  # (a resumed one settles a delivery we know: its gid as before)
            # AMQP lets a settled delivery's tag be used again (Qpid JMS sends every
            # pre-settled message with the empty tag), and a pre-settled delivery is never
            # sent again: each gets a gid of its own, from generations no unsettled one uses
            # (the top bit set), this router's stamp clock (strictly increasing here) and,
            # with the tag, this router's id (another router's clock may run behind ours).
            stamp = self.stamp()
            gid = pub.gids.gid(tag + self.router_bytes, _PRESETTLED | stamp)
        else:
            stamp = 0
            if pub.retired:
                previous = pub.retired.pop(tag, None)
                if previous is not None:
                    generation = previous + 1
            gid = pub.gids.gid(tag, generation)
        records = self.records
        known = records.records.get(gid)
        if known is not None:
            return self.failover.adopt(pub, known, settled, handle, resumed)
        if resumed and not payload:
            return None
        record: CoreRecord = Record(gid, pub.topic, payload, pub, tag, generation, settled, message_format)
        record.born = stamp or self.stamp()
        record.arrived = self.clock()
        record.root = self.router_id
        if resumed or pub.resent and tag in pub.resent:
            # Sent before, maybe delivered by the router it was first published on: every
            # delivery of it is marked: it may come after newer ones
            # (``test_releases_fresh_seed_a_message_sent_again_after_its_root_died_comes_marked``).
            record.resent = True
            pub.resent.discard(tag)
        credit = self.credit
        if pub.credit > 0 and not resumed:
            credit.used(pub)
        elif pub.parked:
            credit.unpark(pub)
        records.enter(record)
        size = len(payload)
        self.stats["published"] += 1
        pub.counts.received += 1
        if self.journal is not None:
            self.journal.add(Event.RECEIVED, gid, record.topic, "client")
        if not settled:
            record.publisher_handle = handle
            pub.live[tag] = record
        self.local_count += 1
        pub.in_flight += 1
        pub.bytes += size
        # The guess of its message size (``credit.py``) follows a larger one at once, a smaller one slowly.
        guess = pub.size
        pub.size = size if size >= guess else guess - ((guess - size) >> 4)
        over = pub.bytes > self.settings.link_in_flight_bytes or records.bytes + self.reserve.bytes > self.settings.max_in_flight_bytes
        purses = pub.purses
        if purses:  # (its user's or host's ``max_in_flight_bytes``: most publishers have none)
            for purse in purses:
                purse.bytes += size
                over = over or purse.bytes > purse.limit
                if purse.bytes + pub.size > purse.limit:
                    purse.full(self.router_id, pub.size, self.clock())
        if pub.credit and over:
            credit.take_back(pub)
        remote = self.remote_routers(pub.topic)
        if self.treatment.local_groups or self.group_members(pub.topic):
            extra = self.groups.choose_members(record)
            if extra:
                remote = remote | extra
        self.fan_out(record, remote, None, local=True)
        return record

    def take_over(self, pub: Publisher, record: CoreRecord, resumed: bool) -> None:
        """``pub`` sent again a record we hold (it resumed here): the record is ours to answer now."""
        self.credit.used_resent(pub, resumed)
        old = record.publisher
        size = len(record.payload)
        if record.local:
            if old is not pub and isinstance(old, Publisher):
                if old.live.get(record.tag) is record:
                    del old.live[record.tag]
                old.in_flight -= 1
                pub.in_flight += 1
                old.bytes -= size
                pub.bytes += size
                for purse in old.purses:
                    purse.bytes -= size
                for purse in pub.purses:
                    purse.bytes += size
        else:
            record.local = True
            record.arrived = self.clock()  # (our measures count from here: the time held before is another router's)
            self.local_count += 1
            pub.in_flight += 1
            pub.bytes += size
            for purse in pub.purses:
                purse.bytes += size
        record.publisher = pub

    def enqueue(self, record: CoreRecord, sub: Subscriber, redelivery: int) -> bool:
        """Make ``sub`` a waiter of ``record`` and queue it, unless a placeholder says it
        already accepted it (it told us when it resumed)."""
        if self.placeholders and self.placeholders.take(sub.key, record.gid):
            self.stats["placeholder_hits"] += 1
            if sub not in record.states:
                record.states[sub] = SUB_ACCEPTED
            return False
        record.add_waiter(sub)
        sub.queue.append((record, redelivery))
        return True

    def fan_out(self, record: CoreRecord, remote: set[str] | frozenset[str], exclude: str | None, local: bool,
                keys: frozenset[Key] | None = None) -> None:
        subscribers = self.topics.get(record.topic) if local else None
        targets = self.treatment.targets(record, subscribers, keys) if subscribers else []
        if targets:
            redelivery = 1 if keys is not None or record.resent else 0
            targets = [sub for sub in targets if self.enqueue(record, sub, redelivery)]
        if remote:
            dests = set(remote)
            dests.discard(self.router_id)
            if dests:
                self.copies.forward(record, dests, exclude, keys)
        if record.chosen is not None and local and not record.local:
            self.groups.chosen_here_missing(record)  # (the root chose among members it has)
        pumps = self.effects.pumps
        for sub in targets:
            pumps[sub] = None
        if record.pending == 0 and not record.outcome_sent:
            self.complete(record)

    def local_targets(self, record: CoreRecord, keys: frozenset[Key] | None) -> list[Subscriber]:
        """Local subscribers for a record, as the topic's treatment chooses them (``treatments.py``)."""
        subscribers = self.topics.get(record.topic)
        if not subscribers:
            return []
        return self.treatment.targets(record, subscribers, keys)

    # ------------------------------------------------------------ subscribers

    def pump(self, sub: Subscriber) -> None:
        """``sub`` may have something to send: at the end of the batch (``send``)."""
        self.effects.pumps[sub] = None

    def send(self, sub: Subscriber) -> None:
        """Send queued records to ``sub`` while it has credit (only as the batch ends)."""
        queue = sub.queue
        if not queue:
            if sub.port.draining():
                sub.port.drained()
            return
        port = sub.port
        credit = port.credit()
        in_doubt = IN_DOUBT
        while credit > 0 and queue:
            record, redelivery = queue.popleft()
            if record.states.get(sub) is not in_doubt:
                continue
            settled = record.presettled or sub.presettled
            handle = port.deliver(record, settled, redelivery)
            if type(handle) is Refused:  # (its peer can never take it)
                self.subscriber_update(sub, record, None, Outcome(REJECTED_KIND, description=handle.description),
                                       True)
                continue
            credit -= 1
            self.stats["delivered"] += 1
            sub.counts.delivered += 1
            if redelivery:
                self.stats["marked"] += 1
            if settled:
                self.sent_settled(record, sub)
            else:
                record.unsettled[sub] = handle
                sent = sub.sent
                sent[record] = None
                if len(sent) > sub.sent_limit:  # (what was answered some other way)
                    sub.sent = kept = {r: None for r in sent if r.states.get(sub) is in_doubt}
                    sub.sent_limit = max(128, 2 * len(kept))
        if not queue and port.draining():
            port.drained()

    def subscriber_update(self, sub: Subscriber, record: CoreRecord, handle: Any, state: Outcome | None,
                          settled: bool) -> None:
        """The subscriber's disposition for our delivery of ``record``."""
        sub.sent.pop(record, None)  # (sent again, it goes back in)
        sub.answered += 1
        if settled:
            record.unsettled.pop(sub, None)
        kind = state.kind if state is not None else None
        done = False
        if kind is ACCEPTED_KIND:
            done = record.resolve(sub, SUB_ACCEPTED)
            self.stats["accepted"] += 1
            sub.counts.accepted += 1
        elif kind is REJECTED_KIND:
            done = record.resolve(sub, SUB_REJECTED, rejection(state))  # type: ignore[arg-type]
            self.stats["rejected"] += 1
            sub.counts.rejected += 1
        elif kind is RELEASED_KIND or kind is MODIFIED_KIND:
            self.stats["released"] += 1
            if kind is MODIFIED_KIND and state.undeliverable_here:  # type: ignore[union-attr]
                done = record.resolve(sub, SUB_REJECTED, rejected(
                    Conditions.UNDELIVERABLE_HERE,
                    f"subscriber {sub.container_id}/{sub.link_name} declined the message"))
            elif sub.group is not None and not sub.exclusive and not record.presettled:
                # (an exclusive group's active member gets it back: a standby takes nothing)
                done = self._member_released(sub, record, handle, settled)
            else:
                done = self._redeliver(sub, record, handle, settled)
        # (received: progress only; None: settlement alone)
        if record.publisher_settled:
            self.settle_late(record, sub, handle)
        self.answered(record, done)

    def _member_released(self, sub: Subscriber, record: CoreRecord, handle: Any, settled: bool) -> bool:
        """A group member gave the message back: the root gives it to a member that has not
        had it, or back to this one if nobody is left (``docs/protocol.md`` section 8). At
        the root that is decided here; elsewhere the root hears ``released`` and decides.
        Each member's releases of a message count towards ``max_redeliveries`` where it is."""
        if record.states.get(sub) is not IN_DOUBT:
            return False
        tries = sub.attempts.get(record.gid, 0) + 1
        if tries > self.settings.max_redeliveries:
            return self._redeliver(sub, record, handle, settled)  # (rejected there, as for anyone)
        group = sub.group
        assert group is not None
        at_root = record.local or record.far is None
        if at_root and self.copies.sent_elsewhere(record, sub.key, self.router_id):
            return self._redeliver(sub, record, handle, settled)  # (a copy to it elsewhere may reach it still)
        if at_root and self.groups.choosing(record):
            self.groups.released(record.gid, sub.key)  # (choices made for it later leave it out)
            by = self.groups.pass_on(record, group, sub.key)
            if by is None or by == sub.key:
                self.groups.unreleased(record.gid, sub.key)
                return self._redeliver(sub, record, handle, settled)  # nobody else: back to it
        else:
            # Elsewhere the root hears ``released`` and decides; at a root that asks whom its
            # members were (or another root asks), the answers decide, leaving it out:
            # given back to it now, it could process what they give another.
            self.groups.released(record.gid, sub.key)
            if at_root:
                self.groups.released_under_a_fence(record, sub.key)
        sub.attempts[record.gid] = tries
        if not settled:
            self.effects.settle(sub.port, handle)
        record.unsettled.pop(sub, None)
        self.stats["passed_on"] += 1
        done = record.drop_waiter(sub)
        self.dest.released(record, sub)  # (no longer in doubt here: its copy may be answered now)
        return done

    def _redeliver(self, sub: Subscriber, record: CoreRecord, handle: Any, settled: bool) -> bool:
        if record.states.get(sub) is not IN_DOUBT:
            return False
        tries = sub.attempts.get(record.gid, 0) + 1
        if tries > self.settings.max_redeliveries:
            sub.attempts.pop(record.gid, None)
            return record.resolve(sub, SUB_REJECTED, rejected(
                Conditions.REDELIVERY_LIMIT,
                f"subscriber {sub.container_id}/{sub.link_name} released it {tries - 1} times"))
        sub.attempts[record.gid] = tries
        if not settled:
            self.effects.settle(sub.port, handle)
        record.unsettled.pop(sub, None)
        sub.queue.append((record, tries))
        self.stats["redelivered"] += 1
        self.effects.pumps[sub] = None
        return False

    # -------------------------------------------------- answers and the end

    def complete(self, record: CoreRecord) -> None:
        """Every waiter reached a terminal state: answer the publisher."""
        rejected_with = self.records.complete(record)
        if self.journal is not None and not record.presettled:
            self.journal.add(Event.REJECTED if rejected_with is not None else Event.ACCEPTED, record.gid, record.topic)
        for sub in record.states:
            if isinstance(sub, Subscriber) and sub.attempts:
                sub.attempts.pop(record.gid, None)
        if record.chosen is not None and record.local:
            self.groups.answered_at_root(record)
        far = record.far
        if far is not None and far.takes:  # (copies we took: answered to their roots)
            self.dest.answer_ready(record)  # (the destination owns a record that came as a copy)
        if not record.local:
            self.maybe_free(record)
            return
        pub = record.publisher
        if pub is not None and not record.presettled and record.publisher_handle is not None and pub.attached:
            took = self.clock() - record.arrived
            self.observe_latency(took)
            pace = pub.pace
            pace.waited += took  # (its window stops where answers queue: ``pace.py``)
            pace.answers += 1
            outcome = self.outcome(record)
            self.stats["told_accepted" if record.rejection is None else "told_rejected"] += 1
            settle = not pub.settle_second
            self.effects.outcomes.append((pub.port, record.publisher_handle, outcome, settle))
            if settle:
                self.settle_root(record)
        self.maybe_free(record)

    def publisher_settled(self, pub: Publisher, record: CoreRecord) -> None:
        """The publisher settled (receiver-settle-mode second): relay settlement on."""
        if record.publisher_settled:
            return
        self.settle_root(record)
        self.maybe_free(record)

    def settle_root(self, record: CoreRecord) -> None:
        """Settlement starts at the root: retire the tag, relay it to the subscribers."""
        record.publisher_settled = True
        if self.journal is not None:
            self.journal.add(Event.SETTLED, record.gid, record.topic)
        self._retire(record)
        self.settle_subscribers(record)
        if record.far is not None:
            self.copies.settled(record)

    def _retire(self, record: CoreRecord) -> None:
        pub = record.publisher
        if pub is None:
            return
        if pub.live.get(record.tag) is record:
            del pub.live[record.tag]
            pub.retired[record.tag] = record.generation
            if len(pub.retired) > RETIRED_TAGS:
                pub.retired.popitem(last=False)

    def settle_subscribers(self, record: CoreRecord) -> None:
        if record.unsettled:
            settle = self.effects.settle
            for waiter, handle in self.records.settle(record):
                settle(waiter.port, handle)  # type: ignore[union-attr]  # (only subscribers are sent deliveries)

    def answered(self, record: CoreRecord, done: bool) -> None:
        """After a waiter's answer (``done``: it was the last one in doubt): the publisher
        hears the outcome, or else the record goes if nothing holds it any more."""
        if done and not record.outcome_sent:  # (the completion rule: RecordTable.complete says it)
            self.complete(record)
        else:
            self.maybe_free(record)

    def maybe_free(self, record: CoreRecord) -> None:
        if self.records.release(record):
            record.publisher_handle = None  # (it points back at the record: no cycle left behind)
            if record.local:
                self.local_count -= 1
                self.observe_held(self.clock() - record.arrived)
                pub = record.publisher
                if pub is not None:  # (a record of ours always has its publisher)
                    pub.in_flight -= 1
                    size = len(record.payload)
                    pub.bytes -= size
                    for purse in pub.purses:
                        purse.bytes -= size
            if record.far is not None or keeps_own_tombstone(record):
                self.copies.freed(record)
            self.credit.want_pass()

    def settle_late(self, record: CoreRecord, waiter: Subscriber, handle: Any) -> None:
        """An answer to a delivery sent after the record was settled (a redelivery to a
        subscriber that came back): settle it now, nobody else will
        (``test_an_answer_after_settlement_is_settled_at_once``)."""
        if record.unsettled.get(waiter) is handle and record.states.get(waiter) is not IN_DOUBT:
            del record.unsettled[waiter]
            self.effects.settle(waiter.port, handle)

    def sent_settled(self, record: CoreRecord, waiter: Waiter) -> None:
        """A pre-settled send is that waiter's final state: at-most-once, nothing comes back."""
        self.answered(record, record.resolve(waiter, SUB_ACCEPTED))

    def outcome(self, record: CoreRecord) -> Outcome:
        return ACCEPTED if record.rejection is None else record.rejection

    # ----------------------------------------------------------------- credit

    def publisher_credit_changed(self, pub: Publisher, credit: int) -> None:
        """The publisher drained: its unused credit is gone."""
        if self.credit.lowered(pub, credit):
            self.replenish()

    def replenish(self) -> None:
        """Top up publisher credit within the room the window has left (``credit.py``)."""
        if not self.unsynced:
            self.credit.grant(self.local_count, self.records.bytes + self.reserve.bytes, self.tables.clock())

    def synced(self) -> None:
        """The network told us who subscribes where: publishers may have credit now."""
        if self.unsynced:
            self.unsynced = False
            self.replenish()

    def root_records(self) -> int:
        """How many records we are root for (what our publishers hold of the window)."""
        return self.local_count
