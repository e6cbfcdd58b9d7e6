"""Seeds of issue 24's sweeps (the in-process network on seeds the suite never ran),
each a named regression test once its cause is fixed. The schedule is replayed exactly
(``once.sim.schedules.plan``); the verdict must be clean."""

from __future__ import annotations

import pytest
from once.sim.schedules import plan, run


def _clean(seed: int, groups: bool = False) -> None:
    _, verdict = run(plan(seed, groups=groups))
    assert verdict.ok, verdict.violations


def test_seed_8757_three_routers_killed_together_keep_a_crashed_subscribers_grace():
    """line3; C, B and A killed within 90 ms while s1 crashed: every router forgot that
    s1 was suspended, and 60 messages were accepted without it. Each router's
    subscription journal (``router/substore.py``) now brings it back, suspended."""
    _clean(8757)


def test_harness_seed_9608_line3_schedule_loses_nothing_in_the_simulator():
    """Issue 24's real schedule (``once harness --random --seed 9608 --topology line3.yaml
    --messages 40000``), where version 2 lost 6,400+ messages in 3 of 4 runs: s1 lives on
    B, resumes on A when B dies, is killed and left suspended, and ``accepted`` reached
    the publisher for a contiguous range s1 never got. The same faults at the same times
    (from ``tools.harness.scenario.randomized(9608, ...)``), a tenth of the messages over
    the same 20 s. (Version 2 passes this replay too: what lost messages on real routers
    was timing the simulator does not reproduce here. The real check is the harness run,
    10 of 10 clean on version 3: BENCHMARKS.md.)"""
    from once.sim.net import Fault
    from once.sim.schedules import START, Plan

    def at(t: float) -> float:
        return START + t

    faults = [
        Fault(at(0.509), "crash", ("s2",), 0.273),
        Fault(at(4.115), "kill", ("A",), 2.741),
        Fault(at(6.397), "cut", ("B", "C"), 0.645),
        Fault(at(9.978), "kill", ("C",), 1.184),
        Fault(at(12.029), "kill", ("B",), 1.859),
        Fault(at(13.856), "crash", ("s1",), 1.237),
    ]
    p = Plan(9608, "line3", [("p1", ["A", "C", "B"])], [("s1", ["B", "A", "C"]), ("s2", ["A", "B", "C"])],
             4000, 0.005, faults)
    net, verdict = run(p)
    assert verdict.ok, verdict.violations
    assert verdict.published == 4000 and all(len(s.effects) == 4000 for s in net.subscribers)


# Every seed ``tests/router/test_core_simnet_finds.py`` names (version 2's finds, pinned
# there on one core) and the seeds issue 24 traced, replayed on version 3 as the
# simulator draws them today. (A seed's schedule has changed with the simulator since some
# were found; the situations themselves are the unit tests there and the exhaustive
# mode's models.)
CORE_FINDS = (627, 367, 300, 453, 941, 78, 7625, 13, 1545, 1963, 2804, 425, 1348, 2722, 2439, 1350)
ISSUE_SEEDS = (9883, 9064, 1648, 9736, 8757, 5934, 12806, 9696, 8873)


@pytest.mark.parametrize("seed", CORE_FINDS + ISSUE_SEEDS)
def test_historical_seed_is_clean_on_version_3(seed: int):
    _clean(seed)


@pytest.mark.parametrize("seed", (320, 875, 2841, 3550, 3964, 1621))
def test_historical_group_seed_is_clean_on_version_3(seed: int):
    _clean(seed, groups=True)
