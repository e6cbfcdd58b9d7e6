"""Our codec against a real MQTT client (issue 26): paho-mqtt 2.x, 3.1.1 and 5.0, over real
TCP to a small server in this test that speaks only through ``router.mqtt`` (decode what
paho sends, encode the answers). paho completing its QoS 1 and 2 flows proves it read our
acknowledgements; the values we decoded prove we read its packets; what paho receives from
us, properties included, proves our PUBLISH."""

from __future__ import annotations

import queue
import socket
import threading

import paho.mqtt.client as mqtt
import pytest
from once.router.mqtt.codec import decode, encode
from once.router.mqtt.codes import PacketType, Prop, Reason, Version
from once.router.mqtt.framing import PacketReader
from once.router.mqtt.packets import (
    Ack,
    Connack,
    Connect,
    Disconnect,
    PingResp,
    Publish,
    Suback,
    Subscribe,
    Unsuback,
    Unsubscribe,
)
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties


class CodecServer:
    """One connection at a time: answers as a broker would, and records every packet."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.got: queue.Queue[object] = queue.Queue()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        reader = PacketReader()
        version = None
        with conn:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                for t, f, body in reader.feed(data):
                    packet = decode(t, f, body, version)
                    self.got.put(packet)
                    if isinstance(packet, Connect):
                        version = packet.version
                    for answer in self._answer(packet):
                        assert version is not None
                        conn.sendall(encode(answer, version))
                    if isinstance(packet, Disconnect):
                        return

    def _answer(self, p: object) -> list[object]:
        if isinstance(p, Connect):
            return [Connack()]
        if isinstance(p, Subscribe):
            # granted, and a message for the client on its first filter, with properties
            props = ((Prop.CONTENT_TYPE, "text/plain"), (Prop.USER_PROPERTY, ("from", "once")),
                     (Prop.USER_PROPERTY, ("n", "2")))
            return [Suback(p.packet_id, tuple(s.qos for s in p.subscriptions)),
                    Publish("news/today", b"\x00hello\xff", qos=1, packet_id=77, props=props)]
        if isinstance(p, Publish) and p.qos == 1:
            return [Ack(PacketType.PUBACK, p.packet_id)]
        if isinstance(p, Publish) and p.qos == 2:
            return [Ack(PacketType.PUBREC, p.packet_id)]
        if isinstance(p, Ack) and p.kind is PacketType.PUBREL:
            return [Ack(PacketType.PUBCOMP, p.packet_id)]
        if isinstance(p, Unsubscribe):
            return [Unsuback(p.packet_id, tuple(Reason.SUCCESS for _ in p.filters))]
        if type(p).__name__ == "PingReq":
            return [PingResp()]
        return []

    def packets(self, until: type, timeout: float = 10.0) -> list[object]:
        out = []
        while True:
            p = self.got.get(timeout=timeout)
            out.append(p)
            if isinstance(p, until):
                return out


@pytest.mark.parametrize("version", [Version.V311, Version.V5])
def test_paho_talks_to_our_codec(version):
    server = CodecServer()
    v5 = version is Version.V5
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="paho-1",
                         protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311)
    client.username_pw_set("alice", "s3cret")
    client.will_set("wills/paho-1", b"gone", qos=1)
    received: queue.Queue[mqtt.MQTTMessage] = queue.Queue()
    client.on_message = lambda c, u, msg: received.put(msg)
    client.connect("127.0.0.1", server.port, keepalive=30)
    client.loop_start()
    try:
        client.subscribe([("news/+", 1), ("scores/#", 2)])
        msg = received.get(timeout=10)
        assert (msg.topic, msg.payload, msg.qos) == ("news/today", b"\x00hello\xff", 1)
        if v5:
            assert msg.properties.ContentType == "text/plain"
            assert msg.properties.UserProperty == [("from", "once"), ("n", "2")]
        props = None
        if v5:
            props = Properties(PacketTypes.PUBLISH)
            props.ContentType = "application/json"
            props.CorrelationData = b"\x01\x02"
            props.ResponseTopic = "replies/paho-1"
            props.MessageExpiryInterval = 60
            props.UserProperty = [("a", "1"), ("a", "2")]
        infos = [client.publish("scores/game", f"q{q}".encode(), qos=q, properties=props) for q in (0, 1, 2)]
        for info in infos:
            info.wait_for_publish(timeout=10)  # QoS 1 and 2: our PUBACK, PUBREC and PUBCOMP were understood
            assert info.is_published()
        client.unsubscribe("news/+")
        client.disconnect()
        got = server.packets(until=Disconnect)
    finally:
        client.loop_stop()
    connect = got[0]
    assert isinstance(connect, Connect) and connect.version is version
    assert (connect.client_id, connect.username, connect.password, connect.keep_alive) == ("paho-1", "alice", b"s3cret", 30)
    assert connect.will is not None and (connect.will.topic, connect.will.payload, connect.will.qos) == (
        "wills/paho-1", b"gone", 1)
    sub = next(p for p in got if isinstance(p, Subscribe))
    assert [(s.filter, s.qos) for s in sub.subscriptions] == [("news/+", 1), ("scores/#", 2)]
    pubs = [p for p in got if isinstance(p, Publish)]
    assert [(p.topic, p.payload, p.qos) for p in pubs] == [("scores/game", b"q0", 0), ("scores/game", b"q1", 1),
                                                           ("scores/game", b"q2", 2)]
    assert any(isinstance(p, Ack) and p.kind is PacketType.PUBACK and p.packet_id == 77 for p in got)  # it acked ours
    assert any(isinstance(p, Ack) and p.kind is PacketType.PUBREL for p in got)
    assert any(isinstance(p, Unsubscribe) and p.filters == ("news/+",) for p in got)
    if v5:
        assert dict(pubs[1].props).get(Prop.CONTENT_TYPE) == "application/json"
        assert dict(pubs[1].props).get(Prop.CORRELATION_DATA) == b"\x01\x02"
        assert dict(pubs[1].props).get(Prop.RESPONSE_TOPIC) == "replies/paho-1"
        assert dict(pubs[1].props).get(Prop.MESSAGE_EXPIRY_INTERVAL) == 60
        assert [v for p, v in pubs[1].props if p is Prop.USER_PROPERTY] == [("a", "1"), ("a", "2")]
    server.sock.close()
