"""The exactly-once publisher: durable outbox, resuming link, failover.

Every message is committed to the SQLite outbox before it goes on the wire, under a
delivery tag never used before on this link (a counter kept in the store). The link's
incarnation is chosen once and kept too, and sent on every attach (``once:incarnation``),
so every router computes the same gid for a tag: a message resent after a failover or
a restart merges with its record wherever it got to, and reaches no subscriber twice.

On every reattach the link resumes (AMQP 1.0 section 2.6.13) with an unsettled map of
the whole outbox, and the router answers with what it knows (section 3.4.6):

* an outcome: adopt it, settle (a resumed, settled transfer with no payload), done;
* known, outcome pending: resend with ``resume=true`` (the router attaches it to its record);
* unknown: resend as a new delivery.

The router is in receiver-settle-mode ``second``: it settles (and relays settlement to
the subscribers) only after we settle, so a message stays known to the network until we
have seen its outcome.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from ssl import SSLContext
from typing import Any, Protocol

from once.records.gid import compute_gid
from once.router.amqp.connection import Connection
from once.router.amqp.endpoints import Delivery, Link, Session
from once.router.amqp.events import DeliveryUpdated, LinkAttached, LinkDetached
from once.router.amqp.performatives import Accepted, ReceiverSettleMode, Rejected, Role, SenderSettleMode, Target
from once.router.amqp.sasl import SaslClientConfig
from once.router.amqp.types import symbol, ulong

from .connection import FailoverConnection, RouterRefused
from .message import encode
from .store import Store

INCARNATION = symbol("once:incarnation")
_TAG = 8
STORE_RETRY = 1.0  # seconds before a link whose store was unavailable comes back
log = logging.getLogger("once.client")


class StoreUnavailable(Exception):
    """The store cannot forget messages now (its database is away). Nothing is settled:
    the connection goes, and the link resumes a little later with every message still
    unsettled (the router answers what it knows)."""


class PublisherStore(Protocol):
    """Where a publisher keeps what must survive it: its identity, and every message not
    settled yet. ``store.py``'s SQLite file is one; the outbox relay's tables are another
    (``outbox/relay.py``: the rows are the messages, written by the application)."""

    def identity(self, kind: str, name: str | None) -> tuple[str, str]: ...
    def incarnation(self) -> int: ...
    def next_tag(self) -> int: ...
    def outbox(self) -> list[tuple[int, bytes]]: ...
    def add_outbox(self, rows: list[tuple[int, bytes]], next_tag: int) -> None: ...
    # The outcomes came: forget these messages, durably, before they are settled
    def settle_outbox(self, done: list[tuple[int, Any]]) -> None: ...
    def get(self, key: str) -> str | None: ...
    def put(self, key: str, value: str) -> None: ...
    def close(self) -> None: ...


def _tag(n: int) -> bytes:
    return n.to_bytes(_TAG, "big")


class Publisher:
    """``await pub.send(body)`` returns the outcome (``Accepted`` once every subscriber
    accepted, or ``Rejected``). The message is durable (and will be delivered) as soon
    as ``send_nowait`` returns its future, even if this process dies right after."""

    def __init__(self, routers: Sequence[str], topic: str, store: str | Path | PublisherStore, *,
                 name: str | None = None, sasl: SaslClientConfig | None = None, idle_timeout: float = 10.0, ssl: SSLContext | None = None,
                 on_outcome: Callable[[int, Any], None] | None = None) -> None:
        """``on_outcome(tag, outcome)``: called for every outcome, also of messages sent
        before a restart (tags count from 0 and are never reused on this store). ``store``:
        a path (our SQLite file), or a store of the caller's."""
        self.topic = topic
        self.on_outcome = on_outcome
        self.store: PublisherStore = Store(store) if isinstance(store, (str, Path)) else store
        self.container_id, self.link_name = self.store.identity("pub", name)
        self.incarnation = self.store.incarnation()
        self._next = self.store.next_tag()
        self.conn = FailoverConnection(routers, self.container_id, on_session=self._on_session,
                                       on_events=self._on_events, on_down=self._on_down, sasl=sasl,
                                       idle_timeout=idle_timeout, ssl=ssl, on_refused=self._on_refused)
        self.link: Link | None = None
        self.attached = asyncio.Event()
        # tag -> payload, for everything not settled (mirrors the outbox table)
        self._unsettled: dict[int, bytes] = dict(self.store.outbox())
        self._futures: dict[int, asyncio.Future[Any]] = {}
        self._to_send: deque[int] = deque()  # waiting for credit, in tag order
        self._batch: list[tuple[int, bytes]] = []
        self._flush_scheduled = False
        self._ever_attached = bool(self._unsettled) or self.store.get("attached") == "1"
        self.resumes = 0  # attaches that resumed an earlier link
        self.closed = False

    async def start(self) -> Publisher:
        self.conn.start()
        return self

    async def __aenter__(self) -> Publisher:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @property
    def pending(self) -> int:
        """Messages not yet settled (including those from before a restart)."""
        return len(self._unsettled)

    @property
    def next_tag(self) -> int:
        """The tag the next message gets (after a restart: how many were ever sent)."""
        return self._next

    def gid(self, tag: int) -> bytes:
        """The network-wide id every router gives the message with this tag (for journals)."""
        return compute_gid(self.container_id, self.link_name, self.incarnation, _tag(tag))

    def send_nowait(self, body: bytes, message_id: str | None = None) -> asyncio.Future[Any]:
        if self.closed:
            raise RuntimeError("publisher closed")
        if self.conn.refused is not None:
            raise self.conn.refused
        tag = self._next
        self._next += 1
        payload = encode(body, message_id)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._futures[tag] = fut
        self._batch.append((tag, payload))
        self._schedule()
        return fut

    async def send(self, body: bytes, message_id: str | None = None) -> Any:
        return await self.send_nowait(body, message_id)

    def send_stored(self, tag: int, payload: bytes) -> asyncio.Future[Any]:
        """A message the store already holds durably under ``tag`` (the caller's numbering,
        each tag one message for ever): put it on the wire, in tag order with the others.
        Sent before (by an earlier life of the store's owner), it merges with the network's
        record: the attach names it, or its gid does."""
        if self.closed:
            raise RuntimeError("publisher closed")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if tag in self._unsettled:
            fut.set_exception(ValueError(f"tag {tag} is in flight already"))
            return fut
        self._futures[tag] = fut
        self._unsettled[tag] = payload
        self._to_send.append(tag)
        self._schedule()
        return fut

    async def wait_settled(self, timeout: float | None = None) -> None:
        """Wait until every message (also those from before a restart) has its outcome."""
        async def settled() -> None:
            while self._unsettled or self._batch:
                await asyncio.sleep(0.02)
        await asyncio.wait_for(settled(), timeout)

    def abandon(self) -> None:
        """Stop without a word, as if this process had died: the router keeps the link's
        messages for whoever resumes it (an outbox table's next relay), which a closing
        link would end."""
        self.closed = True
        self.conn.abort_for_good()
        self.store.close()

    async def close(self) -> None:
        if self.closed:
            return
        self._flush()
        self.closed = True
        await self.conn.close()
        self.store.close()

    # ------------------------------------------------------------ internals

    def _schedule(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Commit what was queued this turn of the loop, then put it on the wire."""
        self._flush_scheduled = False
        if self._batch:
            self.store.add_outbox(self._batch, self._next)
            for tag, payload in self._batch:
                self._unsettled[tag] = payload
                self._to_send.append(tag)
            self._batch = []
        self._pump()
        self.conn.flush()

    def _on_session(self, engine: Connection, session: Session) -> None:
        resuming = self._ever_attached
        unsettled = {_tag(t): None for t in self._unsettled} if resuming else None
        self.link = engine.attach(
            session, self.link_name, Role.SENDER, target=Target(address=self.topic),
            snd_settle_mode=SenderSettleMode.UNSETTLED, rcv_settle_mode=ReceiverSettleMode.SECOND,
            unsettled=unsettled, properties={INCARNATION: ulong(self.incarnation)})

    def _on_down(self) -> None:
        self.link = None
        self.attached.clear()

    def _on_refused(self, error: RouterRefused) -> None:
        """The network refused us for good: every message waiting for its outcome is told."""
        for fut in self._futures.values():
            if not fut.done():
                fut.set_exception(error)

    def _on_events(self, engine: Connection, events: list[Any]) -> None:
        outcomes: list[tuple[Delivery, Any]] = []
        for ev in events:
            t = type(ev)
            if t is DeliveryUpdated:
                if ev.delivery.context is not None and isinstance(ev.state, (Accepted, Rejected)):
                    outcomes.append((ev.delivery, ev.state))
            elif t is LinkAttached:
                self._on_attached(engine, ev.link, ev.attach.unsettled)
            elif t is LinkDetached:
                if ev.error is not None:
                    for fut in self._futures.values():
                        if not fut.done():
                            fut.set_exception(ConnectionError(f"router refused the link: {ev.error}"))
                engine.close()
        if outcomes:
            self._on_outcomes(engine, outcomes)
        self._pump()

    def _on_attached(self, engine: Connection, link: Link, theirs: Any) -> None:
        if link is not self.link:
            return
        theirs = theirs if isinstance(theirs, dict) else {}
        if self._ever_attached:
            self.resumes += 1
        else:
            self._ever_attached = True
            self.store.put("attached", "1")
        done: list[tuple[int, Any]] = []
        fresh: list[int] = []
        for tag in sorted(self._unsettled):
            key = _tag(tag)
            if key in theirs:
                state = theirs[key]
                if isinstance(state, (Accepted, Rejected)):
                    done.append((tag, state))  # the router knows the outcome: adopt it, resend nothing
                else:
                    d = engine.send(link, key, self._unsettled[tag], resume=True)
                    d.context = tag
            else:
                fresh.append(tag)  # unknown to this router: a new delivery (same tag, so the same gid)
        if done:
            # Forget before settling: settled at the router, the record goes, and a copy
            # resent after a crash here would then be a new message.
            if not self._forget(engine, done):
                return
            for tag, state in done:
                del self._unsettled[tag]
                engine.send(link, _tag(tag), b"", settled=True, state=state, resume=True)
                self._resolve(tag, state)
        self._to_send = deque(fresh)
        self.attached.set()

    def _pump(self) -> None:
        link = self.link
        engine = self.conn.engine
        if link is None or engine is None or not link.attached or not self.attached.is_set():
            return
        queue = self._to_send
        while queue and link.credit > 0:
            tag = queue.popleft()
            payload = self._unsettled.get(tag)
            if payload is None:
                continue
            d = engine.send(link, _tag(tag), payload)
            d.context = tag

    def _on_outcomes(self, engine: Connection, outcomes: list[tuple[Delivery, Any]]) -> None:
        """Outcomes arrived: forget the messages (committed), then settle them."""
        done = [(d.context, state) for d, state in outcomes if d.context in self._unsettled]
        if done and not self._forget(engine, done):
            return
        for d, state in outcomes:
            self._unsettled.pop(d.context, None)
            engine.disposition(d, state, settled=True)
            self._resolve(d.context, state)

    def _forget(self, engine: Connection, done: list[tuple[int, Any]]) -> bool:
        """The store forgets ``done`` before they are settled; False if it cannot now (then
        nothing is settled, and the link comes back after a pause to try again)."""
        try:
            self.store.settle_outbox(done)
        except StoreUnavailable as e:
            log.warning("publisher %s: its store is unavailable (%s): reconnecting in %g s", self.link_name, e,
                        STORE_RETRY)
            # (dropped, not closed: a closed link ends at the router with its messages; a
            # dropped one is suspended, and its messages wait for it to resume)
            self.conn.hold(STORE_RETRY)
            self.conn.abort()
            return False
        return True

    def _resolve(self, tag: int, state: Any) -> None:
        if self.on_outcome is not None:
            self.on_outcome(tag, state)
        fut = self._futures.pop(tag, None)
        if fut is not None and not fut.done():
            fut.set_result(state)
