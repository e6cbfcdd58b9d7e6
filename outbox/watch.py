"""Stranded rows made visible: rows older than a threshold still in a table the relay serves.

A row stays in its table until every subscriber accepted it, so an old row means something
holds it: a subscriber that does not accept, a link the router refuses, a relay that cannot
reach the network. (A row a long transaction committed late is not one of them: the relay
reads every table from its lowest id and never skips it; this counts it only if it waits.)
Each relay counts the tables it serves every ``every`` seconds, exposes the count as a
metric (``once_outbox_rows_stranded``) and says it in a log line: when rows first strand,
again every ``repeat`` seconds while they do, and when none are left.

The count is one query per table that reads the table (no index but the primary key, as
the seed wants); an outbox table is small unless the network is not taking its rows, and
then this is the least of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from once.client.outbox.dialect import Dialect

STRANDED_AFTER = 60.0  # seconds a row may wait before it counts as stranded
EVERY = 5.0  # seconds between counts
REPEAT = 60.0  # seconds between log lines while rows stay stranded


@dataclass(frozen=True, slots=True)
class Count:
    rows: int
    oldest_s: float  # the oldest row's age (0 without rows)


def count(cur: Any, d: Dialect, table: str, now_us: int, after: float) -> Count:
    """Rows of ``table`` written more than ``after`` seconds before ``now_us``."""
    cur.execute(d.sql(f"SELECT COUNT(*), MIN(created_us) FROM {table} WHERE created_us < ?"),
                (now_us - int(after * 1e6),))
    rows, oldest = cur.fetchone()
    return Count(int(rows), (now_us - int(oldest)) / 1e6 if rows else 0.0)


@dataclass
class Watch:
    """What each table counted last, and the log lines a new count calls for."""

    after: float = STRANDED_AFTER
    repeat: float = REPEAT
    counts: dict[str, Count] = field(default_factory=dict)
    said: dict[str, float] = field(default_factory=dict)  # table -> when its stranded rows were last said

    def update(self, table: str, c: Count, now: float) -> str | None:
        """Record ``table``'s count at ``now`` (monotonic seconds); the line to log, if any."""
        before = self.counts.get(table, Count(0, 0.0))
        self.counts[table] = c
        if c.rows == 0:
            if before.rows:
                self.said.pop(table, None)
                return f"{table}: no stranded rows now"
            return None
        if table in self.said and now - self.said[table] < self.repeat:
            return None
        self.said[table] = now
        return (f"{table}: {c.rows} row(s) older than {self.after:g} s are waiting (the oldest {c.oldest_s:.0f} s): "
                "a subscriber that does not accept, a refused link or an unreachable network holds them")

    def forget(self, table: str) -> None:
        """Not ours any more: its next owner counts it."""
        self.counts.pop(table, None)
        self.said.pop(table, None)

    def total(self) -> int:
        return sum(c.rows for c in self.counts.values())
