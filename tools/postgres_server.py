"""A PostgreSQL server of our own for the outbox's tests and bench: Debian's
``postgresql`` (installed when missing), ``initdb`` and ``pg_ctl`` in a temporary
directory, on a free port of 127.0.0.1. PostgreSQL refuses to run as root: as root, the
server runs as the ``postgres`` user the package creates. Each user of it gets a
database of its own."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from .debian import apt_install
from .topology_ports import free_port

USER = "postgres"  # (the package's system user: the server's, when we are root)


class PostgresUnavailable(Exception):
    """No PostgreSQL here and none could be installed (one line: what to do)."""


def _bin(install: Callable[[], None]) -> Path:
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if versions:
        return Path(versions[-1]).parent
    install()
    if not (glob.glob("/usr/lib/postgresql/*/bin/initdb") or shutil.which("initdb")):
        raise PostgresUnavailable("apt-get installed postgresql, and there is no initdb")
    return _bin(lambda: None)


def _apt(needed_by: str) -> Callable[[], None]:
    def install() -> None:
        why = apt_install("postgresql", needed_by)
        if why:
            raise PostgresUnavailable(why)
    return install


class Postgres:
    def __init__(self, needed_by: str = "the outbox", install: Callable[[], None] | None = None) -> None:
        self.bin = _bin(install or _apt(needed_by))
        self.dir = Path(tempfile.mkdtemp(prefix="once-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.root = os.geteuid() == 0
        if self.root:
            shutil.chown(self.dir, USER, USER)
        self._run("initdb", "-D", str(self.data), "-U", "once", "-A", "trust", "-E", "UTF8", "--no-sync")
        self.start()
        self.databases = 0

    def _run(self, tool: str, *args: str) -> None:
        cmd = [str(self.bin / tool), *args]
        if self.root:
            cmd = ["runuser", "-u", USER, "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed: {done.stderr.strip()[-500:]}")

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "log"), "-w", "-o",
                  f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir}", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://once@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A database of its own (one test's or bench run's tables never meet another's)."""
        import psycopg

        self.databases += 1
        name = f"t{self.databases}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def close(self) -> None:
        try:
            self.stop("immediate")
        except RuntimeError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)
