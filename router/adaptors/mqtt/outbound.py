"""The network's messages to an MQTT client: PUBLISH per delivery, its answers back to
the core (``docs/mqtt.md``, "Sessions in the network").

For a persistent session at QoS 2, the packet id of a message is in every replica of the
session before the PUBLISH goes, and its PUBREC before the acceptance leaves this router
and before the PUBREL goes. The router the session resumes at sends the PUBREL for what
was received and sends again, under the same packet id (DUP), what the network still
owes: a client that had it answers PUBREC again without a second delivery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from once.records.table import Record

from ...amqp.errors import DecodeError
from ...core import ACCEPTED, Outcome, OutcomeKind, Refused, Subscriber
from ...mqtt.codes import Prop
from ...mqtt.connection import PacketTooLarge
from ...mqtt.events import DeliveryAcked, DeliveryReceived
from ...mqtt.packets import Publish
from .message import from_amqp, publish_qos
from .ports import MqttSubscriberPort, Sent
from .sessions import Session

if TYPE_CHECKING:
    from .view import ConnectionView


class Outbound:
    """One connection's side of the messages the network sends its client."""

    def __init__(self, conn: ConnectionView) -> None:
        self.conn = conn
        # our QoS 1/2 messages by packet id: (subscriber, record, QoS, the core's handle)
        self.in_flight: dict[int, tuple[Subscriber, Record, int, Any]] = {}
        self.resend: dict[bytes, int] = {}  # gid -> packet id: what a router before us sent, sent again so

    def restore(self, session: Session) -> dict[str, dict[bytes, Any]]:
        """A resumed session: the packet ids it had in flight stay taken; returns, per
        filter, what it received or completed (its subscription's unsettled map: a copy
        that comes again is answered for it, never sent). What it completed is this
        router's to answer from now on (the map's placeholders), so the session drops it."""
        accepted: dict[str, dict[bytes, Any]] = {}
        for pid, (gid, received, filter) in session.outbound.items():
            if received:
                accepted.setdefault(filter, {})[gid] = ACCEPTED
            else:
                self.resend[gid] = pid
            self.conn.mqtt.in_flight[pid] = 2  # (not ours to give another message until it completes)
        for gid, filter in session.done.items():
            accepted.setdefault(filter, {})[gid] = ACCEPTED
        session.done.clear()
        return accepted

    def release_owed(self, session: Session) -> None:
        """After the CONNACK: the PUBRELs a router before us owed."""
        for pid, (_, received, _) in session.outbound.items():
            if received:
                self.conn.mqtt.pubrel(pid)
        self.conn.dirty()

    def deliver(self, port: MqttSubscriberPort, record: Record, settled: bool, redelivery: int) -> int | Sent | Refused | None:
        conn = self.conn
        engine = conn.mqtt
        try:
            payload, props = from_amqp(record.payload)
        except DecodeError:  # not AMQP sections (another message format): passed as it came
            payload, props = record.payload, ()
        if conn.tell_gid:
            props = (*props, (Prop.USER_PROPERTY, ("once-gid", record.gid.hex())))
        # (the lower of the subscription's and the publisher's, MQTT 5.0 section 4.5)
        qos = 0 if settled else min(port.qos, publish_qos(record.payload))
        sub = conn.subscribers[port.filter]
        session = conn.session
        if qos == 2 and session is not None:
            # Persistent: the packet id is the network's before the client sees it.
            known = self.resend.pop(record.gid, None)
            pid = engine.reserve(2) if known is None else known
            handle = Sent(pid, record.gid)
            self.in_flight[pid] = (sub, record, qos, handle)
            # DUP for a packet id sent before: every packet id the session's client was ever
            # sent is in its replicas before the PUBLISH goes, so a message not there never
            # reached it (MQTT 3.3.1.1: a first attempt is DUP 0), whatever marks the network
            # put on it for this client. A group member's is the exception: the network marks
            # a message it passed on from another member, which may have processed it (a
            # standard AMQP member killed before its acceptance left it), and DUP is the one
            # mark MQTT has (RabbitMQ's MQTT plugin sets it from a queue's redelivered flag
            # alike); a QoS 2 client processes a new packet id all the same (fresh ring7c soak
            # seed 613022: 35 messages a Proton member accepted as it was killed went to an
            # MQTT member unmarked).
            dup = known is not None or (bool(redelivery) and sub.group is not None)
            packet = Publish(record.topic, payload, 2, False, dup, pid, props)
            if known is not None:  # (the network knows its packet id already)
                why = self._send(packet)
                return handle if why is None else Refused(why)
            session.outbound[pid] = (record.gid, False, port.filter)
            assert conn.sessions is not None
            conn.sessions.changed(session, lambda: self._send_stored(packet))
            return handle
        try:
            sent = engine.publish(record.topic, payload, qos, props, dup=bool(redelivery))
        except PacketTooLarge as e:
            # (the client can never have it: refused for it, not left in doubt; QoS 0 is dropped)
            return Refused(str(e)) if qos else None
        if sent is not None:
            self.in_flight[sent] = (sub, record, qos, sent)
        conn.dirty()
        return sent

    def _send_stored(self, packet: Publish) -> None:
        """The session store has its packet id now: it goes (or is refused for the client)."""
        entry = self.in_flight.get(packet.packet_id)  # type: ignore[arg-type]
        why = self._send(packet)
        if why is not None and entry is not None:
            self.refuse(entry[0], entry[1], why)

    def _send(self, packet: Publish) -> str | None:
        """Send a QoS 2 message under its packet id; why the client can never take it, if so."""
        conn = self.conn
        engine = conn.mqtt
        pid = packet.packet_id
        assert pid is not None
        entry = self.in_flight.get(pid)
        if engine.closed or entry is None:
            return None
        try:
            engine.publish(packet.topic, packet.payload, 2, packet.props, packet.dup, packet_id=pid)
        except PacketTooLarge as e:
            self.in_flight.pop(pid, None)
            engine.in_flight.pop(pid, None)
            self._forget(pid)
            return str(e)
        conn.dirty()
        return None

    def _forget(self, pid: int) -> None:
        conn = self.conn
        session = conn.session
        if session is not None and session.outbound.pop(pid, None) is not None:
            assert conn.sessions is not None
            conn.sessions.changed(session)

    def acked(self, event: DeliveryAcked) -> None:
        """PUBACK (QoS 1: accepted or refused), PUBCOMP (QoS 2: settled; its PUBREC said
        accepted), or a refusing PUBREC (QoS 2)."""
        conn = self.conn
        pid = event.packet_id
        entry = self.in_flight.pop(pid, None)
        refused = event.reason >= 0x80
        if entry is not None and not refused and type(entry[3]) is Sent and not entry[3].settled:
            self._completed(pid, entry[3])  # (the core settles it with us when the network has)
        else:
            self._forget(pid)
            if entry is not None:
                sub, record, qos, handle = entry
                state: Outcome | None = Outcome(OutcomeKind.REJECTED) if refused else None if qos == 2 else ACCEPTED
                if sub.attached and record.states.get(sub) is not None:
                    conn.core.subscriber_update(sub, record, handle, state, True)
        if entry is not None:
            for s in list(conn.subscribers.values()):  # (the client's receive maximum has room again)
                conn.lifecycle.subscriber_credit(s)

    def _completed(self, pid: int, sent: Sent) -> None:
        """Its PUBCOMP for a message the network has not settled: the packet id is free,
        the gid stays in the session until ``settled``."""
        conn = self.conn
        session = conn.session
        entry = session.outbound.pop(pid, None) if session is not None else None
        if session is None or entry is None:
            return
        session.done[sent.gid] = entry[2]
        assert conn.sessions is not None
        conn.sessions.changed(session)

    def settled(self, sent: Sent) -> None:
        """The core settled the message here (every subscriber answered its root): a
        completed one leaves the session."""
        sent.settled = True
        conn, store = self.conn, self.conn.sessions
        if store is None:
            return
        session = store.sessions.get(conn.client_id)
        if session is not None and session.host == conn.router.id and session.done.pop(sent.gid, None) is not None:
            store.changed(session)

    def received(self, event: DeliveryReceived) -> None:
        """Its PUBREC: it has the message. A persistent session's network learns it first;
        only then does the acceptance leave this router, and the PUBREL go."""
        conn = self.conn
        pid = event.packet_id
        session = conn.session
        if session is None or pid not in session.outbound:
            self._accept(pid)
            conn.mqtt.pubrel(pid)
            return
        gid, _, filter = session.outbound[pid]
        session.outbound[pid] = (gid, True, filter)
        assert conn.sessions is not None

        def release() -> None:
            self._accept(pid)
            if not conn.engine.closed and pid in conn.mqtt.in_flight:
                conn.mqtt.pubrel(pid)
                conn.dirty()
            conn.router.flush()
        conn.sessions.changed(session, release)

    def _accept(self, pid: int) -> None:
        entry = self.in_flight.get(pid)
        if entry is not None and entry[0].attached and entry[1].states.get(entry[0]) is not None:
            self.conn.core.subscriber_update(entry[0], entry[1], entry[3], ACCEPTED, False)

    def refuse(self, sub: Subscriber, record: Record, why: str) -> None:
        """A message this client cannot take (over its maximum packet size): rejected for it."""
        if sub.attached and record.states.get(sub) is not None:
            conn = self.conn
            conn.core.subscriber_update(sub, record, None, Outcome(OutcomeKind.REJECTED, description=why), True)
            conn.router.flush()
