"""The outbox's tables, as the seed lays them out (``../shared/seeds/001_*``).

* ``outgoing_message_<shard>_<partition>``: the messages, one table per shard and
  partition, with a primary key and no other index (the seed's point: the fewest writes
  per row). A row: its id (only grows, never given twice: with the table's identity it
  is the message's identity in the network), topic, key, headers (JSON), body, and when it
  was written (microseconds; for the stranded-row count).
* ``outbox_meta``: the layout (shards, partitions) and this outbox's instance, a random
  id made once by ``init``: two databases never give their messages the same identity.
* ``outbox_dead_letter``: rows the network rejected, with the error, never dropped.
* ``outbox_claim`` and ``outbox_relay``: which relay serves which table (``claims.py``).
* On PostgreSQL, a statement trigger on each table: ``NOTIFY once_outbox`` with the
  table's name, which PostgreSQL sends when the transaction commits (and only then), once
  per table and transaction however many rows it wrote. The relays ``LISTEN``: a commit
  reaches them in a round trip instead of at their next poll (``wakeup.py``).

Shards separate traffic (two by default: the second is the spare a busy moment can move
latency-sensitive messages to without new tables); partitions spread one shard over
several tables; a message's key chooses its partition, so one key's messages keep their
order.
"""

from __future__ import annotations

import secrets
import zlib
from dataclasses import dataclass
from typing import Any

from . import claims
from .dialect import Dialect, OutboxError, dialect_of

DEFAULT_SHARDS = 2
DEFAULT_PARTITIONS = 1
CHANNEL = "once_outbox"  # (PostgreSQL's NOTIFY channel the tables' trigger speaks on)


def table(shard: int, partition: int) -> str:
    return f"outgoing_message_{shard}_{partition}"


@dataclass(frozen=True, slots=True)
class Layout:
    instance: str  # this outbox's identity (hex), part of every message's
    shards: int
    partitions: int  # per shard

    def partition_of(self, key: str | None, fallback: int) -> int:
        """The partition for a message: its key's (crc32), or ``fallback`` without one."""
        if self.partitions == 1:
            return 0
        if key is None:
            return fallback % self.partitions
        return zlib.crc32(key.encode()) % self.partitions

    def tables(self) -> list[tuple[int, int]]:
        return [(s, p) for s in range(self.shards) for p in range(self.partitions)]


def _ddl(d: Dialect, shards: int, partitions: int) -> list[str]:
    out = ["CREATE TABLE IF NOT EXISTS outbox_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
           f"CREATE TABLE IF NOT EXISTS outbox_dead_letter (shard INTEGER NOT NULL, part INTEGER NOT NULL, "
           f"id {d.bigint} NOT NULL, topic TEXT NOT NULL, msg_key TEXT, headers TEXT, body {d.blob} NOT NULL, "
           f"created_us {d.bigint} NOT NULL, failed_us {d.bigint} NOT NULL, error TEXT NOT NULL, "
           f"PRIMARY KEY (shard, part, id))"]
    for s in range(shards):
        for p in range(partitions):
            out.append(f"CREATE TABLE IF NOT EXISTS {table(s, p)} ({d.id_column}, topic TEXT NOT NULL, msg_key TEXT, "
                       f"headers TEXT, body {d.blob} NOT NULL, created_us {d.bigint} NOT NULL)")
    if d.name == "postgresql":
        # (a statement trigger: one notification per table and transaction, sent at commit;
        # dropped and made again, as CREATE TRIGGER has no IF NOT EXISTS before PostgreSQL 14)
        out.append("CREATE OR REPLACE FUNCTION once_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS "
                   f"$$ BEGIN PERFORM pg_notify('{CHANNEL}', TG_TABLE_NAME); RETURN NULL; END $$")
        for s in range(shards):
            for p in range(partitions):
                out.append(f"DROP TRIGGER IF EXISTS once_outbox_notify ON {table(s, p)}")
                out.append(f"CREATE TRIGGER once_outbox_notify AFTER INSERT ON {table(s, p)} "
                           "FOR EACH STATEMENT EXECUTE FUNCTION once_outbox_notify()")
    return out


def init(conn: Any, shards: int = DEFAULT_SHARDS, partitions: int = DEFAULT_PARTITIONS) -> Layout:
    """Create the tables (those that exist are kept) and commit. The layout is fixed once
    made: a different one is refused (rows would sit in tables no relay reads)."""
    if shards < 1 or partitions < 1:
        raise OutboxError(f"shards and partitions must be at least 1 (got {shards} and {partitions})")
    d = dialect_of(conn)
    existing = read_layout(conn, required=False)
    if existing is not None and (existing.shards, existing.partitions) != (shards, partitions):
        conn.rollback()
        raise OutboxError(f"the outbox exists with {existing.shards} shards of {existing.partitions} partitions, "
                          f"not {shards} of {partitions}")
    cur = conn.cursor()
    for statement in _ddl(d, shards, partitions) + claims.ddl(d):
        cur.execute(statement)
    claims.seed(conn, [(s, p) for s in range(shards) for p in range(partitions)])
    if existing is None:
        rows = [("instance", secrets.token_hex(8)), ("shards", str(shards)), ("partitions", str(partitions))]
        cur.executemany(d.sql("INSERT INTO outbox_meta (key, value) VALUES (?, ?)"), rows)
    conn.commit()
    layout = read_layout(conn)
    assert layout is not None
    return layout


def read_layout(conn: Any, required: bool = True) -> Layout | None:
    """The layout ``init`` made (None, or ``OutboxError`` if ``required``, before it)."""
    d = dialect_of(conn)
    cur = conn.cursor()
    try:
        cur.execute("SELECT key, value FROM outbox_meta")
        meta = dict(cur.fetchall())
    except Exception as e:  # (no table: each driver has its own error type)
        if d.name == "postgresql":
            conn.rollback()  # (a failed statement spoils PostgreSQL's transaction)
        if not required:
            return None
        raise OutboxError(f"no outbox tables here: run once outbox init ({type(e).__name__})") from None
    try:
        return Layout(meta["instance"], int(meta["shards"]), int(meta["partitions"]))
    except (KeyError, ValueError):
        raise OutboxError(f"outbox_meta is incomplete: {sorted(meta)}") from None


def rows_left(url_or_conn: Any) -> int:
    """Rows in the outbox's tables and its dead letters (what is not delivered yet, or was
    rejected): 0 once every committed row reached its subscribers. A URL is opened and
    closed; a connection is used as it is (and its transaction ended)."""
    from .dialect import connect

    conn = connect(url_or_conn) if isinstance(url_or_conn, str) else url_or_conn
    try:
        layout = read_layout(conn)
        assert layout is not None
        cur = conn.cursor()
        n = 0
        for s, p in layout.tables():
            cur.execute(f"SELECT COUNT(*) FROM {table(s, p)}")
            n += cur.fetchone()[0]
        cur.execute("SELECT COUNT(*) FROM outbox_dead_letter")
        n += cur.fetchone()[0]
        conn.commit()
        return int(n)
    finally:
        if isinstance(url_or_conn, str):
            conn.close()
