"""What an MQTT connection reports to its application (the router's MQTT adaptor).

Each event is a frozen dataclass. The ones that want an answer say which method of
``MqttConnection`` gives it; the engine answers everything else itself (PINGREQ, the
PUBREL/PUBCOMP halves of QoS 2, protocol errors).
"""

from __future__ import annotations

from dataclasses import dataclass

from .codes import Reason
from .packets import Connect, Publish, Subscribe, Unsubscribe


@dataclass(frozen=True, slots=True)
class ClientConnected:
    """A valid CONNECT: answer with ``accept(session_present)`` or ``refuse(reason)``."""

    connect: Connect


@dataclass(frozen=True, slots=True)
class MessagePublished:
    """A PUBLISH, its topic alias resolved. QoS 1: answer ``puback``; QoS 2: ``pubrec``.
    ``dup``: the client says it may have sent it before (to this or another router)."""

    publish: Publish


@dataclass(frozen=True, slots=True)
class PublishReleased:
    """PUBREL for a QoS 2 message we answered with PUBREC: the engine sent PUBCOMP; the
    packet id is the client's to reuse for a new message from now on."""

    packet_id: int


@dataclass(frozen=True, slots=True)
class SubscribeRequested:
    """Answer with ``suback(packet_id, reasons)``, one per filter, in order."""

    subscribe: Subscribe


@dataclass(frozen=True, slots=True)
class UnsubscribeRequested:
    """Answer with ``unsuback(packet_id, reasons)``."""

    unsubscribe: Unsubscribe


@dataclass(frozen=True, slots=True)
class DeliveryAcked:
    """The client answered our QoS 1 PUBLISH (PUBACK) or finished our QoS 2 one (PUBCOMP).
    ``reason`` >= 0x80: it refused the message (MQTT 5.0)."""

    packet_id: int
    reason: Reason = Reason.SUCCESS


@dataclass(frozen=True, slots=True)
class DeliveryReceived:
    """PUBREC for our QoS 2 PUBLISH: the client has it (the engine sent PUBREL; PUBCOMP follows)."""

    packet_id: int
    reason: Reason = Reason.SUCCESS


@dataclass(frozen=True, slots=True)
class ClientDisconnected:
    """The client sent DISCONNECT. ``will``: it asked for its will message to be sent
    (MQTT 5.0 reason 0x04); a normal disconnection discards the will."""

    reason: Reason = Reason.SUCCESS
    will: bool = False


@dataclass(frozen=True, slots=True)
class ConnectionFailed:
    """The client broke the protocol (or went silent past its keep-alive): the engine
    queued what MQTT says to send (DISCONNECT or CONNACK with ``reason``; MQTT 3.1.1:
    nothing) and is closed. Its will is to be sent."""

    reason: Reason
    description: str
