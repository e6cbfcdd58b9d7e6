"""The core's counts for an operator (issue 25): pure, no sockets, a clock we turn."""

from __future__ import annotations

from typing import Any

from once.router.config import Settings
from once.router.core import ACCEPTED, RELEASED, Core, Outcome, OutcomeKind
from once.router.core.measures import OTHER, Buckets, Measures
from support.batched import batched
from support.routes import TestRoutes
from test_core import Pub, Sub


def test_buckets_count_a_value_at_its_bound_and_accumulate_like_prometheus():
    b = Buckets((0.1, 1.0))
    for v in (0.05, 0.1, 0.5, 2.0):
        b.observe(v)
    assert b.cumulative() == [(0.1, 2), (1.0, 3), (float("inf"), 4)]
    assert b.count == 4 and abs(b.sum - 2.65) < 1e-9


def test_topics_past_the_limit_share_one_other_bucket():
    m = Measures(topic_limit=2)
    a, b, c, d = (m.topic(t) for t in ("a", "b", "c", "d"))
    assert a is m.topic("a") and a is not b
    assert c is d is m.other and set(m.topics) == {"a", "b"} and OTHER not in m.topics


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_counters_follow_a_delivery_its_release_and_its_answer():
    clock = Clock()
    core = batched(Core("A", Settings(), clock=clock, routes=TestRoutes()))
    s, p = Sub(), Pub()
    sub, _ = core.add_subscriber(s, "t", "c1", "l", False)
    pub = core.add_publisher(p, "t", "cp", "lp", settle_second=False)
    record = core.publish(pub, b"0", b"m", False, "h")
    stats: dict[str, Any] = core.tables.stats
    counts = core.tables.measures.topics["t"]
    assert stats["published"] == counts.received == 1 and stats["delivered"] == counts.delivered == 1
    core.subscriber_update(sub, record, s.sent[0], RELEASED, True)
    assert stats["released"] == stats["redelivered"] == 1
    assert stats["delivered"] == 2 and stats["marked"] == 1 and s.sent[1][2] == 1  # the redelivery went marked
    clock.now += 0.25
    core.subscriber_update(sub, record, s.sent[1], ACCEPTED, True)
    assert stats["accepted"] == counts.accepted == 1 and p.outcomes
    latency = core.tables.measures.accept_latency
    assert latency.count == 1 and latency.sum == 0.25
    assert core.tables.measures.held_time.count == 1  # (settled at once: freed with its answer)


def test_a_rejection_counts_per_topic_and_an_expiry_with_deliveries_owed_is_counted():
    clock = Clock()
    core = batched(Core("A", Settings(subscriber_grace=5.0), clock=clock, routes=TestRoutes()))
    s1, s2, p = Sub(), Sub(), Pub()
    a, _ = core.add_subscriber(s1, "t", "c1", "l", False)
    b, _ = core.add_subscriber(s2, "t", "c2", "l", False)
    pub = core.add_publisher(p, "t", "cp", "lp", settle_second=False)
    first = core.publish(pub, b"0", b"m", False, "h")
    core.subscriber_update(a, first, s1.sent[0], Outcome(OutcomeKind.REJECTED), True)
    assert core.tables.stats["rejected"] == core.tables.measures.topics["t"].rejected == 1
    core.publish(pub, b"1", b"n", False, "h2")
    core.suspend_subscriber(b, clock.now + 5.0)
    clock.now += 6.0
    gone = core.expire_suspended(clock.now)
    assert gone == [b]
    stats = core.tables.stats
    assert stats["expired_subscribers"] == 1 and stats["expired_with_owed"] == 1 and stats["expired_owed"] == 2
