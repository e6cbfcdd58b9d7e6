"""Order by sequence at a destination: one stream's copies, delivered in the order the
root sent them to this router, whatever paths they took (``docs/protocol.md``, section
5; ``router/core/destination.py`` applies it).

The root numbers the copies it sends to each destination router: position 1, 2, 3, ...
per stream, epoch and destination. It also writes on each copy ``low``, the lowest
position to this router it still has no answer for. A destination takes a copy when
every position before it has been taken, or is below ``low`` (the root has its answer,
so it was taken, perhaps before this router restarted). A copy that comes early waits
for the gap to fill. The root sends again what it has no answer for, so a gap is only
ever "still on its way".

A newer epoch (the publisher resumed at another root) ends the older one. Copies held
back from the older epoch are dropped: they were never taken, so never answered, so
never accepted, and the resuming publisher sends them again. Copies of an older epoch
that arrive later are stale. Pure: no clock, no I/O. Each call returns what happened
and the copies now ready, in order.
"""

from __future__ import annotations

from enum import Enum
from typing import Generic, NamedTuple, TypeVar

T = TypeVar("T")


class Arrival(Enum):
    TAKEN = "taken"  # in order: it (and what waited behind it) is ready
    HELD = "held"  # ahead of a gap: it waits
    REPEAT = "repeat"  # a position already taken or held (a re-send): answer it from the record
    STALE = "stale"  # an older epoch than the current one: not delivered


class Arrived(NamedTuple, Generic[T]):
    """What one arrival did: how it was taken, the copies ready now (in order), and the
    copies of an older epoch it dropped (to journal as superseded). (A named tuple: one is
    made per copy a destination takes, and a frozen dataclass's ``__init__`` is slower.)"""

    arrival: Arrival
    ready: tuple[T, ...] = ()
    dropped: tuple[T, ...] = ()


class Chain(Generic[T]):
    """One stream's order at one destination."""

    __slots__ = ("epoch", "next", "held", "behind")

    def __init__(self) -> None:
        self.epoch = -1  # none seen yet
        self.next = 1  # the position to take next
        self.held: dict[int, T] = {}  # position -> a copy waiting for the gap before it
        # A newer stream of the same publisher (it resumed elsewhere and sent again what
        # this one had sent) came here first: what this stream still brings is older than
        # what that one may have delivered (the destination drops its pre-settled copies)
        self.behind = False

    def arrive(self, epoch: int, position: int, low: int, item: T) -> Arrived[T]:
        """A copy at ``position`` (of ``epoch``) arrived, with the root's ``low``."""
        dropped: tuple[T, ...] = ()
        if epoch < self.epoch:
            return Arrived(Arrival.STALE)
        if epoch > self.epoch:
            dropped = tuple(self.held[p] for p in sorted(self.held))
            self.epoch, self.next, self.held = epoch, 1, {}
        if low > self.next:
            self.next = low  # the root has answers for everything below: taken before
        first: tuple[T, ...] = ()
        if position < self.next or position in self.held:
            arrival = Arrival.REPEAT
        elif position > self.next:
            self.held[position] = item
            arrival = Arrival.HELD
        else:
            self.next = position + 1
            first = (item,)
            arrival = Arrival.TAKEN
        # (also what ``low`` made takeable, whatever this copy was)
        return Arrived(arrival, first + self._release(), dropped)

    def _release(self) -> tuple[T, ...]:
        held = self.held
        if not held:
            return ()
        out = []
        for p in [p for p in held if p < self.next]:  # below low: answered in an earlier life (repeats)
            del held[p]
        while self.next in held:
            out.append(held.pop(self.next))
            self.next += 1
        return tuple(out)

    def end(self) -> tuple[T, ...]:
        """The stream ended (its root was lost and its publisher did not resume within its
        grace): what was held is dropped, and returned (to journal as abandoned)."""
        dropped = tuple(self.held[p] for p in sorted(self.held))
        self.held = {}
        return dropped

    def drop_newest(self) -> T | None:
        """The transit window is full: the copy held furthest ahead gives its room back (it
        has no answer, so the root sends it again), and the copy that fills the gap can
        always get in."""
        if not self.held:
            return None
        return self.held.pop(max(self.held))
