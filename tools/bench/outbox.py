"""``once bench outbox``: rows an application commits to the outbox, to rows a subscriber
accepted, through the relay and one router; on PostgreSQL (a server of our own,
``tools/postgres_server.py``) and on SQLite, over a few layouts (partitions x relays).

The application is this process: transactions of 100 rows of 1 KiB (``send_many``), keys
spread over the partitions, as fast as it can or at ``rate`` rows a second. Each body
starts with the monotonic time of its insert; the subscriber (the Proton-C receiver of
``c/``) reads it, so the latency is from the insert in its transaction to the delivery:
commit-to-delivery plus the few milliseconds a transaction of 100 takes to write.
Throughput is the rows over the first insert to the last delivery. A run counts only if it
was exactly-once: the subscriber got every row once (no more: it is stopped only after the
tables are empty), nothing was dead-lettered, the tables end empty.

``--compare REF``: the relays and the router of git REF's checkout run each layout too,
alternating with this tree's in every round (the application, the database and the
subscriber are the same for both).
"""

from __future__ import annotations

import re
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from once.client.outbox.dialect import connect
from once.client.outbox.schema import init, rows_left
from once.client.outbox.send import send_many
from once.tools.exits import CommandError, Exit
from once.tools.postgres_server import Postgres, PostgresUnavailable

from . import cclients
from .cclients import _report
from .procs import ROOT, Meter, checkout_cli

BODY = 1024
PER_TX = 100
KEYS = [f"key-{i}" for i in range(PER_TX)]


@dataclass(frozen=True, slots=True)
class Layout:
    db: str  # "postgresql" or "sqlite"
    partitions: int
    relays: int
    rate: int | None = None  # rows/s the application writes (None: as fast as it can)

    @property
    def label(self) -> str:
        pace = f", app at {self.rate:,}/s" if self.rate else ""
        return f"{self.db}, {self.partitions} partition(s), {self.relays} relay(s){pace}"


DEFAULT = (Layout("postgresql", 1, 1), Layout("postgresql", 2, 1), Layout("postgresql", 2, 2),
           Layout("postgresql", 4, 2), Layout("postgresql", 2, 1, 5000),
           Layout("sqlite", 1, 1), Layout("sqlite", 2, 2), Layout("sqlite", 1, 1, 5000))


@dataclass(frozen=True, slots=True)
class Sample:
    rows_per_s: float
    app_rows_per_s: float
    p50_ms: float
    p99_ms: float
    relay_cpu_us: float  # relay CPU per row (all relays)
    router_cpu_us: float


def _start(cmd: list[str], what: str, root: Path, env: dict[str, str] | None,
           log: Path | None = None) -> tuple[subprocess.Popen[str], str]:
    """A process and its first line (its ready line); its log to ``log``."""
    err = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115 - (the child keeps its own copy)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=root, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise RuntimeError(f"{what} did not start (exit {proc.wait()})")
    return proc, line


def _serving(log: Path) -> int:
    """Tables a relay serves, from its last "serving [...]" log line (every version says it)."""
    lines = re.findall(r"serving \[(.*)\]", log.read_text(errors="replace"))
    return lines[-1].count("(") if lines else 0



def _wait(condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


def run(layout: Layout, rows: int, pg: Postgres | None, bins: Path, tmp: Path, root: Path = ROOT) -> Sample:
    url = pg.new_database() if layout.db == "postgresql" and pg else f"sqlite:///{(tmp / 'outbox.db').absolute()}"
    conn = connect(url)
    shape = init(conn, shards=1, partitions=layout.partitions)
    topo = tmp / "single.yaml"
    topo.write_text("routers:\n  A: {listen: 127.0.0.1:0}\n")
    procs: list[subprocess.Popen[str]] = []
    cli, env = checkout_cli(root, tmp)
    try:
        router, line = _start([sys.executable, "-m", cli, "router", str(topo), "--id", "A"], "the router", root, env)
        procs.append(router)
        router_url = line.split()[3]
        host, port = router_url.removeprefix("amqp://").rsplit(":", 1)
        rx = subprocess.Popen([str(bins / "once-crecv"), host, port, "outbox-bench", "bench-rx", "1000",
                               str(rows + 1)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(rx)
        assert rx.stdout is not None
        if rx.stdout.readline().strip() != "attached":
            raise RuntimeError("the receiver did not attach")
        relays, logs = [], []
        for i in range(layout.relays):
            logs.append(tmp / f"relay-{i}.log")
            relay, _ = _start([sys.executable, "-m", cli, "outbox", "run", "--db", url, "--router", router_url,
                               "--lease", "2"], f"relay {i}", root, env, logs[-1])
            procs.append(relay)
            relays.append(relay)

        # (the work spread before the clock starts: a new relay takes its share within a lease)
        def spread() -> bool:
            counts = [_serving(log) for log in logs]
            return sum(counts) == layout.partitions and (layout.relays > layout.partitions or min(counts) > 0)

        _wait(spread, 30, "the relays' shares")
        relay_meter, router_meter = Meter([r.pid for r in relays]), Meter([router.pid])
        relay_meter.start()
        router_meter.start()
        pad = b"\0" * (BODY - 8)
        t0 = time.monotonic_ns()
        for t in range(rows // PER_TX):
            if layout.rate:
                ahead = t0 + t * PER_TX * 1e9 / layout.rate - time.monotonic_ns()
                if ahead > 0:
                    time.sleep(ahead / 1e9)  # (pacing the application, not waiting for the relay)
            stamp = struct.pack(">Q", time.monotonic_ns())
            send_many(conn, "outbox-bench", [stamp + pad] * PER_TX, keys=KEYS, layout=shape)
            conn.commit()
        t1 = time.monotonic_ns()
        _wait(lambda: rows_left(url) == 0, max(60, rows / 1000), "the tables to empty")
        relay_meter.stop()
        router_meter.stop()
        rx.send_signal(signal.SIGTERM)
        got = _report(rx, "receiver", 30)
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
        conn.close()
    if got["received"] != rows:
        raise RuntimeError(f"{layout.label}: the subscriber got {got['received']} rows of {rows}: not exactly once")
    return Sample(round(rows / ((got["last_ns"] - t0) / 1e9)), round(rows / ((t1 - t0) / 1e9)),
                  round(got["p50_us"] / 1000, 1), round(got["p99_us"] / 1000, 1), relay_meter.cpu_us_per(rows),
                  router_meter.cpu_us_per(rows))


def main(rows: int, rounds: int, layouts: tuple[Layout, ...] = DEFAULT, compare: str | None = None) -> int:
    rows = max(PER_TX, rows // PER_TX * PER_TX)
    bins = cclients.build()
    pg = None
    if any(x.db == "postgresql" for x in layouts):
        try:
            pg = Postgres("once bench outbox")
        except PostgresUnavailable as e:
            raise CommandError(Exit.FAILED, str(e)) from None
    samples: dict[tuple[str, Layout], list[Sample]] = {}
    with tempfile.TemporaryDirectory(prefix="once-bench-outbox-") as top:
        sides = [("new", ROOT)]
        if compare:
            from .compare import remove_worktree, worktree

            worktree(compare, Path(top) / "ref")
            sides.append(("old", Path(top) / "ref"))
        try:
            for r in range(rounds):
                for layout in layouts:
                    for side, root in (sides if r % 2 == 0 else sides[::-1]):
                        with tempfile.TemporaryDirectory(prefix="once-bench-outbox-", dir=top) as d:
                            s = run(layout, rows, pg, bins, Path(d), root)
                        samples.setdefault((side, layout), []).append(s)
                        print(f"round {r + 1} {layout.label}{'' if side == 'new' else f' ({compare})'}: "
                              f"{s.rows_per_s:,.0f} rows/s", file=sys.stderr, flush=True)
        finally:
            if pg is not None:
                pg.close()
            if compare:
                remove_worktree(Path(top) / "ref")
    print(f"outbox -> relay -> one router -> one subscriber (Proton-C), {rows:,} rows of {BODY} B in transactions of "
          f"{PER_TX}, exactly once; {rounds} round(s) (median; min-max)"
          + (f"; relays and router of this tree, then of {compare}" if compare else ""))
    print(f"{'layout':56} {'rows/s':>20} {'app rows/s':>10} {'p50/p99 ms':>14} {'relay us/row':>12} "
          f"{'router us/row':>13}" + (f" {'vs ' + compare:>10}" if compare else ""))
    for layout in layouts:
        for side, _ in sides:
            ss = samples[(side, layout)]
            med = statistics.median(s.rows_per_s for s in ss)
            mid = sorted(ss, key=lambda s: s.rows_per_s)[len(ss) // 2]
            rate = f"{med:,.0f} ({min(s.rows_per_s for s in ss):,.0f}-{max(s.rows_per_s for s in ss):,.0f})"
            label = layout.label if side == "new" else f"  {compare}"
            ratio = ""
            if compare and side == "new":
                ratio = f" {med / statistics.median(s.rows_per_s for s in samples[('old', layout)]):>10.2f}"
            print(f"{label:56} {rate:>20} {mid.app_rows_per_s:>10,.0f} {f'{mid.p50_ms}/{mid.p99_ms}':>14} "
                  f"{mid.relay_cpu_us:>12} {mid.router_cpu_us:>13}{ratio}")
    return 0
