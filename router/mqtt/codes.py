"""MQTT's numbers, declared once: packet types, reason codes, properties (3.1.1 and 5.0).

Every table here is the specification's (MQTT 5.0 sections 2.1.2, 2.4, 2.2.2.2 and
3.2.2.2; MQTT 3.1.1 section 3.2.2.3 for the CONNACK return codes).
"""

from __future__ import annotations

from enum import Enum, IntEnum


class Version(IntEnum):
    """The protocol level a CONNECT carries (3 is MQTT 3.1, which we refuse)."""

    V311 = 4
    V5 = 5


class PacketType(IntEnum):
    CONNECT = 1
    CONNACK = 2
    PUBLISH = 3
    PUBACK = 4
    PUBREC = 5
    PUBREL = 6
    PUBCOMP = 7
    SUBSCRIBE = 8
    SUBACK = 9
    UNSUBSCRIBE = 10
    UNSUBACK = 11
    PINGREQ = 12
    PINGRESP = 13
    DISCONNECT = 14
    AUTH = 15  # MQTT 5.0 only


# The fixed header's flags each type must carry (PUBLISH's are DUP, QoS and RETAIN).
REQUIRED_FLAGS: dict[PacketType, int] = {t: 0 for t in PacketType}
REQUIRED_FLAGS[PacketType.PUBREL] = REQUIRED_FLAGS[PacketType.SUBSCRIBE] = REQUIRED_FLAGS[PacketType.UNSUBSCRIBE] = 2


class Reason(IntEnum):
    """MQTT 5.0 reason codes (a value means different things per packet: the names here
    are the specification's for the packets a router sends or reads)."""

    SUCCESS = 0x00  # also Normal disconnection, Granted QoS 0
    GRANTED_QOS_1 = 0x01
    GRANTED_QOS_2 = 0x02
    DISCONNECT_WITH_WILL = 0x04
    NO_MATCHING_SUBSCRIBERS = 0x10
    NO_SUBSCRIPTION_EXISTED = 0x11
    CONTINUE_AUTHENTICATION = 0x18
    RE_AUTHENTICATE = 0x19
    UNSPECIFIED_ERROR = 0x80
    MALFORMED_PACKET = 0x81
    PROTOCOL_ERROR = 0x82
    IMPLEMENTATION_SPECIFIC_ERROR = 0x83
    UNSUPPORTED_PROTOCOL_VERSION = 0x84
    CLIENT_IDENTIFIER_NOT_VALID = 0x85
    BAD_USER_NAME_OR_PASSWORD = 0x86
    NOT_AUTHORIZED = 0x87
    SERVER_UNAVAILABLE = 0x88
    SERVER_BUSY = 0x89
    BANNED = 0x8A
    SERVER_SHUTTING_DOWN = 0x8B
    BAD_AUTHENTICATION_METHOD = 0x8C
    KEEP_ALIVE_TIMEOUT = 0x8D
    SESSION_TAKEN_OVER = 0x8E
    TOPIC_FILTER_INVALID = 0x8F
    TOPIC_NAME_INVALID = 0x90
    PACKET_IDENTIFIER_IN_USE = 0x91
    PACKET_IDENTIFIER_NOT_FOUND = 0x92
    RECEIVE_MAXIMUM_EXCEEDED = 0x93
    TOPIC_ALIAS_INVALID = 0x94
    PACKET_TOO_LARGE = 0x95
    MESSAGE_RATE_TOO_HIGH = 0x96
    QUOTA_EXCEEDED = 0x97
    ADMINISTRATIVE_ACTION = 0x98
    PAYLOAD_FORMAT_INVALID = 0x99
    RETAIN_NOT_SUPPORTED = 0x9A
    QOS_NOT_SUPPORTED = 0x9B
    USE_ANOTHER_SERVER = 0x9C
    SERVER_MOVED = 0x9D
    SHARED_SUBSCRIPTIONS_NOT_SUPPORTED = 0x9E
    CONNECTION_RATE_EXCEEDED = 0x9F
    MAXIMUM_CONNECT_TIME = 0xA0
    SUBSCRIPTION_IDENTIFIERS_NOT_SUPPORTED = 0xA1
    WILDCARD_SUBSCRIPTIONS_NOT_SUPPORTED = 0xA2


# MQTT 3.1.1 CONNACK return codes for the 5.0 reasons a router refuses a CONNECT with
# (3.1.1 has six; every other refusal is "server unavailable").
CONNACK_311 = {Reason.SUCCESS: 0, Reason.UNSUPPORTED_PROTOCOL_VERSION: 1, Reason.CLIENT_IDENTIFIER_NOT_VALID: 2,
               Reason.SERVER_UNAVAILABLE: 3, Reason.BAD_USER_NAME_OR_PASSWORD: 4, Reason.NOT_AUTHORIZED: 5}
CONNACK_311_REASON = {code: reason for reason, code in CONNACK_311.items()}
SUBACK_311_FAILURE = 0x80  # 3.1.1 SUBACK's only failure code


class Kind(Enum):
    """How a property's value is written."""

    BYTE = "byte"
    U16 = "u16"
    U32 = "u32"
    VARINT = "varint"
    STRING = "string"
    BINARY = "binary"
    PAIR = "pair"  # a string pair (user property)


class Prop(IntEnum):
    PAYLOAD_FORMAT_INDICATOR = 0x01
    MESSAGE_EXPIRY_INTERVAL = 0x02
    CONTENT_TYPE = 0x03
    RESPONSE_TOPIC = 0x08
    CORRELATION_DATA = 0x09
    SUBSCRIPTION_IDENTIFIER = 0x0B
    SESSION_EXPIRY_INTERVAL = 0x11
    ASSIGNED_CLIENT_IDENTIFIER = 0x12
    SERVER_KEEP_ALIVE = 0x13
    AUTHENTICATION_METHOD = 0x15
    AUTHENTICATION_DATA = 0x16
    REQUEST_PROBLEM_INFORMATION = 0x17
    WILL_DELAY_INTERVAL = 0x18
    REQUEST_RESPONSE_INFORMATION = 0x19
    RESPONSE_INFORMATION = 0x1A
    SERVER_REFERENCE = 0x1C
    REASON_STRING = 0x1F
    RECEIVE_MAXIMUM = 0x21
    TOPIC_ALIAS_MAXIMUM = 0x22
    TOPIC_ALIAS = 0x23
    MAXIMUM_QOS = 0x24
    RETAIN_AVAILABLE = 0x25
    USER_PROPERTY = 0x26
    MAXIMUM_PACKET_SIZE = 0x27
    WILDCARD_SUBSCRIPTION_AVAILABLE = 0x28
    SUBSCRIPTION_IDENTIFIER_AVAILABLE = 0x29
    SHARED_SUBSCRIPTION_AVAILABLE = 0x2A


WILL = "will"  # the will properties of a CONNECT's payload (where a property may stand, beside packet types)

_P = PacketType
_ACKS = (_P.PUBACK, _P.PUBREC, _P.PUBREL, _P.PUBCOMP, _P.SUBACK, _P.UNSUBACK)
# property -> (how it is written, where it may stand)
PROPERTIES: dict[Prop, tuple[Kind, frozenset[PacketType | str]]] = {
    Prop.PAYLOAD_FORMAT_INDICATOR: (Kind.BYTE, frozenset({_P.PUBLISH, WILL})),
    Prop.MESSAGE_EXPIRY_INTERVAL: (Kind.U32, frozenset({_P.PUBLISH, WILL})),
    Prop.CONTENT_TYPE: (Kind.STRING, frozenset({_P.PUBLISH, WILL})),
    Prop.RESPONSE_TOPIC: (Kind.STRING, frozenset({_P.PUBLISH, WILL})),
    Prop.CORRELATION_DATA: (Kind.BINARY, frozenset({_P.PUBLISH, WILL})),
    Prop.SUBSCRIPTION_IDENTIFIER: (Kind.VARINT, frozenset({_P.PUBLISH, _P.SUBSCRIBE})),
    Prop.SESSION_EXPIRY_INTERVAL: (Kind.U32, frozenset({_P.CONNECT, _P.CONNACK, _P.DISCONNECT})),
    Prop.ASSIGNED_CLIENT_IDENTIFIER: (Kind.STRING, frozenset({_P.CONNACK})),
    Prop.SERVER_KEEP_ALIVE: (Kind.U16, frozenset({_P.CONNACK})),
    Prop.AUTHENTICATION_METHOD: (Kind.STRING, frozenset({_P.CONNECT, _P.CONNACK, _P.AUTH})),
    Prop.AUTHENTICATION_DATA: (Kind.BINARY, frozenset({_P.CONNECT, _P.CONNACK, _P.AUTH})),
    Prop.REQUEST_PROBLEM_INFORMATION: (Kind.BYTE, frozenset({_P.CONNECT})),
    Prop.WILL_DELAY_INTERVAL: (Kind.U32, frozenset({WILL})),
    Prop.REQUEST_RESPONSE_INFORMATION: (Kind.BYTE, frozenset({_P.CONNECT})),
    Prop.RESPONSE_INFORMATION: (Kind.STRING, frozenset({_P.CONNACK})),
    Prop.SERVER_REFERENCE: (Kind.STRING, frozenset({_P.CONNACK, _P.DISCONNECT})),
    Prop.REASON_STRING: (Kind.STRING, frozenset({_P.CONNACK, *_ACKS, _P.DISCONNECT, _P.AUTH})),
    Prop.RECEIVE_MAXIMUM: (Kind.U16, frozenset({_P.CONNECT, _P.CONNACK})),
    Prop.TOPIC_ALIAS_MAXIMUM: (Kind.U16, frozenset({_P.CONNECT, _P.CONNACK})),
    Prop.TOPIC_ALIAS: (Kind.U16, frozenset({_P.PUBLISH})),
    Prop.MAXIMUM_QOS: (Kind.BYTE, frozenset({_P.CONNACK})),
    Prop.RETAIN_AVAILABLE: (Kind.BYTE, frozenset({_P.CONNACK})),
    Prop.USER_PROPERTY: (Kind.PAIR, frozenset({*_P, WILL})),
    Prop.MAXIMUM_PACKET_SIZE: (Kind.U32, frozenset({_P.CONNECT, _P.CONNACK})),
    Prop.WILDCARD_SUBSCRIPTION_AVAILABLE: (Kind.BYTE, frozenset({_P.CONNACK})),
    Prop.SUBSCRIPTION_IDENTIFIER_AVAILABLE: (Kind.BYTE, frozenset({_P.CONNACK})),
    Prop.SHARED_SUBSCRIPTION_AVAILABLE: (Kind.BYTE, frozenset({_P.CONNACK})),
}
# The properties that may appear more than once (every other one twice is a protocol error).
REPEATABLE = frozenset({Prop.USER_PROPERTY, Prop.SUBSCRIPTION_IDENTIFIER})
