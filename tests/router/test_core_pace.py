"""A publisher's window (credit plus records in flight) is probed as a rate and kept where
its answers queue at most ``queue_target`` (``router/core/pace.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from once.router.config import Settings
from once.router.core import ACCEPTED, Core
from once.router.core.ceiling import Phase
from once.router.core.pace import FIRST, Pace
from support.batched import batched
from support.routes import TestRoutes
from test_core import Pub, Sub
from test_core_credit import Clock

TARGET = 0.003


def _drive(pace: Pace, rate_at: Callable[[int], float], latency_at: Callable[[int], float], seconds: float,
           start: float = 0.0) -> list[tuple[float, int]]:
    """A publisher that fills its window on a path that carries ``rate_at(window)`` msg/s
    and answers each in ``latency_at(window)`` s, seen every millisecond (as the router
    sees it after each batch): (time, window) at each step."""
    now, sent, seen = start, float(pace.epoch_sent), []
    while now < start + seconds:
        now += 0.001
        r = rate_at(pace.value)
        sent += r * 0.001
        answered = round(r * 0.001)
        pace.waited += latency_at(pace.value) * answered
        pace.answers += answered
        pace.bound = True
        pace.observe(int(sent), now)
        seen.append((now, pace.value))
    return seen


def _queue(capacity: float, delay: float) -> tuple[Callable[[int], float], Callable[[int], float]]:
    """A path that answers in ``delay`` and carries ``capacity`` msg/s: a larger window
    only queues (Little's law)."""
    def latency(w: int) -> float:
        return max(delay, w / capacity)
    return (lambda w: w / latency(w)), latency


def _batching(most: float, half_at: int) -> tuple[Callable[[int], float], Callable[[int], float]]:
    """A line of routers: more in flight means larger batches and more rate, up to
    ``most``, half of it at ``half_at`` held; and the time held grows with it."""
    def rate(w: int) -> float:
        return most * w / (w + half_at)
    return rate, (lambda w: w / rate(w))


def test_where_more_window_only_queues_it_comes_down_to_what_the_path_needs():
    rate, latency = _queue(100_000, 0.0005)  # one router: 50 in flight carry it all
    pace = Pace(32, 2000, TARGET, 0.0)
    seen = _drive(pace, rate, latency, 10.0)
    assert pace.value <= 128
    assert all(rate(w) >= 0.95 * 100_000 for t, w in seen if t > 5.0 and w == pace.value)


def test_where_more_window_brings_more_rate_it_grows_until_answers_queue_past_the_target():
    rate, latency = _batching(60_000, 200)
    pace = Pace(32, 2000, TARGET, 0.0)
    pace.value = pace.kept = 32  # (a new link: its window starts small and shows the path's delay)
    seen = _drive(pace, rate, latency, 10.0)
    base = latency(32)
    late = [w for t, w in seen if t > 5.0]
    assert all(latency(w) - base <= TARGET * 1.01 for w in late if w == pace.value)  # within the target...
    assert max(late) >= 64  # ...and not at the floor: it took what paid
    # with no target, rate alone decides: it climbs to the top (25 ms of queue on a line)
    free = Pace(32, 2000, 0.0, 0.0)
    _drive(free, rate, latency, 3.0)
    assert free.value == 2000


def test_a_client_far_away_gets_what_its_round_trip_needs():
    # 50 ms between the client and us: credit takes that long to come back as messages;
    # we answer each in 0.5 ms and could take 20k msg/s: 1,000 in flight carry it
    pace = Pace(32, 2000, TARGET, 0.0)
    seen = _drive(pace, lambda w: min(w / 0.050, 20_000), lambda w: 0.0005, 5.0)
    reached = next(t for t, w in seen if w >= 1000)
    assert reached <= 1.0 and pace.value >= 1000


def test_past_the_target_it_halves_at_once_and_keeps_it_whatever_the_rate():
    pace = Pace(32, 2000, TARGET, 0.0)
    pace.base = 0.001
    pace.value = pace.kept = 512
    pace.waited, pace.answers = 0.006 * 100, 100  # 5 ms above the base
    pace.bound = True
    pace.observe(1200, 0.06)
    assert pace.value == 256 and pace.phase is Phase.DOWN
    pace.bound = True
    pace.observe(1200 + 600, 0.12)  # (the window moving down: not measured)
    assert pace.phase is Phase.DOWN
    pace.waited, pace.answers = 0.003 * 100, 100
    pace.bound = True
    pace.observe(1800 + 600, 0.18)  # the rate fell by half: kept all the same
    assert pace.value == 256 and pace.phase is Phase.MEASURE


def test_without_a_target_the_window_is_the_link_credit():
    pace = Pace(32, 2000, 0.0, 0.0)
    rate, latency = _queue(100_000, 0.0005)
    assert {w for _, w in _drive(pace, rate, latency, 3.0)} == {2000}


def test_it_starts_where_qpid_dispatch_does():
    assert Pace(32, 2000, TARGET, 0.0).value == FIRST == 256


# ---------------------------------------------------------------- in the core


def _core(clock: Clock, **kw: Any) -> Core:
    return batched(Core("A", Settings(**kw), clock=clock, routes=TestRoutes()))


def _run(core: Core, clock: Clock, steps: int, answer: Callable[[int, float, float], bool]) -> tuple[list[int], int]:
    """A publisher that sends all its credit every millisecond to a subscriber that accepts
    message ``n`` (arrived at ``t``) when ``answer(n, t, now)`` says so, in order of arrival;
    the router's credit pass every 100 ms and housekeeping every second. What the publisher held (credit plus
    unanswered) at each step, and how many it sent."""
    sub_port, pub_port = Sub(credit=10**9), Pub()
    sub, _ = core.add_subscriber(sub_port, "t", "s", "l", False)
    pub = core.add_publisher(pub_port, "t", "c", "l", False)
    waiting: list[tuple[int, float, Any, Any]] = []
    held, tag = [], 0
    bare = core.bare  # (a millisecond's publishes are one batch, its answers another, as a router reads them)
    for step in range(1, steps + 1):
        clock.now = step / 1000
        first = len(sub_port.sent)
        recs = [bare.publish(pub, str(tag + i).encode(), b"m", False, f"h{tag + i}") for i in range(pub.credit)]
        core.after_batch()
        for i, rec in enumerate(recs):
            waiting.append((tag + i, clock.now, rec, ("handle", first + i + 1)))
        tag += len(recs)
        still = []
        for n, t, rec, handle in waiting:
            if answer(n, t, clock.now):
                bare.subscriber_update(sub, rec, handle, ACCEPTED, settled=True)
            else:
                still.append((n, t, rec, handle))
        waiting = still
        core.after_batch()
        if step % 100 == 0:
            core.replenish()  # (the router's pass every CREDIT_PASS)
        if step % 1000 == 0:
            core.reclaim_idle(clock.now)
        held.append(pub.credit + pub.in_flight)
    return held, pub.sent


def _fifo(delay: float, per_ms: int) -> Callable[[int, float, float], bool]:
    """Answers what arrived ``delay`` ago, at most ``per_ms`` a millisecond."""
    budget = {"at": -1.0, "left": 0}

    def answer(n: int, t: float, now: float) -> bool:
        if budget["at"] != now:
            budget["at"], budget["left"] = now, per_ms
        if t > now - delay or budget["left"] <= 0:
            return False
        budget["left"] -= 1
        return True
    return answer


def test_the_core_keeps_a_publisher_off_a_queue_that_brings_no_rate():
    # answered 2 ms after arrival, 20 a millisecond: 2,000 credit would queue 100 ms
    clock = Clock()
    core = _core(clock, max_in_flight=10_000, link_credit=2000, queue_target=TARGET)
    held, _ = _run(core, clock, 5000, _fifo(0.002, 20))
    late = sorted(held[3000:])
    assert late[len(late) // 2] <= 20 * (2 + 3) * 1.5  # (a probe up now and then, undone)
    clock = Clock()
    core = _core(clock, max_in_flight=10_000, link_credit=2000, queue_target=0)  # (the bound off)
    held, _ = _run(core, clock, 5000, _fifo(0.002, 20))
    assert max(held[3000:]) >= 1500


def test_records_a_subscriber_holds_do_not_stop_what_moves():
    # every fourth message is held for good (not accepted yet): they wait in the window as
    # before, and do not take it from the rest
    clock = Clock()
    core = _core(clock, max_in_flight=10_000, link_credit=2000, queue_target=TARGET)
    held, sent = _run(core, clock, 6000, lambda n, t, now: n % 4 != 0 and t <= now - 0.001)
    pub = next(iter(core.publishers))
    assert pub.in_flight >= 2000 * 0.9  # it sent until the held ones filled its window


def test_a_subscriber_that_accepts_in_batches_is_not_starved():
    # it accepts everything it has every 100 ms: answers take 0 to 100 ms, none of it queueing
    def batches(n: int, t: float, now: float) -> bool:
        return round(now * 1000) % 100 == 0
    sent = {}
    for target in (TARGET, 0.0):
        clock = Clock()
        core = _core(clock, max_in_flight=10_000, link_credit=2000, queue_target=target)
        _, sent[target] = _run(core, clock, 5000, batches)
    assert sent[TARGET] >= 0.75 * sent[0.0]  # (its first second probing up, a probe down now and then)
