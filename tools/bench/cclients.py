"""The bench with C load clients: a Proton-C sender and receiver (``c/``), built at first use.

Our Python clients cost more CPU than the router they load, so a run with them measures
the clients as much as the router. These are small and fast: the sender keeps the credit
full (or a fixed window), the receiver accepts each message settled and re-grants credit in
halves. The receiver reads the send time from the body, so the end-to-end latency is
measured at the subscriber; the sender measures send -> accepted.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from once.tools.exits import CommandError, Exit

from .procs import Meter, two_cores
from .scenarios import Result, Scenario

SOURCES = Path(__file__).parent / "c"
PACKAGE = "libqpid-proton11-dev"  # Debian's Proton-C 0.37 headers and library


def _proton_flags() -> list[str] | None:
    """Compiler flags for Proton-C, or None when its headers are not installed."""
    if shutil.which("pkg-config"):
        r = subprocess.run(["pkg-config", "--cflags", "--libs", "libqpid-proton"], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split()
    if Path("/usr/include/proton/proactor.h").exists():
        return ["-lqpid-proton"]
    return None


def _install_proton() -> None:
    can = os.geteuid() == 0 and shutil.which("apt-get")
    if not can:
        raise CommandError(Exit.FAILED, f"the C clients need Proton-C: sudo apt-get install {PACKAGE} "
                                        "(or run the bench without --clients c)")
    print(f"once bench: installing Debian's {PACKAGE} for the C clients ...", file=sys.stderr, flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for attempt in ([], ["update"]):
        if attempt:
            subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True)
        r = subprocess.run(["apt-get", "install", "-y", "-q", PACKAGE], env=env, capture_output=True, text=True)
        if r.returncode == 0:
            return
    last = (r.stderr.strip().splitlines() or ["no message"])[-1]
    raise CommandError(Exit.FAILED, f"apt-get install {PACKAGE} failed: {last}")


def build() -> Path:
    """The directory holding ``once-csend`` and ``once-crecv``, compiled once per source version."""
    def flags() -> list[str]:
        found = _proton_flags()
        if found is None:
            _install_proton()
            found = _proton_flags() or ["-lqpid-proton"]
        return found
    return compile_clients(SOURCES, "bench-c", {"sender.c": "once-csend", "receiver.c": "once-crecv"}, flags,
                           "or run the bench without --clients c")


def compile_clients(sources: Path, name: str, programs: dict[str, str], flags: Callable[[], list[str]],
                    hint: str = "") -> Path:
    """The cache directory holding ``programs`` (source file -> binary) built from
    ``sources``, compiled once per version of the sources; ``flags()`` (the libraries, which
    it may install) is asked only when something must be built."""
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(sources.iterdir()))).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "once" / f"{name}-{digest}"
    if all((cache / binary).exists() for binary in programs.values()):
        return cache
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise CommandError(Exit.FAILED, f"the bench's C clients need a C compiler (apt-get install gcc){', ' + hint if hint else ''}")
    libs = flags()
    cache.mkdir(parents=True, exist_ok=True)
    for source, binary in programs.items():
        tmp = (cache / binary).with_suffix(f".{os.getpid()}.tmp")  # (two builds at once never share one)
        r = subprocess.run([cc, "-O2", "-o", str(tmp), str(sources / source), *libs], capture_output=True, text=True)
        if r.returncode != 0:
            raise CommandError(Exit.FAILED, f"compiling the C client {source} failed: "
                                            f"{' '.join(r.stderr.strip().splitlines()[:2])}")
        tmp.replace(cache / binary)  # (atomic: a half-written binary is never taken for a built one)
    return cache


def _client(cmd: list[str], ca: Path | None = None) -> subprocess.Popen[str]:
    """``ca``: the client speaks TLS and checks the router's certificate against it."""
    if two_cores():
        cmd = ["taskset", "-c", "1", *cmd]  # the router of a single-router run has core 0
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, ONCE_BENCH_CA=str(ca) if ca is not None else ""))


def _report(proc: subprocess.Popen[str], what: str, timeout: float) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"the C {what} gave no result (exit {proc.returncode}): {err.strip()[-300:]}")
    return json.loads(lines[-1])


def run_scenario(name: str, scenario: Scenario, messages: int, credit: int, addrs: dict[str, tuple[str, int]],
                 meter: Meter, body: int = 100, ca: Path | None = None) -> Result:
    """``ca``: the clients connect over TLS, checking the routers' certificate against it."""
    bins = build()
    topic = f"bench-{name}"
    receivers = []
    for i, rid in enumerate(scenario.subscribers):
        host, port = addrs[rid]
        link = f"bench-group|bench-sub-{i}" if scenario.group else f"bench-sub-{i}"
        proc = _client([str(bins / "once-crecv"), host, str(port), topic, link, str(credit), str(messages),
                        *(["shared"] if scenario.group else [])], ca)
        receivers.append(proc)
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "attached":
            for p in receivers:
                p.kill()
            raise RuntimeError(f"{name}: C receiver {i} did not attach: {proc.stderr.read().strip()[-300:] if proc.stderr else ''}")
    host, port = addrs[scenario.publisher]
    meter.start()
    sender = _client([str(bins / "once-csend"), host, str(port), topic, str(messages), str(body), str(scenario.window)], ca)
    try:
        sent = _report(sender, "sender", max(120, messages / 1000))
    finally:
        meter.stop()
        for p in receivers:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
    got = [_report(p, "receiver", 30) for p in receivers]
    if sent["accepted"] != messages:
        raise RuntimeError(f"{name}: {sent['accepted']} of {messages} accepted ({sent['other']} otherwise)")
    counts = [g["received"] for g in got]
    if scenario.group and sum(counts) != messages:
        raise RuntimeError(f"{name}: the group's members received {sum(counts)} messages, not {messages}")
    if not scenario.group and any(c != messages for c in counts):
        raise RuntimeError(f"{name}: subscribers received {counts}, not {messages} each")
    elapsed = (sent["last_ns"] - sent["first_ns"]) / 1e9
    # the end-to-end figures of the slowest subscriber (every one must have it)
    worst = max(got, key=lambda g: g["p50_us"])
    shares = tuple(round(c / messages, 3) for c in counts) if scenario.group else ()
    return Result(name, round(messages / elapsed), round(sent["p50_us"] / 1000, 3), round(sent["p99_us"] / 1000, 3),
                  messages, len(receivers), True, credit, shares, clients="c",
                  e2e_p50_ms=round(worst["p50_us"] / 1000, 3), e2e_p99_ms=round(worst["p99_us"] / 1000, 3))
