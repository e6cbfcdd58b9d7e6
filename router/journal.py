"""The delivery journal: an append-only CSV of delivery events, one file per writer.

Schema (version 1; the header line names the columns, in this order):

=========  ===================================================================
t_us       wall-clock time of the event, integer microseconds since the epoch;
           strictly increasing within one file, so it also gives the order of events
source     ``router``, ``publisher`` or ``subscriber``
node       router id, or the client's name
event      see ``Event`` (which events each source writes is listed there)
gid        the delivery's network-wide id, 32 hex digits
mid        message-id (clients only: routers never decode payloads), or empty
topic      the topic (address)
peer       router rows: where it came from (``received``) or went (``forwarded``):
           a router id, or ``client`` for a local publisher; subscriber rows:
           ``redelivery`` when the delivery was marked as a possible repeat; else empty
=========  ===================================================================

Rows are buffered and written in batches (every ``interval`` seconds or ``batch`` rows),
so journaling costs an append per event on the data path. A router killed with SIGKILL
loses its last unwritten batch: the audit takes its invariants from the clients'
journals, which write every row as it happens, and uses router rows for per-hop timing.
"""

from __future__ import annotations

import asyncio
import enum
import os
import time
from pathlib import Path

VERSION = 1
COLUMNS = ("t_us", "source", "node", "event", "gid", "mid", "topic", "peer")
HEADER = ",".join(COLUMNS) + "\n"


class Source(enum.StrEnum):
    ROUTER = "router"
    PUBLISHER = "publisher"
    SUBSCRIBER = "subscriber"


class Event(enum.StrEnum):
    SENT = "sent"  # publisher: handed to the library (before it is on the wire)
    RECEIVED = "received"  # router: from a publisher or an upstream router; subscriber: delivered to the application
    FORWARDED = "forwarded"  # router: sent on to a downstream router
    ACCEPTED = "accepted"  # publisher: outcome; router: outcome sent upstream; subscriber: accepted (committed)
    REJECTED = "rejected"  # publisher: outcome; router: outcome sent upstream
    SETTLED = "settled"  # publisher: settled; router: the delivery was settled by its upstream
    # publisher (an outbox application): the row's transaction committed; the message is
    # owed to every subscriber from then on, whatever the relays hear
    COMMITTED = "committed"


def _text(value: str) -> str:
    """CSV-safe without quoting: topics and names with commas or newlines are rare, and a
    row must stay one line."""
    if "," in value or "\n" in value or '"' in value:
        return '"' + value.replace('"', '""').replace("\n", " ") + '"'
    return value


class Journal:
    """Buffered writer of one node's rows. ``add`` is the only call on the data path."""

    def __init__(self, path: str | Path, source: Source, node: str, interval: float = 0.2, batch: int = 8192,
                 sync_every_row: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        self._file = open(self.path, "a", encoding="utf-8")  # kept open for the writer's life
        if fresh:
            self._file.write(HEADER)
            self._file.flush()
        self.source = source
        self.prefix = f"{source},{_text(node)},"
        self.interval = interval
        self.batch = 1 if sync_every_row else batch
        self.rows: list[tuple[int, Event, bytes, str, str, str]] = []
        self.written = 0
        self._timer: asyncio.TimerHandle | None = None
        self._topics: dict[str, str] = {}
        self._last = 0

    def add(self, event: Event, gid: bytes, topic: str, peer: str = "", mid: str = "") -> None:
        t = time.time_ns() // 1000
        if t <= self._last:
            t = self._last + 1
        self._last = t
        self.rows.append((t, event, gid, topic, peer, mid))
        if len(self.rows) >= self.batch:
            self.flush()

    def add_at(self, t_us: int, event: Event, gid: bytes, topic: str, peer: str = "", mid: str = "") -> None:
        """A row for an event timed by its writer (a client catching up after a crash, or one
        that read the clock for its own record): written in batches, as ``add``'s."""
        if t_us <= self._last:
            t_us = self._last + 1
        self._last = t_us
        self.rows.append((t_us, event, gid, topic, peer, mid))
        if len(self.rows) >= self.batch:
            self.flush()

    def flush(self) -> None:
        rows, self.rows = self.rows, []
        if not rows:
            return
        prefix = self.prefix
        topics = self._topics
        out = []
        for t, ev, gid, topic, peer, mid in rows:
            tp = topics.get(topic)
            if tp is None:
                tp = topics[topic] = _text(topic)
            out.append(f"{t},{prefix}{ev},{gid.hex()},{_text(mid) if mid else ''},{tp},{peer}\n")
        self._file.write("".join(out))
        self._file.flush()
        self.written += len(rows)

    def start(self) -> None:
        """Write batches every ``interval`` seconds from the running event loop."""
        loop = asyncio.get_running_loop()

        def tick() -> None:
            self.flush()
            self._timer = loop.call_later(self.interval, tick)

        self._timer = loop.call_later(self.interval, tick)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.flush()
        self._file.close()


def router_journal(directory: str | Path, router_id: str) -> Journal:
    """A router's journal file: one per process life (a restart starts a new file)."""
    return Journal(Path(directory) / f"router-{router_id}.{os.getpid()}.csv", Source.ROUTER, router_id)
