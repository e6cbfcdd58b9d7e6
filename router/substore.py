"""The subscription journal: this router's own subscriptions, kept where a restart finds
them (``docs/protocol.md``, section 7).

The network learns who subscribes where from each router's flooded events, and a
restarted router used to take its earlier subscriptions back from its neighbours'
tables (``linkstate`` ``_adopt``). When every router restarted at once, nobody remembered
a subscriber that was suspended, and messages were accepted without it (the in-process
network's seed 8757). Each router now keeps its own subscriptions in a small journal
and reads it back when it starts. An entry is written when a subscription is announced,
when it is suspended (with its deadline on the wall clock, in microseconds as the
network's stamps are), and dropped when it ends.

``FileStore`` is one JSON file, rewritten whole and atomically (written aside, synced,
renamed in place) on every change. Subscriptions change on attach and detach, not per
message, and a router holds thousands of them, not millions. ``MemoryStore`` is for a
router without a state directory (its subscriptions live as long as its process) and for
the in-process network, whose "disk" outlives a simulated restart.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from once.linkstate.messages import Subscription

Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Kept:
    """One subscription of ours: ``until_us`` is its deadline while it is suspended (None
    while it is attached; ``math.inf`` for a durable group's stand-in, kept until a member
    comes back or the subscription is closed)."""

    sub: Subscription
    until_us: float | None = None


class MemoryStore:
    def __init__(self) -> None:
        self.kept: dict[Key, Kept] = {}
        self.lives = 0

    def begin(self) -> bool:
        """A router life starts with this journal; True if an earlier one had it (a restart)."""
        self.lives += 1
        return self.lives > 1

    def load(self) -> list[Kept]:
        return list(self.kept.values())

    def put(self, kept: Kept) -> None:
        self.kept[kept.sub.key] = kept

    def drop(self, key: Key) -> None:
        self.kept.pop(key, None)

    def suspend(self, key: Key, until_us: float) -> None:
        """Ours and suspended now, until then (nothing if we do not keep it)."""
        kept = self.kept.get(key)
        if kept is not None:
            self.put(Kept(kept.sub, until_us))


class FileStore(MemoryStore):
    """The journal in ``directory/subscriptions.json``."""

    def __init__(self, directory: str | Path) -> None:
        super().__init__()
        self.path = Path(directory) / "subscriptions.json"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            for item in json.loads(self.path.read_text() or "[]"):
                until = item.pop("until_us", None)
                sub = Subscription(**item)
                self.kept[sub.key] = Kept(sub, until)

    def begin(self) -> bool:
        marker = self.path.with_name("lives")
        earlier = marker.exists()
        marker.write_text("")
        return earlier

    def put(self, kept: Kept) -> None:
        if self.kept.get(kept.sub.key) != kept:
            super().put(kept)
            self._write()

    def drop(self, key: Key) -> None:
        if key in self.kept:
            super().drop(key)
            self._write()

    def _write(self) -> None:
        items = [{**asdict(k.sub), "until_us": k.until_us} for k in self.kept.values()]
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(items, f)  # (math.inf is written as Infinity, which json reads back)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


def remaining(kept: Kept, now_us: float, grace: float) -> float | None:
    """Seconds a restored subscription stays suspended for: what is left of its deadline,
    ``grace`` (the larger of its terminus timeout and the router's subscriber grace) if it
    was attached when we went down, None if its deadline passed while we were down."""
    if kept.until_us is None:
        return grace
    if math.isinf(kept.until_us):
        return math.inf
    left = (kept.until_us - now_us) / 1e6
    return left if left > 0 else None
