"""The harness's routers: OS processes on free ports, killed and restarted on demand.

Links that a scenario cuts run through a ``Proxy`` (the dialling router's copy of the
topology names the proxy as its neighbour's inter-router address). A restarted router
gets the same ports, so clients and neighbours find it where it was.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from once.tools.procs import stop_all
from once.tools.topology_ports import free_port, with_free_ports

from .proxy import Proxy

ROOT = Path(__file__).resolve().parents[2]


def _ends(link: Any) -> list[str]:
    """A topology file's link: ``[A, B]`` or ``{between: [A, B], cost: N}``."""
    return [str(r) for r in (link["between"] if isinstance(link, dict) else link)]


class Cluster:
    def __init__(self, topology: Path, out: Path, settings: dict[str, Any], proxied: set[tuple[str, str]],
                 mqtt: bool = False, manage: bool = False) -> None:
        self.out = out
        # (``mqtt``: MQTT clients come, and every router listens for them; ``manage``: an
        # admin drains routers, through every router's http endpoint, as a users-file admin)
        add = (*(("mqtt",) if mqtt else ()), *(("http",) if manage else ()))
        base = with_free_ports(topology, out / "topology.yaml", settings, add)
        doc = yaml.safe_load(base.read_text())
        self.admin = ""
        if manage:
            import secrets

            from once.router.security.users import add_user

            password = secrets.token_urlsafe(12)
            add_user(out / "users.yaml", "harness-admin", password, ("admin",))
            auth = doc.setdefault("auth", {})
            auth["users_file"] = str(out / "users.yaml")
            auth.setdefault("plain_without_tls", True)
            base.write_text(yaml.safe_dump(doc))
            self.admin = f"harness-admin:{password}"
        self.http = {i: "http://" + doc["routers"][i]["http"] for i in sorted(doc["routers"])
                     if doc["routers"][i].get("http")}
        self.ids = sorted(doc["routers"])
        self.urls = {i: "amqp://" + doc["routers"][i]["listen"] for i in self.ids}
        # MQTT clients' addresses (routers with a listener): mqtt://HOST:PORT
        self.mqtt = {i: "mqtt://" + doc["routers"][i]["mqtt"] for i in self.ids if doc["routers"][i].get("mqtt")}
        self.paths = {i: base for i in self.ids}
        self.base = base  # (the network's file, each router where it listens: no proxies)
        self.proxies: dict[tuple[str, str], Proxy] = {}
        for a, b in sorted(proxied):
            dialler, listener = sorted((a, b))
            port = int(doc["routers"][listener]["inter_router"].rsplit(":", 1)[1])
            proxy = Proxy(port)
            self.proxies[(dialler, listener)] = proxy
            own = yaml.safe_load(self.paths[dialler].read_text())
            own["routers"][listener]["inter_router"] = f"127.0.0.1:{proxy.port}"
            path = out / f"topology-{dialler}.yaml"
            path.write_text(yaml.safe_dump(own))
            self.paths[dialler] = path
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.starts: dict[str, int] = {}

    def start(self, *ids: str, timeout: float = 20.0, wait: bool = True) -> None:
        ids = ids or tuple(self.ids)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        for i in ids:
            if self.alive(i):
                continue
            n = self.starts.get(i, 0) + 1
            self.starts[i] = n
            with open(self.out / f"router-{i}.{n}.out", "wb") as stdout, \
                    open(self.out / f"router-{i}.{n}.log", "wb") as stderr:  # the child keeps its own copies
                self.procs[i] = subprocess.Popen(
                    [sys.executable, "-m", "once.tools.cli", "router", str(self.paths[i]), "--id", i,
                     "--journal", str(self.out / "journal"), "--state", str(self.out / f"state-{i}")],
                    cwd=ROOT, stdout=stdout, stderr=stderr, env=env)
        if not wait:
            return  # a restart under a schedule: the run goes on while it comes up
        deadline = time.monotonic() + timeout
        for i in ids:
            ready = self.out / f"router-{i}.{self.starts[i]}.out"
            while b" ready " not in ready.read_bytes():
                if self.procs[i].poll() is not None:
                    log = (self.out / f"router-{i}.{self.starts[i]}.log").read_text()[-500:]
                    raise RuntimeError(f"router {i} exited with {self.procs[i].returncode}: {log}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"router {i} not ready after {timeout:g}s")
                time.sleep(0.02)

    def alive(self, i: str) -> bool:
        proc = self.procs.get(i)
        return proc is not None and proc.poll() is None

    def kill(self, i: str) -> None:
        proc = self.procs.get(i)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()

    def drain(self, i: str) -> None:
        """An admin drains router ``i`` (``once manage drain``): its clients move to other
        routers, and it stops by itself (a later ``restart`` starts it again)."""
        from once.tools.manage import post

        base = self.http[i].replace("http://", f"http://{self.admin}@")
        post(base, "/api/drain", {}, 10.0)

    def stop_router(self, i: str) -> None:
        """SIGTERM: the router stops cleanly and leaves the network (a later ``restart``
        starts it again)."""
        proc = self.procs.get(i)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)

    def relink(self, a: str, b: str, add: bool) -> None:
        """A link added to (or removed from) every router's topology file, then SIGHUP to
        every router running (``once reload``): each end dials it or closes it."""
        for path in sorted(set(self.paths.values())):
            doc = yaml.safe_load(path.read_text())
            links = [lk for lk in doc.get("links") or [] if set(_ends(lk)) != {a, b}]
            doc["links"] = links + ([[a, b]] if add else [])
            path.write_text(yaml.safe_dump(doc))
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGHUP)

    def join(self, name: str, to: tuple[str, ...]) -> None:
        """A router no file names starts with a file of its own (its listeners and the
        network's credentials) and joins through ``to`` (``once router --join``)."""
        base = yaml.safe_load(self.base.read_text())
        entry = {"listen": f"127.0.0.1:{free_port()}",
                 "join": [base["routers"][r]["inter_router"] for r in to]}
        if self.http:
            entry["http"] = f"127.0.0.1:{free_port()}"
        doc = {"routers": {name: entry}, "links": [],
               **{k: base[k] for k in ("auth", "settings", "tls") if k in base}}
        path = self.out / f"topology-{name}.yaml"
        path.write_text(yaml.safe_dump(doc))
        self.paths[name] = path
        self.start(name, wait=False)

    def freeze(self, i: str) -> None:
        """Stop the router's process (SIGSTOP): it keeps its sockets and state, says nothing."""
        proc = self.procs.get(i)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGSTOP)

    def thaw(self, i: str) -> None:
        proc = self.procs.get(i)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGCONT)

    def cut(self, a: str, b: str) -> None:
        self.proxies[tuple(sorted((a, b)))].cut()  # type: ignore[index]

    def slow(self, a: str, b: str, delay: float) -> None:
        self.proxies[tuple(sorted((a, b)))].slow(delay)  # type: ignore[index]

    def quiet(self, a: str, b: str) -> None:
        """The link holds what is sent on it both ways, its connections open (a silent
        partition): only the routers' idle timeout tells."""
        self.proxies[tuple(sorted((a, b)))].freeze()  # type: ignore[index]

    def heal(self, a: str, b: str) -> None:
        self.proxies[tuple(sorted((a, b)))].heal()  # type: ignore[index]

    def rss_kib(self) -> dict[str, int]:
        """Each running router's resident memory (``VmRSS``), in KiB."""
        from once.tools.bench.procs import rss_kib

        out = {}
        for i, proc in sorted(self.procs.items()):
            try:
                out[i] = rss_kib(proc.pid) if proc.poll() is None else None
            except (OSError, RuntimeError):  # (it exited as we looked)
                out[i] = None
        return {i: kib for i, kib in out.items() if kib is not None}

    def dump_state(self) -> None:
        """Ask every live router to log its state (SIGUSR1), for a run that got stuck."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGUSR1)
        time.sleep(0.5)  # not synchronisation of the run: only gives the routers time to log

    def failover_list(self, home: str, mqtt: bool = False) -> list[str]:
        urls = self.mqtt if mqtt else self.urls
        return [urls[home]] + [urls[i] for i in self.ids if i != home and i in urls]

    def stop(self) -> None:
        stop_all(self.procs.values(), sig=signal.SIGINT)
        for p in self.proxies.values():
            p.close()
