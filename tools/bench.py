"""``once bench``: throughput and latency through a real router process.

The load clients run on our own engine in one process (one event loop), the router in
another; each is pinned to its own core when the machine has two. Latency is what a
publisher experiences: from writing a message to receiving its ``accepted``, which the
router sends only after every subscriber accepted.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml
from tqdm import tqdm

from router.amqp.connection import Mode
from router.amqp.events import DeliveryReceived, DeliveryUpdated, LinkAttached, LinkFlow, SessionBegun
from router.amqp.performatives import ACCEPTED, Role, Source, Target
from router.client import ClientProtocol, connect
from router.listeners import Kind, listen
from router.loop import run
from router.shared_subscriptions import GLOBAL, SHARED

BODY_SIZE = 100
# An AMQP message with a single data section of 100 bytes; the first 8 carry the send time.
_DATA_HEAD = b"\x00\x53\x75\xa0" + bytes([BODY_SIZE])
_FILL = b"x" * (BODY_SIZE - 8)
_Q = struct.Struct(">Q")


@dataclass
class Result:
    scenario: str
    msgs_per_s: float
    p50_ms: float
    p99_ms: float
    messages: int
    subscribers: int
    through_router: bool
    credit: int
    # a consumer group's members: the share of the messages each got, in attach order
    shares: tuple[float, ...] = ()


@dataclass(frozen=True)
class Scenario:
    topology: str
    publisher: str  # router the publisher attaches to
    subscribers: tuple[str, ...]  # router of each subscriber
    # another client's sender links that attach and never send (on one connection, in
    # sessions of 1000): what they cost the publisher that does send
    idle_links: int = 0
    group: bool = False  # the subscribers are one consumer group: each message goes to one


SCENARIOS = {
    "single-1to1": Scenario("single.yaml", "A", ("A",)),
    "single-1to4": Scenario("single.yaml", "A", ("A",) * 4),
    "line3-1to1": Scenario("line3.yaml", "A", ("C",)),
    "mesh3-fanout": Scenario("mesh3.yaml", "A", ("A",) * 3 + ("B",) * 3 + ("C",) * 3),
    "single-idle2000": Scenario("single.yaml", "A", ("A",), idle_links=2000),
    "single-group4": Scenario("single.yaml", "A", ("A",) * 4, group=True),
    "line3-group": Scenario("line3.yaml", "A", ("A", "B", "C"), group=True),
}
DEFAULT_SCENARIOS = ("single-1to1", "single-1to4", "line3-1to1", "mesh3-fanout")
ROOT = Path(__file__).resolve().parents[1]


class Publisher:
    def __init__(self, topic: str, total: int) -> None:
        self.topic = topic
        self.total = total
        self.sent = 0
        self.accepted = 0
        self.latencies: list[int] = []
        self.link: Any = None
        self.done = asyncio.get_running_loop().create_future()
        self.started = 0.0
        self.finished = 0.0

    def __call__(self, proto: ClientProtocol, events: list[Any]) -> None:
        engine = proto.engine
        for ev in events:
            t = type(ev)
            if t is DeliveryUpdated:
                if ev.settled:
                    self.latencies.append(time.perf_counter_ns() - ev.delivery.context)
                    self.accepted += 1
            elif t is LinkFlow:
                pass
            elif t is SessionBegun and self.link is None:
                self.link = engine.attach(ev.session, "bench-pub", Role.SENDER, target=Target(address=self.topic))
        if self.link is None and engine.remote_open is not None and not engine.sessions:
            engine.begin()
        link = self.link
        if link is not None and link.attached and link.credit > 0 and self.sent < self.total:
            if not self.started:
                self.started = time.perf_counter()
            send = engine.send
            now = time.perf_counter_ns
            n = min(link.credit, self.total - self.sent)
            for _ in range(n):
                t0 = now()
                d = send(link, _Q.pack(self.sent), _DATA_HEAD + _Q.pack(t0) + _FILL)
                d.context = t0
                self.sent += 1
        if self.accepted >= self.total and not self.done.done():
            self.finished = time.perf_counter()
            self.done.set_result(None)


class Subscriber:
    def __init__(self, topic: str, name: str, credit: int, group: str | None = None) -> None:
        self.topic = topic
        self.name = name
        self.credit = credit
        self.group = group
        self.received = 0
        self.link: Any = None
        self.attached = asyncio.get_running_loop().create_future()

    def __call__(self, proto: ClientProtocol, events: list[Any]) -> None:
        engine = proto.engine
        disposition = engine.disposition
        for ev in events:
            t = type(ev)
            if t is DeliveryReceived:
                self.received += 1
                disposition(ev.delivery, ACCEPTED, settled=True)
            elif t is SessionBegun and self.link is None:
                caps = (SHARED, GLOBAL) if self.group else None
                self.link = engine.attach(ev.session, f"{self.group}|{self.name}" if self.group else self.name,
                                          Role.RECEIVER, source=Source(address=self.topic, capabilities=caps))
            elif t is LinkAttached and ev.link is self.link:
                engine.flow(self.link, self.credit)
                if not self.attached.done():
                    self.attached.set_result(None)
        if self.link is None and engine.remote_open is not None and not engine.sessions:
            engine.begin()
        link = self.link
        if link is not None and link.attached and link.credit < self.credit // 2:
            engine.flow(link, self.credit)


class Idler:
    """Attaches ``n`` sender links on one connection and never sends on them."""

    PER_SESSION = 1000

    def __init__(self, topic: str, n: int) -> None:
        self.topic = topic
        self.n = n
        self.asked = 0
        self.answered = 0
        self.attached = asyncio.get_running_loop().create_future()

    def __call__(self, proto: ClientProtocol, events: list[Any]) -> None:
        engine = proto.engine
        for ev in events:
            t = type(ev)
            if t is SessionBegun:
                for _ in range(min(self.PER_SESSION, self.n - self.asked)):
                    engine.attach(ev.session, f"idle-{self.asked}", Role.SENDER, target=Target(address=self.topic))
                    self.asked += 1
                if self.asked < self.n:
                    engine.begin()
            elif t is LinkAttached:
                self.answered += 1
        if self.asked == 0 and engine.remote_open is not None and not engine.sessions:
            engine.begin()
        if self.answered >= self.n and not self.attached.done():
            self.attached.set_result(None)


class Sink:
    """Server side for --no-router: accepts every publisher link, accepts every message."""

    def __init__(self, credit: int) -> None:
        self.credit = credit

    def __call__(self, proto: ClientProtocol, events: list[Any]) -> None:
        engine = proto.engine
        for ev in events:
            t = type(ev)
            if t is DeliveryReceived:
                engine.disposition(ev.delivery, ACCEPTED, settled=True)
            elif t is LinkAttached and ev.reply_needed:
                link = ev.link
                engine.attach(link.session, link.name, link.role, link=link, target=ev.attach.target)
                engine.flow(link, self.credit)
        for session in engine.sessions.values():
            for link in session.links.values():
                if not link.is_sender and link.attached and link.credit < self.credit // 2:
                    engine.flow(link, self.credit)


def _pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {cpu})


def _unpin() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))


def _start_routers(scenario: Scenario, tmp: Path, router_settings: dict[str, Any] | None = None,
                   journal: bool = False) -> tuple[list[subprocess.Popen[str]], dict[str, tuple[str, int]]]:
    """Every router of the scenario's topology as OS processes on free ports."""
    from .topology_ports import with_free_ports

    # The routers run with the topology's own settings: --credit is the clients' credit.
    topo = with_free_ports(ROOT / "topologies" / scenario.topology, tmp / scenario.topology, router_settings)
    ids = sorted(yaml.safe_load(topo.read_text())["routers"])
    single = len(ids) == 1 and (os.cpu_count() or 1) >= 2 and hasattr(os, "sched_setaffinity")
    procs, addrs = [], {}
    for rid in ids:
        cmd = [sys.executable, "-m", "tools.cli", "router", str(topo), "--id", rid,
               *(["--journal", str(tmp / "journal")] if journal else [])]
        if single:
            cmd = ["taskset", "-c", "0", *cmd]  # one router, one core; the clients get the other
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT))
    for rid, proc in zip(ids, procs):
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "ready" not in line:
            for p in procs:
                p.kill()
            raise RuntimeError(f"router {rid} failed to start: {line!r}")
        host, port = line.split()[3].removeprefix("amqp://").rsplit(":", 1)
        addrs[rid] = (host, int(port))
    return procs, addrs


async def _watch(pub: Publisher, bar: Any) -> None:
    """Move the progress bar from the accepted count (a few times a second, off the hot path)."""
    shown = 0
    while not pub.done.done():
        await asyncio.sleep(0.25)
        bar.update(pub.accepted - shown)
        shown = pub.accepted
    bar.update(pub.accepted - shown)


async def _run_scenario(name: str, scenario: Scenario, messages: int, credit: int,
                        addrs: dict[str, tuple[str, int]], bar: Any = None) -> Result:
    topic = f"bench-{name}"
    if scenario.idle_links:
        idler = Idler(f"{topic}-idle", scenario.idle_links)
        idle_conn = await connect(*addrs[scenario.publisher], "bench-idler", idler)
        await asyncio.wait_for(idler.attached, 60)
    group = "bench-group" if scenario.group else None
    subs = [Subscriber(topic, f"bench-sub-{i}", credit, group) for i in range(len(scenario.subscribers))]
    conns = [await connect(*addrs[r], f"bench-sub-{i}", s) for i, (r, s) in enumerate(zip(scenario.subscribers, subs))]
    await asyncio.wait_for(asyncio.gather(*(s.attached for s in subs)), 10)
    pub = Publisher(topic, messages)
    conns.append(await connect(*addrs[scenario.publisher], "bench-pub", pub))
    watching = asyncio.ensure_future(_watch(pub, bar)) if bar is not None else None
    await asyncio.wait_for(pub.done, max(60, messages / 2000))
    if watching is not None:
        await watching
    # Every accepted message must have reached every subscriber (a group: one member), and
    # the group's members may not have had more between them: a fast wrong answer is no answer.
    if scenario.group:
        got = sum(s.received for s in subs)
        if got != messages:
            raise RuntimeError(f"{name}: the group's members received {got} messages, not {messages}")
    else:
        short = [s.name for s in subs if s.received != messages]
        if short:
            raise RuntimeError(f"{name}: subscribers {short} received fewer than {messages} messages")
    shares = tuple(round(s.received / messages, 3) for s in subs) if scenario.group else ()
    if scenario.idle_links:
        conns.append(idle_conn)
    for c in conns:
        c.engine.close()
        c.flush()
    elapsed = pub.finished - pub.started
    lat = sorted(pub.latencies)
    return Result(name, round(messages / elapsed), round(lat[len(lat) // 2] / 1e6, 3), round(lat[int(len(lat) * 0.99)] / 1e6, 3),
                  messages, len(subs), True, credit, shares)


async def _run_direct(messages: int, credit: int) -> Result:
    server, _, port = await listen(Kind.AMQP, lambda: ClientProtocol("sink", Sink(credit), mode=Mode.SERVER),
                                   "127.0.0.1", 0)
    pub = Publisher("direct", messages)
    conn = await connect("127.0.0.1", port, "bench-pub", pub)
    await asyncio.wait_for(pub.done, max(60, messages / 2000))
    conn.engine.close()
    conn.flush()
    server.close()
    elapsed = pub.finished - pub.started
    lat = sorted(pub.latencies)
    return Result("clients-direct", round(messages / elapsed), round(lat[len(lat) // 2] / 1e6, 3),
                  round(lat[int(len(lat) * 0.99)] / 1e6, 3), messages, 1, False, credit)


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


def bench(names: list[str], json_path: str | None, messages: int, credit: int, no_router: bool,
          journal: bool = False) -> int:
    names = names or list(DEFAULT_SCENARIOS)
    for n in names:
        if n not in SCENARIOS:
            print(f"unknown scenario {n!r} (have {', '.join(SCENARIOS)})", file=sys.stderr)
            return 2
    results: list[Result] = []
    if no_router:
        _pin(1)
        results.append(run(_run_direct(messages, credit)))
    else:
        tty = sys.stderr.isatty()
        with tempfile.TemporaryDirectory() as tmp:
            for i, name in enumerate(names, 1):
                scenario = SCENARIOS[name]
                _unpin()  # children inherit affinity: never start routers from a pinned process
                procs, addrs = _start_routers(scenario, Path(tmp), journal=journal)
                if len(addrs) == 1:
                    _pin(1)
                # a bar on a terminal; a line per scenario otherwise (logs, CI)
                bar = tqdm(total=messages, desc=f"{name} ({i}/{len(names)})", unit="msg", unit_scale=True,
                           leave=False, file=sys.stderr) if tty else None
                if not tty:
                    print(f"bench {name} ({i}/{len(names)}): {messages} messages ...", file=sys.stderr, flush=True)
                try:
                    results.append(run(_run_scenario(name, scenario, messages, credit, addrs, bar)))
                finally:
                    if bar is not None:
                        bar.close()
                    for proc in procs:
                        proc.terminate()
                    for proc in procs:
                        proc.wait(10)
                r = results[-1]
                print(f"bench {name}: {r.msgs_per_s} msg/s, p50 {r.p50_ms} ms", file=sys.stderr, flush=True)
    print(f"{'scenario':<16} {'msgs/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'messages':>9}")
    for r in results:
        shares = f"  shares {' '.join(f'{x:.0%}' for x in r.shares)}" if r.shares else ""
        print(f"{r.scenario:<16} {r.msgs_per_s:>10} {r.p50_ms:>8} {r.p99_ms:>8} {r.messages:>9}{shares}")
    if json_path:
        doc = [dict(asdict(r), date=time.strftime("%Y-%m-%d"), machine=machine()) for r in results]
        Path(json_path).write_text(json.dumps(doc, indent=2) + "\n")
    return 0
