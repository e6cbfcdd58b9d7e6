"""What protects a router from the one client that would take everything: connection
counts per router and per host, the file-descriptor limit they derive from, failed
authentications per host, and log lines that cannot flood.

All of it is bookkeeping that takes ``now`` as an argument; the asyncio shell asks it
before it accepts a connection or feeds a SASL exchange.
"""

from __future__ import annotations

import logging
import resource
from dataclasses import dataclass
from typing import Any

# Descriptors kept for everything that is not a client connection: listeners,
# inter-router links, the journal, log files, Python's own.
FD_RESERVE = 64


def raise_fd_limit() -> int:
    """Raise this process's soft descriptor limit to its hard limit; return the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = max(soft, 1 << 20)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


def default_max_connections(fd_limit: int) -> int:
    """A safe share of the descriptors: the router never runs out of them for its own work."""
    return max(16, int((fd_limit - FD_RESERVE) * 0.9))


class RateLimitedLog:
    """One line per key per ``interval``; what was held back is counted in the next line."""

    def __init__(self, logger: logging.Logger, interval: float = 10.0) -> None:
        self.logger = logger
        self.interval = interval
        self._last: dict[object, float] = {}
        self._held: dict[object, int] = {}

    def warning(self, key: object, now: float, msg: str, *args: object, extra: dict[str, Any] | None = None) -> bool:
        """Log ``msg`` unless ``key`` was logged less than ``interval`` ago; True if logged."""
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            self._held[key] = self._held.get(key, 0) + 1
            return False
        held = self._held.pop(key, 0)
        suffix = f" (and {held} more like it in the last {now - last:.0f}s)" if held and last is not None else ""
        self.logger.warning(msg + suffix, *args, extra=extra)
        self._last[key] = now
        if len(self._last) > 10_000:  # many hosts: forget the oldest keys, never grow without bound
            for k in sorted(self._last, key=self._last.__getitem__)[:5_000]:
                self._last.pop(k, None)
                self._held.pop(k, None)
        return True


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a new connection is refused: which limit, and its value."""

    limit: str
    value: int

    def line(self) -> str:
        return f"{self.limit} {self.value} reached"


class ConnectionLimits:
    """Counts client connections, in total and per host."""

    def __init__(self, max_total: int, max_per_host: int) -> None:
        self.max_total = max_total
        self.max_per_host = max_per_host
        self.total = 0
        self.per_host: dict[str, int] = {}

    def admit(self, host: str) -> Refusal | None:
        """Count a new connection from ``host``, or say which limit refuses it."""
        if self.total >= self.max_total:
            return Refusal("max_connections", self.max_total)
        n = self.per_host.get(host, 0)
        if n >= self.max_per_host:
            return Refusal("max_connections_per_host", self.max_per_host)
        self.total += 1
        self.per_host[host] = n + 1
        return None

    def release(self, host: str) -> None:
        self.total -= 1
        n = self.per_host.get(host, 0) - 1
        if n > 0:
            self.per_host[host] = n
        else:
            self.per_host.pop(host, None)


class AuthFailures:
    """Failed authentications per host, and the pace at which a host may try again.

    After ``free`` failures inside ``window`` seconds a host gets one attempt per
    ``delay(n)`` seconds, growing with its failures up to ``max_delay``: a password
    guesser is slowed to a crawl while a user who mistyped once is not slowed at all.
    Connections from a slowed host wait (their bytes are not read) until their turn.
    """

    def __init__(self, free: int = 5, window: float = 60.0, base_delay: float = 0.25, max_delay: float = 5.0,
                 ) -> None:
        self.free = free
        self.window = window
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[str, tuple[int, float]] = {}  # host -> (count, last failure)
        self._next_turn: dict[str, float] = {}

    def failed(self, host: str, now: float) -> int:
        """Count a failure; return the host's failures in the current window."""
        n, last = self._failures.get(host, (0, now))
        n = 1 if now - last > self.window else n + 1
        self._failures[host] = (n, now)
        if len(self._failures) > 10_000:
            for k in [k for k, (_, t) in self._failures.items() if now - t > self.window]:
                del self._failures[k]
                self._next_turn.pop(k, None)
        return n

    def delay(self, failures: int) -> float:
        if failures <= self.free:
            return 0.0
        return min(self.max_delay, self.base_delay * 2.0 ** min(failures - self.free - 1, 16))

    def turn(self, host: str, now: float) -> float:
        """When the next attempt from ``host`` may be read (``now`` if at once); books that turn."""
        n, last = self._failures.get(host, (0, now))
        if n <= self.free or now - last > self.window:
            return now
        at = max(now, self._next_turn.get(host, now))
        self._next_turn[host] = at + self.delay(n)
        return at
