"""MQTT control packets as frozen dataclasses, one per packet type (both versions).

Properties (MQTT 5.0) are kept as a tuple of ``(Prop, value)`` pairs in the order they
came: a user property may repeat and its order matters. ``prop()`` reads one. A 3.1.1
packet has none. Values: ``int`` for the integer kinds, ``str`` for strings, ``bytes`` for
binary data, ``tuple[str, str]`` for a user property.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from .codes import PacketType, Prop, Reason, Version

PropValue = Union[int, str, bytes, tuple[str, str]]
Props = tuple[tuple[Prop, PropValue], ...]


def prop(props: Props, which: Prop, default: PropValue | None = None) -> PropValue | None:
    """The first value of property ``which``, or ``default``."""
    for p, value in props:
        if p is which:
            return value
    return default


def user_properties(props: Props) -> list[tuple[str, str]]:
    return [v for p, v in props if p is Prop.USER_PROPERTY]  # type: ignore[misc]


@dataclass(frozen=True, slots=True)
class Will:
    topic: str
    payload: bytes
    qos: int = 0
    retain: bool = False
    props: Props = ()


@dataclass(frozen=True, slots=True)
class Connect:
    version: Version
    client_id: str
    clean_start: bool = True  # 3.1.1: clean session
    keep_alive: int = 60  # seconds; 0: none
    username: str | None = None
    password: bytes | None = None
    will: Will | None = None
    props: Props = ()
    type = PacketType.CONNECT


@dataclass(frozen=True, slots=True)
class Connack:
    session_present: bool = False
    reason: Reason = Reason.SUCCESS  # 3.1.1: mapped to its return code (codes.CONNACK_311)
    props: Props = ()
    type = PacketType.CONNACK


@dataclass(frozen=True, slots=True)
class Publish:
    topic: str  # "" with a topic alias (MQTT 5.0)
    payload: bytes
    qos: int = 0
    retain: bool = False
    dup: bool = False
    packet_id: int | None = None  # QoS 1 and 2 only
    props: Props = ()
    type = PacketType.PUBLISH


@dataclass(frozen=True, slots=True)
class Ack:
    """PUBACK, PUBREC, PUBREL or PUBCOMP: one packet id and (5.0) a reason."""

    kind: PacketType
    packet_id: int
    reason: Reason = Reason.SUCCESS
    props: Props = ()

    @property
    def type(self) -> PacketType:
        return self.kind


@dataclass(frozen=True, slots=True)
class Subscription:
    """One topic filter of a SUBSCRIBE, with its options (5.0; 3.1.1 has the QoS only)."""

    filter: str
    qos: int = 0
    no_local: bool = False
    retain_as_published: bool = False
    retain_handling: int = 0


@dataclass(frozen=True, slots=True)
class Subscribe:
    packet_id: int
    subscriptions: tuple[Subscription, ...]
    props: Props = ()
    type = PacketType.SUBSCRIBE


@dataclass(frozen=True, slots=True)
class Suback:
    packet_id: int
    reasons: tuple[int, ...]  # per filter: the granted QoS, or a failure (5.0 reason; 3.1.1: 0x80)
    props: Props = ()
    type = PacketType.SUBACK


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    packet_id: int
    filters: tuple[str, ...]
    props: Props = ()
    type = PacketType.UNSUBSCRIBE


@dataclass(frozen=True, slots=True)
class Unsuback:
    packet_id: int
    reasons: tuple[Reason, ...] = ()  # 5.0 only
    props: Props = ()
    type = PacketType.UNSUBACK


@dataclass(frozen=True, slots=True)
class PingReq:
    type = PacketType.PINGREQ


@dataclass(frozen=True, slots=True)
class PingResp:
    type = PacketType.PINGRESP


@dataclass(frozen=True, slots=True)
class Disconnect:
    reason: Reason = Reason.SUCCESS  # 5.0 only
    props: Props = ()
    type = PacketType.DISCONNECT


@dataclass(frozen=True, slots=True)
class Auth:
    reason: Reason = Reason.SUCCESS
    props: Props = ()
    type = PacketType.AUTH


Packet = Union[Connect, Connack, Publish, Ack, Subscribe, Suback, Unsubscribe, Unsuback, PingReq, PingResp, Disconnect,
               Auth]
