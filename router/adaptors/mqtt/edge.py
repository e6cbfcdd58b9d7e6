"""MQTT client connections: between an MQTT client and the core, through the link lifecycle.

* A client's messages to one topic are one publisher of the core (its link name
  ``mqtt:TOPIC``, its incarnation the session's), attached at its first PUBLISH there:
  per-topic order is the core's per-publisher order. QoS 0 goes pre-settled (at most
  once); QoS 1 is answered PUBACK, QoS 2 PUBREC, when every subscriber in the network
  accepted (MQTT 3.1.1 cannot say "rejected": it hears PUBACK/PUBREC all the same; 5.0
  hears reason 0x80).
* A QoS 2 message's delivery tag is (the session's epoch, its packet id): a DUP resent to
  another router after ours died is the same gid, and merges with the network's record.
  A packet id used again for a new message moves the epoch on (``_next_epoch``).
* Each topic filter of a SUBSCRIBE is one subscriber of the core (``mqtt:FILTER``), QoS 0
  at most once (pre-settled), QoS 1 and 2 holding acceptance back until the client's
  PUBACK, or PUBREC; the SUBACK goes when every filter's attach is effective network-wide.
  ``$share/GROUP/FILTER`` joins consumer group GROUP. Wildcard filters are refused (0xA2)
  until the network matches patterns.
* A persistent session (``sessions.py``) outlives its connection: its subscribers are
  suspended for its expiry, its publishers for their grace, and it resumes at any router.
  Our QoS 2 messages to it are sent only once the network knows their packet id, and
  released only once it knows their PUBREC: the router it resumes at sends the same
  packet id again (DUP) or the PUBREL, and never delivers the message twice.
"""

from __future__ import annotations

import itertools
import logging
import secrets
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
    PublishReleased,
    SubscribeRequested,
    UnsubscribeRequested,
)
from ...mqtt.packets import Props, Publish
from ...mqtt.topics import is_wildcard, parse_filter
from .message import from_amqp, to_amqp
from .ports import MqttPublisherPort, MqttSubscriberPort
from .sessions import Session, SessionStore

if TYPE_CHECKING:
    from ...context import RouterContext

log = logging.getLogger("once.mqtt")
access = logging.getLogger("once.access")
_ids = itertools.count(1)
MAX_SESSION_EXPIRY = 86400  # seconds: a longer one asked for is cut to this (and the client told)

def _tag(epoch: int, packet_id: int) -> bytes:
    return b"\x02" + epoch.to_bytes(4, "big") + packet_id.to_bytes(2, "big")


class MqttEdgeConnection(EngineProtocol):
    def __init__(self, router: RouterContext) -> None:
        super().__init__(router)
        self.core = router.core
        self.lifecycle = router.lifecycle
        s = router.settings
        self.engine = MqttConnection(receive_maximum=min(s.link_credit, 65535),  # type: ignore[assignment]
                                     max_packet_size=s.max_message_size + 1024, release_by_app=True)
        self.sessions: SessionStore | None = getattr(router, "mqtt_sessions", None)
        self.client_id = ""
        self.user = ""
        self.session: Session | None = None  # persistent: lives in the network
        self.incarnation = 0
        self.nonce = secrets.token_bytes(8)  # (QoS 0 and 1 tags: unique to this connection)
        self.epoch = 0
        self.resumed_epoch = 0  # the epoch when it connected: DUP resends from before are of it
        self.used: set[int] = set()  # packet ids of QoS 2 messages in this epoch (here)
        self.open: set[int] = set()  # packet ids of QoS 2 messages published and not answered yet
        self.releasing: dict[int, tuple[str, bytes]] = {}  # PUBREC sent, awaiting PUBREL: packet id -> (topic, tag)
        self.epoch_fresh = True  # ``used`` is all of the epoch's (it began on this connection)
        self.held: list[MessagePublished] = []  # publishes waiting for a new epoch, in order
        self.bumping = False  # a new epoch is on its way to the routers we reach
        self.publishers: dict[str, Publisher] = {}
        self.subscribers: dict[str, Subscriber] = {}
        self.in_flight: dict[int, tuple[Subscriber, Record, int]] = {}  # our QoS 1/2 messages by packet id
        self.resend: dict[bytes, int] = {}  # gid -> packet id: what a router before us sent, sent again so
        self.reading_paused = False
        self.ready = False  # its CONNACK went: deliveries may go (a resumed session's attach before it)
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

    def pause(self) -> None:
        if not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()

    @property
    def mqtt(self) -> MqttConnection:
        return self.engine  # type: ignore[return-value]

    # ------------------------------------------------------------------ connect

    def _on_connect(self, event: ClientConnected) -> None:
        c = event.connect
        engine = self.mqtt
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
        # How long the session outlives the connection: 5.0 says; a 3.1.1 session without
        # clean session lasts the subscriber grace (the network holds messages for it).
        if self.sessions is None:
            expiry = 0
        elif c.version is Version.V5:
            expiry = int(_prop(c.props, Prop.SESSION_EXPIRY_INTERVAL) or 0)
        else:
            expiry = 0 if c.clean_start else int(self.router.settings.subscriber_grace)
        if c.version is Version.V5 and expiry > MAX_SESSION_EXPIRY or self.sessions is None:
            expiry = min(expiry, MAX_SESSION_EXPIRY)
            props += ((Prop.SESSION_EXPIRY_INTERVAL, expiry),)  # (what we keep, when not what it asked)
        self.client_id, self.user = client_id, user
        present = self._open_session(client_id, c.clean_start, expiry)
        self.router.connections.add(self)
        events = engine.accept(present, props)
        self.ready = True
        if present and not engine.closed:
            self._after_connack()
        for ev in events:
            self._dispatch(ev)
        self._rearm()  # (its keep-alive is known now)
        access.info("router %s: access: user %s from %s by MQTT %s (connection %d, client %s%s)", self.router.id,
                    user or "(none)", self.host, "5.0" if c.version is Version.V5 else "3.1.1", self.serial, client_id,
                    ", session resumed" if present else "",
                    extra=fields("access", user=user, host=self.host, peer=self.peer, mechanism=f"MQTT {int(c.version)}",
                                 connection=self.serial, container=client_id))

    def _open_session(self, client_id: str, clean: bool, expiry: int) -> bool:
        """Take the client's session over (it resumes: True) or start one."""
        store = self.sessions
        if store is None:
            self.incarnation = secrets.randbits(63) or 1
            return False
        here = store.on_taken.get(client_id)
        if here is not None:
            here()  # (the same client id connected here before: that connection ends first)
        old = store.get(client_id)
        if old is not None and (clean or not expiry and not old.subscriptions):
            self._end_session(old)
            old = None
        if old is not None and not clean:
            session = old
            store.take(session)
            session.host, session.gone_at, session.expiry = self.router.id, None, expiry
            session.moves = store.next_move(client_id)
            self.epoch = self.resumed_epoch = session.epoch
            self.epoch_fresh = False  # (which packet ids the router before us used in it, we do not know)
        else:
            session = Session(client_id, secrets.randbits(63) or 1, host=self.router.id, expiry=expiry,
                              moves=store.next_move(client_id))
        self.incarnation = session.incarnation
        store.on_taken[client_id] = self._taken
        if expiry > 0 or old is not None:
            self.session = session
            store.changed(session)
        if old is None:
            return False
        self._restore(session)
        return True

    def _restore(self, session: Session) -> None:
        """A resumed session: its subscriptions attach again (what it accepted is their
        unsettled map), and the messages it had in flight keep their packet ids."""
        accepted: dict[str, dict[bytes, Any]] = {}
        for pid, (gid, received, filter) in session.outbound.items():
            if received:
                accepted.setdefault(filter, {})[gid] = ACCEPTED
            else:
                self.resend[gid] = pid
            self.mqtt.in_flight[pid] = 2  # (not ours to give another message until it completes)
        for f, qos in session.subscriptions.items():
            self._attach(f, qos, lambda *_: None, accepted.get(f, {}))

    def _after_connack(self) -> None:
        """The PUBRELs a router before us owed go now."""
        session = self.session
        if session is not None:
            for pid, (_, received, _) in session.outbound.items():
                if received:
                    self.mqtt.pubrel(pid)
            self.dirty()
        for sub in list(self.subscribers.values()):  # (what waited for the CONNACK)
            self.lifecycle.subscriber_credit(sub)

    def _end_session(self, old: Session) -> None:
        """A clean start (or a session nobody wants) ends the old one and its subscriptions,
        at the router that holds them: here, its host if we reach it (``end_suspended``
        there), else (its host died) network-wide from here, by attaching each and ending it."""
        store = self.sessions
        assert store is not None
        if old.host == self.router.id:
            end_suspended(self.router, old.client_id)
        elif old.host in self.router.network.reachable():
            store.end_at(old)
        else:
            for f in old.subscriptions:
                try:
                    parsed = parse_filter(f)
                except MqttError:
                    continue
                self._end_when_effective(SubscriberAttach(
                    parsed.pattern, old.client_id, f"mqtt:{f}", False, GroupId(parsed.group) if parsed.group else None,
                    resumable=True, owner=self.user))
        store.end(old)

    def _end_when_effective(self, request: SubscriberAttach) -> None:
        holder: list[Subscriber] = []
        holder.append(self.lifecycle.attach_subscriber(
            _Ending(), request, lambda *_: self.router.call_soon(self.lifecycle.subscriber_gone, holder[0], False)))

    def _taken(self) -> None:
        """The client connected again (here or at another router): this connection ends."""
        if not self.engine.closed and self.engine.remote_open is not None:
            self.mqtt.disconnect(Reason.SESSION_TAKEN_OVER, "the same client connected again")
            self.dirty()
        self._drop_all(taken=True)

    def _authenticate(self, username: str | None, password: bytes | None) -> str | None:
        auth = self.router.topology.auth
        if username is None:
            return "anonymous" if auth.allow_anonymous else None
        if not auth.users:
            return username if auth.allow_anonymous else None
        response = b"\x00" + username.encode() + b"\x00" + (password or b"")
        return self.router.sasl.authenticate("PLAIN", response)

    # ------------------------------------------------------------------ its messages

    def _on_publish(self, event: MessagePublished, held: bool = False) -> None:
        if self.held and not held:  # (an earlier one waits for a new epoch: this one keeps its place)
            self.held.append(event)
            return
        p = event.publish
        engine = self.mqtt
        if p.retain and engine.version is Version.V5:
            engine.disconnect(Reason.RETAIN_NOT_SUPPORTED, "the network keeps no retained messages")
            self._drop_all()
            return
        if p.qos == 2:
            assert p.packet_id is not None
            pid = p.packet_id
            if p.dup and pid not in self.used:
                tag = _tag(self.resumed_epoch, pid)  # sent before, to us or to a router before us
            elif not self.epoch_fresh or pid in self.used:
                # A packet id used again (or the first new message of a resumed session): a
                # new epoch, once this one's messages are answered (a router after us knows
                # only the latest epoch, so a resent message must be of it).
                # (Held here, reading on: a paused socket would not read its PINGREQs, and the
                # client would give the connection up. What it may send meanwhile is bounded by
                # the receive maximum we advertise.)
                self.held.insert(0, event)
                if not self._blocked(pid):
                    self._next_epoch()
                return
            else:
                tag = _tag(self.epoch, pid)
            self.used.add(pid)
            self.open.add(pid)
        elif p.qos == 1:
            tag = b"\x01" + self.nonce + next(_ids).to_bytes(8, "big")
        else:
            tag = b"\x00" + self.nonce + next(_ids).to_bytes(8, "big")
        pub = self._publisher(p.topic)
        if p.dup and tag not in pub.live:
            pub.resent.add(tag)  # (its deliveries are marked: a router before us may have made some)
        self.core.publish(pub, tag, to_amqp(p.topic, p.payload, p.props), p.qos == 0, (p.qos, p.packet_id or 0, tag))
        port = pub.port
        assert isinstance(port, MqttPublisherPort)
        if port.credit <= 0:
            # No credit on this topic: read no more from the client until the core grants some
            # (MQTT has no credit of its own for QoS 0; TCP's is the only one).
            self.pause()

    def _blocked(self, pid: int) -> bool:
        """Whether a QoS 2 message other than ``pid`` is in the network, unanswered."""
        return bool(self.open) and self.open != {pid}

    def _next_epoch(self) -> None:
        """The epoch moves on; the held publishes go once every router we reach knows it."""
        if self.bumping:
            return
        self.bumping = True
        self.epoch += 1
        self.used = set()
        self.epoch_fresh = True
        session = self.session
        if session is None:
            self.router.call_soon(self._release_held)
            return
        session.epoch = self.epoch
        assert self.sessions is not None
        self.sessions.changed(session, self._release_held)

    def answered(self, packet_id: int) -> None:
        """Its QoS 2 message was answered: a publish held for a new epoch may go now."""
        self.open.discard(packet_id)
        if self.held and not self.bumping:
            first = self.held[0].publish
            if first.packet_id is not None and not self._blocked(first.packet_id):
                self._next_epoch()

    def _release_held(self) -> None:
        self.bumping = False
        if self.engine.closed:
            self.held.clear()
            return
        while self.held:
            event = self.held.pop(0)
            self._on_publish(event, held=True)
            if self.held and self.held[0] is event:  # (it waits again: the rest stay behind it)
                break
        self.core.after_batch()
        self.router.flush()

    def settled(self, topic: str, tag: bytes) -> None:
        """Its message is settled (PUBACK sent, or PUBREL came): the network may forget it."""
        pub = self.publishers.get(topic)
        record = pub.live.get(tag) if pub is not None else None
        if pub is not None and record is not None:
            self.core.publisher_settled(pub, record)

    def _on_released(self, event: PublishReleased) -> None:
        entry = self.releasing.pop(event.packet_id, None)
        if entry is not None:
            self.settled(*entry)

    def _publisher(self, topic: str) -> Publisher:
        pub = self.publishers.get(topic)
        if pub is None:
            persistent = self.session is not None
            pub, _ = self.lifecycle.attach_publisher(MqttPublisherPort(self, topic), topic, self.client_id,
                                                     f"mqtt:{topic}", True, self.incarnation if persistent else None,
                                                     None, group=self)
            self.publishers[topic] = pub
            self.lifecycle.publisher_answered(pub)
        return pub

    # ------------------------------------------------------------------ its subscriptions

    def _on_subscribe(self, event: SubscribeRequested) -> None:
        s = event.subscribe
        reasons: list[int] = []
        pending = 1  # filters whose attach is not effective yet, and the session's copies: the SUBACK waits
        engine = self.mqtt

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
            self._attach(sub.filter, sub.qos, effective, None)
            if self.session is not None:
                self.session.subscriptions[sub.filter] = sub.qos
        if self.session is not None:
            assert self.sessions is not None
            self.sessions.changed(self.session, effective)
        else:
            effective()

    def _attach(self, filter: str, qos: int, effective: Any, unsettled: dict[bytes, Any] | None) -> None:
        f = parse_filter(filter)
        request = SubscriberAttach(f.pattern, self.client_id, f"mqtt:{filter}", qos == 0,
                                   GroupId(f.group) if f.group else None, resumable=self.session is not None,
                                   owner=self.user, unsettled=unsettled)
        self.subscribers[filter] = self.lifecycle.attach_subscriber(MqttSubscriberPort(self, filter, qos), request,
                                                                    effective)

    def _on_unsubscribe(self, event: UnsubscribeRequested) -> None:
        reasons = []
        for f in event.unsubscribe.filters:
            sub = self.subscribers.pop(f, None)
            if sub is None:
                reasons.append(Reason.NO_SUBSCRIPTION_EXISTED)
            else:
                self.lifecycle.subscriber_gone(sub, False)
                reasons.append(Reason.SUCCESS)
                if self.session is not None:
                    self.session.subscriptions.pop(f, None)
        packet_id = event.unsubscribe.packet_id

        def answer() -> None:
            if not self.engine.closed:
                self.mqtt.unsuback(packet_id, reasons)
                self.dirty()
        if self.session is not None:
            assert self.sessions is not None
            self.sessions.changed(self.session, answer)
        else:
            answer()

    # ------------------------------------------------------------------ our messages to it

    def deliver(self, port: MqttSubscriberPort, record: Record, settled: bool, redelivery: int) -> int | None:
        engine = self.mqtt
        try:
            payload, props = from_amqp(record.payload)
        except DecodeError:  # not AMQP sections (another message format): passed as it came
            payload, props = record.payload, ()
        qos = 0 if settled else port.qos
        sub = self.subscribers[port.filter]
        session = self.session
        if qos == 2 and session is not None:
            # Persistent: the packet id is the network's before the client sees it.
            known = self.resend.pop(record.gid, None)
            pid = engine.reserve(2) if known is None else known
            self.in_flight[pid] = (sub, record, qos)
            packet = Publish(record.topic, payload, 2, False, known is not None or bool(redelivery), pid, props)
            if known is not None:  # (the network knows its packet id already)
                self._send_held(packet)
            else:
                session.outbound[pid] = (record.gid, False, port.filter)
                assert self.sessions is not None
                self.sessions.changed(session, lambda: self._send_held(packet))
            return pid
        try:
            sent = engine.publish(record.topic, payload, qos, props, dup=bool(redelivery))
        except PacketTooLarge as e:
            if qos:  # (the client can never have it: refused for it, after this pump, not left in doubt)
                self.router.call_soon(self.refuse_delivery, sub, record, str(e))
            return None
        if sent is not None:
            self.in_flight[sent] = (sub, record, qos)
        self.dirty()
        return sent

    def _send_held(self, packet: Publish) -> None:
        engine = self.mqtt
        pid = packet.packet_id
        assert pid is not None
        entry = self.in_flight.get(pid)
        if engine.closed or entry is None:
            return
        try:
            engine.publish(packet.topic, packet.payload, 2, packet.props, packet.dup, packet_id=pid)
        except PacketTooLarge as e:
            self.in_flight.pop(pid, None)
            engine.in_flight.pop(pid, None)
            self._forget(pid)
            self.refuse_delivery(entry[0], entry[1], str(e))
            return
        self.dirty()

    def _forget(self, pid: int) -> None:
        session = self.session
        if session is not None and session.outbound.pop(pid, None) is not None:
            assert self.sessions is not None
            self.sessions.changed(session)

    def _on_acked(self, event: DeliveryAcked) -> None:
        """PUBACK (QoS 1: accepted or refused), PUBCOMP (QoS 2: settled; its PUBREC said
        accepted), or a refusing PUBREC (QoS 2)."""
        pid = event.packet_id
        self._forget(pid)
        entry = self.in_flight.pop(pid, None)
        if entry is None:
            return
        sub, record, qos = entry
        refused = event.reason >= 0x80
        state: Outcome | None = Outcome(OutcomeKind.REJECTED) if refused else None if qos == 2 else ACCEPTED
        if sub.attached and record.states.get(sub) is not None:
            self.core.subscriber_update(sub, record, pid, state, True)
        for s in list(self.subscribers.values()):  # (the client's receive maximum has room again)
            self.lifecycle.subscriber_credit(s)

    def _on_received(self, event: DeliveryReceived) -> None:
        """Its PUBREC: it has the message. A persistent session's network learns it first;
        only then does the acceptance leave this router, and the PUBREL go: a router
        after us that does not know it was received still owes the message, and sends it
        again under the same packet id, which the client answers without a second delivery."""
        pid = event.packet_id
        session = self.session
        if session is None or pid not in session.outbound:
            self._accept(pid)
            self.mqtt.pubrel(pid)
            return
        gid, _, filter = session.outbound[pid]
        session.outbound[pid] = (gid, True, filter)
        assert self.sessions is not None

        def release() -> None:
            self._accept(pid)
            if not self.engine.closed and pid in self.mqtt.in_flight:
                self.mqtt.pubrel(pid)
                self.dirty()
            self.core.after_batch()
        self.sessions.changed(session, release)

    def _accept(self, pid: int) -> None:
        entry = self.in_flight.get(pid)
        if entry is not None and entry[0].attached and record_waits(entry[0], entry[1]):
            self.core.subscriber_update(entry[0], entry[1], pid, ACCEPTED, False)

    def refuse_delivery(self, sub: Subscriber, record: Record, why: str) -> None:
        """A message this client cannot take (over its maximum packet size): rejected for it."""
        if sub.attached and record.states.get(sub) is not None:
            self.core.subscriber_update(sub, record, None, Outcome(OutcomeKind.REJECTED, description=why), True)
            self.core.after_batch()
            self.router.flush()

    # ------------------------------------------------------------------ the end

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

    def _drop_all(self, taken: bool = False) -> None:
        """The connection ends: a persistent session's links are suspended (it resumes
        here or elsewhere), the others end. ``taken``: the client connected again (the
        connection there changes the session now, not this one)."""
        session = self.session
        keep = session is not None and session.host == self.router.id
        for pub in self.publishers.values():
            self.lifecycle.publisher_gone(pub, keep)
        for sub in self.subscribers.values():
            if keep and session is not None:
                self.lifecycle.subscriber_gone(sub, True, True, float(session.expiry))
            else:
                self.lifecycle.subscriber_gone(sub, False)
        self.publishers.clear()
        self.subscribers.clear()
        self.in_flight.clear()
        self.held.clear()
        store = self.sessions
        if store is not None and self.client_id and store.on_taken.get(self.client_id) == self._taken:
            del store.on_taken[self.client_id]
            # (only while the session is still ours: its client may have connected elsewhere
            # and the newer host's copy come here before this connection's end)
            if keep and session is not None and not taken and store.sessions.get(self.client_id) is session:
                session.gone_at = time.time()
                store.changed(session)
        self.session = None

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
        PublishReleased: _on_released,
        ClientDisconnected: _on_disconnect,
        ConnectionFailed: _on_failed,
    }


def end_suspended(router: RouterContext, client_id: str) -> None:
    """A session that ended: its subscriptions suspended here end (network-wide)."""
    for sub in router.core.suspended():
        if sub.container_id == client_id and sub.link_name.startswith("mqtt:"):
            router.lifecycle.subscriber_gone(sub, False)


def record_waits(sub: Subscriber, record: Record) -> bool:
    return record.states.get(sub) is not None


def _prop(props: Props, key: Prop) -> Any:
    for k, v in props:
        if k is key:
            return v
    return None


class _Ending:
    """The port of a subscription attached only to end it (a clean start's old session)."""

    def credit(self) -> int:
        return 0

    def deliver(self, record: Record, settled: bool, redelivery: int) -> int | None:
        return None

    def settle(self, handle: Any) -> None:
        pass

    def draining(self) -> bool:
        return False

    def drained(self) -> None:
        pass

    def stolen(self) -> None:
        pass

    def activated(self) -> None:
        pass
