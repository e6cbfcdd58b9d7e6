"""An MQTT message as the network carries it (an AMQP 1.0 message), and back.

The network carries AMQP messages; an MQTT PUBLISH becomes one, and a message from any
publisher becomes a PUBLISH for an MQTT subscriber. The table (also in ``docs/mqtt.md``):

| MQTT 5.0 | AMQP 1.0 |
|---|---|
| payload | one ``data`` section, byte for byte |
| topic | ``properties.to`` (the address it was published to) |
| content type | ``properties.content-type`` |
| correlation data | ``properties.correlation-id`` (binary) |
| response topic | ``properties.reply-to`` |
| message expiry interval (s) | ``header.ttl`` (ms) |
| payload format indicator | message annotation ``x-opt-mqtt-payload-format`` (ubyte) |
| user properties | ``application-properties`` (string to string); when a name repeats, the whole list in order as message annotation ``x-opt-mqtt-user-properties`` (a list of name, value, name, value, ...), which wins on the way back |
| QoS 1 | message annotation ``x-opt-mqtt-qos`` (ubyte 1); QoS 0 is a pre-settled delivery, QoS 2 (and any unsettled AMQP delivery) carries nothing |

A subscriber gets a message at the lower of its subscription's QoS and the QoS it was
published with (MQTT 5.0 section 4.5): ``publish_qos`` reads the latter.

From AMQP to MQTT: the body sections' payload is the ``data`` sections' bytes joined; an
``amqp-value`` that is a string is its UTF-8 (payload format indicator 1), one that is
binary its bytes; any other body (another ``amqp-value``, ``amqp-sequence``) is passed
as its AMQP encoding, the body sections as they are, with content type
``application/x-amqp-sections`` unless the message names one. A ``correlation-id``
that is not binary becomes its text in UTF-8; ``application-properties`` values that
are not strings become their text (``str``); ``ttl`` rounds up to whole seconds.
"""

from __future__ import annotations

from typing import Any

from ...amqp.codec import decode, dumps
from ...amqp.errors import DecodeError
from ...amqp.types import Described, symbol, ubyte, uint, ulong
from ...mqtt.codes import Prop
from ...mqtt.packets import Props, PropValue, prop

HEADER, MESSAGE_ANNOTATIONS, PROPERTIES, APPLICATION_PROPERTIES, DATA, SEQUENCE, VALUE = (
    0x70, 0x72, 0x73, 0x74, 0x75, 0x76, 0x77)
PAYLOAD_FORMAT = symbol("x-opt-mqtt-payload-format")
QOS = symbol("x-opt-mqtt-qos")
USER_PROPERTIES = symbol("x-opt-mqtt-user-properties")
AMQP_SECTIONS = "application/x-amqp-sections"  # the content type of a body MQTT has no form for
# properties list: message-id, user-id, to, subject, reply-to, correlation-id, content-type, ...
_TO, _REPLY_TO, _CORRELATION_ID, _CONTENT_TYPE = 2, 4, 5, 6


# The usual message, a PUBLISH without properties, is a properties section naming only
# ``to`` and one data section: built and read here without the generic codec (the two
# cost a sixth of the router's time per MQTT message), byte for byte what it makes.
_TO_ONLY: dict[str, bytes] = {}  # topic -> its properties section (at most 4096 kept)
_DATA = b"\x00\x53\x75"  # described by the smallulong 0x75


def _to_only(topic: str) -> bytes:
    section = _TO_ONLY.get(topic)
    if section is None:
        section = dumps(Described(ulong(PROPERTIES), [None, None, topic]))
        if len(_TO_ONLY) >= 4096:
            _TO_ONLY.clear()
        _TO_ONLY[topic] = section
    return section


# A QoS 1 PUBLISH without properties: this section, then the usual shape
_QOS1 = dumps(Described(ulong(MESSAGE_ANNOTATIONS), {QOS: ubyte(1)}))


def publish_qos(message: bytes) -> int:
    """The QoS an MQTT publisher sent ``message`` at: 1 where it says so, else 2 (an
    unsettled AMQP delivery is exactly once too; a pre-settled one is delivered at 0)."""
    if message.startswith(_QOS1):
        return 1
    if message[:3] not in (b"\x00\x53\x70", b"\x00\x53\x72"):
        return 2  # (no header, no annotations: nothing says otherwise)
    pos = 0
    try:
        while pos < len(message) and message[pos] == 0x00:
            described, pos = decode(message, pos)
            code = described.descriptor if isinstance(described, Described) else None
            if code == MESSAGE_ANNOTATIONS and isinstance(described.value, dict):
                return 1 if described.value.get(QOS) == 1 else 2
            if code != HEADER:
                break
    except DecodeError:
        pass
    return 2


def _plain(message: bytes) -> bytes | None:
    """The payload of a message of the usual shape (``to`` only, one data section), else None."""
    if message.startswith(_QOS1):
        message = message[len(_QOS1):]
    if message[:4] != b"\x00\x53\x73\xc0" or len(message) < 9 or message[5:9] != b"\x03\x40\x40\xa1":
        return None
    end = 5 + message[4]
    if message[end:end + 3] != _DATA or len(message) < end + 5:
        return None
    code = message[end + 3]
    if code == 0xA0:
        start = end + 5
        size = message[end + 4]
    elif code == 0xB0:
        start = end + 8
        size = int.from_bytes(message[end + 4:start], "big")
    else:
        return None
    return message[start:] if start + size == len(message) else None


def to_amqp(topic: str, payload: bytes, props: Props = (), qos: int = 2) -> bytes:
    """The AMQP message for an MQTT PUBLISH (its topic alias already resolved) at ``qos``."""
    if not props:
        n = len(payload)
        return b"".join((_QOS1 if qos == 1 else b"", _to_only(topic), _DATA,
                         b"\xa0" + bytes((n,)) if n < 256 else b"\xb0" + n.to_bytes(4, "big"), payload))
    out = bytearray()
    expiry = prop(props, Prop.MESSAGE_EXPIRY_INTERVAL)
    if isinstance(expiry, int):
        out += dumps(Described(ulong(HEADER), [None, None, uint(min(expiry * 1000, 0xFFFFFFFF))]))
    annotations: dict[Any, Any] = {}
    fmt = prop(props, Prop.PAYLOAD_FORMAT_INDICATOR)
    if isinstance(fmt, int):
        annotations[PAYLOAD_FORMAT] = ubyte(fmt)
    users = [v for p, v in props if p is Prop.USER_PROPERTY and isinstance(v, tuple)]
    names = [k for k, _ in users]
    if len(set(names)) < len(names):
        annotations[USER_PROPERTIES] = [s for pair in users for s in pair]
    if qos == 1:
        annotations[QOS] = ubyte(1)
    if annotations:
        out += dumps(Described(ulong(MESSAGE_ANNOTATIONS), annotations))
    fields: list[Any] = [None] * 7
    fields[_TO] = topic
    reply = prop(props, Prop.RESPONSE_TOPIC)
    if isinstance(reply, str):
        fields[_REPLY_TO] = reply
    correlation = prop(props, Prop.CORRELATION_DATA)
    if isinstance(correlation, bytes):
        fields[_CORRELATION_ID] = correlation
    content_type = prop(props, Prop.CONTENT_TYPE)
    if isinstance(content_type, str):
        fields[_CONTENT_TYPE] = symbol(content_type)
    while fields[-1] is None:
        fields.pop()
    out += dumps(Described(ulong(PROPERTIES), fields))
    if users:
        first: dict[str, str] = {}
        for k, v in users:
            first.setdefault(k, v)
        out += dumps(Described(ulong(APPLICATION_PROPERTIES), first))
    out += dumps(Described(ulong(DATA), payload))
    return bytes(out)


def from_amqp(message: bytes) -> tuple[bytes, Props]:
    """An MQTT payload and its MQTT 5.0 properties from an AMQP message (3.1.1 subscribers
    get the payload only). Raises ``DecodeError`` for a message that is not AMQP sections."""
    plain = _plain(message)
    if plain is not None:
        return plain, ()
    sections: list[tuple[int, Any, int, int]] = []
    pos = 0
    while pos < len(message):
        start = pos
        if message[pos] != 0x00:
            raise DecodeError(f"message section at offset {pos} is not described")
        described, pos = decode(message, pos)
        if not isinstance(described, Described) or not isinstance(described.descriptor, int):
            raise DecodeError("a message section with a symbolic or missing descriptor")
        sections.append((described.descriptor, described.value, start, pos))
    by_code = {code: value for code, value, _, _ in sections}
    props: list[tuple[Prop, PropValue]] = []
    annotations = by_code.get(MESSAGE_ANNOTATIONS) or {}
    body = [(code, value, start, end) for code, value, start, end in sections if code in (DATA, SEQUENCE, VALUE)]
    payload, format_indicator, content_type = _body(message, body)
    if isinstance(annotations, dict) and isinstance(annotations.get(PAYLOAD_FORMAT), int):
        format_indicator = int(annotations[PAYLOAD_FORMAT])
    if format_indicator is not None:
        props.append((Prop.PAYLOAD_FORMAT_INDICATOR, format_indicator))
    header = by_code.get(HEADER)
    if isinstance(header, list) and len(header) > 2 and isinstance(header[2], int):
        props.append((Prop.MESSAGE_EXPIRY_INTERVAL, -(-int(header[2]) // 1000)))
    fields = by_code.get(PROPERTIES)
    fields = fields if isinstance(fields, list) else []
    named_type = fields[_CONTENT_TYPE] if len(fields) > _CONTENT_TYPE else None
    if isinstance(named_type, str):
        content_type = str(named_type)
    if content_type is not None:
        props.append((Prop.CONTENT_TYPE, content_type))
    reply = fields[_REPLY_TO] if len(fields) > _REPLY_TO else None
    if isinstance(reply, str):
        props.append((Prop.RESPONSE_TOPIC, reply))
    correlation = fields[_CORRELATION_ID] if len(fields) > _CORRELATION_ID else None
    if correlation is not None:
        props.append((Prop.CORRELATION_DATA, correlation if isinstance(correlation, bytes)
                      else str(correlation).encode()))
    listed = annotations.get(USER_PROPERTIES) if isinstance(annotations, dict) else None
    if isinstance(listed, list) and len(listed) % 2 == 0 and all(isinstance(s, str) for s in listed):
        props += [(Prop.USER_PROPERTY, (str(listed[i]), str(listed[i + 1]))) for i in range(0, len(listed), 2)]
    else:
        app = by_code.get(APPLICATION_PROPERTIES)
        if isinstance(app, dict):
            props += [(Prop.USER_PROPERTY, (str(k), str(v))) for k, v in app.items()]
    return payload, tuple(props)


def _body(message: bytes, body: list[tuple[int, Any, int, int]]) -> tuple[bytes, int | None, str | None]:
    """(payload, payload format indicator, content type) of the body sections."""
    if body and all(code == DATA for code, _, _, _ in body):
        return b"".join(bytes(value) for _, value, _, _ in body), None, None
    if len(body) == 1 and body[0][0] == VALUE:
        value = body[0][1]
        if isinstance(value, str):
            return value.encode("utf-8"), 1, None
        if isinstance(value, bytes):
            return value, None, None
    if not body:
        return b"", None, None
    return b"".join(message[start:end] for _, _, start, end in body), None, AMQP_SECTIONS
