"""A burst of large messages through one router, and the router's resident memory.

``python -m once.tools.burst [MESSAGES] [SIZE_KIB]`` (default 1,000 x 1,024 KiB): a subscriber
attaches and grants no credit, a publisher sends as fast as it gets credit; we report
how many messages the router took while nobody could take them (its byte bounds), its
RSS before, while holding, at its peak, and after both clients left. Then the
subscriber takes and accepts everything.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from once.client.shell import ClientProtocol, connect
from once.router.amqp.events import DeliveriesReceived, DeliveryUpdated, LinkAttached, SessionBegun
from once.router.amqp.performatives import ACCEPTED, Role, Source, Target
from once.router.loop import run

from .bench.procs import rss_kib, start_routers
from .bench.scenarios import SCENARIOS


class Sender:
    def __init__(self, topic: str, total: int, body: bytes) -> None:
        self.topic, self.total, self.body = topic, total, body
        self.sent = self.accepted = 0
        self.link: Any = None

    def __call__(self, proto: ClientProtocol, events: list[Any]) -> None:
        e = proto.engine
        for ev in events:
            if type(ev) is DeliveryUpdated and ev.settled:
                self.accepted += 1
            elif type(ev) is SessionBegun and self.link is None:
                self.link = e.attach(ev.session, "burst-pub", Role.SENDER, target=Target(address=self.topic))
        if self.link is None and e.remote_open is not None and not e.sessions:
            e.begin()
        while self.link is not None and self.link.attached and self.link.credit > 0 and self.sent < self.total:
            e.send(self.link, str(self.sent).encode(), self.body)
            self.sent += 1


class Taker:
    """Attaches with no credit; ``open(n)`` grants credit and it accepts what comes."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.received = 0
        self.credit = 0
        self.link: Any = None
        self.attached = asyncio.get_running_loop().create_future()

    def __call__(self, proto: ClientProtocol, events: list[Any]) -> None:
        e = proto.engine
        for ev in events:
            if type(ev) is DeliveriesReceived:
                for d in ev.deliveries:
                    self.received += 1
                    e.disposition(d, ACCEPTED, settled=True)
            elif type(ev) is SessionBegun and self.link is None:
                self.link = e.attach(ev.session, "burst-sub", Role.RECEIVER, source=Source(address=self.topic))
            elif type(ev) is LinkAttached and ev.link is self.link and not self.attached.done():
                self.attached.set_result(None)
        if self.link is None and e.remote_open is not None and not e.sessions:
            e.begin()
        if self.credit and self.link is not None and self.link.attached and self.link.credit < self.credit // 2:
            e.flow(self.link, self.credit)


async def _burst(addr: tuple[str, int], pid: int, n: int, size: int) -> None:
    mib = 1024.0
    before = rss_kib(pid) / mib
    taker = Taker("burst")
    tconn = await connect(*addr, "burst-sub", taker)
    await asyncio.wait_for(taker.attached, 10)
    sender = Sender("burst", n, b"x" * size)
    sconn = await connect(*addr, "burst-pub", sender)
    peak = before
    last, still = -1, 0
    while still < 4:  # until the publisher has sent nothing new for 1 s
        await asyncio.sleep(0.25)
        peak = max(peak, rss_kib(pid) / mib)
        still = still + 1 if sender.sent == last else 0
        last = sender.sent
    held = rss_kib(pid) / mib
    print(f"taken while the subscriber gave no credit: {sender.sent} of {n} ({sender.sent * size / 2**20:.0f} MiB); "
          f"RSS before {before:.0f} MiB, holding {held:.0f} MiB")
    taker.credit = 50
    sconn.flush()
    taker(tconn, [])
    tconn.flush()
    while sender.accepted < n:
        await asyncio.sleep(0.25)
        peak = max(peak, rss_kib(pid) / mib)
    for conn in (sconn, tconn):
        conn.engine.close()
        conn.flush()
    await asyncio.sleep(3)
    print(f"all {n} accepted; RSS peak {peak:.0f} MiB, 3 s after the clients left {rss_kib(pid) / mib:.0f} MiB")


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    size = (int(sys.argv[2]) if len(sys.argv) > 2 else 1024) * 1024
    with tempfile.TemporaryDirectory() as tmp:
        procs, addrs = start_routers(SCENARIOS["single-1to1"], Path(tmp))
        try:
            run(_burst(addrs["A"], procs[0].pid, n, size))
        finally:
            for p in procs:
                p.terminate()
                p.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
