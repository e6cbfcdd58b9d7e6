"""The bench's own load clients, on our engine, in one process (one event loop).

Latency is what a publisher experiences: from writing a message to receiving its
``accepted``, which the router sends only after every subscriber accepted.
"""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

from once.client.shell import ClientProtocol, connect
from once.router.adaptors.amqp.shared_subscriptions import GLOBAL, SHARED
from once.router.amqp.connection import Mode
from once.router.amqp.events import DeliveriesReceived, DeliveryUpdated, LinkAttached, LinkFlow, SessionBegun
from once.router.amqp.performatives import ACCEPTED, Role, Source, Target
from once.router.listeners import Kind, listen

from .procs import Meter
from .scenarios import Result, Scenario

BODY_SIZE = 100
_Q = struct.Struct(">Q")


def data_section(size: int) -> tuple[bytes, bytes]:
    """An AMQP message of one data section of ``size`` bytes, as the bytes before and after
    the 8 that carry the send time."""
    head = b"\x00\x53\x75" + (b"\xa0" + bytes([size]) if size < 256 else b"\xb0" + size.to_bytes(4, "big"))
    return head, b"x" * (size - 8)


class Publisher:
    def __init__(self, topic: str, total: int, window: int = 0, body: int = BODY_SIZE) -> None:
        self.topic = topic
        self.total = total
        self.head, self.fill = data_section(body)
        self.window = window  # at most this many unanswered (0: as the credit allows)
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
            head, fill = self.head, self.fill
            n = min(link.credit, self.total - self.sent)
            if self.window:
                n = min(n, self.window - (self.sent - self.accepted))
            for _ in range(n):
                t0 = now()
                d = send(link, _Q.pack(self.sent), head + _Q.pack(t0) + fill)
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
            if t is DeliveriesReceived:
                self.received += len(ev.deliveries)
                for d in ev.deliveries:
                    disposition(d, ACCEPTED, settled=True)
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
            if t is DeliveriesReceived:
                for d in ev.deliveries:
                    engine.disposition(d, ACCEPTED, settled=True)
            elif t is LinkAttached and ev.reply_needed:
                link = ev.link
                engine.attach(link.session, link.name, link.role, link=link, target=ev.attach.target)
                engine.flow(link, self.credit)
        for session in engine.sessions.values():
            for link in session.links.values():
                if not link.is_sender and link.attached and link.credit < self.credit // 2:
                    engine.flow(link, self.credit)


async def _watch(pub: Publisher, bar: Any) -> None:
    """Move the progress bar from the accepted count (a few times a second, off the hot path)."""
    shown = 0
    while not pub.done.done():
        await asyncio.sleep(0.25)
        bar.update(pub.accepted - shown)
        shown = pub.accepted
    bar.update(pub.accepted - shown)


async def run_scenario(name: str, scenario: Scenario, messages: int, credit: int,
                       addrs: dict[str, tuple[str, int]], meter: Meter, bar: Any = None) -> Result:
    topic = f"bench-{name}"
    if scenario.idle_links:
        idler = Idler(f"{topic}-idle", scenario.idle_links)
        idle_conn = await connect(*addrs[scenario.publisher], "bench-idler", idler)
        await asyncio.wait_for(idler.attached, 60)
    group = "bench-group" if scenario.group else None
    subs = [Subscriber(topic, f"bench-sub-{i}", credit, group) for i in range(len(scenario.subscribers))]
    conns = [await connect(*addrs[r], f"bench-sub-{i}", s) for i, (r, s) in enumerate(zip(scenario.subscribers, subs))]
    await asyncio.wait_for(asyncio.gather(*(s.attached for s in subs)), 10)
    pub = Publisher(topic, messages, scenario.window)
    meter.start()
    conns.append(await connect(*addrs[scenario.publisher], "bench-pub", pub))
    watching = asyncio.ensure_future(_watch(pub, bar)) if bar is not None else None
    await asyncio.wait_for(pub.done, max(60, messages / 2000))
    meter.stop()
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


async def run_direct(messages: int, credit: int) -> Result:
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
