"""Memory per in-flight delivery, measured on live router processes.

A subscriber that never accepts holds ``N`` deliveries (100-byte bodies) in flight; we
compare each router's resident memory before and after. ``python -m tools.memory``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from router.amqp.events import DeliveryReceived, LinkAttached, SessionBegun
from router.amqp.performatives import Role, Source
from router.client import ClientProtocol, connect
from router.loop import run

from .bench import SCENARIOS, Publisher, _start_routers


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


class Holder:
    """Receives and never accepts."""

    def __init__(self, topic: str, credit: int) -> None:
        self.topic, self.credit = topic, credit
        self.received = 0
        self.link = None
        self.attached = asyncio.get_running_loop().create_future()

    def __call__(self, proto: ClientProtocol, events: list) -> None:
        e = proto.engine
        for ev in events:
            if type(ev) is DeliveryReceived:
                self.received += 1
            elif type(ev) is SessionBegun and self.link is None:
                self.link = e.attach(ev.session, "holder", Role.RECEIVER, source=Source(address=self.topic))
            elif type(ev) is LinkAttached and ev.link is self.link:
                e.flow(self.link, self.credit)
                self.attached.set_result(None)
        if self.link is None and e.remote_open is not None and not e.sessions:
            e.begin()


async def _measure(addrs: dict[str, tuple[str, int]], sub_at: str, pub_at: str, n: int, pids: dict[str, int]) -> dict[str, float]:
    holder = Holder("mem", n)
    hconn = await connect(*addrs[sub_at], "holder", holder)
    await asyncio.wait_for(holder.attached, 10)
    pub = Publisher("mem", n)
    before = {r: rss_kib(p) for r, p in pids.items()}
    pconn = await connect(*addrs[pub_at], "mem-pub", pub)
    deadline = asyncio.get_running_loop().time() + 60
    while holder.received < n:
        if asyncio.get_running_loop().time() > deadline:
            raise RuntimeError(f"only {holder.received} of {n} deliveries arrived: a window is smaller than {n}")
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)  # let the routers settle their bookkeeping
    after = {r: rss_kib(p) for r, p in pids.items()}
    for conn in (hconn, pconn):
        if conn.transport is not None:
            conn.transport.close()
    return {r: (after[r] - before[r]) * 1024 / n for r in pids}


def main(n: int = 4000) -> int:
    # Below every window involved: on line3, B shares its transit window between two
    # neighbours (5,000 each), and a held delivery never frees its place.
    wanted = sys.argv[1:] or ["single-1to1", "line3-1to1"]
    for name, sub_at in (("single-1to1", "A"), ("line3-1to1", "C")):
        if name not in wanted:
            continue
        scenario = SCENARIOS[name]
        with tempfile.TemporaryDirectory() as tmp:
            procs, addrs = _start_routers(scenario, Path(tmp), {"max_in_flight": 10000, "link_credit": 10000})
            pids = dict(zip(sorted(addrs), (p.pid for p in procs)))
            try:
                per = run(_measure(addrs, sub_at, scenario.publisher, n, pids))
            finally:
                for p in procs:
                    p.terminate()
                    p.wait(10)
        print(f"{name}: bytes of resident memory per in-flight delivery (100-byte body): "
              + ", ".join(f"router {r} {v:,.0f}" for r, v in per.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
