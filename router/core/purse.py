"""The message bytes one user (or one source host) may hold in a router's records.

The policy's ``max_in_flight_bytes`` for a user or a host (``router/security/quotas.py``) is one
``Purse``, shared by every publisher link of that user or from that host; a publisher
holds the purses that bound it (none, most of the time). Its records' bytes are added
and taken away as the publisher's own ``bytes`` are (``delivery.py``), and credit is
granted only while what its purses hold, with what the credit out there may bring at
each link's guessed message size, stays within their limits (``credit.py``): a user's
publishers are slowed as a link is by ``link_in_flight_bytes``. (Only a multi-frame
message still arriving that would pass a budget holding something is refused, as one
passing ``max_connection_bytes`` is: its size was not known when its credit was given.)
That a purse is full is logged, once a while per purse.
"""

from __future__ import annotations

import logging

from ..logs import fields

log = logging.getLogger("once.guard")
LOG_EVERY = 10.0  # seconds: a purse kept full says so once in each


class Purse:
    __slots__ = ("limit", "bytes", "where", "logged_at")

    def __init__(self, limit: int, where: str) -> None:
        self.limit = limit  # bytes (the policy's; SIGHUP may change it)
        self.bytes = 0  # what its publishers' records hold now
        self.where = where  # the rule that set it ("policy.users.alice.max_in_flight_bytes")
        self.logged_at = -LOG_EVERY

    def full(self, router_id: str, next_size: int, now: float) -> None:
        """Its publishers' next message would not fit: they get no credit until records
        are let go (logged at most once in ``LOG_EVERY`` seconds)."""
        if now - self.logged_at < LOG_EVERY:
            return
        self.logged_at = now
        log.warning("router %s: publishers held back: their records hold %d bytes of %s (%d); the next "
                    "%d-byte message waits until some are answered", router_id, self.bytes, self.where, self.limit,
                    next_size, extra=fields("purse.full", rule=self.where, held=self.bytes, limit=self.limit))
