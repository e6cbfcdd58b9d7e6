"""A repeat to an MQTT QoS 2 subscriber, in-process (``docs/mqtt.md``, "Sessions in the
network"): three routers of a line A - C - B on transports that are not sockets.

MQTT cannot mark a repeat of a message whose QoS 2 flow completed: the client forgot the
packet id at its PUBCOMP, and a PUBLISH under a new one is a new message to it, DUP or not
(a QoS 2 subscriber processes every new packet id). So the session remembers what its
client completed until the network settled it: the root may still send it again, marked,
where the session resumes, and there it is answered for the client, never sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from once.router.adaptors.mqtt.edge import end_suspended
from once.router.adaptors.mqtt.sessions import SessionStore
from once.router.config import load_topology
from once.router.mqtt.codes import PacketType, Prop, Reason
from once.router.mqtt.packets import Ack, Connack, Connect, Publish, Suback, Subscribe, Subscription
from once.router.server import Router
from support.inprocess import Link, MqttWire

TOPOLOGY = """
routers:
  A: {listen: 127.0.0.1:5672, inter_router: 127.0.0.1:15672, mqtt: 127.0.0.1:1883}
  B: {listen: 127.0.0.1:5673, inter_router: 127.0.0.1:15673, mqtt: 127.0.0.1:1884}
  C: {listen: 127.0.0.1:5674, inter_router: 127.0.0.1:15674, mqtt: 127.0.0.1:1885}
links:
  - [A, C]
  - [B, C]
auth: {router_secret: in-process-only}
"""
EXPIRY = ((Prop.SESSION_EXPIRY_INTERVAL, 3600),)


async def _settle(*links: Link) -> None:
    for _ in range(5):
        for link in links:
            await link.pump()


def _router(path: Path, name: str) -> Router:
    r = Router(load_topology(path), name)
    r.mqtt_sessions = SessionStore(r)  # (as the router's start does: its replicas of the network's sessions)
    r.mqtt_sessions.on_end = lambda client_id: end_suspended(r, client_id)
    return r


async def _line(tmp_path: Path) -> tuple[Router, Router, Router, Link, Link]:
    """A - C - B, linked and settled."""
    path = tmp_path / "line3.yaml"
    path.write_text(TOPOLOGY)
    a, b, c = (_router(path, r) for r in "ABC")
    ac, bc = Link(a, c), Link(c, b)
    await _settle(ac, bc)
    return a, b, c, ac, bc


def _publishes(packets: list[Any]) -> list[Publish]:
    return [p for p in packets if isinstance(p, Publish)]


async def test_a_completed_qos_2_message_sent_again_where_the_session_resumes_is_not_sent_twice(tmp_path: Path):
    a, b, c, ac, bc = await _line(tmp_path)

    # a persistent QoS 2 subscriber at B, a publisher at A (the message's root)
    first = MqttWire(b)
    [ack] = await first.send(Connect(first.version, "reader", clean_start=False, props=EXPIRY))
    assert isinstance(ack, Connack) and ack.reason is Reason.SUCCESS
    back = await first.send(Subscribe(1, (Subscription("news/+", 2),)))
    await _settle(ac, bc)  # (a subscription is known to every router before its SUBACK)
    [suback] = back + await first.read()
    assert isinstance(suback, Suback) and suback.reasons == (2,)
    await _settle(ac, bc)
    pub = MqttWire(a, peer=("127.0.0.1", 46001))
    await pub.send(Connect(pub.version, "writer"))
    await pub.send(Publish("news/a", b"once", 2, packet_id=1))  # (at QoS 2 to the QoS 2 subscription: the lower)
    await _settle(ac, bc)
    [got] = _publishes(await first.read())
    assert (got.qos, got.dup) == (2, False)

    # A is cut off before B's acceptance reaches it; the client completes the flow with B
    ac.a.connection_lost(ConnectionResetError("cut"))
    ac.b.connection_lost(ConnectionResetError("cut"))
    await _settle(bc)
    assert b.network.reachable() == {"C"}
    back = await first.send(Ack(PacketType.PUBREC, got.packet_id))
    await _settle(bc)
    back += await first.read()
    assert Ack(PacketType.PUBREL, got.packet_id) in back
    await first.send(Ack(PacketType.PUBCOMP, got.packet_id))
    await _settle(bc)
    # (its packet id is free; the message stays in the session, in every replica in reach)
    for r in (b, c):
        session = r.mqtt_sessions.sessions["reader"]
        assert not session.outbound and len(session.done) == 1, r.id

    # its connection to B drops; it resumes its session at C
    first.transport.closing = True
    first.conn.connection_lost(ConnectionResetError("gone"))
    await _settle(bc)
    second = MqttWire(c, peer=("127.0.0.1", 46002))
    [ack] = await second.send(Connect(second.version, "reader", clean_start=False, props=EXPIRY))
    await _settle(bc)
    assert isinstance(ack, Connack) and ack.session_present

    # A comes back: it still owes the key the message, now at C, and sends it there marked
    healed = Link(a, c)
    await _settle(healed, bc)
    again = _publishes(await second.read())
    assert again == [], f"a completed QoS 2 message sent again under a new packet id: {again}"
    assert c.core.tables.stats["placeholder_hits"] == 1
    # and the publisher hears that it was accepted, once
    for _ in range(3):
        await _settle(healed, bc)
    assert [p for p in await pub.read() if isinstance(p, Ack)] == [Ack(PacketType.PUBREC, 1)]
    await pub.send(Ack(PacketType.PUBREL, 1))  # (the network settles it at the PUBREL)
    for _ in range(3):
        await _settle(healed, bc)
    for r in (a, b, c):
        assert not r.mqtt_sessions.sessions["reader"].done, r.id


async def test_a_completed_qos_2_message_leaves_the_session_once_the_network_settled_it(tmp_path: Path):
    a, b, c, ac, bc = await _line(tmp_path)
    reader = MqttWire(b)
    await reader.send(Connect(reader.version, "reader", clean_start=False, props=EXPIRY))
    await reader.send(Subscribe(1, (Subscription("news/+", 2),)))
    slow = MqttWire(a, peer=("127.0.0.1", 46003))  # (another subscriber, which answers last)
    await slow.send(Connect(slow.version, "slow"))
    await slow.send(Subscribe(1, (Subscription("news/+", 1),)))
    await _settle(ac, bc)
    pub = MqttWire(a, peer=("127.0.0.1", 46001))
    await pub.send(Connect(pub.version, "writer"))
    for n in range(3):
        await pub.send(Publish("news/a", b"%d" % n, 2, packet_id=n + 1))
    await _settle(ac, bc)
    got = _publishes(await reader.read())
    assert [p.payload for p in got] == [b"0", b"1", b"2"]
    for p in got:  # the whole QoS 2 flow, each step once the network has it
        await reader.send(Ack(PacketType.PUBREC, p.packet_id))
        await _settle(ac, bc)
        assert Ack(PacketType.PUBREL, p.packet_id) in await reader.read()
        await reader.send(Ack(PacketType.PUBCOMP, p.packet_id))
        await _settle(ac, bc)
    # not settled yet (the other subscriber has not answered): kept, in every replica
    for r in (a, b, c):
        assert len(r.mqtt_sessions.sessions["reader"].done) == 3, r.id
    assert [p for p in await pub.read() if isinstance(p, Ack)] == []
    for p in _publishes(await slow.read()):
        await slow.send(Ack(PacketType.PUBACK, p.packet_id))
    await _settle(ac, bc)
    assert sorted(p.packet_id for p in await pub.read() if isinstance(p, Ack)) == [1, 2, 3]
    for n in range(3):
        await pub.send(Ack(PacketType.PUBREL, n + 1))  # (the network settles each at its PUBREL)
    for _ in range(3):
        await _settle(ac, bc)
    for r in (a, b, c):
        session = r.mqtt_sessions.sessions["reader"]
        assert not session.outbound and not session.done, r.id
