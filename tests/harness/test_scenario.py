"""Scenario files: every shipped one loads; a bad one fails with one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from once.tools.cli import main
from once.tools.harness.scenario import TOPOLOGIES, ScenarioError, load, parse, randomized

SHIPPED = sorted((TOPOLOGIES / "scenarios").glob("*.yaml"))


def test_the_issue_scenarios_are_shipped():
    names = {p.stem for p in SHIPPED}
    assert names == {"publisher-router-dies", "subscriber-router-dies", "intermediate-router-dies",
                     "two-routers-die", "subscriber-crash", "link-flap", "proton-publisher-router-dies",
                     "mqtt-publisher-router-dies", "mqtt-subscriber-router-dies", "mqtt-group-router-dies",
                     "group-member-killed", "exclusive-active-dies", "group-router-dies", "links-slow-and-quiet",
                     "outbox-relay-killed", "outbox-relay-takeover", "outbox-database-restarts", "router-drained",
                     "router-leaves", "router-joins", "link-added", "edge-uplink-dies"}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_scenarios_load(path: Path):
    s = load(path)
    assert s.faults and s.publishers and s.subscribers


BASE = {"topology": "line3.yaml", "publishers": [{"name": "p", "router": "A"}],
        "subscribers": [{"name": "s", "router": "C"}]}


@pytest.mark.parametrize(("change", "message"), [
    ({"topology": "nope.yaml"}, "topology: no such file 'nope.yaml'"),
    ({"messages": 0}, "messages: expected a positive integer"),
    ({"publishers": [{"name": "p", "router": "Z"}]}, "publishers[0]: expected {name: ..., router: one of"),
    ({"subscribers": [{"name": "s", "router": "C", "client": "rhea"}]}, "subscribers[0].client: expected one of"),
    ({"faults": [{"at": 1, "kill": "Z"}]}, "faults[0].kill: no router 'Z'"),
    ({"faults": [{"at": 1, "cut": ["A", "C"]}]}, "faults[0].cut: expected a link of the topology"),
    ({"faults": [{"at": 1, "kill": "A", "restart": "A"}]}, "faults[0]: name exactly one of"),
    ({"faults": [{"at": 1, "kill_client": "p"}]}, "faults[0].kill_client: no subscriber 'p'"),
    ({"colour": "red"}, "colour: unknown key"),
    ({"publishers": [{"name": "p", "router": "A", "topic": "m/+"}]}, "publishers[0].topic: 'm/+' is a pattern"),
    ({"subscribers": [{"name": "s", "router": "C", "topic": "m/#/x"}]}, "subscribers[0].topic: 'm/#/x': '#' may only"),
    ({"outbox": {"relays": [{"name": "r", "router": "A"}]}}, "outbox: an outbox section goes with one publisher"),
    ({"publishers": [{"name": "p", "router": "A", "client": "outbox"}]}, "outbox: an outbox section goes with one"),
    ({"publishers": [{"name": "p", "router": "A", "client": "outbox"}], "outbox": {"db": "mysql", "relays": []}},
     "outbox.db: expected sqlite or postgresql, got 'mysql'"),
    ({"publishers": [{"name": "p", "router": "A", "client": "outbox"}], "outbox": {"relays": []}},
     "outbox.relays: expected a non-empty list of {name, router: one of ['A', 'B', 'C']}"),
    ({"publishers": [{"name": "p", "router": "A", "client": "outbox"}],
      "outbox": {"relays": [{"name": "r", "router": "A"}], "partitions": 0}}, "outbox.partitions: expected an integer >= 1"),
    ({"publishers": [{"name": "p", "router": "A", "client": "outbox"}], "outbox": {"relays": [{"name": "r", "router": "A"}]},
      "faults": [{"at": 1, "restart_db": True}]}, "faults[0].restart_db: a database restart needs outbox.db: postgresql"),
    ({"publishers": [{"name": "p", "router": "A", "client": "outbox"}], "outbox": {"relays": [{"name": "r", "router": "A"}]},
      "faults": [{"at": 1, "kill_relay": "q"}]}, "faults[0].kill_relay: no relay 'q'"),
    ({"subscribers": [{"name": "s", "router": "C", "client": "outbox"}]}, "subscribers[0].client: expected one of"),
    ({"faults": [{"at": 1, "stop": "Z"}]}, "faults[0].stop: no router 'Z'"),
    ({"faults": [{"at": 1, "link": ["A", "Z"]}]}, "faults[0].link: expected two routers of the topology"),
    ({"faults": [{"at": 1, "unlink": ["A", "A"]}]}, "faults[0].unlink: expected two routers of the topology"),
    ({"faults": [{"at": 1, "join": "B", "to": ["A"]}]}, "faults[0].join: expected the name of a router no file"),
    ({"faults": [{"at": 1, "join": "D", "to": ["Z"]}]}, "faults[0].to: expected routers of the topology"),
    ({"faults": [{"at": 1, "kill": "D"}]}, "faults[0].kill: no router 'D'"),
])
def test_bad_scenarios_fail_naming_the_field(change: dict, message: str):
    with pytest.raises(ScenarioError) as e:
        parse({**BASE, **change}, "bad", "bad.yaml")
    assert str(e.value).startswith(f"bad.yaml: {message}") and "\n" not in str(e.value)


def test_cli_reports_a_bad_file_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    bad = tmp_path / "bad.yaml"
    bad.write_text("topology: line3.yaml\nmessages: [1\n")
    assert main(["harness", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{bad}: not valid YAML") and "\n" not in err


def test_random_schedules_repeat_by_seed_and_heal_every_fault():
    a, b, c = randomized(7), randomized(7), randomized(8)
    assert a == b and a.faults != c.faults
    for s in (a, c):
        kills = [f.target for f in s.faults if f.kind == "kill"]
        restarts = [f.target for f in s.faults if f.kind == "restart"]
        assert sorted(kills) == sorted(restarts)
        assert all(f.duration > 0 for f in s.faults if f.kind == "cut")


def test_random_schedule_takes_a_topology_by_name_or_path():
    assert randomized(3, topology="mesh3.yaml") == randomized(3, topology=str(TOPOLOGIES / "mesh3.yaml"))


@pytest.mark.parametrize("topology, says", [("nope.yaml", "--topology: no such file 'nope.yaml'"),
                                            ("single.yaml", "needs at least two linked routers")])
def test_a_random_schedule_on_a_bad_topology_is_a_one_line_error(topology: str, says: str,
                                                                  capsys: pytest.CaptureFixture[str]):
    assert main(["harness", "--random", "--seed", "1", "--topology", topology]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1


def test_random_freezes_stop_routers_for_a_while_and_leave_the_rest_of_the_schedule_alone():
    """``--freeze``: routers SIGSTOPped and continued (issue 24's soaks); the seed's other
    faults are the same with or without them."""
    plain, frozen = randomized(21), randomized(21, freezes=True)
    freezes = [f for f in frozen.faults if f.kind == "freeze"]
    assert 1 <= len(freezes) <= 3 and all(0.5 <= f.duration <= 6.0 for f in freezes)
    assert all(f.target in ("A", "B", "C", "D", "E") for f in freezes)
    assert [f for f in frozen.faults if f.kind != "freeze"] == list(plain.faults)
    assert "SIGSTOP" in freezes[0].describe()


def test_a_scenario_file_may_freeze_a_router():
    doc = {"topology": "line3.yaml", "publishers": [{"name": "p", "router": "A"}],
           "subscribers": [{"name": "s", "router": "C"}], "faults": [{"at": 1.0, "freeze": "B", "for": 2.5}]}
    s = parse(doc, "x", "x.yaml")
    assert [(f.kind, f.target, f.duration) for f in s.faults] == [("freeze", "B", 2.5)]
    with pytest.raises(ScenarioError, match="no router"):
        parse({**doc, "faults": [{"at": 1.0, "freeze": "Z"}]}, "x", "x.yaml")


def test_random_link_faults_slow_or_quiet_links_and_leave_the_rest_of_the_schedule_alone():
    """``--link-faults``: inter-router links slowed or gone quiet through the proxy (issue 24's
    soaks); the seed's other faults are the same with or without them."""
    plain, flaky = randomized(21), randomized(21, link_faults=True)
    extra = [f for f in flaky.faults if f.kind in ("slow", "quiet")]
    assert 1 <= len(extra) <= 3 and [f for f in flaky.faults if f.kind not in ("slow", "quiet")] == list(plain.faults)
    links = {("A", "B"), ("B", "C"), ("C", "D"), ("D", "E"), ("A", "E")}
    assert all(f.target in links for f in extra)
    assert all(0.005 <= f.latency <= 0.08 and 1.0 <= f.duration <= 5.0 for f in extra if f.kind == "slow")
    assert all(0.5 <= f.duration <= 4.0 for f in extra if f.kind == "quiet")


def test_random_clients_are_drawn_from_the_kinds_asked_for_and_leave_the_rest_of_the_schedule_alone():
    """``--clients once,proton,mqtt``: standard AMQP and MQTT QoS 2 clients in the soaks (issue
    48), drawn apart: the seed's routers and faults are the same whatever the clients."""
    plain = randomized(21, groups=True)
    kinds = {c.client for s in range(21, 41) for c in (lambda x: x.publishers + x.subscribers)(
        randomized(s, groups=True, clients=("once", "proton", "mqtt")))}
    assert kinds == {"once", "proton", "mqtt"}
    mixed = randomized(21, groups=True, clients=("proton", "mqtt"))
    assert mixed.faults == plain.faults
    assert [(c.name, c.router, c.group) for c in mixed.publishers + mixed.subscribers] == [
        (c.name, c.router, c.group) for c in plain.publishers + plain.subscribers]
    assert {c.client for c in mixed.publishers + mixed.subscribers} <= {"proton", "mqtt"}
    with pytest.raises(ScenarioError, match="--clients"):
        randomized(21, clients=("rabbit",))


def test_a_scenario_file_may_slow_a_link_or_make_it_quiet():
    doc = {"topology": "line3.yaml", "publishers": [{"name": "p", "router": "A"}],
           "subscribers": [{"name": "s", "router": "C"}],
           "faults": [{"at": 1.0, "slow": ["C", "B"], "for": 2.0, "latency": 0.02}, {"at": 3.0, "quiet": ["A", "B"]}]}
    s = parse(doc, "x", "x.yaml")
    assert [(f.kind, f.target, f.duration, f.latency) for f in s.faults] == [
        ("slow", ("B", "C"), 2.0, 0.02), ("quiet", ("A", "B"), 1.0, 0.0)]
    assert "20 ms" in s.faults[0].describe() and "held" in s.faults[1].describe()
    with pytest.raises(ScenarioError, match="latency"):
        parse({**doc, "faults": [{"at": 1.0, "slow": ["A", "B"], "latency": 9}]}, "x", "x.yaml")
    with pytest.raises(ScenarioError, match="a link of the topology"):
        parse({**doc, "faults": [{"at": 1.0, "quiet": ["A", "C"]}]}, "x", "x.yaml")


def test_a_client_may_name_its_own_topic_and_a_subscriber_a_pattern():
    s = parse({**BASE, "topic": "m/1", "subscribers": [{"name": "s", "router": "C", "topic": "m/+"},
                                                        {"name": "t", "router": "B"}]}, "ok", "ok.yaml")
    assert [s.topic_of(c) for c in (*s.publishers, *s.subscribers)] == ["m/1", "m/+", "m/1"]


def test_a_router_that_joins_may_be_named_by_later_faults():
    s = parse({**BASE, "faults": [{"at": 1, "join": "D", "to": ["A", "C"]}, {"at": 2, "stop": "D"},
                                  {"at": 3, "link": ["C", "A"]}]}, "ok", "ok.yaml")
    assert [(f.kind, f.target) for f in s.faults] == [("join", ("D", "A", "C")), ("stop", "D"), ("link", ("A", "C"))]
    assert [f.describe() for f in s.faults] == ["router D joins through A, C", "stop D (SIGTERM: it leaves the network)",
                                                "add link A-C (SIGHUP)"]
