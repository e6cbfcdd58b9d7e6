"""Every shipped failover scenario, at its own modest size, through the real harness:
router and client OS processes, SIGKILL, restarts, a link cut through a proxy."""

from __future__ import annotations

import argparse
from pathlib import Path

import once.tools.harness.main as harness_main
import pytest
from once.tools.harness.check import Report, SubscriberReport
from once.tools.harness.run import run
from once.tools.harness.scenario import TOPOLOGIES, load
from support.scenarios import AUDITED, assert_scenario_held

SCENARIOS = sorted((TOPOLOGIES / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", [p for p in SCENARIOS if p.stem not in AUDITED], ids=lambda p: p.stem)
def test_scenario_loses_and_duplicates_nothing(path: Path, tmp_path: Path):
    """(The scenarios in ``AUDITED`` run in ``tests/audit/test_audit.py``, with these checks.)"""
    scenario = load(path)
    report = run(scenario, tmp_path / "run", progress=False)
    assert_scenario_held(scenario, report.to_json(), report.text())
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
