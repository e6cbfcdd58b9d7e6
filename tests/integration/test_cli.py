"""The ``once`` command line as an operator uses it."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import yaml
from support.routers import ROOT, RouterProcess, write_topology


def _once(*args: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tools.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, **kw)


def test_bad_topology_is_one_line_naming_file_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"routers": {"A": {"listen": "127.0.0.1:99999"}}}))
    r = _once("router", str(bad), "--id", "A")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"{bad}: routers.A.listen: expected HOST:PORT with a port from 0 to 65535, got '127.0.0.1:99999'"]


def test_unknown_router_id(tmp_path):
    r = _once("router", str(write_topology(tmp_path)), "--id", "Z")
    assert r.returncode == 2 and "no router 'Z'" in r.stderr


def test_launch_prints_ready_per_router_and_stops_on_sigterm(tmp_path):
    doc = {"routers": {"A": {"listen": "127.0.0.1:0"}, "B": {"listen": "127.0.0.1:0"}}, "links": []}
    topo = tmp_path / "two.yaml"
    topo.write_text(yaml.safe_dump(doc))
    proc = subprocess.Popen([sys.executable, "-m", "tools.cli", "launch", str(topo)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = [proc.stdout.readline().strip() for _ in range(3)]
    assert lines[0].startswith("router A ready amqp://127.0.0.1:")
    assert lines[1].startswith("router B ready amqp://127.0.0.1:")
    assert lines[2].startswith("2 router(s) ready")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "all routers stopped" in out


def test_send_and_recv_commands(router: RouterProcess):
    recv = subprocess.Popen([sys.executable, "-m", "tools.cli", "recv", "cli-topic", "--url", router.url, "--count", "3",
                             "--timeout", "20"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert recv.stderr.readline().startswith("subscribed to cli-topic")
    sent = _once("send", "cli-topic", "one", "two", "three", "--url", router.url)
    assert sent.returncode == 0 and "sent 3, accepted 3" in sent.stdout
    out, _ = recv.communicate(timeout=30)
    assert out.split() == ["one", "two", "three"]


def test_once_help_lists_the_commands():
    r = _once("--help")
    for cmd in ("router", "launch", "send", "recv", "bench"):
        assert cmd in r.stdout


def test_launch_rejects_bad_topology_before_starting(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("routers: 5\n")
    r = _once("launch", str(bad))
    assert r.returncode == 2 and r.stderr.strip() == f"{bad}: routers: expected a mapping, got 5"


def test_launch_mesh3_reports_each_router_ready_with_its_neighbours(tmp_path):
    from tools.topology_ports import with_free_ports

    topo = with_free_ports(ROOT / "topologies" / "mesh3.yaml", tmp_path / "mesh3.yaml")
    proc = subprocess.Popen([sys.executable, "-m", "tools.cli", "launch", str(topo)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = [proc.stdout.readline().strip() for _ in range(4)]
    for line, (rid, neighbours) in zip(lines, [("A", "B,C"), ("B", "A,C"), ("C", "A,B")]):
        assert line.startswith(f"router {rid} ready amqp://127.0.0.1:") and line.endswith(f"neighbours {neighbours}")
    assert lines[3].startswith("3 router(s) ready")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "all routers stopped" in out
