"""The relay: every committed outbox row to every subscriber, exactly once.

For each table (shard, partition) the relay reads rows in id order and hands each to the
exactly-once publisher of its (table, topic): one link per pair, its identity fixed by
the outbox (``RowStore``), the row's id its delivery tag. So every relay, and every life
of one, gives a row the same gid: a row sent again after a relay died merges with the
network's record instead of reaching a subscriber twice.

A row is deleted (committed) when every subscriber accepted it, *before* the link settles
it: the router holds the message's record until then (receiver-settle-mode ``second``), so
a relay that dies between the two leaves a record the next one's attach finds, and one
that dies before leaves the row, which the next one names in its attach. A row the network
rejected moves to ``outbox_dead_letter`` with the error, in the same transaction.

No "last id seen" mark: each poll reads the table from its lowest id (only rows not yet
accepted are there) and sends those not in flight, so a row a long transaction committed
late, below ids already sent, is sent all the same (the trap tw-tkms documents).

A commit wakes the relay at once on PostgreSQL (``LISTEN``, ``wakeup.py``); polling is the
safety net, and SQLite's only way. A row whose outcome has not come ``stuck`` seconds after
it was sent (a link the router refused, a send that hangs) has its table's links started
again: the new attach names every row still in flight, which merges with what the network
holds. Rows older than a threshold are counted and said (``watch.py``).

Any number of relays share the tables: each serves the tables it claims (``claims.py``),
every delete is fenced by its claim, and a table it loses or gives back is dropped without
a word (``Publisher.abandon``): the router keeps its links' messages for the next owner,
whose attach names the rows again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from once.client.message import encode
from once.client.outbox.claims import LEASE, RENEW, ClaimLost, Claims, new_owner
from once.client.outbox.dialect import DatabaseUnreachable, Dialect, connect, dialect_of
from once.client.outbox.identity import incarnation, link_identity, message_id, row_gid
from once.client.outbox.schema import Layout, read_layout, table
from once.client.publisher import Publisher, StoreUnavailable
from once.router.amqp.performatives import Accepted
from once.router.journal import Event, Journal

from .wakeup import Listener
from .watch import EVERY, STRANDED_AFTER, Watch, count

UNREACHABLE_LOG_EVERY = 10.0  # seconds between the lines of a relay waiting for its database
STUCK = 30.0  # seconds a row may wait for its outcome before its table's links start again

log = logging.getLogger("once.outbox")


@dataclass
class Part:
    """One table's state at this relay."""

    shard: int
    partition: int
    table: str
    in_flight: dict[int, float] = field(default_factory=dict)  # row id -> when it was sent (monotonic)
    links: dict[str, Publisher] = field(default_factory=dict)  # topic -> its publisher
    due: bool = True  # read it at the next turn (a notification, room in the window, the poll)


class RowStore:
    """The publisher's store for one (table, topic): the rows are its messages (the
    application wrote them); forgetting them is the relay's delete."""

    def __init__(self, relay: OutboxRelay, part: Part, topic: str) -> None:
        self.relay = relay
        self.part = part
        self.topic = topic
        self._identity = link_identity(relay.layout.instance, part.table, topic)

    def identity(self, kind: str, name: str | None) -> tuple[str, str]:
        return self._identity

    def incarnation(self) -> int:
        # (fixed by the outbox: every relay's link for this table and topic is one publisher)
        return incarnation(self.relay.layout.instance)

    def next_tag(self) -> int:
        return 0  # (the rows' ids are the tags: ``send_stored``)

    def outbox(self) -> list[tuple[int, bytes]]:
        return []  # (the relay hands the rows over as it reads them)

    def add_outbox(self, rows: list[tuple[int, bytes]], next_tag: int) -> None:
        raise RuntimeError("the outbox's rows are written by the application")

    def settle_outbox(self, done: list[tuple[int, Any]]) -> None:
        self.relay.finish(self.part, done, self.topic)

    def get(self, key: str) -> str | None:
        # (always resuming: an earlier relay may have sent any row still in the table)
        return "1" if key == "attached" else None

    def put(self, key: str, value: str) -> None:
        pass

    def close(self) -> None:
        pass


class OutboxRelay:
    def __init__(self, db_url: str, routers: Sequence[str], *, poll: float | None = None, window: int = 1000,
                 batch: int = 500, idle_timeout: float = 10.0, lease: float = LEASE, renew: float = RENEW,
                 drain: float = 5.0, stuck: float = STUCK, stranded_after: float = STRANDED_AFTER,
                 count_every: float = EVERY, journal: Journal | None = None, name: str | None = None) -> None:
        """``poll``: seconds between reads of an idle table (0.05 on SQLite; 1 on
        PostgreSQL, whose commits wake the relay); ``window``: rows in flight per table at
        most; ``batch``: rows read at a time; ``lease``, ``renew``: the claims'
        (``claims.py``); ``drain``: seconds a stopping relay waits for what it has in
        flight; ``stuck``: seconds a row may wait for its outcome before its table's links
        start again; ``stranded_after``, ``count_every``: ``watch.py``'s; ``journal``: the
        delivery journal (``router/journal.py``) it writes each outcome to, as a publisher;
        ``name``: said in its log (its claims are this life's own all the same)."""
        self.db_url = db_url
        self.journal = journal
        self.stuck = stuck
        self.count_every = count_every
        self.watch = Watch(after=stranded_after)
        self.listener: Listener | None = None
        self.wake = asyncio.Event()
        self.owner = f"{name}@{new_owner()}" if name else new_owner()
        self.lease = lease
        self.renew = renew
        self.drain = drain
        self.claims: Claims | None = None
        self.routers = list(routers)
        self.poll_given = poll
        self.poll = poll or 0.05
        self.window = window
        self.batch = batch
        self.idle_timeout = idle_timeout
        self.conn: Any = None
        self.dialect: Dialect
        self.layout: Layout
        self.parts: list[Part] = []
        self.refusals: set[str] = set()  # why links were refused, each said once
        self.sent = 0  # rows handed to a link (again after a restart: counted again)
        self.deleted = 0
        self.dead = 0
        self.restarts = 0  # tables whose links started again, a row stuck
        self.db_losses = 0

    # ----------------------------------------------------------- database

    def _connect(self) -> None:
        self.conn = connect(self.db_url, create=False)  # (a database the relay is pointed at is made by init)
        self.dialect = dialect_of(self.conn)
        if self.claims is not None:
            self.claims.conn = self.conn

    def _db_lost(self, e: Exception) -> None:
        self.db_losses += 1
        log.warning("outbox relay: database unavailable (%s): %s", type(e).__name__, str(e).strip().splitlines()[0]
                    if str(e).strip() else "")
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - (it is gone already)
            pass
        self.conn = None

    # ----------------------------------------------------------- running

    async def _first_connect(self, stop: asyncio.Event) -> None:
        """Connect, waiting for a database that is down or not up yet (a relay started with
        it, or while it restarts, took the first refusal as final and ended: nothing was
        sent). A refusal the server sends (a wrong password or database) ends the relay."""
        delay, said = 0.25, -UNREACHABLE_LOG_EVERY
        while True:
            try:
                self._connect()
                return
            except DatabaseUnreachable as e:
                if stop.is_set():
                    raise
                now = time.monotonic()
                if now - said >= UNREACHABLE_LOG_EVERY:
                    said = now
                    log.warning("outbox relay: database unreachable (%s): trying again", e)
            try:
                await asyncio.wait_for(stop.wait(), delay)
            except TimeoutError:
                pass
            delay = min(delay * 2, 5.0)

    async def run(self, stop: asyncio.Event) -> None:
        await self._first_connect(stop)
        self.layout = read_layout(self.conn)  # type: ignore[assignment]
        self.conn.commit()
        self.parts = [Part(s, p, table(s, p)) for s, p in self.layout.tables()]
        by_name = {p.table: p for p in self.parts}
        if self.dialect.name == "postgresql":
            self.listener = Listener(self.db_url, lambda name: self._due(by_name.get(name)))
        if self.poll_given is None and self.listener is not None:
            self.poll = 1.0
        self.claims = Claims(self.conn, self.owner, self.layout.tables(), self.lease)
        log.info("outbox relay %s: %d table(s) of outbox %s to %s", self.owner, len(self.parts),
                 self.layout.instance, ", ".join(self.routers))
        stopping = asyncio.get_running_loop().create_task(stop.wait())
        stopping.add_done_callback(lambda _: self.wake.set())
        next_round = next_poll = next_count = 0.0
        try:
            while not stop.is_set():
                now = time.monotonic()
                if now >= next_round:
                    self._round()
                    next_round = now + self.renew
                if now >= next_count:
                    self._count()
                    next_count = now + self.count_every
                if now >= next_poll:
                    for part in self.parts:
                        part.due = True
                    next_poll = now + self.poll
                self.wake.clear()  # (before reading: a wake while we read comes round again)
                busy = False
                for part in self.parts:
                    if part.due and (part.shard, part.partition) in self.claims.held:
                        busy = self._poll(part) or busy
                if busy:
                    await asyncio.sleep(0)
                else:
                    try:
                        await asyncio.wait_for(self.wake.wait(), min(next_poll, next_round) - time.monotonic())
                    except TimeoutError:
                        pass
            await self._stop()
        finally:
            stopping.cancel()
            for part in self.parts:
                self._drop(part)
            if self.listener is not None:
                self.listener.close()
            if self.conn is not None:
                self.conn.close()
            if self.journal is not None:
                self.journal.close()

    def _due(self, part: Part | None) -> None:
        if part is not None:
            part.due = True
            self.wake.set()

    def _round(self) -> None:
        """Renew our claims, take our share; stop what we lost or hold past our share."""
        assert self.claims is not None
        try:
            if self.conn is None:
                self._connect()
            taken, lost, excess = self.claims.round()
            for key in excess:  # (stopped first: nothing of ours in flight when another takes it)
                self._drop(self._part(key))
                self.claims.give_back(key)
        except Exception as e:  # noqa: BLE001 - the database went away: the claims run out, deletes are fenced
            self._db_lost(e)
            return
        for key in lost:
            self._drop(self._part(key))
        for key in taken:
            self._part(key).due = True  # (read at once, not at the next poll)
        if taken or lost or excess:
            log.info("outbox relay %s: took %s, lost %s, gave back %s; serving %s", self.owner, taken, lost, excess,
                     sorted(self.claims.held))
        if self.listener is not None:
            self.listener.ensure()
        now = time.monotonic()
        for part in self.parts:
            if part.in_flight and now - min(part.in_flight.values()) > self.stuck:
                log.warning("outbox relay %s: %d row(s) of %s waited over %g s for their outcome: its links start "
                            "again", self.owner, len(part.in_flight), part.table, self.stuck)
                self._drop(part)  # (the next read sends them again: the new attach names them)
                self.restarts += 1
                part.due = True

    def _count(self) -> None:
        """Count the stranded rows of the tables we serve; say what changed."""
        assert self.claims is not None
        if self.conn is None:
            return
        now_us, now = time.time_ns() // 1000, time.monotonic()
        try:
            cur = self.conn.cursor()
            for part in self.parts:
                if (part.shard, part.partition) not in self.claims.held:
                    self.watch.forget(part.table)
                    continue
                line = self.watch.update(part.table, count(cur, self.dialect, part.table, now_us, self.watch.after),
                                         now)
                if line:
                    log.warning("outbox relay %s: %s", self.owner, line)
            self.conn.commit()
        except Exception as e:  # noqa: BLE001 - the database went away: counted again once it is back
            self._db_lost(e)

    def _part(self, key: tuple[int, int]) -> Part:
        return next(p for p in self.parts if (p.shard, p.partition) == key)

    def _drop(self, part: Part) -> None:
        """Stop serving ``part``: its links go without a word (the router keeps their
        messages for the next owner), what was in flight is forgotten here."""
        for link in part.links.values():
            if not link.closed:
                link.abandon()
        part.links.clear()
        part.in_flight.clear()

    async def _stop(self) -> None:
        """A clean stop: no new rows; what is in flight may finish (``drain`` seconds); the
        tables go back (the others take them at once)."""
        deadline = time.monotonic() + self.drain
        while any(p.in_flight for p in self.parts) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for part in self.parts:
            if part.in_flight:
                self._drop(part)  # (left to the next owner, as a dying relay would)
            else:
                for link in part.links.values():
                    try:
                        await link.close()
                    except Exception as e:  # noqa: BLE001 - (stopping: a link that fails to close is dropped)
                        log.warning("outbox relay %s: closing %s's link failed (%s: %s): dropped", self.owner,
                                    part.table, type(e).__name__, e)
                        link.abandon()
                part.links.clear()
        if self.claims is not None and self.conn is not None:
            try:
                self.claims.leave()
            except Exception as e:  # noqa: BLE001 - (the claims run out by themselves)
                self._db_lost(e)

    def _poll(self, part: Part) -> bool:
        """Read the table from its lowest id; hand over what is not in flight. True if any.
        With rows in flight, their ids are read first and only the others' bodies after
        (the rows in flight stay in the table until accepted: reading them whole again
        would cost a window of bodies per read)."""
        part.due = False
        room = min(self.window - len(part.in_flight), self.batch)
        if room <= 0:
            return False
        d = self.dialect
        columns = f"SELECT id, topic, msg_key, headers, body FROM {part.table}"
        try:
            if self.conn is None:
                self._connect()
            cur = self.conn.cursor()
            if not part.in_flight:
                cur.execute(d.sql(f"{columns} ORDER BY id LIMIT ?"), (room,))
                fresh = cur.fetchall()
            else:
                cur.execute(d.sql(f"SELECT id FROM {part.table} ORDER BY id LIMIT ?"), (len(part.in_flight) + room,))
                ids = [r[0] for r in cur.fetchall() if r[0] not in part.in_flight][:room]
                fresh = []
                if ids:
                    where, params = d.among(ids)
                    cur.execute(f"{columns} WHERE {where} ORDER BY id", params)
                    fresh = cur.fetchall()
            self.conn.commit()  # (ends the read: no snapshot held between polls)
        except Exception as e:  # noqa: BLE001 - any driver's error, or connect's: the database went away
            self._db_lost(e)
            return False
        if len(fresh) == room:
            part.due = True  # (there may be more: read again at once)
        now = time.monotonic()
        for row_id, topic, key, headers, body in fresh:
            link = part.links.get(topic)
            if link is None:
                link = part.links[topic] = Publisher(self.routers, topic, RowStore(self, part, topic),
                                                     idle_timeout=self.idle_timeout)
                asyncio.get_running_loop().create_task(link.start())
            payload = encode(bytes(body), message_id(part.table, row_id), group_id=key,
                             application=json.loads(headers) if headers else None)
            part.in_flight[row_id] = now
            link.send_stored(row_id, payload).add_done_callback(self._refused)
            self.sent += 1
        return bool(fresh)

    def _refused(self, fut: asyncio.Future[Any]) -> None:
        """A row's send failed for good (the router refused its link): said once per reason.
        The row stays in its table and in flight here until ``stuck`` runs out; then its
        table's links start again (a refused link usually needs an operator: the stranded
        count shows it meanwhile)."""
        if fut.cancelled() or fut.exception() is None:
            return
        why = str(fut.exception())
        if why not in self.refusals:
            self.refusals.add(why)
            log.warning("outbox relay %s: a link was refused: %s", self.owner, why)

    def finish(self, part: Part, done: list[tuple[int, Any]], topic: str) -> None:
        """Outcomes came for these rows (of ``topic``): delete them (a rejected one into the
        dead letters) and commit, or raise ``StoreUnavailable`` (then nothing is settled)."""
        d = self.dialect
        rejected = [(row_id, state) for row_id, state in done if not isinstance(state, Accepted)]
        assert self.claims is not None
        if self.journal is not None:  # (what this relay heard, whether or not its delete lands)
            for row_id, state in done:
                self.journal.add(Event.ACCEPTED if isinstance(state, Accepted) else Event.REJECTED,
                                 row_gid(self.layout.instance, part.table, topic, row_id), topic,
                                 mid=message_id(part.table, row_id))
        try:
            if self.conn is None:
                self._connect()
            cur = self.conn.cursor()
            if d.name == "sqlite" and not self.conn.in_transaction:
                cur.execute("BEGIN IMMEDIATE")  # (the claim read below and the deletes: one write transaction)
            self.claims.fence(cur, (part.shard, part.partition))
            now = time.time_ns() // 1000
            for row_id, state in rejected:
                cur.execute(d.sql(
                    "INSERT INTO outbox_dead_letter (shard, part, id, topic, msg_key, headers, body, created_us, "
                    f"failed_us, error) SELECT ?, ?, id, topic, msg_key, headers, body, created_us, ?, ? FROM {part.table} "
                    "WHERE id = ?"), (part.shard, part.partition, now, _why(state), row_id))
            ids = [row_id for row_id, _ in done]
            for at in range(0, len(ids), 10000):  # (one statement per 10,000: SQLite's parameter limit)
                where, params = d.among(ids[at:at + 10000])
                cur.execute(f"DELETE FROM {part.table} WHERE {where}", params)
            self.conn.commit()
        except ClaimLost as e:
            self.conn.rollback()
            log.warning("outbox relay %s: %s; it stops serving %s", self.owner, e, part.table)
            asyncio.get_running_loop().call_soon(self._drop, part)
            raise StoreUnavailable(str(e)) from None
        except Exception as e:  # noqa: BLE001 - the database went away: nothing is settled
            self._db_lost(e)
            raise StoreUnavailable(type(e).__name__) from None
        for row_id, _ in done:
            part.in_flight.pop(row_id, None)
        if not part.due and self.window - len(part.in_flight) >= self.window // 4:
            self._due(part)  # (room for a read: a quarter of the window, so reads stay few)
        self.deleted += len(done) - len(rejected)
        self.dead += len(rejected)
        if rejected:
            log.warning("outbox relay: %d row(s) of %s rejected, kept in outbox_dead_letter (first: %s)",
                        len(rejected), part.table, _why(rejected[0][1]))


def _why(state: Any) -> str:
    error = getattr(state, "error", None)
    if error is None:
        return "rejected"
    return f"{getattr(error, 'condition', '')}: {getattr(error, 'description', '') or ''}".strip(": ")
