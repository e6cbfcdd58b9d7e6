"""The inter-router adaptor (``router/adaptors/amqp/interrouter.py``) in-process: two
routers of a topology, built but not started, joined by one inter-router connection over
transports that are not sockets; clients on each (``tests/support/inprocess.py``)."""

from __future__ import annotations

from typing import Any

from once.router.amqp.events import DeliveriesReceived, DeliveryUpdated, LinkAttached
from once.router.amqp.performatives import Accepted, ReceiverSettleMode, Role, Source, Target
from support.inprocess import Link, Wire, router


def _of(events: list[Any], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


async def _attach(wire: Wire, link_: Link, role: Role, topic: str, name: str) -> Any:
    c = wire.client
    c.open()
    await wire.pump()
    session = c.begin()
    source, target = (Source(address=topic), Target()) if role is Role.RECEIVER else (Source(), Target(address=topic))
    link = c.attach(session, name, role, source=source, target=target, rcv_settle_mode=ReceiverSettleMode.FIRST)
    for _ in range(10):  # (a subscriber's attach completes once the other router acknowledged it)
        await wire.pump()
        await link_.pump()
    assert any(e.link is link for e in _of(wire.events, LinkAttached)), wire.events
    return link


async def test_a_copy_crosses_the_link_and_the_publisher_hears_accepted_from_the_far_subscriber():
    a, b = router("line3.yaml", "A"), router("line3.yaml", "B")
    ab = Link(a, b)
    await ab.pump()
    assert a.network.links.keys() == {"B"} and b.network.links.keys() == {"A"}  # up, both ways
    sub, pub = Wire(a, "sub"), Wire(b, "pub")
    rx = await _attach(sub, ab, Role.RECEIVER, "news", "s")
    sub.client.flow(rx, 10)
    await sub.pump()
    tx = await _attach(pub, ab, Role.SENDER, "news", "p")
    assert tx.credit > 0  # B knows A's subscriber: publishes are taken
    d = pub.client.send(tx, b"t0", b"\x00Sw\xa1\x05hello")
    await pub.pump()
    await ab.pump()
    [got] = _of(await sub.pump(), DeliveriesReceived)
    [delivery] = got.deliveries
    assert delivery.payload.endswith(b"hello")
    assert _of(await pub.pump(), DeliveryUpdated) == []  # A has not answered B yet
    sub.client.disposition(delivery, Accepted(), settled=True)
    await sub.pump()
    await ab.pump()
    [outcome] = _of(await pub.pump(), DeliveryUpdated)
    assert outcome.delivery is d and isinstance(outcome.state, Accepted)
