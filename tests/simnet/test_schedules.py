"""Random fault schedules on the in-process network (``schedules.py``).

Ten thousand seeded schedules run in a subprocess with a fixed hash seed (so a failing
seed replays exactly: ``PYTHONPATH=tests PYTHONHASHSEED=0 python -m simnet.schedules
--seed N --trace``), two thousand more with a consumer group (``--groups``), and
hypothesis draws schedules of its own (a group among them) and shrinks what fails.

What holds in every schedule today is asserted exactly: no subscriber ever processes a
message twice, none sees a message nobody sent, no publisher hears two outcomes for one
message. Losses, reorders and stalls still occur in about 2.5 % of the schedules (issue
13 is open for them; BENCHMARKS.md has the counts): the sweep asserts they stay under a
ceiling recorded here, and each one found so far is a named regression test once fixed
(``tests/router/test_core_simnet_finds.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simnet.net import Fault
from simnet.schedules import KINDS, START, TOPOLOGIES, Plan, run

TESTS = Path(__file__).resolve().parent.parent
NEVER = ("duplicated", "phantom", " then ")  # processed twice, never sent, two outcomes
# Failing schedules of 10,000 (seeds 0-9999) on the commit that recorded them; lower it
# when a fix brings the count down, never raise it without saying why in BENCHMARKS.md.
CEILING = {"lost": 15, "reordered": 30, "never answered": 14, "state left behind": 66, "expired": 2}


def _sweep(tmp_path: Path, n: int, ceiling: dict[str, int], *options: str) -> dict[str, list[str]]:
    """Run ``n`` seeded schedules in a subprocess; assert never-twice exactly and the ceilings;
    return the failing ones."""
    out = tmp_path / "failed.json"
    env = dict(os.environ, PYTHONPATH=str(TESTS), PYTHONHASHSEED="0")
    proc = subprocess.run([sys.executable, "-m", "simnet.schedules", *options, "--seeds", f"0:{n}", "--jobs", "2",
                           "--json", str(out)], cwd=TESTS.parent, env=env, capture_output=True, text=True,
                          timeout=600)
    assert f"{n} schedules" in proc.stdout, proc.stderr[-2000:]
    failed: dict[str, list[str]] = json.loads(out.read_text())
    twice = {seed: v for seed, v in failed.items() if any(k in line for line in v for k in NEVER)}
    assert not twice, f"never twice, broken: {dict(list(twice.items())[:5])}"
    counts = {kind: sum(any(kind in line for line in v) for v in failed.values()) for kind in ceiling}
    over = {kind: (c, ceiling[kind]) for kind, c in counts.items() if c > ceiling[kind]}
    assert not over, f"more failing schedules than recorded (count, ceiling): {over}; {proc.stdout[-3000:]}"
    return failed


def test_ten_thousand_random_schedules(tmp_path: Path):
    _sweep(tmp_path, 10000, CEILING)


# The same over 2,000 schedules with a consumer group of two or three members (and faults
# on them) added (``--groups``): the group counts as one subscriber; each message once
# across it. Recorded at the commit that added it (BENCHMARKS.md).
GROUP_CEILING = {"lost": 10, "reordered": 32, "never answered": 30, "state left behind": 60}
# Groups seeds that lost messages before their fix (the in-process network's own finds):
# 320 (a member moved on to a router that then died: that router was dropped as having
# nobody) and 875 (a resumed publisher's new root adopted a record without waiting for
# the member chosen at the dead root).
GROUP_FINDS = (320, 875)


def test_two_thousand_random_schedules_with_a_consumer_group(tmp_path: Path):
    failed = _sweep(tmp_path, 2000, GROUP_CEILING, "--groups")
    assert not [seed for seed in GROUP_FINDS if str(seed) in failed], {seed: failed.get(str(seed)) for seed in GROUP_FINDS}


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    topology = draw(st.sampled_from(sorted(TOPOLOGIES)))
    links = TOPOLOGIES[topology]
    names = sorted({n for pair in links for n in pair})
    prefs = st.permutations(names)
    publishers = [(f"p{i}", list(draw(prefs))) for i in range(draw(st.integers(1, 2)))]
    subscribers = [(f"s{i}", list(draw(prefs))) for i in range(draw(st.integers(1, 3)))]
    members = [(f"g{i}", list(draw(prefs))) for i in range(draw(st.integers(0, 3)))]  # of consumer group "g"
    messages = draw(st.integers(5, 50))
    interval = draw(st.sampled_from((0.002, 0.01, 0.03)))
    span = messages * interval
    faults = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(KINDS))
        at = START + draw(st.floats(0.0, span))
        duration = draw(st.floats(0.05, 2.5))
        if kind == "kill":
            target: tuple[str, ...] = (draw(st.sampled_from(names)),)
        elif kind in ("cut", "slow"):
            target = draw(st.sampled_from(links))
        elif kind == "drop":
            target = (draw(st.sampled_from([c for c, _ in publishers + subscribers + members])),)
        else:
            target = (draw(st.sampled_from([c for c, _ in subscribers + members])),)
        faults.append(Fault(at, kind, target, duration, 0.03))
    seed = draw(st.integers(0, 2**32))
    return Plan(seed, topology, publishers, subscribers, messages, interval, sorted(faults, key=lambda f: f.at),
                members)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_no_schedule_makes_a_subscriber_process_a_message_twice(plan: Plan):
    _, verdict = run(plan)
    broken = [v for v in verdict.violations if any(k in v for k in NEVER)]
    assert not broken, plan.describe()


def test_a_schedule_past_its_wall_time_cap_is_a_failure():
    """Hangs are failures: a run stopped by the cap says so in its verdict."""
    from simnet.schedules import plan as plan_of

    _, verdict = run(plan_of(5), wall_cap=0.001)
    assert [v for v in verdict.violations if v.startswith("hang: ")], verdict.violations
    _, verdict = run(plan_of(5))
    assert not [v for v in verdict.violations if v.startswith("hang: ")]
