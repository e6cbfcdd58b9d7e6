"""``once bench memory``: what a router holds per in-flight delivery, by body size.

A subscriber that never accepts holds ``N`` deliveries in flight on one router; we read the
router's resident memory before the publisher starts and once all ``N`` have arrived, and
divide. The figure beyond the body is the router's own cost of a delivery (record, frames,
bookkeeping); a body that pinned a larger read buffer, or was copied and kept twice, shows
up here as a multiple of the body.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from once.client.shell import ClientProtocol, connect
from once.router.amqp.events import DeliveriesReceived, LinkAttached, SessionBegun
from once.router.amqp.performatives import Role, Source
from once.router.loop import run

from .procs import rss_kib, start_routers, stop
from .pyclients import Publisher
from .scenarios import SCENARIOS

# body size -> deliveries held (20,000 x 4 KiB: the "less than twice the payload")
SIZES = {100: 10_000, 4096: 20_000, 65536: 2_000}
# wide enough that no window, message or byte bound stops the publisher before N are held
_SETTINGS = {"max_in_flight": 40_000, "link_credit": 40_000, "max_connection_credit": 40_000,
             "max_in_flight_bytes": 1 << 30, "link_in_flight_bytes": 1 << 30}


@dataclass(frozen=True)
class Held:
    body: int
    deliveries: int
    grew_kib: int

    @property
    def per_delivery(self) -> float:
        return self.grew_kib * 1024 / self.deliveries

    @property
    def beyond_body(self) -> float:
        return self.per_delivery - self.body

    @property
    def of_payload(self) -> float:
        return self.grew_kib * 1024 / (self.body * self.deliveries)


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
            if type(ev) is DeliveriesReceived:
                self.received += len(ev.deliveries)
            elif type(ev) is SessionBegun and self.link is None:
                self.link = e.attach(ev.session, "holder", Role.RECEIVER, source=Source(address=self.topic))
            elif type(ev) is LinkAttached and ev.link is self.link:
                e.flow(self.link, self.credit)
                self.attached.set_result(None)
        if self.link is None and e.remote_open is not None and not e.sessions:
            e.begin()


async def _settled_rss(pid: int) -> int:
    """RSS once it stops moving (the last frames are being written out as we look)."""
    last = rss_kib(pid)
    for _ in range(20):
        await asyncio.sleep(0.1)
        now = rss_kib(pid)
        if now == last:
            break
        last = now
    return last


async def _hold(addr: tuple[str, int], pid: int, body: int, n: int) -> Held:
    holder = Holder("mem", n)
    hconn = await connect(*addr, "holder", holder)
    await asyncio.wait_for(holder.attached, 10)
    before = await _settled_rss(pid)
    pub = Publisher("mem", n, body=body)
    pconn = await connect(*addr, "mem-pub", pub)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 120
    while holder.received < n:
        if loop.time() > deadline:
            raise RuntimeError(f"only {holder.received} of {n} deliveries arrived: a bound is below {n}")
        await asyncio.sleep(0.05)
    after = await _settled_rss(pid)
    for conn in (hconn, pconn):
        if conn.transport is not None:
            conn.transport.close()
    return Held(body, n, after - before)


def measure(sizes: dict[int, int] | None = None) -> list[Held]:
    results = []
    for body, n in (sizes or SIZES).items():
        print(f"bench memory: {n} deliveries of {body} bytes held ...", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            procs, addrs = start_routers(SCENARIOS["single-1to1"], Path(tmp), _SETTINGS)
            try:
                results.append(run(_hold(addrs["A"], procs[0].pid, body, n)))
            finally:
                stop(procs)
    return results


def report(results: list[Held]) -> str:
    rows = [f"{'body':>7} {'held':>7} {'grew MiB':>9} {'per delivery':>13} {'beyond body':>12} {'x payload':>10}"]
    for h in results:
        rows.append(f"{h.body:>7} {h.deliveries:>7} {h.grew_kib / 1024:>9.1f} {h.per_delivery:>13,.0f} "
                    f"{h.beyond_body:>12,.0f} {h.of_payload:>10.2f}")
    return "\n".join(rows)


def main() -> int:
    print(report(measure()))
    return 0
