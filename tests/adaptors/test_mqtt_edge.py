"""The MQTT client adaptor (``router/adaptors/mqtt/edge.py``) in-process: a router's MQTT
connections over transports that are not sockets, packets encoded by the router's own
MQTT codec at the client's end (``tests/support/inprocess.py``)."""

from __future__ import annotations

from once.router.mqtt.codes import PacketType, Reason
from once.router.mqtt.packets import Ack, Connack, Connect, Publish, Suback, Subscribe, Subscription
from support.inprocess import MqttWire, router


async def test_a_qos_1_publish_is_acknowledged_only_once_the_qos_1_subscriber_acknowledged_it():
    r = router()
    sub, pub = MqttWire(r), MqttWire(r, peer=("127.0.0.1", 46001))
    for client, name in ((sub, "s"), (pub, "p")):
        [ack] = await client.send(Connect(client.version, name))
        assert isinstance(ack, Connack) and ack.reason is Reason.SUCCESS
    [suback] = await sub.send(Subscribe(1, (Subscription("news/+", 1),)))
    assert isinstance(suback, Suback) and suback.reasons == (1,)
    assert await pub.send(Publish("news/a", b"hello", 1, packet_id=7)) == []  # no PUBACK yet
    [got] = [p for p in await sub.read() if isinstance(p, Publish)]
    assert (got.topic, got.payload, got.qos, got.dup) == ("news/a", b"hello", 1, False)
    await sub.send(Ack(PacketType.PUBACK, got.packet_id))
    assert [p for p in await pub.read() if isinstance(p, Ack)] == [Ack(PacketType.PUBACK, 7)]


async def test_a_malformed_packet_closes_that_connection_alone():
    r = router()
    good, bad = MqttWire(r), MqttWire(r, peer=("127.0.0.1", 46001))
    await good.send(Connect(good.version, "g"))
    bad.conn.data_received(b"\x10\x02\xff\xff")  # a CONNECT whose protocol name is cut short
    assert bad.transport.closing
    [suback] = await good.send(Subscribe(1, (Subscription("t", 0),)))
    assert isinstance(suback, Suback) and not good.transport.closing


async def test_a_subscription_gap_ends_the_mqtt_session_and_says_so():
    """Another router gave this client's subscription up while out of reach (a gap,
    ``docs/protocol.md`` section 7; heard here as the network hears it, from a neighbour's
    event): MQTT has no end for one subscription, so the session ends with its connection,
    DISCONNECT 0x80 naming the gap, and the client's next connect finds no session."""
    from once.linkstate.messages import SubEvent
    from once.linkstate.messages import Subscription as Held
    from once.router.mqtt.packets import Disconnect

    r = router()
    first = MqttWire(r)
    [ack] = await first.send(Connect(first.version, "m", clean_start=False))
    assert isinstance(ack, Connack) and ack.reason is Reason.SUCCESS
    [suback] = await first.send(Subscribe(1, (Subscription("news/+", 2),)))
    assert isinstance(suback, Suback) and suback.reasons == (2,)
    r.network.receive("X", SubEvent("X", 1, False, Held("X", "news/+", "m", "mqtt:news/+", since=1, gap=5)))
    r.flush()
    [bye] = [p for p in await first.read() if isinstance(p, Disconnect)]
    assert bye.reason is Reason.UNSPECIFIED_ERROR
    assert any("subscription gap: router X" in str(v) for _, v in bye.props), bye.props
    assert r.core.tables.stats["gaps_told"] == 1
    again = MqttWire(r, peer=("127.0.0.1", 46001))
    [ack] = await again.send(Connect(again.version, "m", clean_start=False))
    assert isinstance(ack, Connack) and not ack.session_present
