"""The exactly-once subscriber: durable record of what it accepted, resuming link, failover.

Its subscriber key (container-id, link name) is chosen once and kept in the store, so a
restart, or a failover to another router, resumes the same subscription. Accepting a
message commits its gid to SQLite (together with the application's own writes, if it
passes ``effect``) before the router hears of it; on every reattach the link resumes
with an unsettled map of the gids accepted and not yet settled, and the router never
sends those again. A copy that still arrives (it was in flight, or came the long way
round after a router died) is recognised by its gid and accepted again without reaching
the application: exactly once, also across this process's own crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from ssl import SSLContext
from typing import Any

from once.router.adaptors.amqp.shared_subscriptions import ACTIVE, EXCLUSIVE, GLOBAL, RESUME, SHARED
from once.router.amqp.connection import Connection
from once.router.amqp.endpoints import Delivery, Link, Session
from once.router.amqp.events import DeliveriesReceived, DeliveryUpdated, LinkAttached, LinkDetached, LinkFlow
from once.router.amqp.performatives import Accepted, ReceiverSettleMode, Role, SenderSettleMode, Source, Target
from once.router.amqp.sasl import SaslClientConfig

from .connection import FailoverConnection, RouterRefused
from .message import decode_message
from .store import Store

ACCEPTED = Accepted()
_MAP_LIMIT = 1000  # gids in a resuming attach: it must fit in one frame (the rest are still recognised)


@dataclass(eq=False)
class Message:
    gid: bytes
    body: Any
    message_id: Any
    redelivered: bool
    delivery: Delivery = field(repr=False)
    _sub: Subscriber = field(repr=False)

    async def accept(self, effect: Callable[[sqlite3.Connection], None] | None = None) -> None:
        """Accept it. ``effect(db)`` runs in the same SQLite transaction that records the
        acceptance: do the application's writes there and they happen exactly once."""
        await self._sub._accept(self, effect)


class Subscriber:
    def __init__(self, routers: Sequence[str], topic: str, store: str | Path, *, name: str | None = None,
                 window: int = 500, grace: float = 30.0, retention: float = 600.0,
                 sasl: SaslClientConfig | None = None, idle_timeout: float = 10.0, ssl: SSLContext | None = None,
                 group: str | None = None, exclusive: bool = False) -> None:
        """``group``: join the topic's consumer group of that name (each message goes to one
        member; ``exclusive``: to the one active member, the others stand by). Exactly-once
        holds as for a plain subscriber: this member resumes with its unsettled map, so
        what it had not accepted waits for it for its grace and is never processed twice."""
        if group is not None and (not group or "|" in group):
            raise ValueError(f"group name {group!r}: not empty, and without '|'")
        self.topic = topic
        self.group = group
        self.exclusive = exclusive
        self.active: bool | None = None  # in an exclusive group: whether we are the active member
        self.window = window
        self.grace = grace
        self.store = Store(store)
        self.db = self.store.db
        # a member's link name begins with its group's (the subscription name, JMS-style)
        self.container_id, self.link_name = self.store.identity(
            "sub", name if group is None else f"{group}|{name or 'once'}")
        self._accepted = self.store.accepted_gids(retention)
        self.conn = FailoverConnection(routers, self.container_id, on_session=self._on_session,
                                       on_events=self._on_events, on_down=self._on_down, sasl=sasl,
                                       idle_timeout=idle_timeout, ssl=ssl, on_refused=self._on_refused)
        self.link: Link | None = None
        self.attached = asyncio.Event()
        self._queue: asyncio.Queue[Message | RouterRefused] = asyncio.Queue()
        self._held: dict[bytes, Message] = {}  # handed to the application, not accepted yet
        self._ever_attached = self.store.get("attached") == "1"
        self._accepts: list[tuple[Message, Any, asyncio.Future[None]]] = []
        self._commit_scheduled = False
        self._unsettled: dict[bytes, Delivery] = {}  # accepted, waiting for the router to settle
        self._settling = asyncio.Event()  # set when the router settles one of them
        self.duplicates = 0  # copies recognised and kept from the application
        self.resumes = 0
        self.closed = False

    async def start(self) -> Subscriber:
        self.conn.start()
        return self

    async def __aenter__(self) -> Subscriber:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __aiter__(self) -> Subscriber:
        return self

    async def __anext__(self) -> Message:
        return self._taken(await self._queue.get())

    @property
    def queued(self) -> int:
        """Messages received and not yet taken by the application."""
        return self._queue.qsize()

    async def receive(self, timeout: float | None = None) -> Message:
        return self._taken(await asyncio.wait_for(self._queue.get(), timeout))

    def _taken(self, item: Message | RouterRefused) -> Message:
        if isinstance(item, RouterRefused):
            self._queue.put_nowait(item)  # (and to every later call)
            raise item
        return item

    def _on_refused(self, error: RouterRefused) -> None:
        """The network refused us for good: the application waiting for messages is told."""
        self._queue.put_nowait(error)

    async def close(self, unsubscribe: bool = False, timeout: float = 2.0) -> None:
        """Stop. ``unsubscribe``: end the subscription (a closing detach), once the router
        settled what we accepted (waiting up to ``timeout``), or else once a router took
        our attach again, whose unsettled map names it (up to ``timeout`` more); otherwise
        the subscription stays suspended on the network for ``grace`` seconds, waiting for
        a restart.

        Why wait: until the router settles a message we accepted, our acceptance may live
        only in that router's memory (and in our store). Were it to die then, with our
        subscription ended, nobody could tell that we processed the message, and our group
        would give it to another member too (``docs/protocol.md`` section 8). Why not wait
        for the settlement alone: it may never come on this connection (its router paused,
        our acceptance queued there, lost with the connection: ``--hard --groups`` churn
        seed 33), and waiting for ever stalled a group when it never came at all (fresh
        churn seed 213206751478). A router's answer to an attach means it has the map."""
        if self.closed:
            return
        self._commit()
        if unsubscribe:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._all_settled(), timeout)
            if self._unsettled and self.link is not None:
                self.attached.clear()
                self.conn.abort()  # (a new connection: its attach carries the map)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.attached.wait(), timeout)
        self.closed = True
        engine = self.conn.engine
        if unsubscribe and engine is not None and self.link is not None:
            engine.detach(self.link, closed=True)
        elif self.link is not None:
            self.conn.abort()  # no closing detach: the router keeps the subscription
        await self.conn.close()
        self.store.close()

    async def _all_settled(self) -> None:
        while self._unsettled or self._accepts:
            self._settling.clear()
            await self._settling.wait()

    # ------------------------------------------------------------ internals

    def _on_session(self, engine: Connection, session: Session) -> None:
        unsettled = None
        if self._ever_attached:
            unsettled = {gid: ACCEPTED for gid in self.store.unsettled_accepted(_MAP_LIMIT)}
        caps = None
        if self.group is not None:
            caps = (SHARED, GLOBAL, EXCLUSIVE) if self.exclusive else (SHARED, GLOBAL)
        self.link = engine.attach(
            session, self.link_name, Role.RECEIVER,
            source=Source(address=self.topic, durable=2, expiry_policy="link-detach", timeout=int(self.grace),
                          capabilities=caps),
            target=Target(), snd_settle_mode=SenderSettleMode.MIXED, rcv_settle_mode=ReceiverSettleMode.SECOND,
            unsettled=unsettled, desired_capabilities=(RESUME,))

    def _on_down(self) -> None:
        self.link = None
        self.attached.clear()
        self._unsettled.clear()

    def _on_events(self, engine: Connection, events: list[Any]) -> None:
        settled: list[bytes] = []
        for ev in events:
            t = type(ev)
            if t is DeliveriesReceived:
                for d in ev.deliveries:
                    self._on_delivery(engine, d)
            elif t is DeliveryUpdated:
                if ev.settled:
                    gid = ev.delivery.tag
                    if self._unsettled.pop(gid, None) is not None:
                        settled.append(gid)
                        self._settling.set()
            elif t is LinkFlow:
                if ev.link is self.link and ev.properties and ev.properties.get(ACTIVE) is True:
                    self.active = True
            elif t is LinkAttached:
                if ev.link is self.link:
                    props = ev.attach.properties if ev.attach is not None else None
                    if isinstance(props, dict) and ACTIVE in props:
                        self.active = bool(props[ACTIVE])
                    if self._ever_attached:
                        self.resumes += 1
                    else:
                        self._ever_attached = True
                        self.db.execute("BEGIN")
                        self.store.put("attached", "1")
                        self.db.execute("COMMIT")
                    self.attached.set()
                    if self.link is not None:
                        engine.flow(self.link, self.window)
            elif t is LinkDetached:
                engine.close()
        if settled:
            self.store.mark_settled(settled)

    def _on_delivery(self, engine: Connection, d: Delivery) -> None:
        gid = d.tag
        if gid in self._accepted:
            # a copy of something we already accepted: tell the router again, nothing more
            self.duplicates += 1
            if not d.settled:
                engine.disposition(d, ACCEPTED)
                self._unsettled[gid] = d
            self._top_up(engine)
            return
        held = self._held.get(gid)
        if held is not None:  # the application has it already (from before a reconnect)
            held.delivery = d
            return
        if d.resume and not d.payload:
            return
        decoded = decode_message(d.payload)
        msg = Message(gid, decoded.body, decoded.message_id, decoded.delivery_count > 0 or not decoded.first_acquirer,
                      d, self)
        self._held[gid] = msg
        self._queue.put_nowait(msg)

    def _top_up(self, engine: Connection) -> None:
        link = self.link
        want = self.window - len(self._held)  # what the application has not accepted counts
        if link is not None and link.attached and link.credit * 2 < want:
            engine.flow(link, want)

    async def _accept(self, msg: Message, effect: Any) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._accepts.append((msg, effect, fut))
        if not self._commit_scheduled:
            self._commit_scheduled = True
            asyncio.get_running_loop().call_soon(self._commit)
        await fut

    def _commit(self) -> None:
        """Record this turn's acceptances (and their effects) in one transaction, then tell the router."""
        self._commit_scheduled = False
        batch, self._accepts = self._accepts, []
        if not batch:
            return
        now = time.time()
        db = self.db
        try:
            db.execute("BEGIN")
            for msg, effect, _ in batch:
                if msg.gid in self._accepted:
                    continue
                if effect is not None:
                    effect(db)
                db.execute("INSERT OR IGNORE INTO accepted (gid, at) VALUES (?, ?)", (msg.gid, now))
            db.execute("COMMIT")
        except BaseException as e:
            db.execute("ROLLBACK")
            for _, _, fut in batch:
                if not fut.done():
                    fut.set_exception(e)
            return
        engine = self.conn.engine
        for msg, _, fut in batch:
            self._accepted.add(msg.gid)
            self._held.pop(msg.gid, None)
            d = msg.delivery
            if engine is not None and self.link is not None and d.link is self.link and not d.settled:
                engine.disposition(d, ACCEPTED)
                self._unsettled[msg.gid] = d
            fut.set_result(None)
        if engine is not None:
            self._top_up(engine)
        self.conn.flush()
