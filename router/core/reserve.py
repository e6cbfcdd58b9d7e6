"""Message bytes a router holds outside its records, counted with them against
``max_in_flight_bytes``.

Adaptors hold bytes the core has not taken yet: an AMQP message still arriving in frames,
an MQTT packet whose length its header announced, MQTT publishes waiting for a new epoch,
a will waiting for its client's connection to end. Each holder says what it holds now
(``hold``); the credit the core gives (``credit.py``) and the arrivals adaptors admit
leave room for all of it, so that the records and everything on its way to them stay
within the one bound. (Without it each connection's arrivals were weighed against the
room the records left as if no other connection had any: six connections' large first
messages took 641 MiB under a 256 MiB bound.)
"""

from __future__ import annotations


class Reserve:
    __slots__ = ("bytes", "_by")

    def __init__(self) -> None:
        self.bytes = 0  # what every holder holds, in all
        self._by: dict[object, int] = {}

    def hold(self, holder: object, n: int) -> None:
        """``holder`` holds ``n`` bytes now (0: none, and it is forgotten)."""
        old = self._by.pop(holder, 0)
        if n > 0:
            self._by[holder] = n
        self.bytes += max(n, 0) - old

    def of(self, holder: object) -> int:
        return self._by.get(holder, 0)

    def room(self, limit: int, records: int, holder: object) -> int:
        """What ``holder`` may hold within ``limit`` beside the records' bytes and what the
        others hold (its own counted as room: it asks what it may hold in all)."""
        return limit - records - (self.bytes - self._by.get(holder, 0))
