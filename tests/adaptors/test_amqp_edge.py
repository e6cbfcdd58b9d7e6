"""The AMQP client adaptor (``router/adaptors/amqp/edge.py``) in-process: a router's
client connections over transports that are not sockets, a client engine at the other
end of each (``tests/support/inprocess.py``). What a process would add is a socket."""

from __future__ import annotations

from typing import Any

from once.router.amqp.events import DeliveriesReceived, DeliveryUpdated, LinkAttached
from once.router.amqp.performatives import Accepted, ReceiverSettleMode, Role, Source, Target
from support.inprocess import Wire, router


def _of(events: list[Any], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


async def _link(wire: Wire, role: Role, topic: str, name: str) -> Any:
    c = wire.client
    if not c.sessions:
        c.open()
        await wire.pump()  # (SASL, then the open)
        session = c.begin()
    else:
        session = next(iter(c.sessions.values()))
    source, target = (Source(address=topic), Target()) if role is Role.RECEIVER else (Source(), Target(address=topic))
    link = c.attach(session, name, role, source=source, target=target, rcv_settle_mode=ReceiverSettleMode.FIRST)
    await wire.pump()
    assert any(e.link is link for e in _of(wire.events, LinkAttached)), wire.events
    return link


async def test_a_message_reaches_the_subscriber_and_the_publisher_hears_accepted_only_after_it_accepted():
    r = router()
    sub, pub = Wire(r, "sub"), Wire(r, "pub")
    rx = await _link(sub, Role.RECEIVER, "news", "s")
    sub.client.flow(rx, 10)
    await sub.pump()
    tx = await _link(pub, Role.SENDER, "news", "p")
    assert tx.credit > 0  # the router gave the publisher credit
    d = pub.client.send(tx, b"t0", b"\x00Sw\xa1\x05hello")
    await pub.pump()
    [got] = _of(await sub.pump(), DeliveriesReceived)
    [delivery] = got.deliveries
    assert delivery.payload.endswith(b"hello")
    assert _of(await pub.pump(), DeliveryUpdated) == []  # not before the subscriber's answer
    sub.client.disposition(delivery, Accepted(), settled=True)
    await sub.pump()
    [outcome] = _of(await pub.pump(), DeliveryUpdated)
    assert outcome.delivery is d and isinstance(outcome.state, Accepted)


