"""A router's clean stop, decided step by step: the same rule for a router process
(``Router._drained``, on SIGTERM or an admin's drain) and for the simulator's ``stop`` fault.

A stopping router has closed its client connections (they resume at other routers, as
after a crash). It waits while clients are still going, then up to ``wait`` for what it
holds as root or destination to be answered and for the subscribers it closed to resume
elsewhere (their new attach takes their keys over). Then, with nothing suspended here, it
tells every router it left (``Network.leave``): they stop counting it among the routers
they may be cut off from. A subscriber still suspended here (its client did not come back
in time, or a durable group's stand-in, suspended for good) is owed what waits for it and
only this router could expire it (``docs/protocol.md`` section 7): the router stops
without a word, and the network waits for it as for a router out of reach.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .core import Core


# A router stopped by a signal (a service manager's stop, a test's teardown): what it holds
# and the subscribers it closed have this long to be answered and to resume elsewhere; those
# that have not by then are the network's, as after a crash. (An admin's drain: ``DRAIN_WAIT``.)
LEAVE_WAIT = 5.0


class Step(enum.Enum):
    WAIT = "wait"  # clients, records or suspended subscribers may still go their way
    LEAVE = "leave"  # every router hears we left, then we stop
    STOP = "stop"  # we stop without a word (nobody to tell, or what is suspended here is owed)


@dataclass(frozen=True, slots=True)
class Holding:
    """What a stopping router still has."""

    clients: int  # client connections not yet gone
    records: int  # deliveries held as root or destination
    suspended: int  # subscribers suspended here
    standing_in: bool  # one of them is a durable group's stand-in (suspended for good)
    linked: bool  # a link to another router is up

    @classmethod
    def of(cls, core: Core, clients: int, linked: bool) -> Holding:
        suspended = core.tables.topics.suspended
        return cls(clients, len(core.records.records), len(suspended),
                   any(sub.suspended_until == math.inf for sub in suspended), linked)


class Leaving:
    """The stop under way: when the last client connection went, and the rule."""

    __slots__ = ("wait", "since")

    def __init__(self, wait: float) -> None:
        self.wait = wait
        self.since: float | None = None  # when the last client connection went

    def step(self, now: float, h: Holding) -> Step:
        if h.clients:
            self.since = None
            return Step.WAIT
        if self.since is None:
            self.since = now
        if (h.records or h.suspended) and not h.standing_in and now - self.since < self.wait:
            return Step.WAIT
        if not h.linked or h.suspended:
            return Step.STOP
        return Step.LEAVE
