"""A partition longer than the graces, in-process (``docs/protocol.md`` section 7): three
routers of a line A - B - C on transports that are not sockets, an AMQP client on each
side of the partition, time moved by calling the routers' housekeeping with a later clock.

A subscriber's connection to A drops and it attaches at C while A is cut off. A keeps it
suspended past its grace (A cannot reach B or C: no evidence that it is attached nowhere
else), and gives it up only past ``partition_grace``, as a gap. When the partition heals,
C hears of the gap and ends the live link with ``once:subscription-gap``; the client
attaches again and the subscription goes on."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from once.router.amqp.events import DeliveriesReceived, LinkAttached, LinkDetached
from once.router.amqp.performatives import Accepted, ReceiverSettleMode, Role, Source, Target
from once.router.config import load_topology
from once.router.server import Router
from support.inprocess import Link, Wire

TOPOLOGY = """
routers:
  A: {listen: 127.0.0.1:5672, inter_router: 127.0.0.1:15672}
  B: {listen: 127.0.0.1:5673, inter_router: 127.0.0.1:15673}
  C: {listen: 127.0.0.1:5674, inter_router: 127.0.0.1:15674}
links:
  - [A, B]
  - [B, C]
settings: {subscriber_grace: 1s, partition_grace: 2s}
auth: {router_secret: in-process-only}
"""


def _of(events: list[Any], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


async def _settle(*links: Link) -> None:
    for _ in range(5):
        for link in links:
            await link.pump()


async def _subscribe(wire: Wire, links: list[Link], name: str) -> Any:
    c = wire.client
    c.open()
    await wire.pump()
    session = c.begin()
    link = c.attach(session, name, Role.RECEIVER, source=Source(address="news"), target=Target(),
                    rcv_settle_mode=ReceiverSettleMode.FIRST)
    for _ in range(10):  # (a subscriber's attach completes once every reachable router has it)
        await wire.pump()
        await _settle(*links)
    assert any(e.link is link for e in _of(wire.events, LinkAttached)), wire.events
    c.flow(link, 10)
    await wire.pump()
    return link


async def test_a_subscriber_given_up_across_a_partition_is_told_where_it_lives(tmp_path: Path):
    path = tmp_path / "line3.yaml"
    path.write_text(TOPOLOGY)
    topology = load_topology(path)
    a, b, c = (Router(topology, r) for r in "ABC")
    ab, bc = Link(a, b), Link(b, c)
    await _settle(ab, bc)
    assert set(b.network.links) == {"A", "C"}

    # attached at A; its connection drops (no close): A keeps it suspended for its grace
    first = Wire(a, "reader")
    await _subscribe(first, [ab, bc], "orders")
    first.lose()
    [suspended] = a.core.suspended()
    assert suspended.key == ("reader", "orders")

    # A is cut off; the client attaches at C meanwhile, across the partition
    ab.a.connection_lost(ConnectionResetError("cut"))
    ab.b.connection_lost(ConnectionResetError("cut"))
    assert not a.network.links and set(b.network.links) == {"C"}
    second = Wire(c, "reader")
    rx = await _subscribe(second, [bc], "orders")

    # past its grace, A holds it: B and C are out of reach, it may be attached there
    now = time.monotonic()
    assert a.core.expire_suspended(now + 1.5) == []
    # past partition_grace too, A gives it up: a gap, flooded (to nobody yet)
    [gone] = a.core.expire_suspended(now + 3.5)
    assert gone.gap and a.core.tables.stats["gaps"] == 1
    a.network.end(gone, expired=True)
    assert ("reader", "orders") in a.network.plane.table.origins["A"].gaps

    # the partition heals: C hears of the gap, and the live link ends, saying so
    healed = Link(a, b)
    await _settle(healed, bc)
    events = await second.pump()
    [detached] = [e for e in _of(events, LinkDetached) if e.link is rx]
    assert detached.closed and detached.error is not None
    assert str(detached.error.condition) == "once:subscription-gap"
    assert "router A gave this subscription up while out of reach" in (detached.error.description or "")
    assert c.core.tables.stats["gaps_told"] == 1

    # the client attaches again (as our client does): the subscription goes on
    second.client.detach(rx, closed=True)
    await second.pump()
    session = second.client.begin()
    again = second.client.attach(session, "orders", Role.RECEIVER, source=Source(address="news"), target=Target(),
                                 rcv_settle_mode=ReceiverSettleMode.FIRST)
    for _ in range(10):
        await second.pump()
        await _settle(healed, bc)
    assert any(e.link is again for e in _of(second.events, LinkAttached))
    second.client.flow(again, 10)
    await second.pump()
    pub = Wire(a, "writer")
    pub.client.open()
    await pub.pump()
    tx = pub.client.attach(pub.client.begin(), "w", Role.SENDER, source=Source(), target=Target(address="news"))
    for _ in range(5):
        await pub.pump()
        await _settle(healed, bc)
    assert tx.credit > 0
    pub.client.send(tx, b"t0", b"\x00Sw\xa1\x05after")
    await pub.pump()
    await _settle(healed, bc)
    [got] = _of(await second.pump(), DeliveriesReceived)
    [delivery] = got.deliveries
    assert delivery.payload.endswith(b"after")
    second.client.disposition(delivery, Accepted(), settled=True)
    await second.pump()

    # once every router has heard of it, A clears the gap everywhere
    for _ in range(3):
        a.network.roll_calls.clear_gaps()
        a.flush()  # (as the router's housekeeping tick does)
        await _settle(healed, bc)
    for r in (a, b, c):
        assert not any(o.gaps for o in r.network.plane.table.origins.values()), r.id
