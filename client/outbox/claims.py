"""Which relay serves which table: leases in the database, no ZooKeeper.

``outbox_claim`` has a row per (shard, partition): its owner, a generation and an expiry.
A relay takes a table whose claim expired (or was never taken) by raising the generation,
renews what it holds well within the expiry, and holds at most its fair share: the tables
divided by the relays alive (``outbox_relay``: each relay's heartbeat). A relay that dies
stops renewing; within one lease its tables are taken by the others.

Every delete checks the claim in its own transaction (``fence``: the claim row locked, the
owner and generation ours), so a relay that lost a table deletes nothing of it, whatever
it still has in flight; it stops publishing the table when it sees the loss (its next
renewal, or a fenced delete). A row it sent meanwhile has the same identity as the new
owner's copy of it and merges in the network.

Why leases and not PostgreSQL's advisory locks: a session lock lives with its
connection, and behind PgBouncer's transaction pooling the connection is not the
session's (pgbouncer#617); a failover of the database drops them silently. A lease row is
data: it survives both, and its generation fences what a relay that paused for too long
does when it wakes.

Times are the database's (PostgreSQL's clock), so relays on hosts whose clocks differ
agree; SQLite's relays share one host's clock.
"""

from __future__ import annotations

import math
import os
import secrets
import socket
import time
from dataclasses import dataclass
from typing import Any

from .dialect import Dialect, dialect_of

LEASE = 5.0  # seconds a claim holds without renewal
RENEW = 1.0  # seconds between renewals (and between looks for tables to take)


class ClaimLost(Exception):
    """This relay no longer holds the table (another took it): nothing of it is deleted."""


@dataclass
class Held:
    generation: int
    expires_us: int


def ddl(d: Dialect) -> list[str]:
    return [f"CREATE TABLE IF NOT EXISTS outbox_claim (shard INTEGER NOT NULL, part INTEGER NOT NULL, owner TEXT NOT "
           f"NULL, generation {d.bigint} NOT NULL, expires_us {d.bigint} NOT NULL, PRIMARY KEY (shard, part))",
           f"CREATE TABLE IF NOT EXISTS outbox_relay (owner TEXT PRIMARY KEY, seen_us {d.bigint} NOT NULL)"]


def seed(conn: Any, tables: list[tuple[int, int]]) -> None:
    """A claim row per table, free (in the caller's transaction)."""
    d = dialect_of(conn)
    cur = conn.cursor()
    for s, p in tables:
        cur.execute(d.sql("SELECT 1 FROM outbox_claim WHERE shard = ? AND part = ?"), (s, p))
        if cur.fetchone() is None:
            cur.execute(d.sql("INSERT INTO outbox_claim (shard, part, owner, generation, expires_us) "
                              "VALUES (?, ?, '', 0, 0)"), (s, p))


def new_owner() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class Claims:
    """One relay's claims, on its own connection."""

    def __init__(self, conn: Any, owner: str, tables: list[tuple[int, int]], lease: float = LEASE) -> None:
        self.conn = conn
        self.d = dialect_of(conn)
        self.owner = owner
        self.tables = tables
        self.lease_us = int(lease * 1e6)
        self.held: dict[tuple[int, int], Held] = {}

    def now_us(self) -> int:
        if self.d.name == "postgresql":
            cur = self.conn.cursor()
            cur.execute("SELECT (extract(epoch from clock_timestamp()) * 1000000)::bigint")
            return int(cur.fetchone()[0])
        return time.time_ns() // 1000

    def round(self) -> tuple[list[tuple[int, int]], list[tuple[int, int]], list[tuple[int, int]]]:
        """Heartbeat, renew, take up to the fair share; commit. Returns (taken, lost,
        excess): the tables past the fair share are the caller's to stop, then give back."""
        d, cur = self.d, self.conn.cursor()
        now = self.now_us()
        cur.execute(d.sql("UPDATE outbox_relay SET seen_us = ? WHERE owner = ?"), (now, self.owner))
        if cur.rowcount == 0:
            cur.execute(d.sql("INSERT INTO outbox_relay (owner, seen_us) VALUES (?, ?)"), (self.owner, now))
        cur.execute(d.sql("DELETE FROM outbox_relay WHERE seen_us < ?"), (now - 10 * self.lease_us,))
        cur.execute(d.sql("SELECT COUNT(*) FROM outbox_relay WHERE seen_us >= ?"), (now - self.lease_us,))
        alive = max(1, int(cur.fetchone()[0]))
        fair = math.ceil(len(self.tables) / alive)
        lost = []
        for key, held in list(self.held.items()):
            cur.execute(d.sql("UPDATE outbox_claim SET expires_us = ? WHERE shard = ? AND part = ? AND owner = ? "
                              "AND generation = ?"), (now + self.lease_us, *key, self.owner, held.generation))
            if cur.rowcount == 1:
                held.expires_us = now + self.lease_us
            else:
                lost.append(key)
                del self.held[key]
        excess = sorted(self.held)[fair:]  # (another relay came: it gets its share)
        taken = []
        for key in self.tables:
            if len(self.held) >= fair:
                break
            if key in self.held:
                continue
            cur.execute(d.sql("UPDATE outbox_claim SET owner = ?, generation = generation + 1, expires_us = ? "
                              "WHERE shard = ? AND part = ? AND (expires_us < ? OR owner = '')"),
                        (self.owner, now + self.lease_us, *key, now))
            if cur.rowcount == 1:
                cur.execute(d.sql("SELECT generation FROM outbox_claim WHERE shard = ? AND part = ?"), key)
                self.held[key] = Held(int(cur.fetchone()[0]), now + self.lease_us)
                taken.append(key)
        self.conn.commit()
        return taken, lost, excess

    def give_back(self, key: tuple[int, int], commit: bool = True) -> None:
        """Free a table we hold (its links are closed first: nothing of ours is in flight)."""
        held = self.held.pop(key, None)
        if held is None:
            return
        cur = self.conn.cursor()
        cur.execute(self.d.sql("UPDATE outbox_claim SET owner = '', expires_us = 0 WHERE shard = ? AND part = ? "
                               "AND owner = ? AND generation = ?"), (*key, self.owner, held.generation))
        if commit:
            self.conn.commit()

    def fence(self, cur: Any, key: tuple[int, int]) -> None:
        """In a delete's transaction, before the delete: the claim is still ours, and stays
        so until the commit (its row locked), or ``ClaimLost``."""
        held = self.held.get(key)
        if held is None:
            raise ClaimLost(f"table {key} is not ours")
        lock = " FOR UPDATE" if self.d.name == "postgresql" else ""
        cur.execute(self.d.sql(f"SELECT owner, generation FROM outbox_claim WHERE shard = ? AND part = ?{lock}"), key)
        row = cur.fetchone()
        if row is None or row[0] != self.owner or int(row[1]) != held.generation:
            self.held.pop(key, None)
            raise ClaimLost(f"table {key} was taken (now {row[0] if row else 'nobody'})")

    def leave(self) -> None:
        """Stopping: every table back, and no heartbeat (the others take them at once)."""
        for key in list(self.held):
            self.give_back(key, commit=False)
        cur = self.conn.cursor()
        cur.execute(self.d.sql("DELETE FROM outbox_relay WHERE owner = ?"), (self.owner,))
        self.conn.commit()
