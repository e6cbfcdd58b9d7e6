"""The adaptors are never inside the core when the core calls them (``router/core/effects.py``):
in-process routers whose core entry calls are watched, and every port the core holds
(publishers', subscribers', neighbours' data links) wrapped to note a call made while an
entry call is running. AMQP clients, MQTT clients and an inter-router link each go
through publish, answers, a release, settlement and a message nobody waits for."""

from __future__ import annotations

from typing import Any

from once.router.amqp.events import DeliveriesReceived, DeliveryUpdated
from once.router.amqp.performatives import Accepted, Released, Role
from once.router.mqtt.codes import PacketType
from once.router.mqtt.packets import Ack, Connect, Publish, Subscribe, Subscription
from support.inprocess import Link, MqttWire, Wire, router
from test_amqp_edge import _link, _of
from test_interrouter import _attach

ENTRY = ("publish", "pump", "subscriber_update", "publisher_settled", "publisher_credit_changed", "replenish",
         "pump_hop", "copy_arrived", "control")


class Watch:
    """Counts the core entry calls running; wraps the ports the cores hold."""

    def __init__(self, *routers: Any) -> None:
        self.routers = routers
        self.inside = 0
        self.wrong: list[str] = []  # port calls made inside an entry call
        self.calls = 0  # port calls made as a batch ended
        for r in routers:
            for name in ENTRY:
                setattr(r.core, name, self._entry(getattr(r.core, name)))

    def _entry(self, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.inside += 1
            try:
                return fn(*args, **kwargs)
            finally:
                self.inside -= 1
        return call

    def ports(self) -> None:
        """Wrap the ports the cores hold now (call again after new links attach)."""
        for r in self.routers:
            core = r.core
            links = [*core.publishers, *(s for subs in core.topics.values() for s in subs.values()),
                     *core.hops.values(), *core.upstreams.values()]
            for link in links:
                if not isinstance(link.port, Guarded):
                    link.port = Guarded(self, link.port)


class Guarded:
    def __init__(self, watch: Watch, port: Any) -> None:
        self._watch = watch
        self._port = port

    def __getattr__(self, name: str) -> Any:
        inner = getattr(self._port, name)
        if not callable(inner):
            return inner
        watch = self._watch

        def called(*args: Any) -> Any:
            if watch.inside:
                watch.wrong.append(f"{type(self._port).__name__}.{name}")
            else:
                watch.calls += 1
            return inner(*args)

        return called


async def _send(wire: Wire, link: Any, n: int) -> list[Any]:
    """``n`` messages, as the link's credit allows (its first credit is one message)."""
    sent = []
    for i in range(n):
        for _ in range(10):
            if link.credit:
                break
            await wire.pump()
        sent.append(wire.client.send(link, bytes([i]), b"\x00Sw\xa1\x01" + bytes([48 + i])))
    await wire.pump()
    return sent


async def test_amqp_clients_are_called_only_as_the_batch_ends():
    r = router()
    watch = Watch(r)
    sub, pub = Wire(r, "sub"), Wire(r, "pub")
    rx = await _link(sub, Role.RECEIVER, "news", "s")
    sub.client.flow(rx, 10)
    await sub.pump()
    tx = await _link(pub, Role.SENDER, "news", "p")
    lone = await _link(pub, Role.SENDER, "nobody", "q")  # (a topic nobody subscribes to)
    watch.ports()
    sent = await _send(pub, tx, 3)
    [alone] = await _send(pub, lone, 1)
    deliveries = [d for e in _of(await sub.pump(), DeliveriesReceived) for d in e.deliveries]
    assert len(deliveries) == 3
    sub.client.disposition(deliveries[0], Accepted(), settled=True)
    sub.client.disposition(deliveries[1], Released(), settled=True)
    again = [d for e in _of(await sub.pump(), DeliveriesReceived) for d in e.deliveries]
    assert len(again) == 1  # (the released one, sent again)
    for d in [deliveries[2], *again]:
        sub.client.disposition(d, Accepted(), settled=True)
    await sub.pump()
    answered = {u.delivery.tag for u in _of(await pub.pump(), DeliveryUpdated) if isinstance(u.state, Accepted)}
    answered |= {u.delivery.tag for u in _of(pub.events, DeliveryUpdated) if isinstance(u.state, Accepted)}
    assert answered == {d.tag for d in [*sent, alone]}
    assert watch.wrong == [] and watch.calls > 0


async def test_mqtt_clients_are_called_only_as_the_batch_ends():
    r = router()
    watch = Watch(r)
    sub, pub = MqttWire(r), MqttWire(r, peer=("127.0.0.1", 46001))
    for client, name in ((sub, "s"), (pub, "p")):
        await client.send(Connect(client.version, name))
    await sub.send(Subscribe(1, (Subscription("news/+", 1),)))
    await pub.send(Publish("warm/up", b"0", 1, packet_id=1))  # (its publishers attach: wrapped below)
    await pub.send(Publish("news/a", b"0", 1, packet_id=2))
    watch.ports()
    # a QoS 1 message nobody waits for is acknowledged in the batch of its publish
    acks = await pub.send(Publish("warm/up", b"1", 1, packet_id=3))
    assert Ack(PacketType.PUBACK, 3) in acks
    await pub.send(Publish("news/a", b"2", 1, packet_id=4), Publish("news/a", b"3", 1, packet_id=5))
    got = [p for p in await sub.read() + sub.received if isinstance(p, Publish)]
    for p in {p.packet_id: p for p in got}.values():
        await sub.send(Ack(PacketType.PUBACK, p.packet_id))
    acked = {p.packet_id for p in await pub.read() + pub.received if isinstance(p, Ack)}
    assert {2, 3, 4, 5} <= acked
    assert watch.wrong == [] and watch.calls > 0


async def test_the_inter_router_adaptor_is_called_only_as_the_batch_ends():
    a, b = router("line3.yaml", "A"), router("line3.yaml", "B")
    watch = Watch(a, b)
    ab = Link(a, b)
    await ab.pump()
    sub, pub = Wire(a, "sub"), Wire(b, "pub")
    rx = await _attach(sub, ab, Role.RECEIVER, "news", "s")
    sub.client.flow(rx, 10)
    await sub.pump()
    tx = await _attach(pub, ab, Role.SENDER, "news", "p")
    watch.ports()
    sent = await _send(pub, tx, 2)
    await ab.pump()
    deliveries = [d for e in _of(await sub.pump(), DeliveriesReceived) for d in e.deliveries]
    assert len(deliveries) == 2
    for d in deliveries:
        sub.client.disposition(d, Accepted(), settled=True)
    await sub.pump()
    await ab.pump()
    await pub.pump()
    answered = {u.delivery.tag for u in _of(pub.events, DeliveryUpdated) if isinstance(u.state, Accepted)}
    assert answered == {d.tag for d in sent}
    assert watch.wrong == [] and watch.calls > 0
