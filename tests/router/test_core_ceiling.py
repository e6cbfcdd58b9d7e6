"""The window's ceiling is probed as a rate (``router/core/ceiling.py``): it rises where a
larger window brings more, and stays low where it would only queue."""

from __future__ import annotations

from collections.abc import Callable

from once.router.core.ceiling import FIRST_CEILING, REPROBE, Ceiling, Phase


def _drive(rate_at: Callable[[int], float], seconds: float, start: int = FIRST_CEILING, top: int = 2000,
           bound: bool = True) -> tuple[Ceiling, list[int]]:
    """A credit-bound publisher on a path that carries ``rate_at(window)`` msg/s, seen
    every millisecond (as the router sees it after each batch)."""
    c = Ceiling(start, 32, top, 0.0)
    sent, now, seen = 0.0, 0.0, []
    while now < seconds:
        now += 0.001
        sent += rate_at(c.value) * 0.001
        if bound or c.phase is not Phase.MEASURE:
            c.observe(int(sent), now)
        else:
            c.restart(int(sent), now)
        seen.append(c.value)
    return c, seen


def test_on_a_router_that_is_saturated_at_a_small_window_the_ceiling_stays_small():
    # one router: the rate is flat beyond ~200 in flight; more window is only more queue
    c, seen = _drive(lambda w: min(w, 200) / 200 * 57_000, seconds=10)
    assert c.value == FIRST_CEILING
    assert max(seen) <= 2 * FIRST_CEILING  # an occasional probe up, undone
    assert sum(v > FIRST_CEILING for v in seen) < len(seen) * 0.1


def test_on_a_long_path_the_ceiling_rises_until_the_rate_stops_rising():
    # a line of routers: 40 ms around the loop, 24k msg/s at most
    c, seen = _drive(lambda w: min(w / 0.040, 24_000), seconds=10)
    assert c.value >= 960 * 0.9  # 24k x 40 ms
    assert c.value <= 2000
    assert seen.index(c.value) < 2000  # found within two seconds


def test_it_comes_down_again_when_a_smaller_window_carries_as_much():
    # the path was long and became short (the far subscriber left, say)
    c, _ = _drive(lambda w: min(w, 100) / 100 * 50_000, seconds=10, start=1024)
    assert c.value <= 128


def test_a_probe_up_that_does_not_pay_is_undone_and_the_next_probe_waits():
    c = Ceiling(256, 32, 2000, 0.0)
    c.observe(1000, 0.1)  # a first epoch: 10k msg/s, and a probe up at once
    assert c.value == 512 and c.phase is Phase.UP
    c.observe(2090, 0.2)  # 10.9k msg/s: less than 10 % more
    assert c.value == 256 and c.phase is Phase.MEASURE
    c.observe(3090, 0.3)
    assert c.value == 256  # no probe before REPROBE
    c.observe(3090 + int(10_000 * REPROBE), 0.3 + REPROBE)
    assert c.value == 128 and c.phase is Phase.DOWN  # the next probe goes the other way


def test_a_publisher_that_is_not_credit_bound_leaves_the_ceiling_alone():
    # app-limited: 1,000 msg/s whatever the window; the core only restarts the epoch
    c, seen = _drive(lambda w: 1000.0, seconds=5, bound=False)
    assert set(seen) == {FIRST_CEILING}
