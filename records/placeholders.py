"""Placeholders: what a resuming subscriber said it already has, before we have it.

A subscriber that resumes with an unsettled map names the gids it accepted (or
rejected). One we have not seen yet (the copy is still on its way through the network)
gets a placeholder until a deadline, so that when the copy arrives it is not delivered
to that subscriber again: its answer is already known (seed 002, "Resuming a subscriber").
"""

from __future__ import annotations

Key = tuple[str, str]  # (container-id, link name)


class Placeholders:
    __slots__ = ("_until",)

    def __init__(self) -> None:
        self._until: dict[tuple[Key, bytes], float] = {}

    def __len__(self) -> int:
        return len(self._until)

    def __bool__(self) -> bool:
        return bool(self._until)

    def add(self, key: Key, gid: bytes, until: float) -> None:
        self._until[(key, gid)] = until

    def take(self, key: Key, gid: bytes) -> bool:
        """True (once) if ``key`` said it has ``gid``: do not deliver it there."""
        return self._until.pop((key, gid), None) is not None

    def has(self, key: Key, gid: bytes) -> bool:
        """Whether ``key`` said it has ``gid`` (the placeholder stays)."""
        return (key, gid) in self._until

    def gids_of(self, key: Key) -> list[bytes]:
        """The gids ``key`` said it has that we hold placeholders for."""
        return [gid for (k, gid) in self._until if k == key]

    def last_deadline(self) -> float:
        """The latest deadline of those held (0.0: none)."""
        return max(self._until.values(), default=0.0)

    def expire(self, now: float) -> int:
        """Forget the placeholders whose deadline passed; how many went."""
        old = [k for k, until in self._until.items() if until <= now]
        for k in old:
            del self._until[k]
        return len(old)
