"""The MQTT codec (issue 26): pure. Every packet round-trips in both versions, the
specification's byte layouts come out, and every malformed input is an ``MqttError``
with the reason MQTT 5.0 gives it, never another exception."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from once.router.mqtt.codec import MqttError, decode, encode, varint
from once.router.mqtt.codes import PROPERTIES, REPEATABLE, WILL, Kind, PacketType, Reason, Version
from once.router.mqtt.framing import PacketReader
from once.router.mqtt.packets import (
    Ack,
    Auth,
    Connack,
    Connect,
    Disconnect,
    PingReq,
    PingResp,
    Publish,
    Suback,
    Subscribe,
    Subscription,
    Unsuback,
    Unsubscribe,
    Will,
)

text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20)
data = st.binary(max_size=40)
packet_ids = st.integers(1, 0xFFFF)
reasons = st.sampled_from(list(Reason))


def _value(kind: Kind) -> st.SearchStrategy:
    return {Kind.BYTE: st.integers(0, 255), Kind.U16: st.integers(0, 0xFFFF), Kind.U32: st.integers(0, 2**32 - 1),
            Kind.VARINT: st.integers(1, 268_435_455), Kind.STRING: text, Kind.BINARY: data,
            Kind.PAIR: st.tuples(text, text)}[kind]


def props(where: PacketType | str) -> st.SearchStrategy:
    """Properties allowed at ``where``: each at most once, and the repeatable ones again."""
    allowed = [p for p, (_, places) in PROPERTIES.items() if where in places]
    if not allowed:
        return st.just(())
    repeatable = [p for p in allowed if p in REPEATABLE]
    chosen = st.tuples(st.lists(st.sampled_from(allowed), unique=True, max_size=4),
                       st.lists(st.sampled_from(repeatable), max_size=2) if repeatable else st.just([]))
    return chosen.flatmap(lambda c: st.tuples(*(st.tuples(st.just(p), _value(PROPERTIES[p][0])) for p in c[0] + c[1])))


def packets(version: Version) -> st.SearchStrategy:
    v5 = version is Version.V5

    def p(where: PacketType | str) -> st.SearchStrategy:
        return props(where) if v5 else st.just(())

    reason = reasons if v5 else st.just(Reason.SUCCESS)
    wills = st.builds(Will, text.filter(bool), data, st.integers(0, 2), st.booleans(), p(WILL))
    user = st.none() | text
    connect = st.builds(Connect, st.just(version), text, st.booleans(), st.integers(0, 0xFFFF), user,
                        st.none() | data, st.none() | wills, p(PacketType.CONNECT))
    if not v5:  # (3.1.1: a password needs a user name)
        connect = connect.filter(lambda c: c.password is None or c.username is not None)
    connack_reason = reasons if v5 else st.sampled_from([Reason.SUCCESS, Reason.UNSUPPORTED_PROTOCOL_VERSION,
                                                         Reason.CLIENT_IDENTIFIER_NOT_VALID, Reason.SERVER_UNAVAILABLE,
                                                         Reason.BAD_USER_NAME_OR_PASSWORD, Reason.NOT_AUTHORIZED])
    publish = st.integers(0, 2).flatmap(lambda qos: st.builds(
        Publish, text, data, st.just(qos), st.booleans(), st.booleans() if qos else st.just(False),
        packet_ids if qos else st.none(), p(PacketType.PUBLISH)))
    acks = st.sampled_from([PacketType.PUBACK, PacketType.PUBREC, PacketType.PUBREL, PacketType.PUBCOMP]).flatmap(
        lambda kind: st.builds(Ack, st.just(kind), packet_ids, reason, p(kind) if v5 else st.just(())))
    subscription = st.builds(Subscription, text, st.integers(0, 2), st.booleans() if v5 else st.just(False),
                             st.booleans() if v5 else st.just(False), st.integers(0, 2) if v5 else st.just(0))
    return st.one_of(
        connect,
        st.builds(Connack, st.booleans(), connack_reason, p(PacketType.CONNACK)),
        publish, acks,
        st.builds(Subscribe, packet_ids, st.lists(subscription, min_size=1, max_size=3).map(tuple), p(PacketType.SUBSCRIBE)),
        st.builds(Suback, packet_ids, st.lists(st.sampled_from([0, 1, 2, 0x80, 0x87]), max_size=3).map(tuple),
                  p(PacketType.SUBACK)),
        st.builds(Unsubscribe, packet_ids, st.lists(text, min_size=1, max_size=3).map(tuple), p(PacketType.UNSUBSCRIBE)),
        st.builds(Unsuback, packet_ids, st.lists(reasons, max_size=3).map(tuple) if v5 else st.just(()),
                  p(PacketType.UNSUBACK)),
        st.just(PingReq()), st.just(PingResp()),
        st.builds(Disconnect, reason, p(PacketType.DISCONNECT)),
        *([st.builds(Auth, reasons, p(PacketType.AUTH))] if v5 else []),
    )


def _one(raw: bytes, version: Version | None) -> object:
    frames = PacketReader().feed(raw)
    assert len(frames) == 1
    t, f, body = frames[0]
    return decode(t, f, body, version)


@pytest.mark.parametrize("version", list(Version))
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_packet_round_trips(version, data):
    packet = data.draw(packets(version))
    assert _one(encode(packet, version), version) == packet


@given(st.lists(st.binary(max_size=30), max_size=6), packets(Version.V5))
def test_a_stream_cut_anywhere_gives_the_same_packets(cuts, packet):
    raw = encode(packet, Version.V5) * 3
    reader = PacketReader()
    frames = []
    pos = 0
    for cut in [len(c) for c in cuts] + [len(raw)]:
        frames += reader.feed(raw[pos:pos + cut])
        pos += cut
    assert [decode(t, f, b, Version.V5) for t, f, b in frames] == [packet] * 3


def test_the_specifications_layouts():
    # MQTT 3.1.1 section 3.1 example: a CONNECT with clean session and keep-alive 10
    c = Connect(Version.V311, "", keep_alive=10)
    assert encode(c, Version.V311) == bytes([0x10, 12, 0, 4]) + b"MQTT" + bytes([4, 0x02, 0, 10, 0, 0])
    assert encode(PingReq(), Version.V5) == b"\xc0\x00" and encode(PingResp(), Version.V311) == b"\xd0\x00"
    assert encode(Disconnect(), Version.V5) == b"\xe0\x00"  # normal disconnection: reason left out
    assert encode(Ack(PacketType.PUBREL, 9), Version.V5) == b"\x62\x02\x00\x09"  # PUBREL's flags are 0010
    assert encode(Connack(reason=Reason.NOT_AUTHORIZED), Version.V311) == b"\x20\x02\x00\x05"
    assert encode(Connack(reason=Reason.QUOTA_EXCEEDED), Version.V311) == b"\x20\x02\x00\x03"  # (no 3.1.1 code: 3)
    assert [varint(n) for n in (0, 127, 128, 16_383, 16_384, 268_435_455)] == [
        b"\x00", b"\x7f", b"\x80\x01", b"\xff\x7f", b"\x80\x80\x01", b"\xff\xff\xff\x7f"]


@pytest.mark.parametrize("raw, version, reason, says", [
    (b"\x30\x03\x00\x01\xc3", Version.V5, Reason.MALFORMED_PACKET, "UTF-8"),  # a topic that is not UTF-8
    (b"\x30\x04\x00\x02a\x00", Version.V5, Reason.MALFORMED_PACKET, "U+0000"),
    (b"\x36\x02\x00\x00", Version.V5, Reason.MALFORMED_PACKET, "QoS 3"),
    (b"\x38\x04\x00\x01a\x00", Version.V5, Reason.MALFORMED_PACKET, "DUP at QoS 0"),
    (b"\x60\x02\x00\x01", Version.V5, Reason.MALFORMED_PACKET, "flags"),  # PUBREL with flags 0000
    (b"\x40\x02\x00\x00", Version.V5, Reason.MALFORMED_PACKET, "identifier 0"),
    (b"\x00\x00", Version.V5, Reason.MALFORMED_PACKET, "reserved"),
    (b"\x82\x02\x00\x01", Version.V311, Reason.PROTOCOL_ERROR, "without a topic filter"),
    (b"\x82\x06\x00\x01\x00\x01a\x04", Version.V311, Reason.MALFORMED_PACKET, "reserved option bits"),
    (b"\x40\x03\x00\x01\x55", Version.V5, Reason.MALFORMED_PACKET, "reason code 0x55"),
    (b"\x30\x06\x00\x01a\x02\x23\x00", Version.V5, Reason.MALFORMED_PACKET, "ends"),  # a property cut short
    (b"\x30\x08\x00\x01a\x04\x12\x00\x01x", Version.V5, Reason.MALFORMED_PACKET, "not allowed in PUBLISH"),
    (b"\x30\x0a\x00\x01a\x06\x03\x00\x00\x03\x00\x00", Version.V5, Reason.PROTOCOL_ERROR, "twice"),
    (b"\x30\x05\x00\x01a\x01\x7f", Version.V5, Reason.MALFORMED_PACKET, "unknown property"),
    (b"\xc0\x01\x00", Version.V5, Reason.MALFORMED_PACKET, "after the end"),
    (b"\xf0\x00", Version.V311, Reason.MALFORMED_PACKET, "5.0 only"),
    (b"\x30\x03\x00\x01a", None, Reason.PROTOCOL_ERROR, "before CONNECT"),
    (b"\x10\x0a\x00\x04MQTT\x03\x02\x00\x0a", None, Reason.UNSUPPORTED_PROTOCOL_VERSION, "level 3"),
    (b"\x10\x0a\x00\x04MQTX\x04\x02\x00\x0a", None, Reason.PROTOCOL_ERROR, "not MQTT"),
    (b"\x10\x0c\x00\x04MQTT\x04\x03\x00\x0a\x00\x00", None, Reason.MALFORMED_PACKET, "reserved flag"),
    (b"\x10\x0c\x00\x04MQTT\x04\x42\x00\x0a\x00\x00", None, Reason.MALFORMED_PACKET, "without a user name"),
    (b"\x10\x0c\x00\x04MQTT\x04\x1e\x00\x0a\x00\x00", None, Reason.MALFORMED_PACKET, "will QoS 3"),
    (b"\x10\x0c\x00\x04MQTT\x04\x22\x00\x0a\x00\x00", None, Reason.MALFORMED_PACKET, "without a will"),
])
def test_malformed_input_names_its_reason(raw, version, reason, says):
    with pytest.raises(MqttError) as e:
        _one(raw, version)
    assert e.value.reason is reason and says in e.value.description, e.value.description


def test_a_length_over_four_bytes_or_the_maximum_is_refused_before_its_body():
    with pytest.raises(MqttError) as e:
        PacketReader().feed(b"\x30\xff\xff\xff\xff\x01")
    assert e.value.reason is Reason.MALFORMED_PACKET
    with pytest.raises(MqttError) as e:
        PacketReader(max_packet_size=100).feed(b"\x30\xe8\x07")  # 1,000 bytes announced: refused at once
    assert e.value.reason is Reason.PACKET_TOO_LARGE


@settings(max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=60), st.sampled_from([None, *Version]))
def test_fuzz_random_bytes_are_packets_or_mqtt_errors(raw, version):
    """Whatever a client sends, the codec answers with packets or an MqttError: no other
    exception can take the connection (or the router) down."""
    try:
        for t, f, body in PacketReader(max_packet_size=1000).feed(raw):
            decode(t, f, body, version)
    except MqttError as e:
        assert isinstance(e.reason, Reason)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(packets(Version.V5), st.integers(0, 200), st.integers(0, 255))
def test_fuzz_one_byte_changed_in_a_valid_packet(packet, where, value):
    raw = bytearray(encode(packet, Version.V5))
    raw[where % len(raw)] = value
    try:
        for t, f, body in PacketReader().feed(bytes(raw)):
            decode(t, f, body, Version.V5)
    except MqttError:
        pass
