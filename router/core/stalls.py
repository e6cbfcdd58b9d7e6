"""Subscribers that hold deliveries and answer none (a stuck consumer, issue 49 item 10).

A subscriber's deliveries wait for its answer, and so do their publishers' answers: one
that stays attached, takes deliveries (or grants no credit while they queue for it) and
never answers held every publisher of its topics for as long as it stayed connected. The
router gives each subscriber a bound of its own, ``subscriber_stall`` (the topology's, or
its user's or host's policy's): one that has answered nothing for that long while it
holds deliveries is *stalled*, and the router treats it as gone (its link is detached
without closing it, so it is suspended: its grace, then its publishers hear accepted
without it, as for any subscriber that went away), as Artemis's slow-consumer policy and
EMQX's in-flight expiry do. One that answers anything, or holds nothing, is not stalled;
at-most-once subscribers (pre-settled) answer nothing and are never held for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from once.records.table import IN_DOUBT

from .peers import Subscriber


def holding(sub: Subscriber) -> int:
    """The deliveries ``sub`` holds: sent and not answered, or queued for it."""
    sent = sum(1 for record in sub.sent if record.states.get(sub) is IN_DOUBT)
    return sent + len(sub.queue)


class Stalls:
    """When each subscriber last answered, as seen at the router's checks."""

    __slots__ = ("marks",)

    def __init__(self) -> None:
        self.marks: dict[Subscriber, tuple[int, float]] = {}  # sub -> (its answers then, since when)

    def check(self, subs: Iterable[Subscriber], now: float,
              limit_of: Callable[[Subscriber], float]) -> list[tuple[Subscriber, float, int]]:
        """The subscribers among ``subs`` (attached ones) stalled now: each with its limit
        and what it holds."""
        marks: dict[Subscriber, tuple[int, float]] = {}
        out: list[tuple[Subscriber, float, int]] = []
        for sub in subs:
            if sub.presettled or not sub.attached or sub.suspended_until is not None:
                continue
            held = holding(sub)
            mark = self.marks.get(sub)
            if not held or mark is None or mark[0] != sub.answered:
                marks[sub] = (sub.answered, now)  # (progress, or nothing held: it starts again)
                continue
            marks[sub] = mark
            limit = limit_of(sub)
            if limit > 0 and now - mark[1] >= limit:
                out.append((sub, limit, held))
                del marks[sub]
        self.marks = marks
        return out
