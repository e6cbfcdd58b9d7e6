"""A delivery leaves no reference cycle behind.

The router freezes its start-up heap and runs the cycle collector rarely
(``router/main.py``'s ``settle_heap``); that is only safe while every per-message object
is freed by reference counting. Real routers in this process, real TCP, the bench's
clients; the collector is off during the run and must find nothing of ours afterwards.
"""

from __future__ import annotations

import asyncio
import gc
from collections import Counter

import pytest
from once.client.shell import connect
from once.router.config import parse_topology
from once.router.server import Router
from once.tools.bench.pyclients import Publisher, Subscriber
from once.tools.topology_ports import free_port

OURS = ("router", "records", "linkstate", "tools")


def _topology(ids: list[str]):
    routers = {r: {"listen": f"127.0.0.1:{free_port()}", "inter_router": f"127.0.0.1:{free_port()}"} for r in ids}
    links = [[a, b] for a, b in zip(ids, ids[1:])]
    return parse_topology({"routers": routers, "links": links,
                           "settings": {"max_in_flight": 10000, "subscriber_grace": "30s"},
                           "auth": {"router_secret": "garbage-test"}})


async def _run(ids: list[str], subscribers_at: list[str], messages: int, timeout: float = 60) -> Counter:
    topology = _topology(ids)
    routers = [Router(topology, r) for r in ids]
    await asyncio.gather(*(r.start(neighbour_timeout=10.0) for r in routers))
    by_id = {r.id: r for r in routers}
    conns = []
    try:
        async def round_(topic: str, count: int) -> None:
            subs = [Subscriber(topic, f"{topic}-sub-{i}", 500) for i in range(len(subscribers_at))]
            for where, sub in zip(subscribers_at, subs):
                a = by_id[where].spec.listen
                conns.append(await connect(a.host, a.port, sub.name, sub))
            await asyncio.wait_for(asyncio.gather(*(s.attached for s in subs)), 10)
            pub = Publisher(topic, count)
            a = by_id[ids[0]].spec.listen
            conns.append(await connect(a.host, a.port, f"{topic}-pub", pub))
            await asyncio.wait_for(pub.done, timeout)
            assert all(s.received == count for s in subs)
            # every record is freed once its settlement went round; wait for that, not a while
            for _ in range(500):
                if not any(r.core.records for r in routers):
                    break
                await asyncio.sleep(0.01)
            assert not any(r.core.records for r in routers)

        await round_("warm", 200)  # lazily built tables and caches are not per message
        gc.collect()
        gc.disable()
        try:
            await round_("run", messages)
            gc.set_debug(gc.DEBUG_SAVEALL)
            gc.collect()
            found = Counter(type(o).__qualname__ for o in gc.garbage
                            if type(o).__module__.split(".")[0] in OURS)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
        return found
    finally:
        for c in conns:
            c.engine.close()
            c.flush()
        await asyncio.gather(*(r.stop(grace=0.5) for r in routers))


def test_fan_out_at_one_router_leaves_no_cycles() -> None:
    assert asyncio.run(_run(["A"], ["A", "A"], 3000)) == Counter()


def test_forwarding_through_a_line_leaves_no_cycles() -> None:
    assert asyncio.run(_run(["A", "B", "C"], ["C", "A"], 3000)) == Counter()


@pytest.mark.slow
def test_a_million_messages_leave_no_cycles() -> None:
    assert asyncio.run(_run(["A"], ["A"], 1_000_000, timeout=900)) == Counter()
