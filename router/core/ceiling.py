"""How much unused credit one publisher may hold: found by probing, not fixed.

Credit a publisher holds unused it may spend at once, and what it sent and we have not
read yet is a queue in front of the router: 2,000 credit on one router at 55k msg/s is
35 ms from send to accepted. Most paths reach their full rate with far less, but not all:
a line of routers needs more in the pipe than one router does, and so does a slow
network. So the ceiling on unused credit is probed, as a rate, the way TCP's BBR probes
bandwidth (what a link holds unanswered stays bounded by its window, ``credit.py``):

* while the link is credit-bound (it used all the credit it had), each epoch (at least
  ``EPOCH`` seconds and twice the ceiling's messages) measures the rate it sent at;
* a probe up doubles the ceiling and keeps it only if the rate rose by ``GAIN``, and then
  tries again at once; a probe down halves it and keeps that if the rate held within
  ``KEEP``; a probe that did not pay is undone, and the next one, the other way, waits
  ``REPROBE`` seconds;
* between ``floor`` and ``top`` (``link_credit``).

A publisher that is not credit-bound gives no information and leaves its ceiling alone.
"""

from __future__ import annotations

from enum import Enum

FIRST_CEILING = 256  # (Qpid Dispatch's default link capacity is 250)
EPOCH = 0.05
GAIN = 1.10
KEEP = 0.95
REPROBE = 1.0


class Phase(Enum):
    MEASURE = 0
    UP = 1
    DOWN = 2


class Prober:
    """What ``Ceiling`` and ``Pace`` (``pace.py``) share: a value probed up and down between
    ``floor`` and ``top``; the probe under way, the value before it, when the next may go."""

    __slots__ = ("value", "kept", "floor", "top", "phase", "next_probe", "next_up")

    def __init__(self, start: int, floor: int, top: int, now: float) -> None:
        self.top = max(1, top)
        self.floor = max(1, min(floor, self.top))
        self.value = min(max(start, self.floor), self.top)
        self.kept = self.value  # the value before the probe under way
        self.phase = Phase.MEASURE
        self.next_probe = now
        self.next_up = True

    def _probe(self, now: float, up: bool) -> bool:
        """Double or halve the value (True); at the top or floor it settles instead (False)."""
        self.kept = self.value
        if up and self.value < self.top:
            self.value = min(self.value * 2, self.top)
            self.phase = Phase.UP
            return True
        if not up and self.value > self.floor:
            self.value = max(self.value // 2, self.floor)
            self.phase = Phase.DOWN
            return True
        self._settle(now, next_up=not up)
        return False

    def _settle(self, now: float, next_up: bool) -> None:
        self.kept = self.value
        self.phase = Phase.MEASURE
        self.next_probe = now + REPROBE
        self.next_up = next_up


class Ceiling(Prober):
    __slots__ = ("epoch_at", "epoch_sent", "base")

    def __init__(self, start: int, floor: int, top: int, now: float) -> None:
        super().__init__(start, floor, top, now)
        self.epoch_at = now
        self.epoch_sent = 0
        self.base = 0.0  # the rate measured at the kept ceiling

    def restart(self, sent: int, now: float) -> None:
        """Not credit-bound while measuring: what it sent says nothing of the path."""
        self.epoch_at, self.epoch_sent = now, sent

    def observe(self, sent: int, now: float) -> None:
        """The credit-bound link has sent ``sent`` deliveries in all, as of ``now``."""
        took = now - self.epoch_at
        n = sent - self.epoch_sent
        if took < EPOCH or n < 2 * self.value:
            return
        rate = n / took
        self.epoch_at, self.epoch_sent = now, sent
        phase = self.phase
        if phase is Phase.UP:
            if rate >= self.base * GAIN:
                self.base = rate
                self._probe(now, up=True)  # it paid: higher again, at once
                return
            self.value = self.kept
            self._settle(now, next_up=False)
        elif phase is Phase.DOWN:
            if rate >= self.base * KEEP:
                self.base = rate
                self._settle(now, next_up=False)  # kept: lower again, later
                return
            self.value = self.kept
            self._settle(now, next_up=True)
        else:
            self.base = rate
            if now >= self.next_probe:
                self._probe(now, up=self.next_up)
