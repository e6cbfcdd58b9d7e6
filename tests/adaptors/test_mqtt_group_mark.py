"""A message passed on to an MQTT member from another group member is marked DUP, in-process
(``router/adaptors/mqtt/outbound.py``; ``docs/mqtt.md``, "Our messages to it").

A standard AMQP member may have processed a message it never answered (killed as it
accepted: Proton had not written the disposition yet), and the group passes the message
on. To an AMQP member the network's mark is `delivery-count`; to an MQTT member under a
persistent session it is DUP, the only mark MQTT has, even under a packet id the client
never had (fresh ring7c soak seed 613022: 35 messages a killed Proton member had accepted
went to an MQTT QoS 2 member with DUP 0, and the group processed them twice, unmarked)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from once.router.adaptors.mqtt.edge import end_suspended
from once.router.adaptors.mqtt.sessions import SessionStore
from once.router.amqp.events import DeliveriesReceived
from once.router.amqp.performatives import ReceiverSettleMode, Role, Source, Target
from once.router.config import load_topology
from once.router.mqtt.codes import Prop
from once.router.mqtt.packets import Connack, Connect, Publish, Suback, Subscribe, Subscription
from once.router.server import Router
from support.inprocess import MqttWire, Wire

TOPOLOGY = """
routers:
  A: {listen: 127.0.0.1:5672, inter_router: 127.0.0.1:15672, mqtt: 127.0.0.1:1883}
links: []
"""
EXPIRY = ((Prop.SESSION_EXPIRY_INTERVAL, 3600),)


def _router(tmp_path: Path) -> Router:
    path = tmp_path / "single.yaml"
    path.write_text(TOPOLOGY)
    r = Router(load_topology(path), "A")
    r.mqtt_sessions = SessionStore(r)  # (as the router's start does)
    r.mqtt_sessions.on_end = lambda client_id: end_suspended(r, client_id)
    return r


async def _attach(wire: Wire, role: Role, name: str, source: Source, target: Target) -> Any:
    c = wire.client
    if not c.sessions:
        c.open()
        await wire.pump()
        session = c.begin()
    else:
        session = next(iter(c.sessions.values()))
    link = c.attach(session, name, role, source=source, target=target, rcv_settle_mode=ReceiverSettleMode.FIRST)
    await wire.pump()
    return link


def _of(packets: list[Any], kind: type) -> list[Any]:
    return [p for p in packets if isinstance(p, kind)]


def _publishes(packets: list[Any]) -> list[Publish]:
    return [p for p in packets if isinstance(p, Publish)]


async def test_a_message_passed_on_from_a_killed_amqp_member_reaches_an_mqtt_member_marked_dup(tmp_path: Path):
    a = _router(tmp_path)
    mqtt = MqttWire(a)
    [ack] = await mqtt.send(Connect(mqtt.version, "worker-m", clean_start=False, props=EXPIRY))
    assert isinstance(ack, Connack)
    [suback] = _of(await mqtt.send(Subscribe(1, (Subscription("$share/workers/jobs", 2),))), Suback)
    assert suback.reasons == (2,)

    amqp = Wire(a, "worker-a", peer=("127.0.0.1", 45001))
    rx = await _attach(amqp, Role.RECEIVER, "workers|global",
                       Source(address="jobs", capabilities=("shared", "global")), Target())
    amqp.client.flow(rx, 10)
    await amqp.pump()

    pub = Wire(a, "pub", peer=("127.0.0.1", 45002))
    tx = await _attach(pub, Role.SENDER, "p", Source(), Target(address="jobs"))
    await pub.pump()
    for i in range(4):  # (one member each, at least: the group spreads them)
        body = f"job {i}".encode()
        pub.client.send(tx, bytes([i]), b"\x00Sw\xa1" + bytes([len(body)]) + body)  # (amqp-value)
        await pub.pump()
    await amqp.pump()
    at_amqp = [d for e in amqp.events if isinstance(e, DeliveriesReceived) for d in e.deliveries]
    first = _publishes(await mqtt.read())
    assert at_amqp and first, "the group gave each member some"
    assert all(not p.dup for p in first)  # (new to the group: unmarked)

    amqp.lose()  # killed before its acceptance left it: it may have processed them
    again = _publishes(await mqtt.read())
    assert len(again) == len(at_amqp)
    assert all(p.dup for p in again), [(p.payload, p.dup) for p in again]
    assert {p.packet_id for p in again}.isdisjoint({p.packet_id for p in first})  # (new packet ids all the same)
