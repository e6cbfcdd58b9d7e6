"""What the core counts for an operator, as plain integers on the hot path.

A metrics endpoint reads these at scrape time (``router/http/metrics.py``); nothing here
takes a lock or builds an object per message. Per-topic counts are capped: the first
``topic_limit`` topics get their own, every later one shares ``other`` (one scrape of a
router with 50,000 topics must stay small: cardinality is bounded by construction).
"""

from __future__ import annotations

from bisect import bisect_left

# Publish to accepted, and a record's time held here: from 100 us to 30 s.
LATENCY_BOUNDS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                  10.0, 30.0)
OTHER = "(other)"  # the label of topics past the cap (not a topic name a client can collide with: parentheses)


class TopicCounts:
    """One topic's deliveries here: from its publishers, and to its local subscribers."""

    __slots__ = ("received", "delivered", "accepted", "rejected")

    def __init__(self) -> None:
        self.received = 0  # from publishers attached here
        self.delivered = 0  # to subscribers attached here
        self.accepted = 0  # by them
        self.rejected = 0


class Buckets:
    """A histogram's counts: ``observe`` is one bisect and two additions."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BOUNDS) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: above every bound (+Inf)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        # bisect_left: a value equal to a bound counts in that bound's bucket (Prometheus' ``le``)
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations at or below it), +Inf last, as Prometheus writes them."""
        out = []
        total = 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts):
            total += n
            out.append((bound, total))
        return out


class Measures:
    __slots__ = ("topic_limit", "topics", "other", "accept_latency", "held_time")

    def __init__(self, topic_limit: int = 100) -> None:
        self.topic_limit = topic_limit
        self.topics: dict[str, TopicCounts] = {}
        self.other = TopicCounts()  # every topic past the cap
        self.accept_latency = Buckets()  # seconds from a publisher's message arriving here to its answer
        self.held_time = Buckets()  # seconds a record we were root for was held, arrival to freed

    def topic(self, name: str) -> TopicCounts:
        """The counts a publisher or subscriber of ``name`` adds to (taken once, at attach)."""
        counts = self.topics.get(name)
        if counts is None:
            if len(self.topics) >= self.topic_limit:
                return self.other
            counts = self.topics[name] = TopicCounts()
        return counts
