"""Start real router processes for tests: free ports, readiness from the ready line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from once.tools.procs import stop_all

ROOT = Path(__file__).resolve().parents[2]


async def until(condition: Callable[[], Any], timeout: float, what: str) -> None:
    """``wait_for`` for a test on the event loop: the loop runs while it waits."""
    import asyncio

    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


def wait_for(condition: Callable[[], Any], timeout: float = 10.0, interval: float = 0.01, what: str = "condition") -> Any:
    """Poll ``condition`` until truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class RouterProcess:
    """One ``once router`` OS process listening on a free port."""

    def __init__(self, topology: Path, router_id: str = "A", proc: subprocess.Popen[str] | None = None,
                 args: tuple[str, ...] = ()) -> None:
        self.topology = topology
        self.router_id = router_id
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = proc or subprocess.Popen(
            [sys.executable, "-m", "once.tools.cli", "router", str(topology), "--id", router_id, "--listen", "127.0.0.1:0",
             *args],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # blocks until the ready line or exit
        if not line.startswith(f"router {router_id} ready "):
            # leave no process or pipe behind: a later test's unraisable-exception check
            # would otherwise fail on them
            self.proc.kill()
            _, err = self.proc.communicate()
            raise AssertionError(f"router did not start: {line!r} {err}")
        self.ready_line = line
        self.url = line.split()[3]
        # its HTTP endpoint, when it has one (``router A ready amqp://... http://...``)
        self.http = next((w for w in line.split()[4:] if w.startswith("http://")), None)
        mqtt = next((w for w in line.split()[4:] if w.startswith("mqtt://")), None)  # (its MQTT listener)
        self.mqtt = None if mqtt is None else (mqtt[7:].rsplit(":", 1)[0], int(mqtt.rsplit(":", 1)[1]))
        mqtts = next((w for w in line.split()[4:] if w.startswith("mqtts://")), None)  # (over TLS)
        self.mqtts = None if mqtts is None else (mqtts[8:].rsplit(":", 1)[0], int(mqtts.rsplit(":", 1)[1]))
        # its TLS listener, when it has one (``amqps://HOST:PORT``)
        self.amqps = next((w for w in line.split()[4:] if w.startswith("amqps://")), None)
        self.host, port = self.url.removeprefix("amqp://").rsplit(":", 1)
        self.port = int(port)
        # Drain its log as it runs: a full stderr pipe would block the router on its next
        # log line (with a line per connection and subscription, that comes soon).
        self._log: list[str] = []
        self._drain = threading.Thread(target=self._read_log, daemon=True)
        self._drain.start()

    def _read_log(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._log.append(line)

    @classmethod
    def adopt(cls, proc: subprocess.Popen[str], topology: Path, router_id: str) -> RouterProcess:
        return cls(topology, router_id, proc)

    @classmethod
    def adopt_all(cls, procs: dict[str, tuple[subprocess.Popen[str], Path]]) -> dict[str, RouterProcess]:
        """Routers started together, by id; when one fails to start, the others are stopped
        before the failure is raised, so no process outlives the test that made it."""
        adopted: dict[str, RouterProcess] = {}
        try:
            for rid, (proc, topology) in procs.items():
                adopted[rid] = cls(topology, rid, proc)
        except BaseException:
            rest = [p for rid, (p, _) in procs.items() if rid not in adopted]
            stop_all([*(r.proc for r in adopted.values()), *rest], sig=signal.SIGINT)
            for p in rest:
                p.communicate()  # (its pipes)
            for r in adopted.values():
                r.stop()
            raise
        return adopted

    def stderr_lines(self) -> list[str]:
        """Stop the router and return what it logged."""
        self.stop()
        return self.logged.splitlines()

    def alive(self) -> bool:
        return self.proc.poll() is None

    logged = ""

    def stop(self) -> int:
        stop_all([self.proc], sig=signal.SIGINT)
        self._drain.join(10)  # the pipe ends with the process
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None and not pipe.closed:
                pipe.close()
        self.logged = "".join(self._log)
        return self.proc.returncode


def write_topology(tmp: Path, settings: dict[str, Any] | None = None, auth: dict[str, Any] | None = None,
                   users: dict[str, str] | None = None) -> Path:
    doc: dict[str, Any] = {"routers": {"A": {"listen": "127.0.0.1:0"}}, "links": [],
                           "settings": {"max_in_flight": 10000, "subscriber_grace": "30s", **(settings or {})}}
    if users is not None:
        # (the router keeps salted hashes only: the test's passwords are written as such)
        from once.router.security.users import entry

        (tmp / "users.yaml").write_text(yaml.safe_dump({name: entry(pw) for name, pw in users.items()}))
        doc["auth"] = {"users_file": "users.yaml", **(auth or {})}
    elif auth:
        doc["auth"] = auth
    path = tmp / "topology.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


class Network:
    """Every router of a shipped topology as OS processes on free ports; ready when all are.

    ``proxied`` links run through a ``Proxy`` the test can cut: the dialling router gets
    its own copy of the topology naming the proxy as its neighbour's inter-router address.
    """

    def __init__(self, topology: str, tmp: Path, settings: dict[str, Any] | None = None,
                 proxied: tuple[tuple[str, str], ...] = ()) -> None:
        from once.tools.harness.proxy import Proxy
        from once.tools.topology_ports import with_free_ports

        base = with_free_ports(ROOT / "topologies" / topology, tmp / topology, settings)
        doc = yaml.safe_load(base.read_text())
        self.ids = sorted(doc["routers"])
        self.paths = {i: base for i in self.ids}
        self.proxies: dict[frozenset[str], Proxy] = {}
        for a, b in proxied:
            dialler, listener = sorted((a, b))
            port = int(doc["routers"][listener]["inter_router"].rsplit(":", 1)[1])
            proxy = Proxy(port)
            self.proxies[frozenset((a, b))] = proxy
            own = yaml.safe_load(self.paths[dialler].read_text())
            own["routers"][listener]["inter_router"] = f"127.0.0.1:{proxy.port}"
            path = tmp / f"{dialler}-{topology}"
            path.write_text(yaml.safe_dump(own))
            self.paths[dialler] = path
        self.routers: dict[str, RouterProcess] = {}
        self.start(*self.ids)

    def start(self, *ids: str) -> None:
        self.routers.update(RouterProcess.adopt_all({i: (_spawn(self.paths[i], i), self.paths[i]) for i in ids}))

    def proxy(self, a: str, b: str):
        return self.proxies[frozenset((a, b))]

    def __getitem__(self, rid: str) -> RouterProcess:
        return self.routers[rid]

    def stop(self) -> None:
        stop_all([r.proc for r in self.routers.values()], sig=signal.SIGINT)  # all at once: they stop in parallel
        for r in self.routers.values():
            r.stop()  # (its log and pipes)
        for p in self.proxies.values():
            p.close()


def _spawn(topology: Path, router_id: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "once.tools.cli", "router", str(topology), "--id", router_id],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def masked(container: str) -> str:
    """An anonymous client's container id as an HTTP endpoint without ``auth.http`` shows it."""
    import hashlib

    return "~" + hashlib.sha256(container.encode()).hexdigest()[:12]
