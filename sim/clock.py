"""Virtual time and a seeded scheduler: everything in the in-process network is an event
at a virtual instant, run in (time, order of scheduling); the same seed, the same run."""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from typing import Any


class Runaway(Exception):
    """The run does not come to rest (traffic without end, or state without bound)."""


class Timer:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Loop:
    def __init__(self, seed: int) -> None:
        self.now = 0.0
        self.rng = random.Random(seed)
        self._heap: list[tuple[float, int, Timer, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = 0
        self.events = 0
        self.max_events = 2_000_000  # a schedule that never settles is reported, not run forever

    def time(self) -> float:
        return self.now

    def wall(self) -> int:
        """Microseconds, like the routers' wall clock (the stamps of records and subscriptions)."""
        return 1_000_000_000 + int(self.now * 1_000_000)

    def at(self, when: float, fn: Callable[..., Any], *args: Any) -> Timer:
        timer = Timer()
        self._seq += 1
        heapq.heappush(self._heap, (max(when, self.now), self._seq, timer, fn, args))
        return timer

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Timer:
        return self.at(self.now + delay, fn, *args)

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> Timer:
        return self.at(self.now, fn, *args)

    def run_until(self, until: float, idle: Callable[[], bool] | None = None) -> None:
        """Run events up to virtual time ``until`` (or until ``idle()`` says all is done)."""
        heap = self._heap
        while heap and heap[0][0] <= until:
            if self.events > self.max_events:
                raise Runaway(f"more than {self.max_events} events by {self.now:.3f} s virtual")
            when, _, timer, fn, args = heapq.heappop(heap)
            if timer.cancelled:
                continue
            self.now = when
            self.events += 1
            fn(*args)
            if idle is not None and idle():
                return
        self.now = max(self.now, until)
