"""MQTT client connections: between an MQTT client and the core, through the link lifecycle.

What this first version does (``docs/mqtt.md`` has the plan for the rest):

* A client's messages to one topic are one publisher of the core (its link name
  ``mqtt:TOPIC``), attached at its first PUBLISH there: per-topic order is the core's
  per-publisher order. QoS 0 goes pre-settled (at most once); QoS 1 is answered PUBACK,
  QoS 2 PUBREC, when every subscriber in the network accepted (MQTT 3.1.1 cannot say
  "rejected": it hears PUBACK/PUBREC all the same; 5.0 hears reason 0x80).
* Each topic filter of a SUBSCRIBE is one subscriber of the core (``mqtt:FILTER``), QoS 0
  at most once (pre-settled), QoS 1 and 2 holding acceptance back until the client's
  PUBACK, or PUBREC; the SUBACK goes when every filter's attach is effective network-wide.
  ``$share/GROUP/FILTER`` joins consumer group GROUP. Wildcard filters are refused (0xA2)
  until the network matches patterns.
* Sessions end with the connection: a client asking for a persistent one is told it has
  none (CONNACK session expiry 0; session present false). No will messages yet.
"""

from __future__ import annotations

import itertools
import logging
import time
from typing import TYPE_CHECKING, Any

from once.records.membership import GroupId
from once.records.table import Record

from ...amqp.errors import DecodeError
from ...core import ACCEPTED, Outcome, OutcomeKind, Publisher, Subscriber
from ...core.lifecycle import SubscriberAttach
from ...engineio import EngineProtocol
from ...logs import fields
from ...mqtt.codec import MqttError
from ...mqtt.codes import Prop, Reason, Version
from ...mqtt.connection import MqttConnection, PacketTooLarge
from ...mqtt.events import (
    ClientConnected,
    ClientDisconnected,
    ConnectionFailed,
    DeliveryAcked,
    DeliveryReceived,
    MessagePublished,
    SubscribeRequested,
    UnsubscribeRequested,
)
from ...mqtt.packets import Props
from ...mqtt.topics import is_wildcard, parse_filter
from .message import from_amqp, to_amqp

if TYPE_CHECKING:
    from ...context import RouterContext

log = logging.getLogger("once.mqtt")
access = logging.getLogger("once.access")
QOS0_WINDOW = 1000  # pre-settled deliveries a QoS 0 subscriber is given at once
_ids = itertools.count(1)


class MqttPublisherPort:
    __slots__ = ("conn", "credit")

    def __init__(self, conn: MqttEdgeConnection) -> None:
        self.conn = conn
        self.credit = 0

    def grant(self, credit: int) -> None:
        self.credit = credit
        if credit > 0:
            self.conn.resume()

    def outcome(self, handle: tuple[int, int], outcome: Outcome, settle: bool) -> None:
        qos, packet_id = handle
        conn = self.conn
        if conn.engine.closed:
            return
        reason = Reason.SUCCESS if outcome.kind is OutcomeKind.ACCEPTED else Reason.UNSPECIFIED_ERROR
        if qos == 1:
            conn.engine.puback(packet_id, reason)
        else:
            conn.engine.pubrec(packet_id, reason)
        conn.dirty()


class MqttSubscriberPort:
    __slots__ = ("conn", "topic", "qos")

    def __init__(self, conn: MqttEdgeConnection, topic: str, qos: int) -> None:
        self.conn = conn
        self.topic = topic
        self.qos = qos

    def credit(self) -> int:
        conn = self.conn
        if conn.paused or conn.engine.closed:
            return 0
        return conn.engine.credit() if self.qos else QOS0_WINDOW

    def deliver(self, record: Record, settled: bool, redelivery: int) -> int | None:
        conn = self.conn
        try:
            payload, props = from_amqp(record.payload)
        except DecodeError:  # not AMQP sections (another message format): passed as it came
            payload, props = record.payload, ()
        qos = 0 if settled else self.qos
        try:
            pid = conn.engine.publish(record.topic, payload, qos, props, dup=bool(redelivery))
        except PacketTooLarge as e:
            if qos:  # (the client can never have it: refused for it, after this pump, not left in doubt)
                conn.router.call_soon(conn.refuse_delivery, conn.subscribers[self.topic], record, str(e))
            pid = None
        if pid is not None:
            conn.in_flight[pid] = (conn.subscribers[self.topic], record, qos)
        conn.dirty()
        return pid

    def settle(self, handle: Any) -> None:
        pass

    def draining(self) -> bool:
        return False

    def drained(self) -> None:
        pass

    def stolen(self) -> None:
        self.conn.engine.disconnect(Reason.SESSION_TAKEN_OVER, "the same client connected again")
        self.conn.dirty()

    def activated(self) -> None:
        pass


class MqttEdgeConnection(EngineProtocol):
    def __init__(self, router: RouterContext) -> None:
        super().__init__(router)
        self.core = router.core
        self.lifecycle = router.lifecycle
        s = router.settings
        self.engine = MqttConnection(receive_maximum=min(s.link_credit, 65535),  # type: ignore[assignment]
                                     max_packet_size=s.max_message_size + 1024)
        self.client_id = ""
        self.user = ""
        self.publishers: dict[str, Publisher] = {}
        self.subscribers: dict[str, Subscriber] = {}
        self.in_flight: dict[int, tuple[Subscriber, Record, int]] = {}  # our QoS 1/2 messages by packet id
        self.reading_paused = False
        self.serial = 0
        self.peer = "?"

    def describe(self) -> str:
        return f"MQTT connection from {self.remote}"

    def on_admitted(self) -> None:
        self.peer = self.remote
        self.router.serials += 1
        self.serial = self.router.serials

    def resume(self) -> None:
        if self.reading_paused and self.transport is not None:
            self.reading_paused = False
            self.transport.resume_reading()

    # ------------------------------------------------------------------ events

    def _on_connect(self, event: ClientConnected) -> None:
        c = event.connect
        engine: MqttConnection = self.engine  # type: ignore[assignment]
        self._handshake_done()
        user = self._authenticate(c.username, c.password)
        if user is None:
            engine.refuse(Reason.BAD_USER_NAME_OR_PASSWORD if c.username else Reason.NOT_AUTHORIZED,
                          "authentication failed")
            log.warning("router %s: refused MQTT client %r from %s: authentication failed", self.router.id,
                        c.client_id, self.peer, extra=fields("auth.failed", peer=self.peer, host=self.host,
                                                             mechanism="MQTT", user=c.username or ""))
            return
        props: Props = ()
        client_id = c.client_id
        if not client_id:
            if c.version is Version.V311 and not c.clean_start:
                engine.refuse(Reason.CLIENT_IDENTIFIER_NOT_VALID, "an empty client id needs a clean session")
                return
            client_id = f"once-{self.router.id}-{next(_ids)}-{time.time_ns() % 10**9}"
            if c.version is Version.V5:
                props = ((Prop.ASSIGNED_CLIENT_IDENTIFIER, client_id),)
        if c.version is Version.V5:
            props += ((Prop.SESSION_EXPIRY_INTERVAL, 0),)  # (sessions end with the connection, for now)
        self.client_id, self.user = client_id, user
        self.router.connections.add(self)
        for ev in engine.accept(False, props):
            self._dispatch(ev)
        self._rearm()  # (its keep-alive is known now)
        access.info("router %s: access: user %s from %s by MQTT %s (connection %d, client %s)", self.router.id,
                    user or "(none)", self.host, "5.0" if c.version is Version.V5 else "3.1.1", self.serial, client_id,
                    extra=fields("access", user=user, host=self.host, peer=self.peer, mechanism=f"MQTT {int(c.version)}",
                                 connection=self.serial, container=client_id))

    def _authenticate(self, username: str | None, password: bytes | None) -> str | None:
        auth = self.router.topology.auth
        if username is None:
            return "anonymous" if auth.allow_anonymous else None
        if not auth.users:
            return username if auth.allow_anonymous else None
        response = b"\x00" + username.encode() + b"\x00" + (password or b"")
        return self.router.sasl.authenticate("PLAIN", response)

    def _on_publish(self, event: MessagePublished) -> None:
        p = event.publish
        engine: MqttConnection = self.engine  # type: ignore[assignment]
        if p.retain and engine.version is Version.V5:
            engine.disconnect(Reason.RETAIN_NOT_SUPPORTED, "the network keeps no retained messages")
            self._drop_all()
            return
        pub = self.publishers.get(p.topic)
        if pub is None:
            pub, _ = self.lifecycle.attach_publisher(MqttPublisherPort(self), p.topic, self.client_id,
                                                     f"mqtt:{p.topic}", False, None, None, group=self)
            self.publishers[p.topic] = pub
            self.lifecycle.publisher_answered(pub)
        tag = p.packet_id.to_bytes(2, "big") if p.packet_id is not None else next(_ids).to_bytes(8, "big")
        message = to_amqp(p.topic, p.payload, p.props)
        self.core.publish(pub, tag, message, p.qos == 0, (p.qos, p.packet_id or 0))
        port = pub.port
        assert isinstance(port, MqttPublisherPort)
        if port.credit <= 0 and not self.reading_paused and self.transport is not None:
            # No credit on this topic: read no more from the client until the core grants some
            # (MQTT has no credit of its own for QoS 0; TCP's is the only one).
            self.reading_paused = True
            self.transport.pause_reading()

    def _on_subscribe(self, event: SubscribeRequested) -> None:
        s = event.subscribe
        reasons: list[int] = []
        pending = 0  # filters whose attach is not effective yet: the SUBACK waits for all
        engine: MqttConnection = self.engine  # type: ignore[assignment]

        def effective(*_: Any) -> None:
            nonlocal pending
            pending -= 1
            if pending == 0 and not engine.closed:
                engine.suback(s.packet_id, reasons)
                self.dirty()
                self.router.flush()

        for sub in s.subscriptions:
            try:
                f = parse_filter(sub.filter)
            except MqttError as e:
                reasons.append(e.reason)
                continue
            if is_wildcard(f.pattern):
                reasons.append(Reason.WILDCARD_SUBSCRIPTIONS_NOT_SUPPORTED)
                continue
            reasons.append(sub.qos)
            old = self.subscribers.pop(sub.filter, None)
            if old is not None:
                self.lifecycle.subscriber_gone(old, False)
            pending += 1
            request = SubscriberAttach(f.pattern, self.client_id, f"mqtt:{sub.filter}", sub.qos == 0,
                                       GroupId(f.group) if f.group else None, owner=self.user)
            self.subscribers[sub.filter] = self.lifecycle.attach_subscriber(
                MqttSubscriberPort(self, sub.filter, sub.qos), request, effective)
        if pending == 0:
            engine.suback(s.packet_id, reasons)

    def _on_unsubscribe(self, event: UnsubscribeRequested) -> None:
        reasons = []
        for f in event.unsubscribe.filters:
            sub = self.subscribers.pop(f, None)
            if sub is None:
                reasons.append(Reason.NO_SUBSCRIPTION_EXISTED)
            else:
                self.lifecycle.subscriber_gone(sub, False)
                reasons.append(Reason.SUCCESS)
        self.engine.unsuback(event.unsubscribe.packet_id, reasons)  # type: ignore[attr-defined]

    def _on_acked(self, event: DeliveryAcked) -> None:
        """PUBACK (QoS 1: accepted or refused), PUBCOMP (QoS 2: settled; its PUBREC said
        accepted), or a refusing PUBREC (QoS 2)."""
        entry = self.in_flight.pop(event.packet_id, None)
        if entry is None:
            return
        sub, record, qos = entry
        refused = event.reason >= 0x80
        state: Outcome | None = Outcome(OutcomeKind.REJECTED) if refused else None if qos == 2 else ACCEPTED
        self.core.subscriber_update(sub, record, event.packet_id, state, True)
        for s in list(self.subscribers.values()):  # (the client's receive maximum has room again)
            self.lifecycle.subscriber_credit(s)

    def _on_received(self, event: DeliveryReceived) -> None:
        entry = self.in_flight.get(event.packet_id)
        if entry is not None:
            self.core.subscriber_update(entry[0], entry[1], event.packet_id, ACCEPTED, False)

    def refuse_delivery(self, sub: Subscriber, record: Record, why: str) -> None:
        """A message this client cannot take (over its maximum packet size): rejected for it."""
        if sub.attached and record.states.get(sub) is not None:
            self.core.subscriber_update(sub, record, None, Outcome(OutcomeKind.REJECTED, description=why), True)
            self.core.after_batch()
            self.router.flush()

    def _on_disconnect(self, event: ClientDisconnected) -> None:
        self._drop_all()

    def _on_failed(self, event: ConnectionFailed) -> None:
        log.warning("router %s: closed MQTT connection from %s: 0x%02x %s", self.router.id, self.peer, event.reason,
                    event.description, extra=fields("connection.failed", connection=self.serial, peer=self.peer,
                                                    condition=event.reason.name, description=event.description))
        self._drop_all()

    def _dispatch(self, event: object) -> None:
        handler = self.HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def _drop_all(self) -> None:
        for pub in self.publishers.values():
            self.lifecycle.publisher_gone(pub, False)
        for sub in self.subscribers.values():
            self.lifecycle.subscriber_gone(sub, False)
        self.publishers.clear()
        self.subscribers.clear()
        self.in_flight.clear()

    def on_batch_failed(self) -> None:
        self._drop_all()

    def on_lost(self, exc: Exception | None) -> None:
        self.router.connections.discard(self)
        self._drop_all()

    def on_writable(self) -> None:
        for sub in list(self.subscribers.values()):
            self.core.pump(sub)

    HANDLERS = {
        ClientConnected: _on_connect,
        MessagePublished: _on_publish,
        SubscribeRequested: _on_subscribe,
        UnsubscribeRequested: _on_unsubscribe,
        DeliveryAcked: _on_acked,
        DeliveryReceived: _on_received,
        ClientDisconnected: _on_disconnect,
        ConnectionFailed: _on_failed,
    }
