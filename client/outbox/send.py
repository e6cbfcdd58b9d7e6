"""The application's side: a message written into the outbox in the caller's transaction.

``send(conn, topic, body)`` inserts one row and does not commit: it is sent if and only if
the caller's transaction commits. ``send_many`` writes a batch in one round trip (psycopg's
pipelined ``executemany``): an application writing many messages per transaction spends
its time there, not in the database's answers. The layout (shards, partitions) is read from the database
unless the caller passes it (``read_layout(conn)`` once: one query less per message).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Sequence
from typing import Any

from once.records.names import publisher_name_error

from .dialect import OutboxError, dialect_of
from .schema import Layout, read_layout, table

_spread = itertools.count()  # (messages without a key go round the partitions)


def send(conn: Any, topic: str, body: bytes, *, shard: int = 0, key: str | None = None,
         headers: dict[str, str] | None = None, layout: Layout | None = None) -> int:
    """Write a message for ``topic`` into the outbox, in ``conn``'s open transaction; its
    row id. ``key``: messages with the same key go to the same partition, in order.
    ``headers``: string application properties the message carries."""
    return send_many(conn, topic, [body], shard=shard, keys=[key], headers=headers, layout=layout)[0]


def send_many(conn: Any, topic: str, bodies: Sequence[bytes], *, shard: int = 0,
              keys: Sequence[str | None] | None = None, headers: dict[str, str] | None = None,
              layout: Layout | None = None) -> list[int]:
    """``send`` for each of ``bodies`` (``keys``: one per body, or none), in one round
    trip; their row ids, in order."""
    wrong = publisher_name_error(topic) if topic else "a message needs a topic"
    if wrong:
        raise OutboxError(wrong)
    for body in bodies:
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise OutboxError(f"the body is bytes, not {type(body).__name__}")
    if keys is not None and len(keys) != len(bodies):
        raise OutboxError(f"{len(keys)} keys for {len(bodies)} bodies: one each, or none")
    if layout is None:
        layout = read_layout(conn)
        assert layout is not None
    if not 0 <= shard < layout.shards:
        raise OutboxError(f"shard {shard}: the outbox has shards 0..{layout.shards - 1}")
    d = dialect_of(conn)
    props = json.dumps(headers, sort_keys=True) if headers else None
    now = time.time_ns() // 1000
    by_table: dict[str, list[int]] = {}  # table -> positions in ``bodies``
    for i in range(len(bodies)):
        key = keys[i] if keys is not None else None
        by_table.setdefault(table(shard, layout.partition_of(key, next(_spread))), []).append(i)
    ids = [0] * len(bodies)
    cur = conn.cursor()
    for name, at in by_table.items():
        insert = d.sql(f"INSERT INTO {name} (topic, msg_key, headers, body, created_us) VALUES (?, ?, ?, ?, ?) "
                       "RETURNING id")
        rows = [(topic, keys[i] if keys is not None else None, props, bytes(bodies[i]), now) for i in at]
        if d.name == "sqlite":  # (sqlite3's executemany returns no rows; its statements cost no round trip)
            for i, row in zip(at, rows):
                ids[i] = int(cur.execute(insert, row).fetchone()[0])
            continue
        cur.executemany(insert, rows, returning=True)
        for i in at:  # (one result per statement, in order)
            ids[i] = int(cur.fetchone()[0])
            cur.nextset()
    return ids
