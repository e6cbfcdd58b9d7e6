"""MQTT clients on real routers (issue 26, first listener): paho-mqtt 2.x (3.1.1 and 5.0),
Debian's mosquitto clients and Proton on one network of OS processes over TCP."""

from __future__ import annotations

import json
import queue
import shutil
import socket
import subprocess
import urllib.request

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from proton.utils import BlockingConnection, LinkDetached
from support.debian import install
from support.proton_clients import ProtonPublisher, ProtonSubscriber
from support.proton_options import SharedSubscription
from support.routers import Network, masked, wait_for

ACCEPTED = 36


class Paho:
    """A paho client on its own network thread; what it gets lands in ``messages``."""

    def __init__(self, where: tuple[str, int], client_id: str, v5: bool = True) -> None:
        self.messages: queue.Queue[mqtt.MQTTMessage] = queue.Queue()
        self.acks: queue.Queue[object] = queue.Queue()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id,
                                  protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311)
        self.client.on_message = lambda c, u, m: self.messages.put(m)
        self.client.on_subscribe = lambda c, u, mid, codes, props: self.acks.put([int(getattr(x, "value", x))
                                                                                for x in codes])
        self.client.connect(*where, keepalive=30)
        self.client.loop_start()

    def subscribe(self, *filters: tuple[str, int]) -> list[int]:
        self.client.subscribe(list(filters))
        return self.acks.get(timeout=15)  # (the SUBACK: every filter's subscription is live network-wide)

    def take(self, n: int, timeout: float = 20) -> list[mqtt.MQTTMessage]:
        return [self.messages.get(timeout=timeout) for _ in range(n)]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@pytest.fixture(scope="module")
def line3(tmp_path_factory):
    """One line of three for the module (each test its own topics and client ids): the
    suite's 10 minutes hold one network start here, not one per test."""
    net = Network("line3.yaml", tmp_path_factory.mktemp("line3"))
    yield net
    net.stop()


def test_mqtt_and_amqp_clients_across_a_line_of_three_byte_exact_and_in_order(line3):
    v5 = Paho(line3["C"].mqtt, "sub-v5")
    v311 = Paho(line3["B"].mqtt, "sub-v311", v5=False)
    assert v5.subscribe(("sensors/1", 2)) == [2]
    assert v311.subscribe(("sensors/1", 1)) == [1]
    amqp = ProtonSubscriber(line3["A"].url, "sensors/1", name="amqp-sub")
    pub = Paho(line3["A"].mqtt, "pub")
    props = Properties(PacketTypes.PUBLISH)
    props.ContentType = "application/octet-stream"
    props.UserProperty = [("unit", "C")]
    bodies = [bytes([i]) * i + b"\x00\xff" for i in range(1, 41)]
    infos = [pub.client.publish("sensors/1", body, qos=1 + i % 2, properties=props) for i, body in enumerate(bodies)]
    for info in infos:
        info.wait_for_publish(timeout=30)  # PUBACK / PUBREC: every subscriber in the network accepted
    # (each at the lower of the two QoS: paho hands a QoS 2 message to the application at
    # its PUBREL, a round trip after a QoS 1 one sent after it; MQTT 5.0 section 4.6 orders
    # a publisher's messages per QoS)
    got_v5 = v5.take(40)
    for qos in (1, 2):
        assert [m.payload for m in got_v5 if m.qos == qos] == [b for i, b in enumerate(bodies) if 1 + i % 2 == qos]
    assert [m.payload for m in v311.take(40)] == bodies
    got = amqp.take(40)
    assert [bytes(m.body) for m in got] == bodies
    assert got[0].content_type == "application/octet-stream" and got[0].properties == {"unit": "C"}
    # and the other way: an AMQP publisher to MQTT subscribers
    proton = ProtonPublisher(line3["B"].url, "sensors/1")
    assert proton.send_wait(b"\x01amqp\x02") == ACCEPTED
    assert v5.take(1)[0].payload == v311.take(1)[0].payload == b"\x01amqp\x02"
    for c in (v5, v311, pub, amqp, proton):
        c.close()


def test_an_mqtt_acknowledgement_waits_for_every_subscriber_to_accept(line3):
    slow = ProtonSubscriber(line3["C"].url, "orders", name="slow", auto_accept=False)
    pub = Paho(line3["A"].mqtt, "orders-pub")
    info = pub.client.publish("orders", b"o1", qos=1)
    assert bytes(slow.get(timeout=15).body) == b"o1"
    assert not info.is_published()  # no PUBACK while the AMQP subscriber has not accepted
    slow.command("accept")
    info.wait_for_publish(timeout=15)
    assert info.is_published()
    pub.close()
    slow.close()


def test_wildcard_subscribers_across_the_line_mqtt_and_amqp(line3):
    """A pattern is a subscription across the network: MQTT and AMQP subscribers of
    ``w/+/t`` and ``w/#`` at each end get every matching message, from MQTT and AMQP
    publishers at the other end, each publisher's in order, and nothing else."""
    plus = Paho(line3["C"].mqtt, "wild-plus")
    hash311 = Paho(line3["B"].mqtt, "wild-hash", v5=False)
    assert plus.subscribe(("w/+/t", 2)) == [2]
    assert hash311.subscribe(("w/#", 1)) == [1]
    amqp = ProtonSubscriber(line3["C"].url, "w/+/t", name="wild-amqp")
    pub = Paho(line3["A"].mqtt, "wild-pub")
    sent = [(f"w/{i % 3}/{'tx'[i % 2]}", f"m{i}".encode()) for i in range(30)]
    for topic, body in sent:
        pub.client.publish(topic, body, qos=2).wait_for_publish(timeout=30)
    proton = ProtonPublisher(line3["A"].url, "w/9/t")
    assert proton.send_wait(b"from amqp") == ACCEPTED
    plus_want = [b for t, b in sent if t.endswith("/t")] + [b"from amqp"]
    assert [m.payload for m in plus.take(len(plus_want))] == plus_want
    assert [bytes(m.body) for m in amqp.take(len(plus_want))] == plus_want
    hash_want = [b for _, b in sent] + [b"from amqp"]
    got = hash311.take(len(hash_want))
    assert [m.payload for m in got] == hash_want and got[0].topic == "w/0/t"  # (the topic it was published to)
    # nothing more came: a message to a topic no pattern matches, then the last one they get
    pub.client.publish("x/1/t", b"nobody", qos=1).wait_for_publish(timeout=30)
    pub.client.publish("w/last/t", b"last", qos=1).wait_for_publish(timeout=30)
    assert plus.take(1)[0].payload == hash311.take(1)[0].payload == bytes(amqp.get().body) == b"last"
    for c in (plus, hash311, amqp, pub, proton):
        c.close()


def test_a_group_of_a_pattern_shares_every_matching_topic_and_is_not_the_group_of_a_topic(line3):
    """``$share/jobs/q/+`` (MQTT, at B) and an AMQP member of group ``jobs`` on ``q/+`` (at
    C) are one group, of every topic ``q/+`` matches: each message to ``q/1`` or ``q/2`` goes
    to one of them, once. ``$share/jobs/q/1`` is another group, of ``q/1`` alone: it gets
    each of those too."""
    mqtt_member = Paho(line3["B"].mqtt, "share-pattern")
    assert mqtt_member.subscribe(("$share/jobs/q/+", 1)) == [1]
    amqp_member = ProtonSubscriber(line3["C"].url, "q/+", name="jobs|global", container_id="share-amqp",
                                   options=SharedSubscription())
    other_group = Paho(line3["C"].mqtt, "share-topic")
    assert other_group.subscribe(("$share/jobs/q/1", 1)) == [1]
    pub = Paho(line3["A"].mqtt, "share-pub")
    sent = [(f"q/{1 + i % 2}", f"j{i}".encode()) for i in range(40)]
    for topic, body in sent:
        pub.client.publish(topic, body, qos=1).wait_for_publish(timeout=30)  # (every member chosen accepted)
    got = [m.payload for m in _drain(mqtt_member)] + [bytes(m.body) for m in _drain(amqp_member)]
    assert sorted(got) == sorted(b for _, b in sent)  # each message once, across the group
    assert [m.payload for m in other_group.take(20)] == [b for t, b in sent if t == "q/1"]
    for c in (mqtt_member, amqp_member, other_group, pub):
        c.close()


def _drain(c: Paho | ProtonSubscriber) -> list:
    """What the client has received so far (both keep it in ``messages``)."""
    out = []
    while True:
        try:
            out.append(c.messages.get_nowait())
        except queue.Empty:
            return out


def test_a_publisher_to_a_pattern_is_refused(line3):
    conn = BlockingConnection(line3["A"].url, timeout=30)
    with pytest.raises(LinkDetached) as refused:
        conn.create_sender("a/+/c")
    conn.close()
    assert "amqp:invalid-field" in str(refused.value) and "'a/+/c' is a pattern" in str(refused.value)


def _mosquitto() -> tuple[str, str]:
    """Debian's mosquitto clients, installed when missing (as root)."""
    if not shutil.which("mosquitto_pub"):
        install("mosquitto-clients", "the MQTT test")
    pub, sub = shutil.which("mosquitto_pub"), shutil.which("mosquitto_sub")
    assert pub and sub, "apt-get install mosquitto-clients failed"
    return pub, sub


@pytest.mark.parametrize("version", ["mqttv311", "mqttv5"])
def test_mosquitto_clients_across_the_line(line3, version):
    mpub, msub = _mosquitto()
    (ahost, aport), (chost, cport) = line3["A"].mqtt, line3["C"].mqtt
    # (stdbuf: -d's lines come as they happen, not when the pipe's buffer fills)
    sub = subprocess.Popen(["stdbuf", "-oL", msub, "-h", chost, "-p", str(cport), "-V", version, "-t", "m/x",
                            "-t", "mw/+", "-q", "2", "-C", "4", "-i", f"msub-{version}", "-d"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = sub.stdout.readline()
        while "SUBACK" not in line:  # (-d prints the packets: the SUBACK says it is subscribed)
            assert line, sub.stderr.read()
            line = sub.stdout.readline()
        for i in range(3):
            done = subprocess.run([mpub, "-h", ahost, "-p", str(aport), "-V", version, "-t", "m/x", "-q", str(1 + i % 2),
                                   "-m", f"hello {i}", "-i", f"mpub-{version}-{i}"], capture_output=True, text=True,
                                  timeout=30)
            assert done.returncode == 0, done.stderr
        # and one to a topic its wildcard filter matches
        done = subprocess.run([mpub, "-h", ahost, "-p", str(aport), "-V", version, "-t", "mw/y", "-q", "1",
                               "-m", "hello wild", "-i", f"mpub-{version}-w"], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        out, _ = sub.communicate(timeout=30)
    finally:
        sub.kill()
    assert [line for line in out.splitlines() if line.startswith("hello")] == ["hello 0", "hello 1", "hello 2",
                                                                                 "hello wild"]


def test_a_subscriber_gets_a_message_at_the_lower_of_its_qos_and_the_publishers(line3):
    """MQTT 5.0 section 4.5: a QoS 1 publish reaches a QoS 2 subscription (at another
    router) at QoS 1, a QoS 2 one at 2; a QoS 1 subscription gets QoS 2 messages at 1; an
    unsettled AMQP delivery (exactly once) is QoS 2."""
    two, one = Paho(line3["C"].mqtt, "min-qos-2"), Paho(line3["B"].mqtt, "min-qos-1")
    assert two.subscribe(("minq", 2)) == [2] and one.subscribe(("minq", 1)) == [1]
    pub = Paho(line3["A"].mqtt, "min-qos-pub")
    proton = ProtonPublisher(line3["A"].url, "minq")
    for qos in (1, 2):
        pub.client.publish("minq", f"qos {qos}".encode(), qos=qos).wait_for_publish(timeout=20)
    assert proton.send_wait(b"amqp") == ACCEPTED
    assert [(m.payload, m.qos) for m in two.take(3)] == [(b"qos 1", 1), (b"qos 2", 2), (b"amqp", 2)]
    assert [(m.payload, m.qos) for m in one.take(3)] == [(b"qos 1", 1), (b"qos 2", 1), (b"amqp", 1)]
    for c in (two, one, pub, proton):
        c.close()


def test_a_qos_0_message_reaches_a_subscriber_at_another_router(line3):
    """Found with this listener: no pre-settled publish (MQTT QoS 0, AMQP at-most-once)
    crossed a router (a copy's ``low`` was past its own position: dropped as a repeat)."""
    sub = Paho(line3["C"].mqtt, "q0-sub")
    assert sub.subscribe(("q0", 1)) == [1]
    pub = Paho(line3["A"].mqtt, "q0-pub")
    pub.client.publish("q0", b"at most once", qos=0).wait_for_publish(timeout=10)
    assert sub.take(1, timeout=10)[0].payload == b"at most once"


def test_a_message_answered_as_it_is_published_is_settled_and_not_held(line3):
    """Found by ``once stat -l``: a QoS 1 or 2 message answered within the publish itself (no
    subscriber anywhere, or only QoS 0 ones here) was settled before the adaptor noted it
    unsettled, so its record stayed held (and counted against the link's window) until the
    client went."""
    q0 = Paho(line3["A"].mqtt, "only-q0-sub")
    assert q0.subscribe(("only-q0", 0)) == [0]
    pub = Paho(line3["A"].mqtt, "answered-pub")
    infos = [pub.client.publish("nobody/here", b"n%d" % i, qos=1 + i % 2) for i in range(40)]
    infos += [pub.client.publish("only-q0", b"q%d" % i, qos=1) for i in range(40)]
    for info in infos:
        info.wait_for_publish(timeout=30)  # (PUBACK, or PUBREC, PUBREL and PUBCOMP)
    assert [m.payload for m in q0.take(40)] == [b"q%d" % i for i in range(40)]

    def held() -> list[tuple[str, int, int]]:
        with urllib.request.urlopen(line3["A"].http + "/api/links", timeout=10) as r:
            return [(lk["topic"], lk["in_flight"], lk["unsettled"]) for lk in json.loads(r.read())
                    if lk.get("container") == masked("answered-pub")]  # (anonymous: a digest)

    wait_for(lambda: held() == [("nobody/here", 0, 0), ("only-q0", 0, 0)], timeout=10,
             what="no record held for the answered messages")
    # (and the API lists MQTT clients among the connections: it failed on them before)
    with urllib.request.urlopen(line3["A"].http + "/api/connections", timeout=10) as r:
        mine = [c for c in json.loads(r.read()) if c["container"] == masked("answered-pub")]
    assert [(c["protocol"], c["publishers"], c["subscribers"]) for c in mine] == [("mqtt", 2, 0)]
    pub.close()
    q0.close()


def test_a_client_that_asks_for_gids_gets_one_with_a_message_answered_as_it_is_published(line3):
    """``once-gid: 1`` at CONNECT: each PUBACK names its message's gid, a message answered
    within its own publish (no subscriber) too (its PUBACK had none)."""
    props = Properties(PacketTypes.CONNECT)
    props.UserProperty = [("once-gid", "1")]
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="gid-pub", protocol=mqtt.MQTTv5)
    acks: queue.Queue[tuple[int, dict[str, str]]] = queue.Queue()
    c.on_publish = lambda cl, u, mid, reason, p: acks.put(
        (int(getattr(reason, "value", reason)), dict(getattr(p, "UserProperty", None) or [])))
    c.connect(*line3["A"].mqtt, properties=props)
    c.loop_start()
    try:
        gids = []
        for i in range(3):
            c.publish("nobody/gid", b"g%d" % i, qos=1)
            reason, user_props = acks.get(timeout=15)
            assert reason == 0 and len(user_props.get("once-gid", "")) >= 16, user_props
            gids.append(user_props["once-gid"])
        assert len(set(gids)) == 3
    finally:
        c.disconnect()
        c.loop_stop()


def test_a_message_over_a_subscribers_maximum_packet_size_is_refused_for_it_not_left_waiting(line3):
    """MQTT 5.0: a client that takes at most N bytes cannot have a larger message; the
    publisher hears it refused (0x80) at once instead of waiting for an acknowledgement
    that can never come."""
    props = Properties(PacketTypes.CONNECT)
    props.MaximumPacketSize = 200
    small = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="small", protocol=mqtt.MQTTv5)
    subscribed: queue.Queue[object] = queue.Queue()
    small.on_subscribe = lambda c, u, mid, codes, p: subscribed.put(codes)
    small.connect(*line3["A"].mqtt, properties=props)
    small.loop_start()
    small.subscribe([("big", 1)])
    subscribed.get(timeout=15)
    pub = Paho(line3["A"].mqtt, "big-pub")
    acks: queue.Queue[int] = queue.Queue()
    pub.client.on_publish = lambda c, u, mid, reason, p: acks.put(int(getattr(reason, "value", reason)))
    pub.client.publish("big", b"x" * 1000, qos=1)
    assert acks.get(timeout=15) == 0x80
    small.disconnect()
    small.loop_stop()
    pub.close()


def test_a_will_is_published_when_its_clients_connection_dies_and_reaches_amqp_and_mqtt(line3):
    mqtt_sub = Paho(line3["C"].mqtt, "will-watch")
    assert mqtt_sub.subscribe(("plant/will", 1)) == [1]
    amqp = ProtonSubscriber(line3["B"].url, "plant/will", name="will-amqp")
    dying = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="will-client", protocol=mqtt.MQTTv5)
    dying.will_set("plant/will", b"client lost", qos=1)
    dying.connect(*line3["A"].mqtt, keepalive=30)
    dying.loop_start()
    pub = dying.publish("plant/will", b"alive", qos=1)
    pub.wait_for_publish(timeout=15)  # (connected, and every subscriber has it)
    dying.loop_stop()
    dying.socket().shutdown(socket.SHUT_RDWR)  # its network dies: no DISCONNECT
    dying.socket().close()
    assert [m.payload for m in mqtt_sub.take(2)] == [b"alive", b"client lost"]
    assert [bytes(m.body) for m in amqp.take(2)] == [b"alive", b"client lost"]
    mqtt_sub.close()
    amqp.close()


def test_a_will_with_retain_is_refused_at_connect_in_5_0(line3):
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="will-retain", protocol=mqtt.MQTTv5)
    c.will_set("plant/will", b"x", qos=1, retain=True)
    codes: queue.Queue[int] = queue.Queue()
    c.on_connect = lambda client, u, flags, rc, props: codes.put(int(getattr(rc, "value", rc)))
    c.connect(*line3["A"].mqtt, keepalive=30)
    c.loop_start()
    assert codes.get(timeout=15) == 0x9A  # retain not supported
    c.loop_stop()
