"""PostgreSQL's ``LISTEN``: the relay hears of a commit in a round trip, not at its next poll.

Each outbox table's trigger (``schema.py``) notifies ``once_outbox`` with the table's name
when a transaction that wrote to it commits. The listener is a connection of its own in
autocommit (a notification waits for the end of the listener's own transaction), watched
by the event loop: readable means notifications, or that the server went away. Polling
stays the relay's safety net (a notification is lost with its connection); this only
makes a commit's rows go sooner. SQLite has no such thing: its relay polls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from once.client.outbox.schema import CHANNEL

log = logging.getLogger("once.outbox")


class Listener:
    def __init__(self, url: str, on_table: Callable[[str], None]) -> None:
        self.url = url
        self.on_table = on_table  # called with each notified table's name
        self.conn: Any = None
        self.fd = -1  # (kept: a lost connection may not say its socket any more)
        self.lost = 0  # times the listening connection went away
        self.heard = 0  # notifications

    @property
    def listening(self) -> bool:
        return self.conn is not None

    def ensure(self) -> None:
        """Listen, if not already (after a loss: again, at the relay's next round)."""
        if self.conn is not None:
            return
        import psycopg

        try:
            conn = psycopg.connect(self.url, autocommit=True)
            conn.execute(f"LISTEN {CHANNEL}")
        except psycopg.Error as e:
            log.debug("outbox relay: LISTEN failed (%s): polling only", type(e).__name__)
            return
        self.conn, self.fd = conn, conn.fileno()
        asyncio.get_running_loop().add_reader(self.fd, self._readable)

    def _readable(self) -> None:
        pg = self.conn.pgconn
        try:
            pg.consume_input()  # (raises once the server is gone: then the socket stays readable)
            names = set()
            while (n := pg.notifies()) is not None:
                names.add(n.extra.decode())
                self.heard += 1
        except Exception as e:  # noqa: BLE001 - the server went away: poll until the next round listens again
            self.lost += 1
            log.info("outbox relay: the LISTEN connection went away (%s): polling until it is back", type(e).__name__)
            self.close()
            return
        for name in names:
            self.on_table(name)

    def close(self) -> None:
        if self.conn is None:
            return
        try:
            asyncio.get_running_loop().remove_reader(self.fd)
        except (RuntimeError, ValueError, OSError):  # (no loop, or the socket is closed already)
            pass
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - (it is gone already)
            pass
        self.conn = None
