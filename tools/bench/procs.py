"""Router processes for the bench: start them on free ports, pin them, read what they cost.

CPU and memory come from ``/proc`` (utime + stime, VmHWM), so the figure is the router's
own, whatever the load clients cost."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from .scenarios import Scenario

ROOT = Path(__file__).resolve().parents[2]
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def two_cores() -> bool:
    return (os.cpu_count() or 1) >= 2 and hasattr(os, "sched_setaffinity")


def pin(cpu: int) -> None:
    if two_cores():
        os.sched_setaffinity(0, {cpu})


def unpin() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()  # (the name may hold spaces)
    return (int(fields[11]) + int(fields[12])) / _TICK


def _status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    raise RuntimeError(f"no {key} for process {pid}")


def rss_kib(pid: int) -> int:
    return _status_kib(pid, "VmRSS:")


def peak_rss_kib(pid: int) -> int:
    return _status_kib(pid, "VmHWM:")


ROOMS = ("router", "linkstate", "records", "client", "outbox", "sim", "tools", "topologies")


def checkout_cli(root: Path, tmp: Path) -> tuple[str, dict[str, str] | None]:
    """The module to run ``once`` from checkout ``root`` with, and the environment for it.

    This tree runs as installed. Another checkout's code must win over the installed
    ``once``: its rooms are linked under ``tmp/<name>/once/`` and that goes first on the
    path (the path's finders come before an editable install's). A checkout from before
    the ``once`` namespace (its rooms were top-level packages) runs from its own folder."""
    if root == ROOT:
        return "once.tools.cli", None
    if "once.tools.cli" not in (root / "pyproject.toml").read_text():
        return "tools.cli", None  # (cwd=root puts its top-level packages first)
    base = tmp / f"checkout-{abs(hash(root))}"
    if not base.exists():
        (base / "once").mkdir(parents=True)
        for room in ROOMS:
            if (root / room).exists():  # (an older checkout may lack a room)
                (base / "once" / room).symlink_to(root / room)
    return "once.tools.cli", dict(os.environ, PYTHONPATH=str(base))


def start_routers(scenario: Scenario, tmp: Path, router_settings: dict[str, Any] | None = None,
                  journal: bool = False, root: Path = ROOT, http: dict[str, str] | None = None,
                  tls: tuple[Path, Path, Path] | None = None) -> tuple[list[subprocess.Popen[str]], dict[str, tuple[str, int]]]:
    """Every router of the scenario's topology as OS processes on free ports; a single router
    is pinned to core 0 (the load clients then take core 1). ``root``: the checkout whose
    router code runs (``--compare`` points it at another git ref's). ``http``: a dict to
    fill with each router's http endpoint (they serve one on a free port). ``tls``:
    (certificate, key, CA): the routers link over TLS and the addresses returned are their
    ``amqps`` listeners."""
    from once.tools.topology_ports import with_free_ports

    # The routers run with the topology's own settings: --credit is the clients' credit.
    topo = with_free_ports(ROOT / "topologies" / scenario.topology, tmp / scenario.topology, router_settings)
    doc = yaml.safe_load(topo.read_text())
    for spec in doc["routers"].values():
        # The endpoint only with --http (given then on the command line): off is off, and a
        # --compare checkout from before the endpoint would refuse the key.
        spec.pop("http", None)
        if tls is not None:
            spec["amqps"] = "127.0.0.1:0"
    if tls is not None:
        doc["tls"] = {"certificate": str(tls[0]), "private_key": str(tls[1]), "ca": str(tls[2])}
        doc.get("auth", {}).pop("router_secret", None)  # (routers authenticate with the certificate)
    topo.write_text(yaml.safe_dump(doc))
    ids = sorted(doc["routers"])
    single = len(ids) == 1 and two_cores()
    procs, addrs = [], {}
    cli, env = checkout_cli(root, tmp)
    for rid in ids:
        cmd = [sys.executable, "-m", cli, "router", str(topo), "--id", rid,
               *(["--journal", str(tmp / "journal")] if journal else []),
               *(["--http", "127.0.0.1:0"] if http is not None else [])]
        if single:
            cmd = ["taskset", "-c", "0", *cmd]  # one router, one core; the clients get the other
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=root,
                                      env=env))
    for rid, proc in zip(ids, procs):
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "ready" not in line:
            for p in procs:
                p.kill()
            raise RuntimeError(f"router {rid} failed to start: {line!r}")
        where = next(w for w in line.split() if w.startswith("amqps://")) if tls is not None else line.split()[3]
        host, port = where.removeprefix("amqps://").removeprefix("amqp://").rsplit(":", 1)
        addrs[rid] = (host, int(port))
        if http is not None:
            http[rid] = next(w for w in line.split() if w.startswith("http://"))
    return procs, addrs


def stop(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


class Meter:
    """The routers' CPU over the measured part of a run (from the publisher's start to its
    last answer), and their peak resident memory."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.started: list[float] = []
        self.cpu = 0.0

    def start(self) -> None:
        self.started = [cpu_seconds(p) for p in self.pids]

    def stop(self) -> None:
        self.cpu = sum(cpu_seconds(p) - s for p, s in zip(self.pids, self.started))

    def cpu_us_per(self, messages: int) -> float:
        return round(self.cpu * 1e6 / messages, 1)

    def peak_rss_mib(self) -> float:
        return round(max(peak_rss_kib(p) for p in self.pids) / 1024, 1)
