"""What the client library keeps on disk (SQLite), so that a restart resumes its links.

WAL with ``synchronous=NORMAL``: a commit survives the process crashing (which is what
the library promises to survive); it may not survive the machine losing power.

Publisher: its identity (container-id, link name, incarnation), the next delivery tag,
and every message not yet settled. A message is committed before it goes on the wire.

Subscriber: its identity and the gid of every delivery it accepted, kept after the
router settled it for ``retention`` seconds, so that a copy arriving late (after a
failover) is recognised and never handed to the application twice.
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS outbox (tag INTEGER PRIMARY KEY, payload BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS accepted (gid BLOB PRIMARY KEY, at REAL NOT NULL, settled INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS accepted_at ON accepted (settled, at);
"""


class Store:
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, so batches are explicit.
        self.db = sqlite3.connect(self.path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)

    def close(self) -> None:
        self.db.close()

    def get(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def put(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def identity(self, kind: str, name: str | None) -> tuple[str, str]:
        """(container-id, link name), chosen once and kept: the subscriber key (or the
        publisher's gid prefix) must survive a restart."""
        container_id = self.get("container_id")
        link_name = self.get("link_name")
        if container_id is None or link_name is None:
            container_id = f"once-{kind}-{secrets.token_hex(6)}"
            link_name = name or f"{kind}-{secrets.token_hex(4)}"
            self.db.execute("BEGIN")
            self.put("container_id", container_id)
            self.put("link_name", link_name)
            self.db.execute("COMMIT")
        elif name is not None and name != link_name:
            raise ValueError(f"store {self.path} belongs to link {link_name!r}, not {name!r}")
        return container_id, link_name

    # ------------------------------------------------------------ publisher

    def incarnation(self) -> int:
        value = self.get("incarnation")
        if value is None:
            value = str(secrets.randbits(63) or 1)
            self.db.execute("BEGIN")
            self.put("incarnation", value)
            self.db.execute("COMMIT")
        return int(value)

    def next_tag(self) -> int:
        row = self.db.execute("SELECT MAX(tag) FROM outbox").fetchone()
        stored = self.get("next_tag")
        return max(int(stored) if stored else 0, (row[0] + 1) if row[0] is not None else 0)

    def add_outbox(self, rows: list[tuple[int, bytes]], next_tag: int) -> None:
        self.db.execute("BEGIN")
        self.db.executemany("INSERT INTO outbox (tag, payload) VALUES (?, ?)", rows)
        self.put("next_tag", str(next_tag))
        self.db.execute("COMMIT")

    def outbox(self) -> list[tuple[int, bytes]]:
        return self.db.execute("SELECT tag, payload FROM outbox ORDER BY tag").fetchall()

    def settle_outbox(self, done: list[tuple[int, object]]) -> None:
        """(tag, outcome) of messages settled: forgotten, whatever the outcome."""
        self.db.execute("BEGIN")
        self.db.executemany("DELETE FROM outbox WHERE tag = ?", [(t,) for t, _ in done])
        self.db.execute("COMMIT")

    # ----------------------------------------------------------- subscriber

    def accepted_gids(self, retention: float) -> set[bytes]:
        self.db.execute("DELETE FROM accepted WHERE at < ?", (time.time() - retention,))
        return {row[0] for row in self.db.execute("SELECT gid FROM accepted")}

    def unsettled_accepted(self, limit: int) -> list[bytes]:
        rows = self.db.execute("SELECT gid FROM accepted WHERE settled = 0 ORDER BY at DESC LIMIT ?", (limit,))
        return [row[0] for row in rows]

    def mark_settled(self, gids: list[bytes]) -> None:
        self.db.execute("BEGIN")
        self.db.executemany("UPDATE accepted SET settled = 1 WHERE gid = ?", [(g,) for g in gids])
        self.db.execute("COMMIT")
