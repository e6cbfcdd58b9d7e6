"""``once bench mqtt``: MQTT QoS 1 and 2, one publisher and one subscriber, through once
(one router, and a line of three) beside Debian's Mosquitto, with the same C load clients
(libmosquitto, ``cmqtt/``), in the same run, alternating.

The publisher keeps ``--window`` messages unacknowledged (100 bytes each, the send time in
the first 8); the subscriber reads the send time from the body. Throughput is messages
over the publisher's first send to its last PUBACK/PUBCOMP, and every message must have
reached the subscriber. A single router or broker is pinned to core 0, the clients to
core 1. Mosquitto is configured to lose nothing and not to bound the window below ours
(``max_inflight_messages`` = the window, ``max_queued_messages 0``); it acknowledges a
message once it has it, once says PUBACK/PUBREC only when the subscriber accepted.

Beside them, in the same rounds: AMQP through the same routers with the Proton-C load
clients (``c/``), the same window and body, the publisher told ``accepted`` when the
subscriber accepted: what the same network does for the other protocol.
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import yaml
from once.tools.exits import CommandError, Exit

from . import cclients
from .cclients import _client, _report, compile_clients
from .procs import Meter, start_routers, stop, two_cores
from .scenarios import SCENARIOS

SOURCES = Path(__file__).parent / "cmqtt"
ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("libmosquitto-dev", "mosquitto")  # Debian's: the client library's headers, the broker


@dataclass(frozen=True)
class Sample:
    msgs_per_s: float
    ack_p50_ms: float
    ack_p99_ms: float
    e2e_p50_ms: float
    e2e_p99_ms: float
    cpu_us: float  # the router's (summed over routers) or the broker's CPU per message


def _apt(packages: tuple[str, ...]) -> None:
    if not (os.geteuid() == 0 and shutil.which("apt-get")):
        raise CommandError(Exit.FAILED, f"the MQTT bench needs {' and '.join(packages)}: "
                                        f"sudo apt-get install {' '.join(packages)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    r = subprocess.run(["apt-get", "install", "-y", "-q", *packages], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True)
        r = subprocess.run(["apt-get", "install", "-y", "-q", *packages], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise CommandError(Exit.FAILED, f"apt-get install {' '.join(packages)} failed: "
                                        f"{(r.stderr.strip().splitlines() or [''])[-1]}")


def build() -> Path:
    """The directory holding ``once-mqtt-pub`` and ``once-mqtt-sub``, compiled once per source version."""
    def flags() -> list[str]:
        if not Path("/usr/include/mosquitto.h").exists() or shutil.which("mosquitto", path="/usr/sbin:/usr/bin") is None:
            _apt(PACKAGES)
        return ["-lmosquitto"]
    return compile_clients(SOURCES, "bench-mqtt", {"mqtt_pub.c": "once-mqtt-pub", "mqtt_sub.c": "once-mqtt-sub"}, flags)


def _once(topology: str, tmp: Path) -> tuple[list[subprocess.Popen[str]], tuple[str, int], tuple[str, int]]:
    """once's routers for ``topology``: the processes, the first router's MQTT address, the last's."""
    from once.tools.topology_ports import with_free_ports

    topo = with_free_ports(ROOT / "topologies" / topology, tmp / topology)
    doc = yaml.safe_load(topo.read_text())
    ids = sorted(doc["routers"])
    single = len(ids) == 1 and two_cores()
    procs, mqtt = [], {}
    for rid in ids:
        cmd = [sys.executable, "-m", "once.tools.cli", "router", str(topo), "--id", rid,
               *([] if doc["routers"][rid].get("mqtt") else ["--mqtt", "127.0.0.1:0"])]
        if single:
            cmd = ["taskset", "-c", "0", *cmd]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT))
    for rid, proc in zip(ids, procs):
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = next((w for w in line.split() if w.startswith("mqtt://")), None)
        if "ready" not in line or url is None:
            for p in procs:
                p.kill()
            raise RuntimeError(f"router {rid} failed to start: {line!r}")
        host, port = url.removeprefix("mqtt://").rsplit(":", 1)
        mqtt[rid] = (host, int(port))
    return procs, mqtt[ids[0]], mqtt[ids[-1]]


def _mosquitto(tmp: Path, window: int) -> tuple[list[subprocess.Popen[str]], tuple[str, int], tuple[str, int]]:
    from once.tools.topology_ports import free_port

    port = free_port()
    conf = tmp / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                    f"max_inflight_messages {window}\nmax_queued_messages 0\nlog_dest none\n")
    cmd = [shutil.which("mosquitto", path="/usr/sbin:/usr/bin") or "mosquitto", "-c", str(conf)]
    if two_cores():
        cmd = ["taskset", "-c", "0", *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while True:  # (it prints nothing when ready: its port answering is the sign)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"mosquitto did not start: {proc.stderr.read() if proc.stderr else ''}") from None
            time.sleep(0.02)  # (a poll interval while it starts)
    return [proc], ("127.0.0.1", port), ("127.0.0.1", port)


def run_once(target: str, qos: int, messages: int, window: int, bins: Path) -> Sample:
    with tempfile.TemporaryDirectory(prefix="once-bench-mqtt-") as d:
        tmp = Path(d)
        procs, pub_at, sub_at = (_mosquitto(tmp, window) if target == "mosquitto"
                                 else _once("single.yaml" if target == "once-1" else "line3.yaml", tmp))
        try:
            sub = _client([str(bins / "once-mqtt-sub"), sub_at[0], str(sub_at[1]), "bench/mqtt", str(messages), str(qos)])
            assert sub.stdout is not None
            if sub.stdout.readline().strip() != "attached":
                raise RuntimeError(f"{target}: the subscriber did not subscribe: "
                                   f"{sub.stderr.read().strip()[-300:] if sub.stderr else ''}")
            meter = Meter([p.pid for p in procs])
            meter.start()
            pub = _client([str(bins / "once-mqtt-pub"), pub_at[0], str(pub_at[1]), "bench/mqtt", str(messages),
                           str(qos), str(window), "100"])
            try:
                sent = _report(pub, "MQTT publisher", max(120, messages / 500))
            finally:
                meter.stop()
            got = _report(sub, "MQTT subscriber", 30)
        finally:
            for p in procs:
                p.kill()
                p.wait()
        if sent["acked"] != messages or got["received"] != messages:
            raise RuntimeError(f"{target} QoS {qos}: {sent['acked']} acknowledged, {got['received']} received "
                               f"of {messages}")
        elapsed = (sent["last_ns"] - sent["first_ns"]) / 1e9
        return Sample(round(messages / elapsed), round(sent["p50_us"] / 1000, 2), round(sent["p99_us"] / 1000, 2),
                      round(got["p50_us"] / 1000, 2), round(got["p99_us"] / 1000, 2), meter.cpu_us_per(messages))


TARGETS = {"once-1": "once, one router", "once-line3": "once, line of three (pub A, sub C)",
           "mosquitto": "Mosquitto 2.0 (Debian)"}
# AMQP beside: the bench's scenario, and its label
AMQP = {"single-1to1": "AMQP 1.0, once, one router", "line3-1to1": "AMQP 1.0, once, line of three"}


def run_amqp(name: str, messages: int, window: int) -> Sample:
    """AMQP through once's routers with the Proton-C clients, at the MQTT clients' window."""
    scenario = replace(SCENARIOS[name], window=window)
    with tempfile.TemporaryDirectory(prefix="once-bench-amqp-") as d:
        procs, addrs = start_routers(scenario, Path(d))
        meter = Meter([p.pid for p in procs])
        try:
            r = cclients.run_scenario(name, scenario, messages, window, addrs, meter)
        finally:
            stop(procs)
    return Sample(r.msgs_per_s, r.p50_ms, r.p99_ms, r.e2e_p50_ms or 0.0, r.e2e_p99_ms or 0.0,
                  meter.cpu_us_per(messages))


def main(messages: int, rounds: int, window: int = 100, qos_levels: tuple[int, ...] = (1, 2)) -> int:
    bins = build()
    if shutil.which("mosquitto", path="/usr/sbin:/usr/bin") is None:  # (the clients were built before)
        _apt(("mosquitto",))
    cclients.build()  # (before any router starts: the first build may install Proton-C)
    samples: dict[tuple[str, int], list[Sample]] = {}
    for r in range(rounds):
        for name in AMQP:
            s = run_amqp(name, messages, window)
            samples.setdefault((name, 0), []).append(s)
            print(f"round {r + 1} AMQP {name}: {s.msgs_per_s:,.0f} msg/s", file=sys.stderr, flush=True)
        for qos in qos_levels:
            for target in TARGETS:  # alternating: each round runs every target once
                s = run_once(target, qos, messages, window, bins)
                samples.setdefault((target, qos), []).append(s)
                print(f"round {r + 1} QoS {qos} {target}: {s.msgs_per_s:,.0f} msg/s", file=sys.stderr, flush=True)
    print(f"MQTT, 1 publisher -> 1 subscriber, {messages} messages of 100 bytes, window {window}, "
          f"{rounds} alternating rounds (median; min-max)")
    print(f"{'target':38} {'QoS':>3} {'msg/s':>18} {'ack p50/p99 ms':>16} {'e2e p50/p99 ms':>16} {'CPU us/msg':>10} "
          f"{'vs Mosquitto':>12}")
    qos1 = statistics.median(s.msgs_per_s for s in samples[("mosquitto", 1)]) if 1 in qos_levels else 0
    for name, label in AMQP.items():  # (against Mosquitto's QoS 1: acknowledged, one delivery each)
        _row(label, "-", samples[(name, 0)], qos1)
    for qos in qos_levels:
        base = statistics.median(s.msgs_per_s for s in samples[("mosquitto", qos)])
        for target, label in TARGETS.items():
            _row(label, str(qos), samples[(target, qos)], base)
    return 0


def _row(label: str, qos: str, ss: list[Sample], base: float) -> None:
    med = statistics.median(s.msgs_per_s for s in ss)
    mid = sorted(ss, key=lambda s: s.msgs_per_s)[len(ss) // 2]
    rate = f"{med:,.0f} ({min(s.msgs_per_s for s in ss):,.0f}-{max(s.msgs_per_s for s in ss):,.0f})"
    ratio = f"{med / base:.2f}" if base else "-"
    print(f"{label:38} {qos:>3} {rate:>18} {f'{mid.ack_p50_ms}/{mid.ack_p99_ms}':>16} "
          f"{f'{mid.e2e_p50_ms}/{mid.e2e_p99_ms}':>16} {mid.cpu_us:>10} {ratio:>12}")
