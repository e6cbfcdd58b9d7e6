"""A row's identity in the network, the same for every relay and every life of one.

The relay publishes each (table, topic) through one link whose container and name are
fixed by the outbox (its instance, made once by ``init``), whose incarnation is fixed by
the instance too, and whose delivery tag is the row's id: so the row's gid (the id every
router gives the message, ``records/gid.py``) is a function of the row alone. A relay
that sends a row again (after a relay, a router or the database died) gives it the gid
the network already holds, and the router merges it with its record.
"""

from __future__ import annotations

from once.records.gid import compute_gid

TAG_BYTES = 8  # (the client library's tags: 8 bytes, big-endian)


def link_identity(instance: str, table: str, topic: str) -> tuple[str, str]:
    """The (container id, link name) of the link that publishes ``table``'s rows for ``topic``."""
    return f"outbox-{instance}", f"{table}:{topic}"


def incarnation(instance: str) -> int:
    return int(instance, 16) % (2**63 - 1) or 1


def row_gid(instance: str, table: str, topic: str, row_id: int) -> bytes:
    container, link = link_identity(instance, table, topic)
    return compute_gid(container, link, incarnation(instance), row_id.to_bytes(TAG_BYTES, "big"))


def message_id(table: str, row_id: int) -> str:
    """The message-id property the relay gives a row: ``TABLE:ID``."""
    return f"{table}:{row_id}"
