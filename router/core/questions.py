"""The questions a root asks before it chooses a message's group members again
(``inquiry.py``, ``docs/protocol.md`` section 8): one per message, or one per resumed
publisher before its message came."""

from __future__ import annotations

from once.records.membership import GroupId

from .peers import CoreRecord, Publisher
from .tables import Key

# (key, group, router, had): had 1 (True) when the member had it there, 0 (False) when a
# root chose it, ``RELEASED`` when it released it there, ``HOLDS`` when it is queued or sent
# to it there with no answer yet: it may process it (``Told``)
Member = tuple[Key, GroupId, str, int]
RELEASED = 2
HOLDS = 3
# the order a question's answers are taken in: what a member had, then what one holds
# (it will process it unless withdrawn), then a root's choice a copy named
RANK = {1: 0, HOLDS: 1, 0: 2}


class Asking:
    """A root's open question about one message: who has not answered in this round,
    whether one was unsure, what it heard (in every round: a member that had it, had it)."""

    __slots__ = ("record", "waiting", "unsure", "heard", "asked_at", "stamp")

    def __init__(self, record: CoreRecord, waiting: set[str], now: float, stamp: int) -> None:
        self.record = record
        self.stamp = stamp  # when we first asked (the newest asker chooses)
        self.waiting = waiting
        self.unsure = False
        self.heard: list[Member] = []
        self.asked_at = now


class Early:
    """A question asked when the publisher resumed, before its message came: who has not
    told yet, what they told."""

    __slots__ = ("publisher", "topic", "stamp", "waiting", "heard", "asked_at")

    def __init__(self, publisher: Publisher, stamp: int, waiting: set[str], now: float) -> None:
        self.publisher = publisher
        self.topic = publisher.topic
        self.stamp = stamp
        self.waiting = waiting
        self.heard: list[Member] = []
        self.asked_at = now
