"""The local delivery hot path: a publish, the queue and pump of each subscriber, their
answers, the publisher's outcome, settlement and the end of a record; and the credit
window's hooks (``credit.py`` decides).

One part of ``Core`` (``facade.py``); the parts share the core's tables (``state.py``).
"""

from __future__ import annotations

from typing import Any

from once.records.gid import RETIRED_TAGS
from once.records.table import IN_DOUBT, SUB_ACCEPTED, SUB_REJECTED, Record

from ..journal import Event
from .peers import Hop, Publisher, Subscriber, TagInUse, Waiter
from .ports import ACCEPTED, Conditions, Outcome, rejected
from .state import (
    ACCEPTED_KIND,
    MODIFIED_KIND,
    REJECTED_KIND,
    RELEASED_KIND,
    CoreState,
    rejection,
)
from .treatments import GROUPED


class Delivery(CoreState):
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
        gid = pub.gids.gid(tag, generation)
        known = self.records.records.get(gid)
        if known is not None:
            return self._adopt(pub, known, settled, handle, resumed)
        if resumed and not payload:
            return None
        record = Record(gid, pub.topic, payload, pub, tag, generation, settled, message_format)
        record.born = self._stamp()
        record.root = self.router_id
        if pub.parked:
            self.credit.unpark(pub)
        if pub.credit > 0 and not resumed:
            pub.credit -= 1
            credit = self.credit
            credit.outstanding -= 1
            pub.sent += 1
            if pub.credit <= pub.refill_at:
                credit.dirty = True  # top it up (and its window may grow) after this batch
        records = self.records  # (``add`` inlined: the gid was looked up above)
        records.records[gid] = record
        size = len(payload)
        records.bytes += size
        self.stats["published"] += 1
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
        if pub.credit and (pub.bytes > self.settings.link_in_flight_bytes
                           or records.bytes > self.settings.max_in_flight_bytes):
            self.credit.take_back(pub)
        remote = self.remote_routers(pub.topic)
        if self.local_groups or self.group_members(pub.topic):
            extra = self._choose_members(record)
            if extra:
                remote = remote | extra
        self._fan_out(record, remote, None, local=True)
        return record

    def _stamp(self) -> int:
        """Strictly increasing here even if the wall clock steps back."""
        t = self.wall()
        if t <= self._born:
            t = self._born + 1
        self._born = t
        return t

    def _enqueue(self, record: Record, sub: Subscriber, redelivery: int) -> bool:
        """Make ``sub`` a waiter of ``record`` and queue it, unless a placeholder says it
        already accepted it (it told us when it resumed)."""
        if self.placeholders and self.placeholders.take(sub.key, record.gid):
            if sub not in record.states:
                record.states[sub] = SUB_ACCEPTED
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
        if remote:
            dests = set(remote)
            dests.discard(self.router_id)
            if dests:
                self._forward(record, dests, exclude, keys)
        if local and keys is None and not record.local and self.moved_away:
            owed = self._moved_away_owed(record)
            if owed:
                self._send_owed(record, owed)
        if record.chosen is not None and local and not record.local:
            self._chosen_here_missing(record)  # (the root chose among members it has)
        for sub in targets:
            self.pump(sub)
        if record.pending == 0 and not record.outcome_sent:
            self._complete(record)

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

    def pump(self, sub: Subscriber) -> None:
        """Send queued records to ``sub`` while it has credit."""
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
        if kind is ACCEPTED_KIND:
            done = record.resolve(sub, SUB_ACCEPTED)
            self.stats["accepted"] += 1
        elif kind is REJECTED_KIND:
            done = record.resolve(sub, SUB_REJECTED, rejection(state))  # type: ignore[arg-type]
            self.stats["rejected"] += 1
        elif kind is RELEASED_KIND or kind is MODIFIED_KIND:
            if kind is MODIFIED_KIND and state.undeliverable_here:  # type: ignore[union-attr]
                done = record.resolve(sub, SUB_REJECTED, rejected(
                    Conditions.UNDELIVERABLE_HERE,
                    f"subscriber {sub.container_id}/{sub.link_name} declined the message"))
            else:
                passed = self._member_released(sub, record, handle, settled) if sub.group is not None else None
                done = self._redeliver(sub, record, handle, settled) if passed is None else passed
        # (received: progress only; None: settlement alone)
        if record.publisher_settled:
            self._settle_late(record, sub, handle)
        self._answered(record, done)

    def _redeliver(self, sub: Subscriber, record: Record, handle: Any, settled: bool) -> bool:
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
            sub.port.settle(handle)
        record.unsettled.pop(sub, None)
        sub.queue.append((record, tries))
        self.stats["redelivered"] += 1
        self.pump(sub)
        return False

    def _complete(self, record: Record) -> None:
        """Every waiter reached a terminal state: answer the publisher."""
        record.outcome_sent = True
        if self.journal is not None and not record.presettled:
            self.journal.add(Event.REJECTED if record.rejection is not None else Event.ACCEPTED, record.gid, record.topic)
        for sub in record.states:
            if isinstance(sub, Subscriber) and sub.attempts:
                sub.attempts.pop(record.gid, None)
        if record.chosen is not None and record.local:
            self._groups_answered(record)
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

    def _settle_late(self, record: Record, waiter: Subscriber | Hop, handle: Any) -> None:
        """An answer to a copy sent after the record was settled (a redelivery to a
        subscriber that came back, a re-forward): settle it now, nobody else will (the
        in-process network's seed 78 kept such records for good)."""
        if record.unsettled.get(waiter) is handle and record.states.get(waiter) is not IN_DOUBT:
            del record.unsettled[waiter]
            waiter.port.settle(handle)

    def _sent_settled(self, record: Record, waiter: Waiter) -> None:
        """A pre-settled send is that waiter's final state: at-most-once, nothing comes back."""
        self._answered(record, record.resolve(waiter, SUB_ACCEPTED))

    def _outcome(self, record: Record) -> Outcome:
        return ACCEPTED if record.rejection is None else record.rejection

    def publisher_credit_changed(self, pub: Publisher, credit: int) -> None:
        """The publisher drained: its unused credit is gone."""
        if self.credit.lowered(pub, credit):
            self.replenish()

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
            self.credit.grant(self.local_count, self.records.bytes, self.clock())

    def reclaim_idle(self, now: float) -> int:
        """Cut back links that hold credit without sending; how many were cut."""
        cut = self.credit.reclaim(self.publishers, now)
        if cut:
            self.replenish()
        return cut

    @property
    def outstanding(self) -> int:
        return self.credit.outstanding

    def _local_targets(self, record: Record, keys: frozenset | None) -> list[Subscriber]:
        """Local subscribers for a record, as the treatment chooses them (``treatments.py``)."""
        subscribers = self.topics.get(record.topic)
        if not subscribers:
            return []
        if record.topic in self.local_groups:
            return GROUPED.targets(record, subscribers, keys)
        return self.treatment.targets(record, subscribers, keys)
