"""MQTT messages as the network carries them (AMQP 1.0) and back (issue 26), checked
against Qpid Proton's own codec: what an AMQP subscriber would read, what an AMQP
publisher's message becomes for an MQTT subscriber. Payloads are byte for byte."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from once.router.adaptors.mqtt.message import AMQP_SECTIONS, DATA, PROPERTIES, from_amqp, to_amqp
from once.router.amqp.codec import dumps
from once.router.amqp.types import Described, ulong
from once.router.mqtt.codes import Prop
from proton import Message


def test_an_mqtt_message_reads_as_an_amqp_one_in_proton():
    props = ((Prop.CONTENT_TYPE, "application/json"), (Prop.CORRELATION_DATA, b"\x00\x01"),
             (Prop.RESPONSE_TOPIC, "replies/1"), (Prop.MESSAGE_EXPIRY_INTERVAL, 30), (Prop.PAYLOAD_FORMAT_INDICATOR, 1),
             (Prop.USER_PROPERTY, ("region", "eu")), (Prop.USER_PROPERTY, ("tier", "gold")))
    m = Message()
    m.decode(to_amqp("orders/eu", b'{"id": 1}', props))
    assert bytes(m.body) == b'{"id": 1}'
    assert (m.address, m.content_type, m.correlation_id, m.reply_to, m.ttl) == (
        "orders/eu", "application/json", b"\x00\x01", "replies/1", 30.0)
    assert m.properties == {"region": "eu", "tier": "gold"}
    assert m.annotations == {"x-opt-mqtt-payload-format": 1}


def test_back_to_mqtt_the_same_properties_and_repeated_user_properties_in_order():
    props = ((Prop.PAYLOAD_FORMAT_INDICATOR, 1), (Prop.MESSAGE_EXPIRY_INTERVAL, 30), (Prop.CONTENT_TYPE, "text/csv"),
             (Prop.RESPONSE_TOPIC, "r"), (Prop.CORRELATION_DATA, b"c"),
             (Prop.USER_PROPERTY, ("a", "1")), (Prop.USER_PROPERTY, ("b", "2")), (Prop.USER_PROPERTY, ("a", "3")))
    payload, back = from_amqp(to_amqp("t", b"x,y\n", props))
    assert payload == b"x,y\n" and back == props


@given(st.binary(max_size=300), st.lists(st.tuples(st.text(max_size=5), st.text(max_size=5)), max_size=4))
def test_any_payload_and_user_properties_round_trip(payload, users):
    props = tuple((Prop.USER_PROPERTY, pair) for pair in users)
    got_payload, got = from_amqp(to_amqp("t", payload, props))
    assert got_payload == payload and got == props  # (repeated names too, in order)


def _from_proton(**kw) -> tuple[bytes, dict]:
    payload, props = from_amqp(bytes(Message(**kw).encode()))  # (Proton encodes to a bytearray; payloads are bytes)
    return payload, dict(props)


def test_an_amqp_publishers_message_for_an_mqtt_subscriber():
    payload, props = _from_proton(body=b"\x00raw\xff", content_type="application/octet-stream",
                                  correlation_id=uuid.UUID(int=7), reply_to="back", ttl=1.5,
                                  properties={"k": "v", "n": 3})
    assert payload == b"\x00raw\xff"  # (Proton sends bytes as one data section)
    assert props[Prop.CONTENT_TYPE] == "application/octet-stream" and props[Prop.RESPONSE_TOPIC] == "back"
    assert props[Prop.CORRELATION_DATA] == str(uuid.UUID(int=7)).encode()
    assert props[Prop.MESSAGE_EXPIRY_INTERVAL] == 2  # 1,500 ms, rounded up
    assert [v for p, v in from_amqp(bytes(Message(body=b"", properties={"k": "v", "n": 3}).encode()))[1]
            if p is Prop.USER_PROPERTY] == [("k", "v"), ("n", "3")]
    text, props = _from_proton(body="héllo")  # an amqp-value string: its UTF-8, marked as such
    assert text == "héllo".encode() and props[Prop.PAYLOAD_FORMAT_INDICATOR] == 1
    other, props = _from_proton(body={"a": [1, 2]})  # no MQTT form: the AMQP encoding, named
    assert props[Prop.CONTENT_TYPE] == AMQP_SECTIONS
    m = Message()
    m.decode(other)  # (the sections as they were: Proton reads them back)
    assert m.body == {"a": [1, 2]}


@pytest.mark.parametrize("size", [0, 1, 255, 256, 70_000])
@pytest.mark.parametrize("topic", ["t", "plant/line-4/temperature", "é/ü", "x" * 300])
def test_the_usual_message_is_built_and_read_as_the_codec_would(topic: str, size: int):
    """A PUBLISH without properties takes the short way (``to`` and one data section)
    both ways: the same bytes as the generic encoder, the same payload back."""
    payload = bytes(i % 251 for i in range(size))
    generic = dumps(Described(ulong(PROPERTIES), [None, None, topic])) + dumps(Described(ulong(DATA), payload))
    built = to_amqp(topic, payload)
    assert built == bytes(generic)
    assert from_amqp(built) == (payload, ())
    assert from_amqp(built + dumps(Described(ulong(0x78), None))) == (payload, ())  # (a footer: the long way)
