"""The forwarding core: topics, publishers, subscribers, acceptance, the in-flight window.

The core knows no protocol. Adaptors (client connections now, inter-router links next)
call it through this interface and it calls back through two small ports:

``PublisherPort``: ``grant(credit)`` (absolute credit for the link) and
``outcome(handle, outcome, settle)`` (tell the publisher the aggregate outcome).

``SubscriberPort``: ``credit() -> int``, ``deliver(record, settled, redelivery) -> handle``,
``settle(handle)`` and ``drained()``.

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

import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any, Protocol

from records.gid import RETIRED_TAGS, gid_from_prefix, gid_prefix
from records.table import Record, RecordTable, SubState

from .amqp.performatives import ACCEPTED, Accepted, Error, Modified, Received, Rejected, Released
from .config import Settings


class PublisherPort(Protocol):
    def grant(self, credit: int) -> None: ...
    def outcome(self, handle: Any, outcome: Any, settle: bool) -> None: ...


class SubscriberPort(Protocol):
    def credit(self) -> int: ...
    def deliver(self, record: Record, settled: bool, redelivery: int) -> Any: ...
    def settle(self, handle: Any) -> None: ...
    def drained(self) -> None: ...
    def draining(self) -> bool: ...


class TagInUse(Exception):
    """A publisher reused a delivery tag that is still unsettled (AMQP forbids it)."""


class Publisher:
    __slots__ = ("port", "topic", "container_id", "link_name", "incarnation", "prefix", "credit", "live", "retired",
                 "settle_second", "attached")

    def __init__(self, port: PublisherPort, topic: str, container_id: str, link_name: str, incarnation: int,
                 settle_second: bool) -> None:
        self.port = port
        self.topic = topic
        self.container_id = container_id
        self.link_name = link_name
        self.incarnation = incarnation
        self.prefix = gid_prefix(container_id, link_name, incarnation)
        self.credit = 0
        self.live: dict[bytes, Record] = {}  # unsettled deliveries by tag
        self.retired: OrderedDict[bytes, int] = OrderedDict()  # settled tag -> generation
        self.settle_second = settle_second
        self.attached = True

    @property
    def key(self) -> tuple[str, str]:
        return (self.container_id, self.link_name)


class Subscriber:
    __slots__ = ("port", "topic", "container_id", "link_name", "presettled", "queue", "attempts", "attached")

    def __init__(self, port: SubscriberPort, topic: str, container_id: str, link_name: str, presettled: bool) -> None:
        self.port = port
        self.topic = topic
        self.container_id = container_id
        self.link_name = link_name
        self.presettled = presettled  # the subscriber asked for at-most-once (snd-settle-mode settled)
        self.queue: deque[tuple[Record, int]] = deque()
        self.attempts: dict[bytes, int] = {}  # gid -> redeliveries so far
        self.attached = True

    @property
    def key(self) -> tuple[str, str]:
        return (self.container_id, self.link_name)

    def __repr__(self) -> str:
        return f"Subscriber({self.container_id}/{self.link_name} on {self.topic!r})"


class Core:
    def __init__(self, router_id: str, settings: Settings, clock: Callable[[], float] = time.monotonic) -> None:
        self.router_id = router_id
        self.settings = settings
        self.clock = clock
        self.records = RecordTable()
        self.topics: dict[str, dict[tuple[str, str], Subscriber]] = {}
        self.publishers: list[Publisher] = []
        self.incarnations: dict[tuple[str, str], int] = {}
        self.outstanding = 0  # credit granted to publishers and not yet used
        self._rr = 0
        self.stats = {"published": 0, "delivered": 0, "accepted": 0, "rejected": 0, "redelivered": 0}

    # ----------------------------------------------------------- publishers

    def add_publisher(self, port: PublisherPort, topic: str, container_id: str, link_name: str,
                      settle_second: bool) -> Publisher:
        key = (container_id, link_name)
        # A fresh attach starts a new incarnation: its tags may restart at 0 (Proton does).
        incarnation = self.incarnations.get(key, 0) + 1
        self.incarnations[key] = incarnation
        pub = Publisher(port, topic, container_id, link_name, incarnation, settle_second)
        self.publishers.append(pub)
        self.replenish()
        return pub

    def remove_publisher(self, pub: Publisher) -> None:
        if not pub.attached:
            return
        pub.attached = False
        self.publishers.remove(pub)
        self.outstanding -= pub.credit
        pub.credit = 0
        # Nobody is left to answer: the records live on until their subscribers finish.
        for record in list(pub.live.values()):
            record.publisher_handle = None
            record.publisher_settled = True
            self._settle_subscribers(record)
            self._maybe_free(record)
        pub.live.clear()
        self.replenish()

    def publisher_credit_changed(self, pub: Publisher, credit: int) -> None:
        """The publisher drained: its unused credit is gone."""
        if credit < pub.credit:
            self.outstanding -= pub.credit - credit
            pub.credit = credit
            self.replenish()

    def publish(self, pub: Publisher, tag: bytes, payload: bytes, settled: bool, handle: Any,
                message_format: int = 0) -> Record:
        if tag in pub.live:
            raise TagInUse(f"delivery tag {tag!r} reused while its delivery is unsettled")
        generation = 0
        if pub.retired:
            previous = pub.retired.pop(tag, None)
            if previous is not None:
                generation = previous + 1
        gid = gid_from_prefix(pub.prefix, tag, generation)
        record = Record(gid, pub.topic, payload, pub, tag, generation, settled, message_format, self.clock())
        if pub.credit > 0:
            pub.credit -= 1
            self.outstanding -= 1
        self.records.add(record)
        self.stats["published"] += 1
        if not settled:
            record.publisher_handle = handle
            pub.live[tag] = record
        subscribers = self.topics.get(pub.topic)
        if subscribers:
            for sub in subscribers.values():
                record.add_waiter(sub)
                sub.queue.append((record, 0))
            for sub in subscribers.values():
                self.pump(sub)
        if record.pending == 0 and not record.outcome_sent:
            self._complete(record)
        return record

    def publisher_settled(self, pub: Publisher, record: Record) -> None:
        """The publisher settled (receiver-settle-mode second): relay settlement on."""
        if record.publisher_settled:
            return
        record.publisher_settled = True
        self._retire(record)
        self._settle_subscribers(record)
        self._maybe_free(record)

    # ---------------------------------------------------------- subscribers

    def add_subscriber(self, port: SubscriberPort, topic: str, container_id: str, link_name: str,
                       presettled: bool) -> tuple[Subscriber, Subscriber | None]:
        """Attach a subscriber; return it and the subscriber it displaced (same key), if any."""
        subs = self.topics.setdefault(topic, {})
        old = subs.get((container_id, link_name))
        for other_topic, other in self.topics.items():
            if other_topic != topic and (container_id, link_name) in other:
                old = other[(container_id, link_name)]
        if old is not None:
            self.remove_subscriber(old)
        sub = Subscriber(port, topic, container_id, link_name, presettled)
        self.topics.setdefault(topic, {})[sub.key] = sub
        return sub, old

    def remove_subscriber(self, sub: Subscriber) -> None:
        if not sub.attached:
            return
        sub.attached = False
        subs = self.topics.get(sub.topic)
        if subs is not None and subs.get(sub.key) is sub:
            del subs[sub.key]
            if not subs:
                del self.topics[sub.topic]
        sub.queue.clear()
        for record in [r for r in self.records.records.values() if sub in r.states]:
            if record.drop_waiter(sub) and not record.outcome_sent:
                self._complete(record)
            else:
                self._maybe_free(record)
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
                if record.resolve(sub, SubState.ACCEPTED) and not record.outcome_sent:
                    self._complete(record)
                else:
                    self._maybe_free(record)
            else:
                record.unsettled[sub] = handle
        if not queue and port.draining():
            port.drained()

    def subscriber_update(self, sub: Subscriber, record: Record, handle: Any, state: Any, settled: bool) -> None:
        """The subscriber's disposition for our delivery of ``record``."""
        if settled:
            record.unsettled.pop(sub, None)
        kind = type(state)
        done = False
        if kind is Accepted:
            done = record.resolve(sub, SubState.ACCEPTED)
            self.stats["accepted"] += 1
        elif kind is Rejected:
            done = record.resolve(sub, SubState.REJECTED, state.error or Error(condition="amqp:not-allowed",
                                                                                  description="rejected by a subscriber"))
            self.stats["rejected"] += 1
        elif kind is Released or kind is Modified:
            if kind is Modified and state.undeliverable_here:
                done = record.resolve(sub, SubState.REJECTED, Error(
                    condition="once:undeliverable-here",
                    description=f"subscriber {sub.container_id}/{sub.link_name} declined the message"))
            else:
                done = self._redeliver(sub, record, handle, settled)
        elif kind is Received or state is None:
            pass  # progress only, or settlement alone
        if done and not record.outcome_sent:
            self._complete(record)
        else:
            self._maybe_free(record)

    def _redeliver(self, sub: Subscriber, record: Record, handle: Any, settled: bool) -> bool:
        if record.states.get(sub) is not SubState.IN_DOUBT:
            return False
        tries = sub.attempts.get(record.gid, 0) + 1
        if tries > self.settings.max_redeliveries:
            sub.attempts.pop(record.gid, None)
            return record.resolve(sub, SubState.REJECTED, Error(
                condition="once:redelivery-limit",
                description=f"subscriber {sub.container_id}/{sub.link_name} released it {tries - 1} times"))
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
        for sub in record.states:
            if isinstance(sub, Subscriber):
                sub.attempts.pop(record.gid, None)
        pub: Publisher = record.publisher
        if not record.presettled and record.publisher_handle is not None and pub.attached:
            outcome = ACCEPTED if record.rejection is None else Rejected(error=record.rejection)
            settle = not pub.settle_second
            pub.port.outcome(record.publisher_handle, outcome, settle)
            if settle:
                record.publisher_settled = True
                self._retire(record)
                self._settle_subscribers(record)
        self._maybe_free(record)

    def _retire(self, record: Record) -> None:
        pub: Publisher = record.publisher
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

    def _maybe_free(self, record: Record) -> None:
        if record.pending == 0 and (record.presettled or record.publisher_settled) and not record.unsettled:
            if record.gid in self.records:
                self.records.free(record)
                self._credit_dirty = True

    _credit_dirty = False

    # --------------------------------------------------------------- credit

    def after_batch(self) -> None:
        if self._credit_dirty:
            self._credit_dirty = False
            self.replenish()

    def replenish(self) -> None:
        """Top up publisher credit within the room the in-flight window has left."""
        pubs = self.publishers
        if not pubs:
            return
        window = self.settings.max_in_flight
        budget = window - len(self.records) - self.outstanding
        if budget <= 0:
            return
        share = max(1, min(self.settings.link_credit, window // len(pubs)))
        n = len(pubs)
        start = self._rr % n
        for i in range(n):
            pub = pubs[(start + i) % n]
            if pub.credit * 2 > share:
                continue
            give = min(share - pub.credit, budget)
            if give <= 0:
                continue
            pub.credit += give
            self.outstanding += give
            budget -= give
            pub.port.grant(pub.credit)
            if budget <= 0:
                self._rr = start + i + 1
                break
