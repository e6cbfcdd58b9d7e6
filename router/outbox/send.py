"""The application's side: a message written into the outbox in the caller's transaction.

``send(conn, topic, body)`` inserts one row and does not commit: it is sent if and only if
the caller's transaction commits. The layout (shards, partitions) is read from the database
unless the caller passes it (``read_layout(conn)`` once: one query less per message).
"""

from __future__ import annotations

import itertools
import json
import time
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
    wrong = publisher_name_error(topic) if topic else "a message needs a topic"
    if wrong:
        raise OutboxError(wrong)
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise OutboxError(f"the body is bytes, not {type(body).__name__}")
    if layout is None:
        layout = read_layout(conn)
        assert layout is not None
    if not 0 <= shard < layout.shards:
        raise OutboxError(f"shard {shard}: the outbox has shards 0..{layout.shards - 1}")
    d = dialect_of(conn)
    name = table(shard, layout.partition_of(key, next(_spread)))
    cur = conn.cursor()
    cur.execute(d.sql(f"INSERT INTO {name} (topic, msg_key, headers, body, created_us) VALUES (?, ?, ?, ?, ?) "
                      "RETURNING id"),
                (topic, key, json.dumps(headers, sort_keys=True) if headers else None, bytes(body),
                 time.time_ns() // 1000))
    row = cur.fetchone()
    return int(row[0])
