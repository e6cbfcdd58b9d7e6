"""Give a topology free loopback ports: for tests and the bench, which never use fixed ones."""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path
from typing import Any

import yaml


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _slice(low: int) -> tuple[int, int]:
    """The ports below ``low`` this process picks from: all of them, or under the test
    suite's workers (pytest-xdist) a slice of its own each, so that two workers never pick
    the same port between choosing it and a router binding it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if worker.startswith("gw") and worker[2:].isdigit() and count > 1:
        span = (low - 10000) // count
        start = 10000 + int(worker[2:]) % count * span
        return start, start + span
    return 10000, low


# Every port handed out by this process: two calls in a row can otherwise give the same
# port (nothing binds it between them), and a topology with its listen and mqtt ports equal
# fails to start (it happened in CI, with six independent picks for two routers).
_given: set[int] = set()


def free_port(taken: set[int] | None = None) -> int:
    """A port free now and not handed out before by this process, below the kernel's
    ephemeral range when it can be.

    A router binds its port only after we chose it, and binds it again when the harness
    restarts it. A port from the ephemeral range (what binding port 0 gives) can meanwhile
    become the local end of some outgoing connection, and the router then fails with
    "address already in use" (it happened in a 50-run soak). Below that range only a
    listener can take it.
    """
    low = _ephemeral_low()
    first, last = _slice(low) if low > 10001 else (0, 0)
    for _ in range(50):
        port = random.randrange(first, last) if last > first else 0
        if port in _given or (taken and port in taken):
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            got = int(s.getsockname()[1])
        if got in _given:  # (port 0 gave one handed out before)
            continue
        _given.add(got)
        return got
    for _ in range(50):  # (the kernel's choice, from its ephemeral range: still never one given before)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            got = int(s.getsockname()[1])
        if got not in _given and not (taken and got in taken):
            break
    _given.add(got)
    return got


def with_free_ports(src: str | Path, dst: Path, settings: dict[str, Any] | None = None,
                    add: tuple[str, ...] = ()) -> Path:
    """Copy topology ``src`` to ``dst`` with every listen/inter_router/http port replaced by a free one.
    ``add``: listeners every router gets too (``mqtt``: the harness's MQTT clients on any topology)."""
    doc = yaml.safe_load(Path(src).read_text())
    taken: set[int] = set()

    def pick() -> int:
        port = free_port(taken)
        taken.add(port)
        return port

    for spec in doc["routers"].values():
        spec["listen"] = f"127.0.0.1:{pick()}"
        for key in add:
            if key == "http" and spec.get("uplink"):
                continue  # (an edge serves no http endpoint: router/uplink.py)
            spec.setdefault(key, "")
        for key in ("inter_router", "http", "mqtt", "amqps", "mqtts"):
            if key in spec:
                spec[key] = f"127.0.0.1:{pick()}"
    if settings:
        doc.setdefault("settings", {}).update(settings)
    dst.write_text(yaml.safe_dump(doc))
    return dst
