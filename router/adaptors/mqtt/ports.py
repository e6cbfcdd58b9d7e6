"""The core's ports for an MQTT connection: a publisher per topic it publishes to, a
subscriber per topic filter (``core/ports.py`` says what a port is)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from once.records.table import Record

from ...core import Outcome, OutcomeKind, Refused
from ...mqtt.codes import Prop, Reason
from ...mqtt.packets import Props

if TYPE_CHECKING:
    from .view import ConnectionView

QOS0_WINDOW = 1000  # pre-settled deliveries a QoS 0 subscriber is given at once


class MqttPublisherPort:
    __slots__ = ("conn", "topic")

    def __init__(self, conn: ConnectionView, topic: str) -> None:
        self.conn = conn
        self.topic = topic

    def grant(self, credit: int) -> None:
        """An MQTT client's publishers take no credit (``Core.add_publisher``: its adaptor
        stops reading the client past the byte bounds, ``MqttEdgeConnection.past_bounds``)."""

    def outcome(self, handle: tuple[int, int, bytes], outcome: Outcome, settle: bool) -> None:
        """Every subscriber answered: PUBACK (QoS 1) or PUBREC (QoS 2); MQTT 3.1.1 cannot say
        "rejected" and hears success all the same, 5.0 hears 0x80. The message is settled
        with the PUBACK, or the PUBREL that follows a PUBREC: until then a DUP resent to
        another router (the PUBREC lost with ours) finds the network's record."""
        qos, packet_id, tag = handle
        conn = self.conn
        if conn.engine.closed:
            return
        accepted = outcome.kind is OutcomeKind.ACCEPTED
        reason = Reason.SUCCESS if accepted else Reason.UNSPECIFIED_ERROR
        props: Props = ()
        if conn.tell_gid:
            gid = conn.inbound.gid(self.topic, tag)
            props = ((Prop.USER_PROPERTY, ("once-gid", gid.hex())),) if gid else ()
        if qos == 1:
            conn.mqtt.puback(packet_id, reason, props)
            conn.inbound.settled(self.topic, tag)
        else:
            conn.mqtt.pubrec(packet_id, reason, props)
            if accepted:
                conn.inbound.releasing[packet_id] = (self.topic, tag)
            else:  # (a refused QoS 2 flow ends at its PUBREC)
                conn.inbound.settled(self.topic, tag)
            conn.inbound.answered(packet_id)
        conn.dirty()


@dataclass(slots=True, eq=False)
class Sent:
    """The core's handle for a persistent session's QoS 2 message: which message, under
    which packet id, and whether the core settled it here yet."""

    pid: int
    gid: bytes
    settled: bool = False


class MqttSubscriberPort:
    __slots__ = ("conn", "filter", "qos")

    def __init__(self, conn: ConnectionView, filter: str, qos: int) -> None:
        self.conn = conn
        self.filter = filter
        self.qos = qos

    def credit(self) -> int:
        conn = self.conn
        if conn.paused or conn.engine.closed or not conn.ready:
            return 0
        return conn.mqtt.credit() if self.qos else QOS0_WINDOW

    def deliver(self, record: Record, settled: bool, redelivery: int) -> int | Sent | Refused | None:
        return self.conn.outbound.deliver(self, record, settled, redelivery)

    def settle(self, handle: Any) -> None:
        """The message is settled here (MQTT has nothing to send for it): a persistent
        session's completed QoS 2 message is forgotten (``outbound.py``)."""
        if type(handle) is Sent:
            self.conn.outbound.settled(handle)

    def draining(self) -> bool:
        return False

    def drained(self) -> None:
        pass

    def stolen(self) -> None:
        self.conn.mqtt.disconnect(Reason.SESSION_TAKEN_OVER, "the same client connected again")
        self.conn.dirty()

    def stalled(self, why: str) -> None:
        """It answered nothing for ``subscriber_stall`` while it held deliveries: MQTT has no end
        for one subscription, so the connection ends (0x97, quota exceeded, saying why); a
        persistent session's subscriptions are suspended for its expiry, as at any drop."""
        conn = self.conn
        conn.mqtt.disconnect(Reason.QUOTA_EXCEEDED, why)
        conn.drop_all()
        conn.dirty()

    def gap(self, router: str) -> None:
        """Router ``router`` gave this subscription up while out of reach (messages were
        accepted without it). MQTT has no end for one subscription: the session ends, and
        the connection with it, so the client's next connect finds no session (session
        present 0: by the specification it discards its own state and subscribes anew)."""
        conn = self.conn
        conn.subscribers.pop(self.filter, None)  # (the core ended it)
        session, store = conn.session, conn.sessions
        if session is not None and store is not None:
            session.subscriptions.pop(self.filter, None)
            store.end(session)
            conn.session = None  # (its other subscriptions end with the connection, not suspended)
        conn.mqtt.disconnect(Reason.UNSPECIFIED_ERROR, f"subscription gap: router {router} gave the subscription to "
                             f"{self.filter!r} up while out of reach, messages were accepted without it")
        conn.dirty()

    def activated(self) -> None:
        pass
