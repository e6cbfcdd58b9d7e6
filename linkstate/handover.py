"""Hand-over fences: when a subscriber's attach may complete.

A subscriber that attached here may be owed deliveries that other routers hold (it moved
from a router that died, or reconnected elsewhere). Each router, on learning of the
attach, sends what it holds for it this way and then a ``HandOver`` marker behind it on
the same paths. The attach completes once the flood is acknowledged (the echo) and every
router that was reachable has vouched with the whole weight, or stopped being reachable.
Pure bookkeeping: the caller owns the timers and the callbacks.
"""

from __future__ import annotations

from .messages import WHOLE, HandOver


def split(marker: HandOver, paths: int) -> list[HandOver]:
    """The marker for each of ``paths`` ways towards its target, its weight shared out."""
    share, rest = divmod(marker.weight, paths)
    return [HandOver(marker.origin, marker.target, marker.seq, share + (rest if i == 0 else 0)) for i in range(paths)]


class _Wait:
    __slots__ = ("owed", "echoed")

    def __init__(self, routers: set[str]) -> None:
        self.owed = dict.fromkeys(routers, WHOLE)  # router -> weight not yet received
        self.echoed = False


class Fences:
    """Our attaches still waiting, by the seq of their subscription event."""

    def __init__(self) -> None:
        self.waiting: dict[int, _Wait] = {}

    def __contains__(self, seq: int) -> bool:
        return seq in self.waiting

    def __len__(self) -> int:
        return len(self.waiting)

    def open(self, seq: int, routers: set[str]) -> None:
        self.waiting[seq] = _Wait(routers)

    def owed(self, seq: int) -> set[str]:
        wait = self.waiting.get(seq)
        return set(wait.owed) if wait is not None else set()

    def echoed(self, seq: int) -> bool:
        """The flood of the event was acknowledged everywhere; True if the attach may complete."""
        wait = self.waiting.get(seq)
        if wait is None:
            return False
        wait.echoed = True
        return self._done(seq)

    def marker(self, marker: HandOver) -> bool:
        """A marker for us arrived; True if it completed its attach."""
        wait = self.waiting.get(marker.seq)
        if wait is None:
            return False
        owed = wait.owed
        left = owed.get(marker.origin)
        if left is None:
            return False
        left -= marker.weight
        if left > 0:
            owed[marker.origin] = left
            return False
        del owed[marker.origin]
        return self._done(marker.seq)

    def unreachable(self, reachable: set[str]) -> list[int]:
        """Routers no longer reachable send nothing more: the attaches that now may complete."""
        done = []
        for seq, wait in list(self.waiting.items()):
            for gone in [r for r in wait.owed if r not in reachable]:
                del wait.owed[gone]
            if self._done(seq):
                done.append(seq)
        return done

    def give_up(self, seq: int) -> bool:
        """Stop waiting for markers (one was lost with its link); True if the attach may complete."""
        wait = self.waiting.get(seq)
        if wait is None:
            return False
        wait.owed.clear()
        return self._done(seq)

    def _done(self, seq: int) -> bool:
        wait = self.waiting[seq]
        if wait.owed or not wait.echoed:
            return False
        del self.waiting[seq]
        return True
