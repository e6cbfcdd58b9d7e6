"""Every shipped failover scenario, at its own modest size, through the real harness:
router and client OS processes, SIGKILL, restarts, a link cut through a proxy."""

from __future__ import annotations

import argparse
from pathlib import Path

import once.tools.harness.main as harness_main
import pytest
from once.records.names import matches
from once.tools.harness.check import Report, SubscriberReport
from once.tools.harness.run import run
from once.tools.harness.scenario import TOPOLOGIES, load

SCENARIOS = sorted((TOPOLOGIES / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_loses_and_duplicates_nothing(path: Path, tmp_path: Path):
    scenario = load(path)
    report = run(scenario, tmp_path / "run", progress=False)
    assert report.ok, report.text()
    assert report.accepted == scenario.messages * len(scenario.publishers)
    # each subscriber (a group: its members together) has every message of the topics it matches
    owed = {c.name: scenario.messages * sum(matches(scenario.topic_of(c), scenario.topic_of(p)) for p in scenario.publishers)
            for c in scenario.subscribers}
    owed.update({f"group {c.group}": owed[c.name] for c in scenario.subscribers if c.group})
    assert {s.name: s.distinct for s in report.subscribers} == {s.name: owed[s.name] for s in report.subscribers}
    router_deaths = [r for r in report.resume if r["fault"].startswith("kill ") and "client" not in r["fault"]]
    for r in router_deaths:
        assert r["seconds"] is not None and r["seconds"] < 5.0, report.text()  # the 2 s figure is the soak's
    assert (tmp_path / "run" / "report.json").exists()


def test_harness_exits_non_zero_on_a_violation(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]):
    bad = Report("x", sent=2, accepted=2, subscribers=[SubscriberReport("s", "once", received=1, distinct=1, lost=1,
                                                                        examples={"lost": ["p:1"]})])
    monkeypatch.setattr(harness_main, "run", lambda scenario, out, progress: bad)
    args = argparse.Namespace(random=False, scenario=str(SCENARIOS[0]), messages=None, out=str(tmp_path / "o"),
                              quiet=True, seed=1, runs=1, topology="ring5.yaml")
    assert harness_main.harness(args) == 1
    out = capsys.readouterr().out
    assert "lost 1" in out and "first lost: p:1" in out and "FAIL" in out
