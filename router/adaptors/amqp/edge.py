"""Client connections: the asyncio glue between one socket, the engine and the core.

``EdgeConnection`` feeds bytes to the sans-IO engine, turns its events into core calls
and writes what the engine has to send. ``PublisherLink`` and ``SubscriberLink`` are the
core's ports onto one AMQP link.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from once.records.names import publisher_name_error, subscriber_name_error

from ...amqp.connection import Connection, Mode, State
from ...amqp.endpoints import Delivery, EndpointState, Link
from ...amqp.errors import AMQPError, Condition
from ...amqp.errors import condition_value as _value
from ...amqp.events import (
    ConnectionClosed,
    ConnectionFailed,
    ConnectionOpened,
    DeliveriesReceived,
    DeliveryUpdated,
    LinkAttached,
    LinkDetached,
    LinkFlow,
    SaslDone,
    SessionBegun,
    SessionEnded,
)
from ...amqp.performatives import Error, ReceiverSettleMode, Rejected, SenderSettleMode
from ...amqp.types import symbol, ulong
from ...core import Outcome, Publisher, Subscriber, TagInUse
from ...core.lifecycle import SubscriberAttach
from ...core.peers import CoreRecord
from ...core.ports import Conditions
from ...engineio import EngineProtocol
from ...logs import fields
from ...security.authn import client_sasl, user_groups
from ...security.tls import common_name
from .dispositions import outcomes_in, states_out, to_amqp, to_outcome
from .management_links import ManagementLinks, Replies, Requests
from .message import check, mark_redelivered
from .shared_subscriptions import ACTIVE, OFFERED, can_resume, group_of

if TYPE_CHECKING:
    from ...context import RouterContext
    from ...core.purse import Purse

log = logging.getLogger("once.edge")
access = logging.getLogger("once.access")
PRE_AUTH = (State.START, State.SASL)


class PublisherLink:
    __slots__ = ("conn", "link")

    def __init__(self, conn: EdgeConnection, link: Link) -> None:
        self.conn = conn
        self.link = link

    def grant(self, credit: int) -> None:
        if self.link.attached:
            self.conn.engine.flow(self.link, credit)
            self.conn.dirty()

    def outcome(self, handle: Delivery, outcome: Outcome, settle: bool) -> None:
        self.conn.engine.disposition(handle, to_amqp(outcome), settled=settle)
        self.conn.dirty()


class SubscriberLink:
    __slots__ = ("conn", "link")

    def __init__(self, conn: EdgeConnection, link: Link) -> None:
        self.conn = conn
        self.link = link

    def credit(self) -> int:
        if self.conn.paused or not self.link.attached:
            return 0
        return self.link.credit

    def deliver(self, record: CoreRecord, settled: bool, redelivery: int) -> Delivery:
        # Only the standard format has a header to mark; others go out as they came.
        payload = mark_redelivered(record.payload, redelivery) if redelivery and not record.message_format \
            else record.payload
        d = self.conn.engine.send(self.link, record.gid, payload, settled=settled, message_format=record.message_format)
        d.context = record
        self.conn.dirty()
        return d

    def settle(self, handle: Delivery) -> None:
        self.conn.engine.disposition(handle, handle.state, settled=True)
        self.conn.dirty()

    def draining(self) -> bool:
        return self.link.drain and self.link.credit > 0 and self.link.attached

    def drained(self) -> None:
        self.conn.engine.drained(self.link)
        self.conn.dirty()

    def stolen(self) -> None:
        """The same subscriber attached again (elsewhere on this router): this link ends."""
        self.conn.engine.detach(self.link, closed=True, error=Error(
            condition=Condition.STOLEN.value, description="the same subscriber attached again"))
        self.link.context = None
        self.conn._holdings_stale = True  # (no event comes for it: the peer's answering detach is plain)
        self.conn.dirty()

    def stalled(self, why: str) -> None:
        """It answered nothing for ``subscriber_stall`` while it held deliveries: its link
        ends, saying so (``once:subscriber-stalled``: closed, so that every client notices;
        a detach that does not close leaves a blocking Proton receiver waiting for good), and
        the subscription is suspended for its grace, as if its client had gone: attached
        again under its name within the grace, it resumes."""
        conn = self.conn
        conn.engine.detach(self.link, closed=True, error=Error(condition=Conditions.SUBSCRIBER_STALLED.value,
                                                               description=why))
        conn._drop_link(self.link, suspend=True)
        conn.dirty()

    def gap(self, router: str) -> None:
        """Router ``router`` gave this subscription up while out of reach: messages were
        accepted without it. The link ends, saying so; the client attaches anew, knowing."""
        self.conn.engine.detach(self.link, closed=True, error=Error(
            condition=Conditions.SUBSCRIPTION_GAP.value,
            description=f"router {router} gave this subscription up while out of reach: messages published "
                        "meanwhile were accepted without it"))
        self.link.context = None
        self.conn._holdings_stale = True
        self.conn.dirty()

    def activated(self) -> None:
        if self.link.attached:  # (before its attach is answered, the answer says so)
            self.conn.engine.announce(self.link, {ACTIVE: True})
            self.conn.dirty()


class EdgeConnection(EngineProtocol):
    def __init__(self, router: RouterContext) -> None:
        super().__init__(router)
        self.core = router.core
        self.lifecycle = router.lifecycle
        s = router.settings
        self.engine = Connection(
            Mode.SERVER, router.container_id, max_frame_size=s.max_frame_size, idle_timeout=s.idle_timeout,
            channel_max=255, offered_capabilities=OFFERED,  # (SASL: set once the socket is up)
        )
        self.peer = "?"
        self.serial = 0  # this router's number for it (management API, logs), from 1
        self.mechanism = ""  # the SASL mechanism it authenticated with ("" without SASL)
        self.opened_at: float | None = None  # (monotonic) when its open came
        self.principal: tuple[str, str] | None = None  # (user, host) it is counted under (``quotas.py``)
        self._holdings_stale = False  # its sessions or links may have changed since it told the quotas
        self.management: ManagementLinks | None = None  # its ``$management`` links, once it attaches one
        self._answering = False  # (while it answers its own ``$management`` requests)

    def closed_by_admin(self, why: str) -> None:
        """(``amqp:connection:forced``: a close that says the peer did not end it; its links
        are suspended for their grace, as when a connection is lost)"""
        if self._answering:
            # (a ``$management`` request of this very connection closes it, or drains the
            # router: its response goes out first, then the close)
            self.router.call_soon(self.closed_by_admin, why)
            return
        self.engine.close(Error(condition=Condition.CONNECTION_FORCED.value, description=why))
        self.write_out()  # (now: the admin's request is not this connection's batch)
        if self.transport is not None and not self.transport.is_closing():
            # (not waiting for the peer's close: a client that never answers it kept the
            # connection, and its links attached, until an idle timeout)
            self.transport.close()

    def dirty(self) -> None:
        """``EngineProtocol.dirty``, here again: its links call it per message, and compiled
        here the call costs no interpreted frame."""
        self.router.dirty.add(self)

    def write_out(self) -> None:
        if self._holdings_stale:  # (once per batch that attached, detached, began or ended)
            self._holdings_stale = False
            self.router.quotas.report(self)
        super().write_out()

    # -------------------------------------------------------------- asyncio

    def on_admitted(self) -> None:
        # What it may authenticate with depends on its TLS (``authn.py``); before a byte is read.
        self.engine.sasl_server = client_sasl(self.router.topology.auth, self.tls, self.peercert)
        self.peer = self.remote
        self.router.serials += 1
        self.serial = self.router.serials
        self.router.connections.add(self)

    def on_bytes(self, data: bytes) -> None:
        if self.engine.state in PRE_AUTH and self.held_for_turn(data):
            return  # (a SASL exchange takes two or three reads: one turn for them all)
        self.feed(data)
        if self.engine.assembling or self.holding:  # (only while a multi-frame message arrives)
            self._bound_arrivals()

    def _bound_arrivals(self) -> None:
        """The bytes of messages still arriving count, with those this connection's records
        hold, against its share (``max_connection_bytes``), and at twice their size (their
        frames and the message joined from them) with everything the router holds against
        its bound (``max_in_flight_bytes``: the records and what every connection holds on
        their account, ``core/reserve.py``). A link's first message has credit before its
        size is known: one connection's links could otherwise each bring a message as large
        as ``max_message_size`` at once, and six connections each one (641 MiB under a
        256 MiB bound). Past either, the newest arrivals are refused
        (``amqp:resource-limit-exceeded`` on their links, their bytes let go): the
        connection's other links, and every other client, go on."""
        engine = self.engine
        links = engine.arriving()
        if not links:
            self.hold_bytes(0)
            return
        s = self.router.settings
        share = s.max_connection_bytes or max(s.max_message_size, s.max_in_flight_bytes // 4)
        arriving = sum(link.partial_size for link in links)
        held = 0
        for session in engine.sessions.values():
            for link in session.links.values():
                pub = link.context
                if not link.is_sender and isinstance(pub, Publisher):  # (not a ``$management`` request link)
                    held += pub.bytes
        limit = s.max_in_flight_bytes
        room = self.core.reserve.room(limit, self.core.records.bytes, self)
        quotas = self.router.quotas
        user = self._user()
        while links and (held + arriving > share or (2 * arriving > room and room < limit)
                         or quotas.arrivals_over(user, self.host, arriving, len(links) == 1) is not None):
            purse = quotas.arrivals_over(user, self.host, arriving, len(links) == 1)
            link = links.pop()  # (the newest arrival first: the earlier ones were let in)
            arriving -= link.partial_size
            if arriving + link.partial_size + held > share:
                name, why = "max_connection_bytes", (f"this connection's messages would hold more than "
                                                     f"max_connection_bytes ({share}): {held} held, "
                                                     f"{arriving + link.partial_size} arriving")
            elif purse is None:
                name, why = "max_in_flight_bytes", (f"the router would hold more than max_in_flight_bytes ({limit}): "
                                                    f"{limit - room} held, {arriving + link.partial_size} arriving here")
            else:
                name, why = purse.where, (f"more than max_in_flight_bytes ({purse.limit}) of messages would be "
                                          f"held ({purse.where})")
                quotas.refused_bytes(user, self.host, purse)  # (the policy's budget: what refused it)
            engine.drop_arriving(link, Condition.RESOURCE_LIMIT_EXCEEDED, why)
            self._drop_link(link)
            self.router.guard_log.warning(("bytes", self.host), asyncio.get_running_loop().time(),
                                          "router %s: refused a message arriving on %s from %s: %s", self.router.id,
                                          link.name, self.peer, why,
                                          extra=fields("link.refused", connection=self.serial, peer=self.peer,
                                                       link=link.name, limit=name))
        self.hold_bytes(2 * arriving)
        self.dirty()

    def on_batch_failed(self) -> None:
        self._drop_all_links(suspend=True)

    def on_lost(self, exc: Exception | None) -> None:
        self.router.connections.discard(self)
        if self.principal is not None:
            self.router.quotas.leave(self, *self.principal)
        self.hold_bytes(0)
        clean = self.engine.state is State.CLOSED
        log.info("router %s: connection from %s (container %s) %s", self.router.id, self.peer, self._container(),
                 "closed" if clean else f"lost without a close ({exc or 'the peer went away'}): its links are "
                 "suspended for their grace",
                 extra=fields("connection.closed" if clean else "connection.lost", connection=self.serial,
                              peer=self.peer, container=self._container(), user=self.engine.user or "",
                              error=None if clean else str(exc or "the peer went away")))
        self._drop_all_links(suspend=True)  # no close frame came: the client may come back

    def on_writable(self) -> None:
        for session in list(self.engine.sessions.values()):
            for link in list(session.links.values()):
                if isinstance(link.context, Subscriber):
                    self.core.pump(link.context)

    def on_tick_failure(self) -> None:
        assert self.engine.failed is not None
        self._log_failure(self.engine.failed.condition, self.engine.failed.description)

    # ------------------------------------------------------------- handlers

    def _log_failure(self, condition: Any, description: str) -> None:
        cond = condition.value if isinstance(condition, Condition) else condition
        log.warning("router %s: closed connection from %s: %s: %s", self.router.id, self.peer, cond, description,
                    extra=fields("connection.failed", connection=self.serial, peer=self.peer, condition=cond,
                                 description=description))

    def _on_failed(self, event: ConnectionFailed) -> None:
        self._log_failure(event.condition, event.description)
        self._drop_all_links(suspend=True)

    def _on_sasl(self, event: SaslDone) -> None:
        if event.ok:
            self.mechanism = event.mechanism
            return
        self.auth_failed(f"SASL {event.mechanism}", event.mechanism, event.requested or "")

    def _on_opened(self, event: ConnectionOpened) -> None:
        self._handshake_done()
        self._rearm()  # the peer's idle timeout is known only now: its heartbeats are due
        self.opened_at = time.monotonic()
        user = self.engine.user
        log.info("router %s: connection from %s opened (container %s%s)", self.router.id, self.peer,
                 self._container(), f", user {user}" if user else "",
                 extra=fields("connection.opened", connection=self.serial, peer=self.peer, container=self._container(),
                              user=user or ""))
        # The access log: who came in, from where, how (``--log-level access=warning`` silences it).
        tls = ("TLS, certificate " + (common_name(self.peercert) or "?") if self.peercert else "TLS") if self.tls \
            else "plain"
        access.info("router %s: access: user %s from %s by %s over %s (connection %d, container %s)", self.router.id,
                    user or "(none)", self.host, self.mechanism or "no SASL", tls, self.serial, self._container(),
                    extra=fields("access", user=user or "", host=self.host, peer=self.peer,
                                 mechanism=self.mechanism or "", connection=self.serial, container=self._container(),
                                 tls=self.tls))
        self.principal = (self._user(), self.host)
        over = self.router.quotas.enter(self, *self.principal, self.serial, self.peer)
        if over is not None:
            self.engine.close(Error(condition=Condition.RESOURCE_LIMIT_EXCEEDED.value, description=over))
            self.dirty()

    # ------------------------------------------- per-user and per-host limits

    def _user(self) -> str:
        return self.engine.user or "anonymous"

    def detached_by_admin(self, name: str, why: str) -> bool:
        """An admin detaches link ``name`` (``http/manage.py``): closed, saying so
        (``amqp:link:detach-forced``: a blocking client notices only a closing detach), and
        suspended for its grace, as if its client had gone: attached again under its name,
        it resumes. False when there is no such link."""
        for session in list(self.engine.sessions.values()):
            for link in list(session.links.values()):
                if link.name == name and link.context is not None:
                    self.engine.detach(link, closed=True, error=Error(condition=Condition.DETACH_FORCED.value,
                                                                      description=why))
                    self._drop_link(link, suspend=True)
                    self.write_out()  # (now: the admin's request is not this connection's batch)
                    return True
        return False

    def links_here(self) -> list[Publisher | Subscriber]:
        """The core's publishers and subscribers of this connection's links."""
        return [lk.context for session in list(self.engine.sessions.values()) for lk in list(session.links.values())
                if isinstance(lk.context, (Publisher, Subscriber))]  # (not ``$management``'s)

    def budgets(self) -> list[tuple[Publisher, tuple[Purse, ...]]]:
        """Its publishers with the byte budgets their user and host have now (``Core.rebudget``)."""
        quotas = self.router.quotas
        return [(ctx, quotas.purses(ctx.user, self.host)) for ctx in self.links_here() if isinstance(ctx, Publisher)]

    def holds(self, what: str) -> int:
        """Its answered sessions, or its links: answered, or taken up and waiting for their
        answer (a subscriber's waits for the network: a burst of them counts at once), not
        those of this batch still to be read (``quotas.Holder``)."""
        sessions = self.engine.sessions.values()
        if what == "sessions":
            return sum(sn.state is EndpointState.MAPPED for sn in sessions)
        return sum(lk.state is EndpointState.MAPPED or (lk.state is EndpointState.RECEIVED and lk.context is not None)
                   for sn in sessions for lk in sn.links.values())

    def _over(self, name: str, what: str, mine: int) -> str | None:
        """Whether ``mine`` of ``what`` on this connection, with what its user's and host's
        other connections hold, passes their limit ``name``: the refusal, or None."""
        quotas = self.router.quotas
        user, host = self.principal or (self._user(), self.host)
        return quotas.over(user, host, name, quotas.holding(what, mine, self), self.serial, self.peer)

    def _on_session_begun(self, event: SessionBegun) -> None:
        self._holdings_stale = True
        # (the sessions up to this one: several begins read at once are each counted in turn)
        mine = 1
        for session in self.engine.sessions.values():
            if session is event.session:
                break
            mine += session.state is EndpointState.MAPPED
        over = self._over("max_sessions", "sessions", mine)
        if over is not None:
            self.engine.end(event.session, Error(condition=Condition.RESOURCE_LIMIT_EXCEEDED.value, description=over))
            self.dirty()

    def container(self) -> str:
        return self._container()

    def _container(self) -> str:
        return self.engine.remote_open.container_id if self.engine.remote_open else "?"

    def _on_closed(self, event: ConnectionClosed) -> None:
        self._holdings_stale = True
        self._drop_all_links()

    def _on_attach(self, event: LinkAttached) -> None:
        self._holdings_stale = True
        link, attach = event.link, event.attach
        if not event.reply_needed:
            return
        container_id = self.engine.remote_open.container_id if self.engine.remote_open else "?"
        engine = self.engine
        # (links counted once we answered their attach: several read at once are each counted in turn)
        too_many = self._too_many_links(link) or self._over("max_links", "links", 1 + self.holds("links"))
        if too_many:
            self._refuse(link, Condition.RESOURCE_LIMIT_EXCEEDED, too_many)
            return
        if ManagementLinks.wanted(link, attach):  # (``management.py``: requests, or a dynamic reply address)
            if self.management is None:
                self.management = ManagementLinks(engine, self.serial)
            self.management.attach(link, attach)
            self.dirty()
            return
        if link.is_sender:  # the peer receives: a subscriber
            address = attach.source.address if attach.source is not None else None
            if not address:
                self._refuse(link, Condition.INVALID_FIELD, "a subscriber needs source.address = topic")
                return
            owner = self._owner()
            if owner and self.lifecycle.owned_by_other((container_id, link.name), owner):
                self._refuse(link, Condition.UNAUTHORIZED_ACCESS,
                             f"subscriber {container_id}/{link.name} belongs to another user")
                log.warning("router %s: refused %r from %s the subscriber %s/%s of another user", self.router.id,
                            owner, self.peer, container_id, link.name,
                            extra=fields("link.refused", connection=self.serial, peer=self.peer, user=owner,
                                         container=container_id, link=link.name, topic=address))
                return
            group, exclusive = group_of(attach.source, link.name, container_id, self.router.topology.group_mode)
            wrong = subscriber_name_error(address)
            if wrong:
                self._refuse(link, Condition.INVALID_FIELD, wrong)
                return
            if self._unauthorized(link, "subscribe", address) or \
                    (group is not None and self._unauthorized(link, "join", group.name)):
                return
            their_map = attach.unsettled
            request = SubscriberAttach(address, container_id, link.name, attach.snd_settle_mode is SenderSettleMode.SETTLED,
                                       group, exclusive, can_resume(attach.desired_capabilities), owner,
                                       None if their_map is None else outcomes_in(their_map))

            def answer(ours: dict[bytes, Outcome] | None, active: bool | None) -> None:
                engine.attach(link.session, link.name, link.role, link=link, source=attach.source, target=attach.target,
                              snd_settle_mode=attach.snd_settle_mode, rcv_settle_mode=attach.rcv_settle_mode,
                              unsettled=None if ours is None else states_out(ours),
                              properties=None if active is None else {ACTIVE: active})
                self._holdings_stale = True
                self.dirty()
                self.router.flush()

            link.context = self.lifecycle.attach_subscriber(SubscriberLink(self, link), request, answer)
        else:  # the peer sends: a publisher
            address = attach.target.address if attach.target is not None else None
            if not address:
                self._refuse(link, Condition.INVALID_FIELD, "a publisher needs target.address = topic")
                return
            wrong = publisher_name_error(address)
            if wrong:
                self._refuse(link, Condition.INVALID_FIELD, wrong)
                return
            if self._unauthorized(link, "publish", address):
                return
            incarnation = _incarnation(attach.properties)
            pub, ours = self.lifecycle.attach_publisher(
                PublisherLink(self, link), address, container_id, link.name,
                attach.rcv_settle_mode is ReceiverSettleMode.SECOND, incarnation,
                None if attach.unsettled is None else outcomes_in(attach.unsettled), group=self)
            pub.user = self._user()  # (it travels with the copies: ``core/peers.py``)
            pub.purses = self.router.quotas.purses(pub.user, self.host)  # (before its first credit)
            link.context = pub
            engine.attach(link.session, link.name, link.role, link=link, source=attach.source, target=attach.target,
                          snd_settle_mode=attach.snd_settle_mode, rcv_settle_mode=attach.rcv_settle_mode,
                          max_message_size=self._max_message_size(),
                          unsettled=None if ours is None else states_out(ours),
                          properties={INCARNATION: ulong(pub.incarnation)})
            self.lifecycle.publisher_answered(pub)
        self.dirty()

    def _max_message_size(self) -> int:
        """The router's ``max_message_size``, or the user's or host's smaller one (the policy's)."""
        return self.router.quotas.max_message_size(self._user(), self.host)

    def _too_many_links(self, link: Link) -> str | None:
        """Why one more link would be too many for its session or connection (None: it is not)."""
        s = self.router.settings
        if len(link.session.links) > s.max_links_per_session:
            return f"more than max_links_per_session {s.max_links_per_session} links on this session"
        if sum(len(session.links) for session in self.engine.sessions.values()) > s.max_links_per_connection:
            return f"more than max_links_per_connection {s.max_links_per_connection} links on this connection"
        return None

    def _owner(self) -> str:
        """Who this connection's subscriptions belong to: its authenticated user, when the
        router authenticates clients (it has users); "" when authentication is off."""
        if not self.router.topology.auth.users:
            return ""
        return self.engine.user or "anonymous"

    def _unauthorized(self, link: Link, action: str, name: str) -> bool:
        """The topology's policy refuses this connection's user ``action`` on ``name``: the
        attach is refused with the rule that decided, and logged (True)."""
        policy = self.router.topology.policy
        if policy is None:
            return False
        user = self.engine.user or "anonymous"
        groups = user_groups(self.router.topology.auth, user)
        check = policy.may_publish if action == "publish" else policy.may_subscribe if action == "subscribe" \
            else policy.may_join
        refusal = check(user, groups, name)
        if refusal is None:
            return False
        self._refuse(link, Condition.UNAUTHORIZED_ACCESS, refusal)
        self.router.quotas.count_refusal(action, ("user", user))
        log.warning("router %s: refused %s on connection %d from %s: %s", self.router.id, link.name, self.serial,
                    self.peer, refusal, extra=fields("link.unauthorized", connection=self.serial, peer=self.peer,
                                                     user=user, link=link.name, action=action, name=name))
        return True

    def _refuse(self, link: Link, condition: Condition, description: str) -> None:
        self._holdings_stale = True
        self.engine.attach(link.session, link.name, link.role, link=link)
        self.engine.detach(link, closed=True, error=Error(condition=condition.value, description=description))
        self.dirty()

    def _on_detach(self, event: LinkDetached) -> None:
        self._holdings_stale = True
        err = event.error
        if err is not None and err is event.link.detach_error and str(err.condition) == Condition.MESSAGE_SIZE_EXCEEDED.value:
            # (the engine's own detach, not the peer's answer to it; counted where the policy's limit binds)
            self.router.quotas.refused_size(self._user(), self.host)
        self._drop_link(event.link, suspend=not event.closed)

    def _on_session_ended(self, event: SessionEnded) -> None:
        self._holdings_stale = True
        for link in list(event.session.links.values()):
            self._drop_link(link)

    def _drop_link(self, link: Link, suspend: bool = False) -> None:
        """The link is gone: a closed subscription ends; an interrupted one is suspended."""
        self._holdings_stale = True
        ctx = link.context
        link.context = None
        if isinstance(ctx, (Requests, Replies)):
            assert self.management is not None
            self.management.dropped(ctx)
        elif isinstance(ctx, Publisher):
            self.lifecycle.publisher_gone(ctx, suspend)
        elif isinstance(ctx, Subscriber):
            source = link.source
            self.lifecycle.subscriber_gone(ctx, suspend, durable=source is not None and source.expiry_policy == "never",
                                           timeout=float(source.timeout) if source is not None else 0.0)

    def _drop_all_links(self, suspend: bool = False) -> None:
        for session in list(self.engine.sessions.values()):
            for link in list(session.links.values()):
                self._drop_link(link, suspend)

    def _on_deliveries(self, event: DeliveriesReceived) -> None:
        if isinstance(event.link.context, Requests):
            self._management_requests(event.deliveries)
            return
        publish = self.core.publish
        for d in event.deliveries:
            pub = d.link.context  # (each time: a delivery of the batch may have ended the link)
            if not isinstance(pub, Publisher):
                return
            try:
                check(d.payload, d.message_format)
            except AMQPError as e:
                self._refuse_message(pub, d, e)
                continue
            try:
                d.context = publish(pub, d.tag, d.payload, d.settled, d, d.message_format, d.resume)
                if d.context is None and not d.settled:
                    # resumed, and we hold nothing of it (AMQP: ignored): settle so nothing hangs
                    self.engine.disposition(d, d.state, settled=True)
            except TagInUse as e:
                self.engine.detach(d.link, closed=True,
                                   error=Error(condition=Condition.NOT_ALLOWED.value, description=str(e)))
                self._drop_link(d.link)

    def _management_requests(self, deliveries: list[Delivery]) -> None:
        management = self.management
        assert management is not None
        node = self.router.management
        self._answering = True
        try:
            for d in deliveries:
                management.request(d, node.answer(d.payload, self._user(), self.host, self._owner() != "" and
                                                   self._user() == "anonymous"))
        finally:
            self._answering = False
        self.dirty()

    def _refuse_message(self, pub: Publisher, d: Delivery, e: AMQPError) -> None:
        """A message the router could not carry safely: nobody sees it, the publisher hears why."""
        error = Error(condition=_value(e.condition), description=f"message refused: {e.description}")
        log.warning("router %s: refused a message from %s (%s/%s on %r): %s", self.router.id, self.peer,
                    pub.container_id, pub.link_name, pub.topic, e,
                    extra=fields("message.refused", connection=self.serial, peer=self.peer, container=pub.container_id,
                                 link=pub.link_name, topic=pub.topic, error=str(e)))
        if d.settled:  # nothing to reject: the publisher learns it from the link
            self.engine.detach(d.link, closed=True, error=error)
            self._drop_link(d.link)
        else:
            self.engine.disposition(d, Rejected(error=error), settled=True)
            self.core.publisher_credit_changed(pub, d.link.credit)  # the transfer used a credit
        self.dirty()

    def _on_update(self, event: DeliveryUpdated) -> None:
        d = event.delivery
        record = d.context
        if record is None:
            return
        ctx = d.link.context
        if isinstance(ctx, Subscriber):
            self.core.subscriber_update(ctx, record, d, to_outcome(event.state), event.settled)
        elif isinstance(ctx, Publisher) and event.settled:
            self.core.publisher_settled(ctx, record)

    def _on_flow(self, event: LinkFlow) -> None:
        ctx = event.link.context
        if isinstance(ctx, Replies):
            assert self.management is not None
            self.management.pump(ctx)
            self.dirty()
        elif isinstance(ctx, Subscriber):
            self.lifecycle.subscriber_credit(ctx)
        elif isinstance(ctx, Publisher):
            self.lifecycle.publisher_credit(ctx, event.link.credit)


# (set after the class: compiled, a class body's dict cannot name its methods)
EdgeConnection.HANDLERS = {
    ConnectionOpened: EdgeConnection._on_opened,
    SaslDone: EdgeConnection._on_sasl,
    ConnectionFailed: EdgeConnection._on_failed,
    ConnectionClosed: EdgeConnection._on_closed,
    LinkAttached: EdgeConnection._on_attach,
    LinkDetached: EdgeConnection._on_detach,
    SessionEnded: EdgeConnection._on_session_ended,
    SessionBegun: EdgeConnection._on_session_begun,
    DeliveriesReceived: EdgeConnection._on_deliveries,
    DeliveryUpdated: EdgeConnection._on_update,
    LinkFlow: EdgeConnection._on_flow,
}


INCARNATION = symbol("once:incarnation")



def _incarnation(properties: Any) -> int | None:
    """The incarnation a resuming publisher carries back (our client library does)."""
    if not isinstance(properties, dict):
        return None
    value = properties.get(INCARNATION)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
