"""Seeds of issue 24's sweeps (the in-process network on seeds the suite never ran),
each a named regression test once its cause is fixed. The schedule is replayed exactly
(``simnet.schedules.plan``); the verdict must be clean."""

from __future__ import annotations

from simnet.schedules import plan, run


def _clean(seed: int, groups: bool = False) -> None:
    _, verdict = run(plan(seed, groups=groups))
    assert verdict.ok, verdict.violations


def test_seed_8757_three_routers_killed_together_keep_a_crashed_subscribers_grace():
    """line3; C, B and A killed within 90 ms while s1 crashed: every router forgot that
    s1 was suspended, and 60 messages were accepted without it. Each router's
    subscription journal (``router/substore.py``) now brings it back, suspended."""
    _clean(8757)
