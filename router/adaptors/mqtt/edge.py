"""MQTT client connections: between an MQTT client and the core, through the link lifecycle.

* A client's messages to one topic are one publisher of the core (its link name
  ``mqtt:TOPIC``, its incarnation the session's), attached at its first PUBLISH there:
  per-topic order is the core's per-publisher order. QoS 0 goes pre-settled (at most
  once); QoS 1 is answered PUBACK, QoS 2 PUBREC, when every subscriber in the network
  accepted (MQTT 3.1.1 cannot say "rejected": it hears PUBACK/PUBREC all the same; 5.0
  hears reason 0x80).
* Its messages to the network are ``inbound.py``'s (a QoS 2 message's tag is the
  session's epoch and its packet id: a DUP resent to another router is the same gid);
  the network's messages to it are ``outbound.py``'s.
* Each topic filter of a SUBSCRIBE is one subscriber of the core (``mqtt:FILTER``), QoS 0
  at most once (pre-settled), QoS 1 and 2 holding acceptance back until the client's
  PUBACK, or PUBREC; the SUBACK goes when every filter's attach is effective network-wide.
  A filter with ``+`` or ``#`` is a pattern subscriber: the network matches it against
  every topic (``records/names.py``). ``$share/GROUP/FILTER`` joins consumer group GROUP
  of that filter (of a pattern too: a group of every topic it matches).
* A persistent session (``sessions.py``) outlives its connection: its subscribers are
  suspended for its expiry, its publishers for their grace, and it resumes at any router.
  Our QoS 2 messages to it are sent only once the network knows their packet id, and
  released only once it knows their PUBREC: the router it resumes at sends the same
  packet id again (DUP) or the PUBREL, and never delivers the message twice.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from typing import TYPE_CHECKING, Any

from once.records.membership import GroupId
from once.records.table import Record

from ...core import Subscriber
from ...core.lifecycle import SubscriberAttach
from ...engineio import EngineProtocol
from ...logs import fields
from ...mqtt.codec import MqttError
from ...mqtt.codes import Prop, Reason, Version
from ...mqtt.connection import MqttConnection
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
from ...mqtt.packets import Props, Will, prop
from ...mqtt.topics import parse_filter
from ...security.authn import password_user, user_groups
from .inbound import Inbound
from .outbound import Outbound
from .ports import MqttSubscriberPort
from .sessions import Session, SessionStore
from .will import publish_will, will_delay, will_size

if TYPE_CHECKING:
    from ...context import RouterContext
    from ...core import Publisher
    from ...core.purse import Purse

log = logging.getLogger("once.mqtt")
access = logging.getLogger("once.access")
_ids = itertools.count(1)
GID = "once-gid"
# bytes: a packet arriving longer than this is weighed against the bytes bound (``_bound_bytes``;
# shorter ones are bounded by what one read brings)
WEIGHED = 64 * 1024
MAX_SESSION_EXPIRY = 86400  # seconds: a longer one asked for is cut to this (and the client told)

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
        self.will: Will | None = None  # (``will.py``)
        # It asked to be told each message's gid (CONNECT user property ``once-gid``, 5.0):
        # in a user property of our PUBACK/PUBREC and of every PUBLISH we send it (for a
        # delivery journal the audit can join, as our harness's MQTT clients keep).
        self.tell_gid = False
        self.subscribers: dict[str, Subscriber] = {}
        self.inbound = Inbound(self)
        self.outbound = Outbound(self)
        self.reading_paused = False
        self.pausing: set[str] = set()  # why reading is paused (``pause``)
        self.ready = False  # its CONNACK went: deliveries may go (a resumed session's attach before it)
        self.serial = 0
        self.peer = "?"
        self.principal: tuple[str, str] | None = None  # (user, host) it is counted under (``quotas.py``)
        self.max_message_size = 0  # its user's or host's, when smaller than the router's (0: the router's)
        self.will_bytes = 0  # what its will holds (``_bound_bytes``)

    def describe(self) -> str:
        return f"MQTT connection from {self.remote}"

    def on_bytes(self, data: bytes) -> None:
        if not self.ready and self.held_for_turn(data):
            return  # (its CONNECT waits for its host's turn: ``EngineProtocol.held_for_turn``)
        self.feed(data)
        mqtt = self.mqtt
        if mqtt.reader.incoming > WEIGHED or self.holding or self.inbound.held_bytes or self.will_bytes:
            self._bound_bytes()

    def _bound_bytes(self) -> None:
        """What this connection holds on the router's account (``core/reserve.py``): a packet
        arriving, from its header on, at twice its length (its buffer and the message made of
        it), publishes held for a new epoch and its will. A packet that would pass the
        router's ``max_in_flight_bytes``, the connection's share (``max_connection_bytes``)
        or its user's or host's budget is not read on until there is room: reading pauses
        with its header, before its body is held (six clients' 80 MB publishes took 547 MiB
        under a 256 MiB bound, nothing refused). One alone, with nothing else held, goes."""
        reader = self.mqtt.reader
        incoming = reader.incoming if reader.incoming > WEIGHED else 0
        rest = self.inbound.held_bytes + self.will_bytes
        why = None
        if incoming:
            s = self.router.settings
            limit = s.max_in_flight_bytes
            room = self.core.reserve.room(limit, self.core.records.bytes, self)
            share = s.max_connection_bytes or max(s.max_message_size, limit // 4)
            held = sum(pub.bytes for pub in self.inbound.publishers.values())
            if 2 * incoming + rest > room and room < limit:
                why = (f"max_in_flight_bytes ({limit}): the router holds {limit - room} bytes, this packet is "
                       f"{incoming}")
            elif held and held + incoming + rest > share:
                why = f"max_connection_bytes ({share}): its messages hold {held} bytes, this packet is {incoming}"
            elif self.principal is not None:
                purse = self.router.quotas.arrivals_over(*self.principal, incoming, True)
                if purse is not None:
                    why = f"max_in_flight_bytes ({purse.where}: {purse.limit})"
        waiting = self in self.router.waiting_for_room
        if why is None and waiting and any(self.past_bounds(pub) for pub in self.inbound.publishers.values()):
            why = ""  # (its records are past a bound: it waits, with no line, as a link waits for credit)
        if why is None:
            self.hold_bytes(2 * incoming + rest)
            if waiting:
                self.router.waiting_for_room.discard(self)
                self.resume("bytes")
            return
        self.hold_bytes(len(reader.buffer) + rest)
        if not waiting:
            self.wait_for_room()
        if why and not waiting:
            self.router.guard_log.warning(
                ("bytes", self.host), asyncio.get_running_loop().time(),
                "router %s: MQTT client %s from %s: not read until there is room: its next packet would pass %s",
                self.router.id, self.client_id or "?", self.peer, why,
                extra=fields("mqtt.paused", connection=self.serial, peer=self.peer, container=self.client_id,
                             limit=why.split(" ", 1)[0], incoming=incoming))

    def past_bounds(self, pub: Publisher) -> bool:
        """Whether ``pub``'s records, or the router's, are past their byte bound (its
        user's or host's budget included): the client is not read until they are not."""
        s = self.router.settings
        core = self.core
        if pub.bytes > s.link_in_flight_bytes or core.records.bytes + core.reserve.bytes > s.max_in_flight_bytes:
            return True
        return any(purse.bytes > purse.limit for purse in pub.purses)

    def wait_for_room(self) -> None:
        """Read no more until there is room (``room_changed``, as batches end)."""
        self.router.waiting_for_room.add(self)
        self.pause("bytes")

    def room_changed(self) -> None:
        """Records were let go, or another connection's arrivals ended: read on if it fits."""
        if self.transport is None or self.mqtt.closed:
            self.router.waiting_for_room.discard(self)
            return
        self._bound_bytes()

    def on_admitted(self) -> None:
        self.peer = self.remote
        self.router.serials += 1
        self.serial = self.router.serials

    def resume(self, why: str) -> None:
        """Reading goes on once no reason to pause is left (``bytes``: the byte bounds,
        ``_bound_bytes``; ``held``: publishes held in the adaptor, ``Inbound``)."""
        self.pausing.discard(why)
        if self.reading_paused and not self.pausing and self.transport is not None:
            self.reading_paused = False
            self.mqtt.reading = self.mqtt.heard = True
            self.transport.resume_reading()

    def pause(self, why: str) -> None:
        self.pausing.add(why)
        if not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.mqtt.reading = False  # (its silence meanwhile is ours: keep-alive does not count it)
            self.transport.pause_reading()

    @property
    def mqtt(self) -> MqttConnection:
        return self.engine  # type: ignore[return-value]

    # ------------------------------------------------------------------ connect

    def _on_connect(self, event: ClientConnected) -> None:
        c = event.connect
        engine = self.mqtt
        self._handshake_done()
        auth = self.router.topology.auth
        if c.username is not None and auth.users and not (self.tls or auth.plain_without_tls):
            # A password on a connection without TLS is not even read: said so, to the
            # client (5.0) and in the log (it heard "bad user name or password", with the
            # right one, and nothing said why). Not a failure to count: nothing was guessed.
            why = "passwords are taken over TLS only (the router's mqtts listener), or with auth.plain_without_tls"
            engine.refuse(Reason.NOT_AUTHORIZED, why)
            now = asyncio.get_running_loop().time()
            self.router.guard_log.warning(("plain", self.host), now, "router %s: MQTT client %r from %s sent a "
                                          "password without TLS: %s", self.router.id, c.client_id, self.remote, why,
                                          extra=fields("auth.cleartext", peer=self.remote, host=self.host,
                                                       user=c.username))
            return
        user = self._authenticate(c.username, c.password)
        if user is None:
            engine.refuse(Reason.BAD_USER_NAME_OR_PASSWORD if c.username else Reason.NOT_AUTHORIZED,
                          "authentication failed")
            # (counted against its host, whose next attempts wait their turn, and logged
            # at most once a while per host, as SASL's: ``EngineProtocol.auth_failed``)
            self.auth_failed(f"MQTT (client {c.client_id!r})", "MQTT", c.username or "")
            return
        self.user = user
        if c.will is not None:
            refusal = self.unauthorized("publish", c.will.topic)
            if refusal is not None:  # (a will is published as its user, where it ends: checked now)
                engine.refuse(Reason.NOT_AUTHORIZED, f"the will: {refusal}")
                return
        taken = self._owned_by_other(c.client_id, user)
        if taken is not None:
            engine.refuse(Reason.NOT_AUTHORIZED, taken)
            log.warning("router %s: refused MQTT client %r of user %s from %s: %s", self.router.id, c.client_id,
                        user, self.peer, taken, extra=fields("mqtt.session_refused", peer=self.peer, host=self.host,
                                                             user=user, client=c.client_id))
            return
        # The policy's limits for its user and host (``quotas.py``): its connections count
        # with the user's AMQP ones; a message larger than its size is refused at the frame.
        # A connection of the same client here is taken over if this one is let in: it is
        # not counted against it (a client reconnecting over a half-open socket is not
        # locked out by its own ghost).
        self.principal = (user or "anonymous", self.host)
        ghost = next((conn for conn in self.router.connections if isinstance(conn, MqttEdgeConnection)
                      and c.client_id and conn.client_id == c.client_id), None)
        over = self.router.quotas.enter(self, *self.principal, self.serial, self.peer, replacing=ghost)
        if over is not None:
            engine.refuse(Reason.QUOTA_EXCEEDED, over)
            return
        largest = self.router.quotas.max_message_size(*self.principal)
        if largest < self.router.settings.max_message_size:
            engine.max_packet_size = engine.reader.max_packet_size = largest + 1024  # (as the router's: headers)
            self.max_message_size = largest  # (and the message itself: ``_on_publish``)
        if c.will is not None and c.will.retain and c.version is Version.V5:
            engine.refuse(Reason.RETAIN_NOT_SUPPORTED, "the network keeps no retained messages (the will has retain)")
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
            asked = prop(c.props, Prop.SESSION_EXPIRY_INTERVAL)
            expiry = asked if isinstance(asked, int) else 0
        else:
            expiry = 0 if c.clean_start else int(self.router.settings.subscriber_grace)
        if c.version is Version.V5 and expiry > MAX_SESSION_EXPIRY or self.sessions is None:
            expiry = min(expiry, MAX_SESSION_EXPIRY)
            props += ((Prop.SESSION_EXPIRY_INTERVAL, expiry),)  # (what we keep, when not what it asked)
        self.client_id, self.user = client_id, user
        self.tell_gid = c.version is Version.V5 and (Prop.USER_PROPERTY, (GID, "1")) in c.props
        present = self._open_session(client_id, c.clean_start, expiry)
        self.will = c.will
        self.will_bytes = will_size(c.will) if c.will is not None else 0
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

    def _owner(self, user: str) -> str:
        """Who this client's session and subscriptions belong to: its user when the router
        authenticates clients (it has users), "" when it does not (as ``amqp/edge.py``)."""
        return user if self.router.topology.auth.users else ""

    def _owned_by_other(self, client_id: str, user: str) -> str | None:
        """Why ``user`` may not connect as ``client_id``: another user's connection, session
        or subscription has that client id (a takeover would disconnect it, resume its
        session or end it with a clean start). None when it may."""
        owner = self._owner(user)
        if not client_id or not owner:
            return None
        why = f"client id {client_id!r} belongs to another user"
        for conn in self.router.connections:
            if isinstance(conn, MqttEdgeConnection) and conn.client_id == client_id and conn.owner != owner:
                return why
        session = self.sessions.get(client_id) if self.sessions is not None else None
        if session is not None and session.owner and session.owner != owner:
            return why
        for f in session.subscriptions if session is not None else ():
            if self.lifecycle.owned_by_other((client_id, f"mqtt:{f}"), owner):
                return why  # (a replica from before owners were kept: its subscribers' owner says)
        return None

    @property
    def owner(self) -> str:
        return self._owner(self.user)

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
            self.inbound.resumed(session.epoch)
        else:
            session = Session(client_id, secrets.randbits(63) or 1, host=self.router.id, expiry=expiry,
                              moves=store.next_move(client_id), owner=self.owner)
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
        """A resumed session: its subscriptions attach again (what it received is their
        unsettled map: never sent again), the messages in flight keep their packet ids."""
        accepted = self.outbound.restore(session)
        if not session.owner:
            session.owner = self.owner  # (kept from now on: ``_owned_by_other`` let this user in)
        for f, qos in list(session.subscriptions.items()):
            # The policy now, not the one it subscribed under (it may have changed since,
            # SIGHUP): a filter its user may no longer have is not attached (logged), and
            # leaves the session; what waited for it goes at its grace, as for an AMQP
            # subscriber whose resume the policy refuses.
            parsed = parse_filter(f)
            if self.unauthorized("subscribe", parsed.pattern) or \
                    (parsed.group and self.unauthorized("join", parsed.group)):
                del session.subscriptions[f]
                continue
            self._attach(f, qos, lambda *_: None, accepted.get(f, {}))

    def _after_connack(self) -> None:
        if self.session is not None:
            self.outbound.release_owed(self.session)
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
                    resumable=True, owner=self.owner))
        store.end(old)

    def _end_when_effective(self, request: SubscriberAttach) -> None:
        holder: list[Subscriber] = []
        holder.append(self.lifecycle.attach_subscriber(
            _Ending(), request, lambda *_: self.router.call_soon(self.lifecycle.subscriber_gone, holder[0], False)))

    def _taken(self) -> None:
        """The client connected again (here or at another router): this connection ends."""
        if self.principal is not None:  # (its place is the new connection's now)
            self.router.quotas.leave(self, *self.principal)
            self.principal = None
        if not self.engine.closed and self.engine.remote_open is not None:
            self.mqtt.disconnect(Reason.SESSION_TAKEN_OVER, "the same client connected again")
            self.dirty()
        self.drop_all(taken=True)

    def _authenticate(self, username: str | None, password: bytes | None) -> str | None:
        auth = self.router.topology.auth
        if username is None or not auth.users:
            # (with no users a claimed name is no user: it stays anonymous, under the
            # policy's default, never the rules the policy gives that name)
            return "anonymous" if auth.allow_anonymous else None
        return password_user(auth, self.tls, username, password or b"")

    # ------------------------------------------------------------------ events

    def _on_publish(self, event: MessagePublished) -> None:
        if self.max_message_size and len(event.publish.payload) > self.max_message_size:
            self.mqtt.disconnect(Reason.PACKET_TOO_LARGE, f"a message of {len(event.publish.payload)} bytes; this "
                                 f"user or host may send at most {self.max_message_size} (the policy's max_message_size)")
            if self.principal is not None:
                self.router.quotas.refused_size(*self.principal)
            self.dirty()
            self.drop_all()
            return
        self.inbound.publish(event)

    def _on_released(self, event: PublishReleased) -> None:
        self.inbound.released(event)

    def _on_acked(self, event: DeliveryAcked) -> None:
        self.outbound.acked(event)

    def _on_received(self, event: DeliveryReceived) -> None:
        self.outbound.received(event)

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
                f = parse_filter(sub.filter)  # (valid, or its reason)
            except MqttError as e:
                reasons.append(e.reason)
                continue
            if self.unauthorized("subscribe", f.pattern) or (f.group and self.unauthorized("join", f.group)):
                reasons.append(Reason.NOT_AUTHORIZED)
                continue
            # (an idle topic it published to gives its place up before the refusal is counted)
            if sub.filter not in self.subscribers and self.too_many_links(refuse=False) \
                    and not self.inbound.retire_idle() and self.too_many_links():
                reasons.append(Reason.QUOTA_EXCEEDED)
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

    def links_here(self) -> list[Publisher | Subscriber]:
        """The core's publishers (one per topic it publishes to) and subscribers of this client."""
        return [*self.inbound.publishers.values(), *self.subscribers.values()]

    def budgets(self) -> list[tuple[Publisher, tuple[Purse, ...]]]:
        """Its publishers with the byte budgets their user and host have now (``Core.rebudget``)."""
        quotas = self.router.quotas
        return [(pub, quotas.purses(pub.user, self.host)) for pub in self.inbound.publishers.values()]

    def holds(self, what: str) -> int:
        """Its subscriptions and the topics it publishes to count as links
        (``quotas.Holder``); it holds no AMQP sessions."""
        return len(self.subscribers) + len(self.inbound.publishers) if what == "links" else 0

    def too_many_links(self, refuse: bool = True) -> str:
        """Why one more link (a subscription, or a topic it publishes to) is refused: past
        the router's ``max_links_per_connection`` or its user's or host's ``max_links``
        (the refusal logged and counted by the quotas when ``refuse``); "" when it may
        have one."""
        mine = len(self.subscribers) + len(self.inbound.publishers) + 1
        cap = self.router.settings.max_links_per_connection
        if mine > cap:
            return f"more than max_links_per_connection {cap} subscriptions and topics published on this connection"
        quotas = self.router.quotas
        user, host = self.principal or (self.user or "anonymous", self.host)
        return quotas.over(user, host, "max_links", quotas.holding("links", mine, self), self.serial, self.peer,
                           refuse) or ""

    def write_out(self) -> None:
        self.router.quotas.report(self)  # (what it holds may have changed: a count, cheap to compare)
        super().write_out()

    def unauthorized(self, action: str, name: str) -> str | None:
        """The topology's policy refuses this client's user ``action`` on ``name``: why (logged)."""
        policy = self.router.topology.policy
        if policy is None:
            return None
        user = self.user or "anonymous"
        groups = user_groups(self.router.topology.auth, user)
        check = policy.may_publish if action == "publish" else policy.may_subscribe if action == "subscribe" \
            else policy.may_join
        refusal = check(user, groups, name)
        if refusal is not None:
            self.router.quotas.count_refusal(action, ("user", user))
            log.warning("router %s: refused MQTT client %s: %s", self.router.id, self.client_id, refusal,
                        extra=fields("link.unauthorized", client=self.client_id, user=user, action=action, name=name))
        return refusal

    def _attach(self, filter: str, qos: int, effective: Any, unsettled: dict[bytes, Any] | None) -> None:
        f = parse_filter(filter)
        request = SubscriberAttach(f.pattern, self.client_id, f"mqtt:{filter}", qos == 0,
                                   GroupId(f.group) if f.group else None, resumable=self.session is not None,
                                   owner=self.owner, unsettled=unsettled)
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

    # ------------------------------------------------------------------ the end

    def _on_disconnect(self, event: ClientDisconnected) -> None:
        if not event.will:
            self.will = None  # (a normal DISCONNECT discards it)
            self.will_bytes = 0
        self.drop_all()

    def _on_failed(self, event: ConnectionFailed) -> None:
        log.warning("router %s: closed MQTT connection from %s: 0x%02x %s", self.router.id, self.peer, event.reason,
                    event.description, extra=fields("connection.failed", connection=self.serial, peer=self.peer,
                                                    condition=event.reason.name, description=event.description))
        if event.reason is Reason.PACKET_TOO_LARGE and self.principal is not None:
            self.router.quotas.refused_size(*self.principal)  # (past the maximum packet size CONNACK gave)
        self.drop_all()

    def _dispatch(self, event: object) -> None:
        handler = self.HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def drop_all(self, taken: bool = False) -> None:
        """The connection ends: a persistent session's links are suspended (it resumes
        here or elsewhere), the others end. ``taken``: the client connected again (the
        connection there changes the session now, not this one)."""
        session = self.session
        keep = session is not None and session.host == self.router.id
        will, self.will = self.will, None
        self.will_bytes = 0
        if will is not None:
            self._will(will, session)
        self.inbound.drop(keep)
        for sub in self.subscribers.values():
            if keep and session is not None:
                # (suspended for its session expiry, not durable: a group it was the last of
                # does not wait for it past its session)
                self.lifecycle.subscriber_gone(sub, True, False, float(session.expiry))
            else:
                self.lifecycle.subscriber_gone(sub, False)
        self.subscribers.clear()
        self.outbound.in_flight.clear()
        store = self.sessions
        if store is not None and self.client_id and store.on_taken.get(self.client_id) == self._taken:
            del store.on_taken[self.client_id]
            # (only while the session is still ours: its client may have connected elsewhere
            # and the newer host's copy come here before this connection's end)
            if keep and session is not None and not taken and store.sessions.get(self.client_id) is session:
                session.gone_at = time.time()
                store.changed(session)
        self.session = None

    def _will(self, will: Will, session: Session | None) -> None:
        """Its will goes now, or after its will delay unless the session resumed by then."""
        client_id, router = self.client_id, self.router
        delay = min(will_delay(will), session.expiry if session is not None else 0)
        store, incarnation, moves = self.sessions, session.incarnation if session else 0, session.moves if session else 0
        user = self.user
        reserve = self.core.reserve
        reserve.hold(will, will_size(will))  # (until it goes into the records, or not at all)

        def due() -> None:
            reserve.hold(will, 0)
            now = store.sessions.get(client_id) if store is not None and delay > 0 else None
            if now is not None and now.incarnation == incarnation and now.moves != moves and not now.ended:
                return  # (its client connected again, here or elsewhere, and the session went on)
            publish_will(router, client_id, will, user)
        if delay <= 0:
            router.call_soon(due)
        else:
            router.call_later(delay, due)

    def on_batch_failed(self) -> None:
        self.drop_all()

    def on_lost(self, exc: Exception | None) -> None:
        self.router.connections.discard(self)
        if self.principal is not None:
            self.router.quotas.leave(self, *self.principal)
        self.drop_all()
        self.router.waiting_for_room.discard(self)
        self.hold_bytes(0)

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

    def gap(self, router: str) -> None:
        pass

    def closed_by_admin(self, why: str) -> None:
        """(DISCONNECT 0x98, administrative action; its session stays, as when it is lost)"""
        self.mqtt.disconnect(Reason.ADMINISTRATIVE_ACTION, why)
        self.drop_all()
        self.write_out()  # (now: the admin's request is not this connection's batch)

    def stalled(self, why: str) -> None:
        pass

    def activated(self) -> None:
        pass
