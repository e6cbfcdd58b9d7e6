"""``once bench`` with C clients, ``once bench memory`` and ``--compare``: they run and report.

Figures are measured, never asserted (a test cannot know how fast this machine is); what
is asserted is that every message was counted and each column is there.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from once.tools.bench import attach, memory
from support.routers import ROOT


def _once(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "once.tools.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def _rows(out: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in out.splitlines()[1:] if line.strip()}


def test_the_c_clients_are_built_and_measure_fan_out_and_one_in_flight():
    r = _once("bench", "--clients", "c", "single-1to3", "single-ping", "--messages", "3000")
    assert r.returncode == 0, r.stderr[-2000:]
    header, *_ = r.stdout.splitlines()
    assert header.split()[:3] == ["scenario", "clients", "msgs/s"] and "cpu us/msg" in header and "peak MiB" in header
    rows = _rows(r.stdout)
    fan, ping = rows["single-1to3"], rows["single-ping"]
    assert fan[1] == "c" and int(fan[2]) > 0 and fan[-1] == "3000"  # every subscriber got all 3000 (checked by bench)
    assert float(fan[5]) > 0 and float(fan[7]) > 0 and float(fan[8]) > 0  # e2e p50, router CPU, peak RSS
    assert ping[-1] == "3000" and float(ping[3]) < float(fan[3])  # one in flight queues nothing


def test_c_clients_over_tls_through_a_line_of_routers_linked_over_mutual_tls():
    r = _once("bench", "--clients", "c", "--tls", "line3-1to1", "--messages", "3000")
    assert r.returncode == 0, r.stderr[-2000:]
    line = _rows(r.stdout)["line3-1to1"]
    assert line[1] == "c" and int(line[2]) > 0 and line[-1] == "3000"
    refused = _once("bench", "--tls", "single-1to1", "--messages", "10")
    assert refused.returncode == 2 and "--tls needs --clients c" in refused.stderr


def test_a_group_is_measured_with_c_clients_each_member_a_share():
    r = _once("bench", "--clients", "c", "single-group4", "--messages", "4000")
    assert r.returncode == 0, r.stderr[-2000:]
    line = next(line for line in r.stdout.splitlines() if line.startswith("single-group4"))
    shares = [int(x.rstrip("%")) for x in line.split("shares")[1].split()]
    assert len(shares) == 4 and 98 <= sum(shares) <= 102 and all(s > 0 for s in shares)


def test_memory_per_held_delivery_is_measured_by_body_size():
    held = memory.measure({100: 2000, 4096: 2000})
    assert [(h.body, h.deliveries) for h in held] == [(100, 2000), (4096, 2000)]
    # holding 2000 x 4 KiB grows the router by at least the payload it holds
    assert held[1].grew_kib * 1024 >= 4096 * 2000 * 0.9
    assert "per delivery" in memory.report(held).splitlines()[0]


def test_an_attach_storm_is_measured_with_and_without_a_policy(monkeypatch):
    monkeypatch.setattr(attach, "CONNECTIONS", 100)  # (every link answered, or it times out)
    storms = attach.measure(rounds=1, compare=None)
    assert [(s.side, s.policy) for s in storms] == [("this tree", False), ("this tree", True)]
    assert all(s.cpu >= 0 and s.seconds > 0 for s in storms)  # (figures measured, not asserted)
    lines = attach.report(storms).splitlines()
    assert "router cpu s" in lines[0] and len(lines) == 3


def test_compare_runs_another_ref_back_to_back():
    r = _once("bench", "--compare", "HEAD", "single-1to1", "--messages", "2000", "--rounds", "1")
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout.splitlines()
    assert "vs HEAD" in out[0]
    row = next(line.split() for line in out if line.startswith("single-1to1"))
    assert float(row[3]) > 0  # the throughput ratio new/old
    assert "round 1/1, HEAD" in r.stderr


def test_refs_are_looked_up_in_a_checkout_of_once_not_any_git_repository(tmp_path):
    """CI's Python is pyenv's, a git clone: an installed ``once`` sits in site-packages inside
    that repository, whose HEAD has nothing of ours (``--compare HEAD`` checked pyenv out)."""
    from once.tools.bench.compare import _repository
    from once.tools.exits import CommandError

    other = tmp_path / "pyenv"
    (other / "lib").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    assert _repository((other / "lib", ROOT)) == ROOT
    with pytest.raises(CommandError, match="inside a git checkout of once"):
        _repository((other / "lib",))


def test_compare_names_a_bad_ref_in_one_line():
    r = _once("bench", "--compare", "no-such-ref", "--messages", "100")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and "--compare no-such-ref: not a commit" in r.stderr


def test_the_core_loops_run_against_another_checkout():
    """``once bench core --compare HEAD``: the same five loops over this tree's core and a
    checkout's (the committed one), each with a figure and a ratio."""
    r = _once("bench", "core", "--compare", "HEAD", "--rounds", "1", "--messages", "2000")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = _rows(r.stdout.split("\n", 1)[1])
    assert set(rows) == {"local-1to1", "local-1to3", "root-hop", "transit", "destination"}, r.stdout
    for name, (_, new, old, ratio) in rows.items():
        assert float(new) > 0 and float(old) > 0 and float(ratio) > 0, name


def test_against_writes_a_dispatch_configuration_from_the_topology_and_refuses_what_it_cannot_run(tmp_path):
    """The peer router's configuration (the peer itself is built by the user, not here):
    every router a client listener, an inter-router listener and the dialling side of each
    link, one worker, the bench's topics multicast; a bad --against or a group scenario is
    one line."""
    import yaml
    from once.tools.bench.peer import _config, parse, start
    from once.tools.bench.scenarios import SCENARIOS
    from once.tools.exits import CommandError
    from once.tools.topology_ports import with_free_ports

    topo = with_free_ports(ROOT / "topologies" / "line3.yaml", tmp_path / "line3.yaml")
    doc = yaml.safe_load(topo.read_text())
    a, b = _config("A", doc, tmp_path / "a.log"), _config("B", doc, tmp_path / "b.log")
    port = doc["routers"]["B"]["inter_router"].rsplit(":", 1)[1]
    assert "id: A" in a and "workerThreads: 1" in a and "role: normal" in a
    assert f"port: {port}\n    role: inter-router" in a and "connector {" in a  # A dials B
    assert b.count("connector {") == 1 and f"port: {port}\n    role: inter-router" in b  # B dials C, listens for A
    assert all(f"prefix: bench-{name}\n    distribution: multicast" in a for name in SCENARIOS)
    with pytest.raises(CommandError, match="expected qdrouterd=PATH"):
        parse("artemis=/x")
    with pytest.raises(CommandError, match="no such file"):
        parse(f"qdrouterd={tmp_path / 'none'}")
    with pytest.raises(CommandError, match="consumer groups and idle links are ours alone"):
        start(tmp_path / "none", SCENARIOS["single-group4"], tmp_path)
