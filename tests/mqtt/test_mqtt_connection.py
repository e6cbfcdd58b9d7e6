"""The sans-IO MQTT server connection (issue 26): pure, packets in, events and packets out."""

from __future__ import annotations

import pytest
from once.router.mqtt.codec import decode, encode
from once.router.mqtt.codes import PacketType, Prop, Reason, Version
from once.router.mqtt.connection import MqttConnection, PacketTooLarge
from once.router.mqtt.events import (
    ClientConnected,
    ClientDisconnected,
    ConnectionFailed,
    DeliveryAcked,
    DeliveryReceived,
    MessagePublished,
    PublishReleased,
    SubscribeRequested,
)
from once.router.mqtt.framing import PacketReader
from once.router.mqtt.packets import (
    Ack,
    Connack,
    Connect,
    Disconnect,
    PingReq,
    PingResp,
    Publish,
    Suback,
    Subscribe,
    Subscription,
)


class Client:
    """Encodes what a client sends; decodes what the server sent back."""

    def __init__(self, version: Version = Version.V5, **kw) -> None:
        self.version = version
        self.conn = MqttConnection(**kw)

    def send(self, *packets) -> list:
        return self.conn.receive_data(b"".join(encode(p, self.version) for p in packets))

    def got(self) -> list:
        return [decode(t, f, b, self.version) for t, f, b in PacketReader().feed(self.conn.data_to_send())]

    def connected(self, props=(), **kw) -> None:
        events = self.send(Connect(self.version, "c1", props=props, **kw))
        assert events == [ClientConnected(Connect(self.version, "c1", props=props, **kw))]
        assert self.conn.accept() == []
        (ack,) = self.got()
        assert isinstance(ack, Connack) and ack.reason is Reason.SUCCESS


@pytest.mark.parametrize("version", list(Version))
def test_connect_accept_publish_at_each_qos_and_disconnect(version):
    c = Client(version)
    c.connected()
    e0, e1, e2 = (c.send(Publish("t", b"m", qos, packet_id=qos or None)) for qos in (0, 1, 2))
    assert [type(e[0]) for e in (e0, e1, e2)] == [MessagePublished] * 3 and c.got() == []  # nothing before the answers
    c.conn.puback(1)
    c.conn.pubrec(2)
    assert c.got() == [Ack(PacketType.PUBACK, 1), Ack(PacketType.PUBREC, 2)]
    assert c.send(Ack(PacketType.PUBREL, 2)) == [PublishReleased(2)] and c.got() == [Ack(PacketType.PUBCOMP, 2)]
    assert c.send(PingReq()) == [] and c.got() == [PingResp()]
    assert c.send(Disconnect()) == [ClientDisconnected()] and c.conn.closed


def test_a_qos_2_message_sent_again_before_its_release_is_not_a_new_message():
    c = Client()
    c.connected()
    c.send(Publish("t", b"m", 2, packet_id=5))
    c.conn.pubrec(5)
    c.got()
    assert c.send(Publish("t", b"m", 2, dup=True, packet_id=5)) == []  # (MQTT-4.3.3-10)
    assert c.got() == [Ack(PacketType.PUBREC, 5)]
    assert c.send(Ack(PacketType.PUBREL, 5)) == [PublishReleased(5)]
    # after PUBCOMP the packet id is a new message's
    assert c.send(Publish("t", b"n", 2, packet_id=5)) == [MessagePublished(Publish("t", b"n", 2, packet_id=5))]


def test_packets_sent_before_the_connack_wait_for_it_and_a_refusal_drops_them():
    c = Client()
    events = c.conn.receive_data(encode(Connect(Version.V5, "c1"), Version.V5) + encode(PingReq(), Version.V5))
    assert [type(e) for e in events] == [ClientConnected] and c.got() == []
    assert c.conn.accept() == [] and c.got() == [
        Connack(props=((Prop.RECEIVE_MAXIMUM, 1000), (Prop.TOPIC_ALIAS_MAXIMUM, 64),
                       (Prop.MAXIMUM_PACKET_SIZE, 1024 * 1024), (Prop.RETAIN_AVAILABLE, 0))), PingResp()]
    r = Client()
    r.send(Connect(Version.V5, "c2"), PingReq())
    r.conn.refuse(Reason.NOT_AUTHORIZED, "no")
    assert r.got() == [Connack(reason=Reason.NOT_AUTHORIZED, props=((Prop.REASON_STRING, "no"),))] and r.conn.closed


@pytest.mark.parametrize("version", list(Version))
def test_protocol_violations_disconnect_with_their_reason(version):
    cases = [
        (Connect(version, "again"), Reason.PROTOCOL_ERROR),
        (Publish("a/+", b"x"), Reason.TOPIC_NAME_INVALID),
        (Suback(1, (0,)), Reason.PROTOCOL_ERROR),  # the server's packet
        (Ack(PacketType.PUBACK, 9), Reason.PROTOCOL_ERROR),  # nothing in flight
    ]
    for packet, reason in cases:
        c = Client(version)
        c.connected()
        (failed,) = c.send(packet)
        assert isinstance(failed, ConnectionFailed) and failed.reason is reason and c.conn.closed
        got = c.got()
        if version is Version.V5:
            assert len(got) == 1 and isinstance(got[0], Disconnect) and got[0].reason is reason
        else:
            assert got == []  # 3.1.1: the connection is closed, nothing said
        assert c.send(PingReq()) == []  # closed: nothing more is read


def test_the_first_packet_must_be_connect_and_an_old_protocol_level_gets_0x84():
    c = Client()
    (failed,) = c.conn.receive_data(encode(PingReq(), Version.V5))
    assert failed.reason is Reason.PROTOCOL_ERROR and c.conn.closed and c.conn.data_to_send() == b""
    old = MqttConnection()
    (failed,) = old.receive_data(b"\x10\x0c\x00\x06MQIsdp\x03\x02\x00\x0a")  # MQTT 3.1
    assert failed.reason is Reason.UNSUPPORTED_PROTOCOL_VERSION
    assert old.data_to_send() == b"\x20\x02\x00\x01"  # CONNACK, 3.1.1's "unacceptable protocol version"


def test_the_receive_maximum_is_enforced_and_topic_aliases_resolve():
    c = Client(receive_maximum=2)
    c.connected()
    c.send(Publish("t", b"1", 1, packet_id=1), Publish("t", b"2", 2, packet_id=2))
    (failed,) = c.send(Publish("t", b"3", 1, packet_id=3))
    assert failed.reason is Reason.RECEIVE_MAXIMUM_EXCEEDED
    a = Client(topic_alias_maximum=4)
    a.connected()
    (first,) = a.send(Publish("long/topic", b"1", props=((Prop.TOPIC_ALIAS, 3),)))
    (second,) = a.send(Publish("", b"2", props=((Prop.TOPIC_ALIAS, 3), (Prop.CONTENT_TYPE, "x"))))
    assert first.publish.topic == second.publish.topic == "long/topic"
    assert second.publish.props == ((Prop.CONTENT_TYPE, "x"),)  # (the alias is ours, not the message's)
    (failed,) = a.send(Publish("t", b"3", props=((Prop.TOPIC_ALIAS, 5),)))
    assert failed.reason is Reason.TOPIC_ALIAS_INVALID


def test_our_messages_follow_the_clients_receive_maximum_and_packet_size():
    c = Client()
    c.connected(props=((Prop.RECEIVE_MAXIMUM, 2), (Prop.MAXIMUM_PACKET_SIZE, 64)))
    ids = [c.conn.publish("t", b"m", 1), c.conn.publish("t", b"m", 2)]
    assert ids == [1, 2] and c.conn.credit() == 0
    with pytest.raises(ValueError):
        c.conn.publish("t", b"m", 1)
    with pytest.raises(PacketTooLarge):
        c.conn.publish("t", b"x" * 100, 0)
    c.got()
    assert c.send(Ack(PacketType.PUBACK, 1)) == [DeliveryAcked(1)] and c.conn.credit() == 1
    assert c.send(Ack(PacketType.PUBREC, 2)) == [DeliveryReceived(2)] and c.got() == [Ack(PacketType.PUBREL, 2)]
    assert c.send(Ack(PacketType.PUBCOMP, 2)) == [DeliveryAcked(2)] and c.conn.credit() == 2


def test_keep_alive_closes_a_silent_client_after_one_and_a_half_times_it():
    c = Client()
    c.connected(keep_alive=10)
    assert c.conn.tick(100.0) == 105.0  # (ticked again within half the keep-alive)
    assert c.conn.tick(110.0) == 115.0
    c.send(PingReq())  # heard: the clock starts again
    assert c.conn.tick(112.0) == 117.0
    c.got()
    assert c.conn.tick(127.0) is None and c.conn.closed
    (disconnect,) = c.got()
    assert disconnect.reason is Reason.KEEP_ALIVE_TIMEOUT


def test_subscribe_is_the_applications_to_answer_and_3_1_1_failures_are_0x80():
    c = Client(Version.V311)
    c.connected()
    sub = Subscribe(3, (Subscription("a/#", 1), Subscription("b/+", 2)))
    assert c.send(sub) == [SubscribeRequested(sub)]
    c.conn.suback(3, [1, Reason.NOT_AUTHORIZED])
    assert c.got() == [Suback(3, (1, 0x80))]


def test_a_pubrel_waits_for_the_application_when_it_releases_and_a_resend_keeps_the_packet_id():
    """``release_by_app``: a persistent session makes a PUBREC known to the network before
    the PUBREL goes; a message sent again (a router after ours) keeps its packet id."""
    c = Client(release_by_app=True)
    c.connected()
    pid = c.conn.reserve(2)
    assert c.conn.credit() == 65534  # (reserved: counted against the client's receive maximum)
    c.conn.publish("t", b"m", 2, packet_id=pid, dup=True)
    (sent,) = c.got()
    assert sent.packet_id == pid and sent.dup
    assert c.send(Ack(PacketType.PUBREC, pid)) == [DeliveryReceived(pid, Reason.SUCCESS)]
    assert c.got() == []  # no PUBREL until the application says
    c.conn.pubrel(pid)
    assert c.got() == [Ack(PacketType.PUBREL, pid)]
    assert c.send(Ack(PacketType.PUBCOMP, pid)) == [DeliveryAcked(pid, Reason.SUCCESS)]


def test_a_resumed_session_completes_a_pubrel_it_never_saw_and_pubcomp_repeats_pubrec_properties():
    c = Client()
    assert c.send(Connect(Version.V5, "c1", clean_start=False))
    c.conn.accept(session_present=True)
    (ack,) = c.got()
    assert ack.session_present
    # a PUBREL for a message the router before us answered: success, not 0x92
    assert c.send(Ack(PacketType.PUBREL, 9)) == []
    assert c.got() == [Ack(PacketType.PUBCOMP, 9, Reason.SUCCESS)]
    c.send(Publish("t", b"m", 2, packet_id=3))
    named = ((Prop.USER_PROPERTY, ("once-gid", "ab")),)
    c.conn.pubrec(3, Reason.SUCCESS, named)
    assert c.got() == [Ack(PacketType.PUBREC, 3, Reason.SUCCESS, named)]
    assert c.send(Ack(PacketType.PUBREL, 3)) == [PublishReleased(3)]
    assert c.got() == [Ack(PacketType.PUBCOMP, 3, Reason.SUCCESS, named)]  # (clients see the PUBCOMP's)


def test_a_fresh_session_answers_an_unknown_pubrel_with_0x92_in_5_0():
    c = Client()
    c.connected()
    c.send(Ack(PacketType.PUBREL, 9))
    assert c.got() == [Ack(PacketType.PUBCOMP, 9, Reason.PACKET_IDENTIFIER_NOT_FOUND)]
