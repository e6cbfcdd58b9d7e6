"""What every shipped failover scenario must show, checked where it runs: most run once in
``tests/integration/test_failover_scenarios.py``; those in ``AUDITED`` run once in
``tests/audit/test_audit.py`` instead, through ``once harness --audit`` (the same checks,
and the Spark audit's agreement), so no scenario runs twice in the suite."""

from __future__ import annotations

from typing import Any

from once.records.names import matches
from once.tools.harness.scenario import Scenario

AUDITED = ("subscriber-crash", "mqtt-subscriber-router-dies", "outbox-relay-takeover",
           # (issue 51: the network changing under traffic)
           "router-leaves", "router-joins", "link-added")


def _routers(scenario: Scenario) -> list[str]:
    import yaml

    return list(yaml.safe_load(scenario.topology.read_text())["routers"])


def assert_scenario_held(scenario: Scenario, report: dict[str, Any], text: str) -> None:
    """``report``: the harness's report.json; ``text``: what to show when it fails."""
    assert report["ok"], text
    assert report["accepted"] == scenario.messages * len(scenario.publishers), text
    # each subscriber (a group: its members together) has every message of the topics it matches
    owed = {c.name: scenario.messages * sum(matches(scenario.topic_of(c), scenario.topic_of(p)) for p in scenario.publishers)
            for c in scenario.subscribers}
    owed.update({f"group {c.group}": owed[c.name] for c in scenario.subscribers if c.group})
    assert {s["name"]: s["distinct"] for s in report["subscribers"]} == {
        s["name"]: owed[s["name"]] for s in report["subscribers"]}, text
    # the network changed as the scenario says: every other router heard a stopped one leave,
    # a joiner linked to those it joined through, a link was added at both ends
    changes = set(report.get("network", ()))
    routers = {c.router for c in scenario.publishers + scenario.subscribers} | set(_routers(scenario))
    for f in scenario.faults:
        if f.kind == "stop":
            assert f"{f.target}: leaving the network" in changes, text
            assert {f"{r}: router {f.target} left the network" for r in routers - {f.target}} <= changes, text
        elif f.kind == "join":
            name, *to = f.target
            assert {f"{r}: linked to {name}, which our topology does not name" for r in to} <= changes, text
        elif f.kind in ("link", "unlink"):
            a, b = f.target
            verb = "added" if f.kind == "link" else "removed"
            assert {f"{a}: SIGHUP: link to {b} {verb}", f"{b}: SIGHUP: link to {a} {verb}"} <= changes, text
    router_deaths = [r for r in report["resume"] if r["fault"].startswith("kill ") and "client" not in r["fault"]
                     and "relay" not in r["fault"]]
    for r in router_deaths:
        # resumed after each router's death (how soon is the harness's figure, a measurement:
        # a deadline here failed on a machine busy with other work)
        assert r["seconds"] is not None, text
