"""How much one publisher may hold in all (credit plus records in flight): probed as a rate,
and kept where it queues at most ``queue_target``.

What a publisher holds waits in a queue: at r messages a second, W held wait W / r on
average. ``link_credit`` (2,000) on a line of three routers at 50k msg/s is 25 ms from send
to accepted, most of it queueing: the line answers a lone message in under a millisecond.
More window does bring more rate there (the routers work in larger batches), so a probe of
rate alone (``ceiling.py``) would climb to the top; the queue it builds is the price. So the
window is probed as a rate, and the time its answers take decides too:

* each epoch (at least ``EPOCH`` seconds, two rounds of the path, and twice the window's
  messages or ``LONG_EPOCH``) of a publisher that uses what it may hold measures its rate
  and the mean time from a message's arrival here to its answer;
* ``base`` is the lowest such mean lately (a sliding minimum over ``BASE_TTL``): the path's
  own delay, as a small window sees it. What an epoch's mean has above it is queueing;
* more than ``queue_target`` of queueing (a setting, 1.5 ms; on a slow path, more than a
  quarter of its delay) halves the window at once, and keeps it halved whatever the rate
  does: latency first;
* otherwise the probes of ``ceiling.py``: a doubling is kept if the rate rose by ``GAIN``
  without queueing past the target (and then it doubles again at once); a halving is
  kept if the rate held within ``KEEP``; a probe that did not pay is undone, and the next
  one, the other way, waits ``REPROBE`` seconds.

Why probing rather than Little's law (window = rate x delay): answers do not come back as a
queue drains. A subscriber that accepts in batches every 100 ms, one that holds what it
has not processed, a group member that leaves with messages: each has some records wait
long while others are answered at once, and a window sized by the quick answers would
starve them. A probe only asks whether more window brings more rate, and the mean of what
was answered whether it queues: records a subscriber holds are in neither.

A publisher whose window stops it sends nothing and so starts no credit pass: an epoch
also ends at the router's housekeeping pass (every second), after ``LONG_EPOCH``.
``queue_target`` 0 turns the bound off (the window is then ``link_credit``).
"""

from __future__ import annotations

from .ceiling import GAIN, KEEP, Phase, Prober

INF = float("inf")
FIRST = 256  # (Qpid Dispatch's default link capacity is 250)
EPOCH = 0.05
LONG_EPOCH = 0.1  # an epoch ends after this even with few messages (a stopped publisher)
BASE_TTL = 10.0
SLACK = 0.25  # on a slow path (answers in 100 ms, say) queueing is what passes a quarter of it


class Pace(Prober):
    __slots__ = ("target", "epoch_at", "epoch_sent", "rate", "waited", "answers", "base", "base_prev", "base_turn",
                 "over", "bound", "moving")

    def __init__(self, floor: int, top: int, target: float, now: float) -> None:
        super().__init__(FIRST if target > 0 else top, floor, top, now)
        self.target = target
        self.epoch_at = now if target > 0 else INF  # (without a target no epoch ever ends: no pass calls)
        self.epoch_sent = 0
        self.rate = 0.0  # the rate measured at the kept window
        # The core adds each answer's time from arrival (seconds) to ``waited`` and counts it.
        self.waited = 0.0
        self.answers = 0
        # The sliding minimum of epoch means: this half of BASE_TTL's and the half before.
        self.base = INF
        self.base_prev = INF
        self.base_turn = now + BASE_TTL / 2
        self.over = False  # the probe under way is a halving for latency
        self.bound = False  # it used what it may hold at some pass of this epoch (the pass says)
        self.moving = False  # a probe's first epoch: the window moves to its new value, not measured

    def observe(self, sent: int, now: float) -> None:
        """The publisher has sent ``sent`` deliveries in all, as of ``now`` (a credit pass)."""
        took = now - self.epoch_at
        n = sent - self.epoch_sent
        base = min(self.base, self.base_prev)
        if base == INF:
            base = 0.0
        if took < EPOCH or (n < 2 * self.value and took < LONG_EPOCH) or self.target <= 0 or took < 2 * base:
            return  # (two rounds at least: a window's change shows one round later)
        if (not self.bound and self.phase is Phase.MEASURE) or self.moving:
            # It did not use what it may hold, or the window was still moving to a probe's
            # value: what it sent says nothing of the path.
            self.epoch_at, self.epoch_sent, self.waited, self.answers = now, sent, 0.0, 0
            self.bound = self.moving = False
            return
        rate = n / took
        delay = self.waited / self.answers if self.answers else -1.0
        self.epoch_at, self.epoch_sent, self.waited, self.answers, self.bound = now, sent, 0.0, 0, False
        if now >= self.base_turn:
            self.base_prev, self.base, self.base_turn = self.base, INF, now + BASE_TTL / 2
        if 0.0 <= delay < self.base:
            self.base = delay
        base = min(self.base, self.base_prev)
        over = delay - base > max(self.target, base * SLACK)
        phase = self.phase
        if phase is Phase.UP:
            if rate >= self.rate * GAIN and not over:
                self.rate = rate
                self._probe(now, up=True)  # it paid: higher again, at once
                return
            self.value = self.kept
            self._settle(now, next_up=False)
        elif phase is Phase.DOWN:
            if rate >= self.rate * KEEP or self.over:
                self.rate = rate
                self._settle(now, next_up=False)  # kept: lower again, later
                return
            self.value = self.kept
            self._settle(now, next_up=True)
        else:
            self.rate = rate
            if n == 0:
                self._probe(now, up=True)  # what it holds stopped it: a subscriber holds them, not the path
            elif over:
                self._probe(now, up=False, over=True)
            elif now >= self.next_probe:
                self._probe(now, up=self.next_up)

    def _probe(self, now: float, up: bool, over: bool = False) -> bool:
        self.over = over  # (a halving for latency is kept whatever the rate does)
        self.moving = super()._probe(now, up)
        return self.moving

    def _settle(self, now: float, next_up: bool) -> None:
        super()._settle(now, next_up)
        self.over = False
