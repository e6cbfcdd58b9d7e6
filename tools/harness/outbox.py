"""A scenario's transactional outbox: its database and its relays.

The database is an SQLite file in the run directory, or a PostgreSQL server of the run's
own (``tools/postgres_server.py``, stopped and started by ``restart_db`` faults). Each
relay is a ``once outbox run`` OS process (SIGKILLed by ``kill_relay``) with the failover
list of its router, writing its outcomes to its delivery journal for the audit. The
application is a client process (``outbox_app.py``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from once.client.outbox.dialect import connect
from once.client.outbox.schema import init, rows_left
from once.tools.postgres_server import Postgres
from once.tools.procs import stop_all

from .cluster import ROOT, Cluster
from .scenario import OutboxSpec

LEASE = 1.5  # seconds: a dead relay's tables are taken over within that
TRANSACTIONS = "CREATE TABLE IF NOT EXISTS harness_tx (id TEXT PRIMARY KEY)"  # (the application's own: outbox_app.py)


class Outbox:
    def __init__(self, spec: OutboxSpec, cluster: Cluster, out: Path) -> None:
        self.spec = spec
        self.cluster = cluster
        self.out = out
        self.pg: Postgres | None = None
        self.url = ""
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.starts: dict[str, int] = {}
        self.homes = dict(spec.relays)

    def start_db(self) -> None:
        if self.spec.db == "postgresql":
            self.pg = Postgres("once harness")
            self.url = self.pg.new_database()
        else:
            self.url = f"sqlite:///{(self.out / 'outbox.db').absolute()}"
        conn = connect(self.url)
        try:
            init(conn, shards=1, partitions=self.spec.partitions)
            conn.cursor().execute(TRANSACTIONS)
            conn.commit()
        finally:
            conn.close()

    def start_relay(self, name: str) -> None:
        n = self.starts[name] = self.starts.get(name, 0) + 1
        routers = [a for url in self.cluster.failover_list(self.homes[name]) for a in ("--router", url)]
        with open(self.out / f"relay-{name}.{n}.log", "wb") as log:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "once.tools.cli", "outbox", "run", "--db", self.url, *routers, "--name", name,
                 "--journal", str(self.out / "journal" / f"publisher-relay-{name}.csv"), "--lease", str(LEASE)],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))

    def kill_relay(self, name: str) -> None:
        proc = self.procs.get(name)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()

    def restart_relay(self, name: str) -> None:
        proc = self.procs.get(name)
        if proc is None or proc.poll() is not None:
            self.start_relay(name)

    def stop_db(self) -> None:
        assert self.pg is not None
        self.pg.stop("fast")

    def start_db_again(self) -> None:
        assert self.pg is not None
        self.pg.start()

    def left(self) -> int | None:
        """Rows in the outbox's tables and its dead letters (None: the database is away)."""
        try:
            return rows_left(self.url)
        except Exception:  # noqa: BLE001 - (down for a restart: asked again later)
            return None

    def tracebacks(self) -> list[str]:
        """Relay logs that hold a traceback (a relay must say its troubles in one line)."""
        return [p.name for p in sorted(self.out.glob("relay-*.log")) if "Traceback" in p.read_text(errors="replace")]

    def stop(self) -> None:
        stop_all(self.procs.values())
        if self.pg is not None:
            self.pg.close()
