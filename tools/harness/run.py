"""``once harness``: run a scenario's routers and clients, apply its faults, check the records.

Everything the run produces goes under ``--out DIR``: the topology with its ports, each
router's log (one per start), each client's records and output, and ``report.json``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from once.records.names import matches
from once.tools.procs import stop_all

from .check import EXACTLY_ONCE, Report, check, read_records
from .cluster import ROOT, Cluster
from .outbox import Outbox
from .scenario import LINK_FAULTS, ClientSpec, Fault, Scenario


class Clients:
    """The scenario's client processes (each its own OS process, killed with SIGKILL)."""

    def __init__(self, scenario: Scenario, cluster: Cluster, out: Path) -> None:
        self.scenario = scenario
        self.cluster = cluster
        self.out = out
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.starts: dict[str, int] = {}
        self.specs = {c.name: c for c in scenario.publishers + scenario.subscribers}
        self.extra: dict[str, Any] = {}  # (what an outbox application is told besides)

    def start(self, name: str) -> None:
        c = self.specs[name]
        kind = "pub" if c in self.scenario.publishers else "sub"
        spec = {"name": c.name, "client": c.client, "topic": self.scenario.topic_of(c), "out": str(self.out),
                "routers": self.cluster.failover_list(c.router, c.client == "mqtt"), "messages": self.scenario.messages,
                "rate": self.scenario.rate, "group": c.group, "exclusive": c.exclusive, **self.extra}
        n = self.starts.get(name, 0) + 1
        self.starts[name] = n
        spec["life"] = n  # (1: its first process; more: the harness restarted it)
        with open(self.out / f"{name}.{n}.out", "wb") as stdout, open(self.out / f"{name}.{n}.err", "wb") as stderr:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "once.tools.harness.clients", kind, json.dumps(spec)], cwd=ROOT,
                stdout=stdout, stderr=stderr, env=dict(os.environ, PYTHONUNBUFFERED="1"))

    def output(self, name: str) -> bytes:
        return (self.out / f"{name}.{self.starts[name]}.out").read_bytes()

    def wait_attached(self, names: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for name in names:
            while b"attached" not in self.output(name):
                if self.procs[name].poll() is not None:
                    raise RuntimeError(f"client {name} exited: {self.errors(name)}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"client {name} did not attach within {timeout:g}s")
                time.sleep(0.02)

    def errors(self, name: str) -> str:
        return (self.out / f"{name}.{self.starts[name]}.err").read_text()[-800:]

    def kill(self, name: str) -> None:
        proc = self.procs.get(name)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()

    def running(self, name: str) -> bool:
        return self.procs[name].poll() is None

    def stop(self) -> None:
        stop_all(self.procs.values())


def _count_accepted(out: Path, name: str) -> int:
    """Messages owed to the subscribers: accepted, or (an outbox application's) committed."""
    path = out / f"pub-{name}.jsonl"
    if not path.exists():
        return 0
    data = path.read_bytes()
    return data.count(b'"accepted"') + data.count(b'"committed"')


def _received_ids(out: Path, c: ClientSpec) -> set[str]:
    if c.client == "once":
        path = out / f"sub-{c.name}.db"
        if not path.exists():
            return set()
        try:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.2)
            try:
                return {r[0] for r in db.execute("SELECT DISTINCT id FROM received")}
            finally:
                db.close()
        except sqlite3.OperationalError:
            return set()
    path = out / f"sub-{c.name}.jsonl"
    if not path.exists():
        return set()
    lines = (json.loads(line) for line in path.read_bytes().splitlines() if line.endswith(b"}"))
    return {d["id"] for d in lines if "id" in d}  # (not an MQTT subscriber's PUBREL lines)


def _received(out: Path, scenario: Scenario) -> list[tuple[str, int, str]]:
    """Distinct messages each plain subscriber, and each group (its members together), has;
    and the topic (or pattern) it subscribed to."""
    units: dict[str, set[str]] = {}
    topics: dict[str, str] = {}
    for c in scenario.subscribers:
        unit = f"group {c.group}" if c.group else c.name
        units.setdefault(unit, set()).update(_received_ids(out, c))
        topics[unit] = scenario.topic_of(c)
    return [(name, len(ids), topics[name]) for name, ids in units.items()]


def run(scenario: Scenario, out: Path, *, progress: bool = True, stall: float = 30.0,
        attach_timeout: float = 30.0) -> Report:
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty: a run's records must not mix with an earlier run's")
    out.mkdir(parents=True, exist_ok=True)
    say = (lambda msg: print(msg, file=sys.stderr, flush=True)) if progress else (lambda msg: None)
    proxied = {f.target for f in scenario.faults if f.kind in LINK_FAULTS}
    mqtt = any(c.client == "mqtt" for c in scenario.publishers + scenario.subscribers)
    manage = any(f.kind == "drain" for f in scenario.faults)
    cluster = Cluster(scenario.topology, out, scenario.settings, proxied, mqtt, manage)  # type: ignore[arg-type]
    clients = Clients(scenario, cluster, out)
    outbox = Outbox(scenario.outbox, cluster, out) if scenario.outbox else None
    fault_log: list[dict[str, Any]] = []
    errors: list[str] = []
    left: int | None = 0
    rss: dict[str, int] = {}
    boot_s = 0.0
    booted = time.monotonic()
    try:
        cluster.start(timeout=max(20.0, 1.5 * len(cluster.ids)))  # (a network of many: they start together)
        boot_s = time.monotonic() - booted
        say(f"harness {scenario.name}: routers {', '.join(cluster.ids)} up; results in {out}")
        subs = [c.name for c in scenario.subscribers]
        for name in subs:
            clients.start(name)
        clients.wait_attached(subs, attach_timeout)
        if outbox is not None:
            outbox.start_db()
            clients.extra = {"db": outbox.url, "per_tx": outbox.spec.per_tx,
                             "rollback_every": outbox.spec.rollback_every}
            for name, _ in outbox.spec.relays:
                outbox.start_relay(name)
            say(f"  outbox on {outbox.spec.db}, relays {', '.join(n for n, _ in outbox.spec.relays)}")
        for c in scenario.publishers:
            clients.start(c.name)
        t0 = time.monotonic()
        pending: list[tuple[float, Fault, str]] = [(f.at, f, "apply") for f in scenario.faults]
        pending += [(f.at + f.duration, f, "heal") for f in scenario.faults
                    if f.kind in (*LINK_FAULTS, "freeze", "restart_db")]
        pending.sort(key=lambda p: p[0])
        # (a router stopped cleanly is part of the run until it has: its leave, its log)
        stopping = {f.target for f in scenario.faults if f.kind == "stop"} - {
            f.target for f in scenario.faults if f.kind == "restart"}
        last_progress = time.monotonic()
        last_counts: tuple[int, ...] = ()
        next_report = t0
        while True:
            now = time.monotonic() - t0
            while pending and pending[0][0] <= now:
                _, f, action = pending.pop(0)
                _apply(f, action, cluster, clients, outbox)
                if action == "apply":
                    fault_log.append({"t": round(now, 3), "at": time.time(), "fault": f.describe(),
                                      "router": f.target if f.kind == "kill" else None,
                                      "client": f.target if f.kind in ("kill_client", "restart_client") else None,
                                      # (with an outbox, the subscribers show every pause: the relays'
                                      # outcomes are in their journals alone, the application's
                                      # commits go on whatever fails)
                                      "streams": [c.name for c in scenario.subscribers] if scenario.outbox
                                      else None})
                say(f"  {now:6.2f}s  {action} {f.describe()}")
            by_pub = {c.name: (_count_accepted(out, c.name), scenario.topic_of(c)) for c in scenario.publishers}
            accepted = sum(n for n, _ in by_pub.values())
            units = _received(out, scenario)
            received = [n for _, n, _ in units]
            # (each owed what its publishers' topics that it matches had accepted)
            owed = [sum(n for n, t in by_pub.values() if matches(topic, t)) for _, _, topic in units]
            counts = (accepted, *received)
            if counts != last_counts:
                last_counts, last_progress = counts, time.monotonic()
            if time.monotonic() >= next_report:
                next_report += 1.0
                say(f"  {now:6.2f}s  accepted {accepted}/{scenario.messages * len(scenario.publishers)}  "
                    + "  ".join(f"{name} {n}" for name, n, _ in units))
            pubs_done = all(not clients.running(c.name) for c in scenario.publishers)
            for c in scenario.publishers:
                if not clients.running(c.name) and clients.procs[c.name].returncode != 0:
                    errors.append(f"publisher {c.name} exited with {clients.procs[c.name].returncode}: "
                                  f"{clients.errors(c.name)}")
            if errors:
                break
            done = pubs_done and not pending and all(n >= want for n, want in zip(received, owed)) \
                and not any(cluster.alive(t) for t in stopping)  # type: ignore[arg-type]
            if done and outbox is not None:
                left = outbox.left()  # (the tables end empty: every row's outcome came and it was deleted)
                done = left == 0
            if done:
                break
            if time.monotonic() - last_progress > stall and not pending:
                errors.append(f"no progress for {stall:g}s: stopped waiting (router state dumped in the logs)"
                              + (f"; {left} row(s) left in the outbox" if outbox is not None and left else ""))
                cluster.dump_state()
                break
            time.sleep(0.1)
        say(f"  {time.monotonic() - t0:6.2f}s  finished")
    finally:
        rss = cluster.rss_kib()
        clients.stop()
        if outbox is not None:
            errors += [f"{log} holds a traceback" for log in outbox.tracebacks()]
            outbox.stop()
        cluster.stop()
    _finish_journals(out, scenario)
    (out / "journal" / "faults.json").write_text(json.dumps(fault_log, indent=1))
    (out / "journal" / "clients.json").write_text(json.dumps(
        {c.name: {"role": "publisher" if c in scenario.publishers else "subscriber", "topic": scenario.topic_of(c),
                  "guarantee": "exactly-once" if c.client in EXACTLY_ONCE else "at-least-once", "router": c.router,
                  "group": c.group}
         for c in scenario.publishers + scenario.subscribers}
        | {name: {"role": "relay", "router": router} for name, router in (scenario.outbox.relays if scenario.outbox
                                                                          else ())}, indent=1))
    pubs, subs_records = read_records(out, {c.name: c.client for c in scenario.subscribers})
    homes = {c.name: c.router for c in scenario.publishers + scenario.subscribers}
    report = check(scenario.name, pubs, subs_records, fault_log, homes,
                   retrying={c.name for c in scenario.publishers if c.client not in EXACTLY_ONCE}, groups=scenario.groups,
                   topics={c.name: scenario.topic_of(c) for c in scenario.publishers + scenario.subscribers})
    report.errors += errors
    report.network = network_changes(out)
    report.boot_s, report.rss_kib = boot_s, rss
    (out / "report.json").write_text(json.dumps(report.to_json(), indent=2))
    return report


# What a router logs when the network changes while it runs (``router/network.py``, ``Router._relink``)
CHANGES = re.compile(r"router (\w+): (router \w+ left the network|leaving the network|linked to \w+, which our "
                     r"topology does not name|SIGHUP: link to \w+ (?:added|removed))")


def network_changes(out: Path) -> list[str]:
    """Each router's log lines that say the network changed: "A: router B left the network"."""
    found = set()
    for log in sorted(out.glob("router-*.log")):
        for m in CHANGES.finditer(log.read_text(errors="replace")):
            found.add(f"{m.group(1)}: {m.group(2)}")
    return sorted(found)


def _finish_journals(out: Path, scenario: Scenario) -> None:
    """A once subscriber killed (and not restarted) may have committed acceptances its
    journal does not show yet: write them, as its next start would have."""
    from .clients import RECEIVED, catch_up_journal

    (out / "journal").mkdir(exist_ok=True)
    for c in scenario.subscribers:
        path = out / f"sub-{c.name}.db"
        if c.client == "once" and path.exists():
            db = sqlite3.connect(path)
            try:
                db.execute(RECEIVED)
                catch_up_journal(out, c.name, scenario.topic_of(c), db).close()
            finally:
                db.close()


def _apply(f: Fault, action: str, cluster: Cluster, clients: Clients, outbox: Outbox | None) -> None:
    if f.kind in ("kill_relay", "restart_relay", "restart_db"):
        assert outbox is not None  # (the scenario's parser saw to it)
        if f.kind == "kill_relay":
            outbox.kill_relay(f.target)  # type: ignore[arg-type]
        elif f.kind == "restart_relay":
            outbox.restart_relay(f.target)  # type: ignore[arg-type]
        elif action == "apply":
            outbox.stop_db()
        else:
            outbox.start_db_again()
    elif f.kind == "kill":
        cluster.kill(f.target)  # type: ignore[arg-type]
    elif f.kind == "drain":
        cluster.drain(f.target)  # type: ignore[arg-type]
    elif f.kind == "stop":
        cluster.stop_router(f.target)  # type: ignore[arg-type]
    elif f.kind in ("link", "unlink"):
        a, b = f.target
        cluster.relink(a, b, f.kind == "link")
    elif f.kind == "join":
        name, *to = f.target
        cluster.join(name, tuple(to))
    elif f.kind == "restart":
        cluster.start(f.target, wait=False)  # type: ignore[arg-type]
    elif f.kind in LINK_FAULTS:
        a, b = f.target
        if action == "heal":
            cluster.heal(a, b)
        elif f.kind == "cut":
            cluster.cut(a, b)
        elif f.kind == "slow":
            cluster.slow(a, b, f.latency)
        else:
            cluster.quiet(a, b)
    elif f.kind == "freeze":
        if action == "apply":
            cluster.freeze(f.target)  # type: ignore[arg-type]
        else:
            cluster.thaw(f.target)  # type: ignore[arg-type]
    elif f.kind == "kill_client":
        clients.kill(f.target)  # type: ignore[arg-type]
    elif f.kind == "restart_client":
        if not clients.running(f.target):  # type: ignore[arg-type]
            clients.start(f.target)  # type: ignore[arg-type]
