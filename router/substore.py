"""The subscription journal: this router's own subscriptions, kept where a restart finds
them (``docs/protocol.md``, section 7).

The network learns who subscribes where from each router's flooded events, and a
restarted router used to take its earlier subscriptions back from its neighbours'
tables (``linkstate`` ``_adopt``). When every router restarted at once, nobody remembered
a subscriber that was suspended, and messages were accepted without it (the in-process
network's seed 8757). Each router now keeps its own subscriptions in a small journal
and reads it back when it starts. An entry is written when a subscription is announced,
when it is suspended (with its deadline on the wall clock, in microseconds as the
network's stamps are), and dropped when it ends. A subscription that ended here (closed,
or its grace expired) leaves a closed entry until no copy can come for it any more: a
router that restarts right after a subscriber closed must still answer ``closed`` for it
(``--groups --leaves`` seed 404 waited for ever on a restarted router that said it knew
no such subscription).

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
from typing import NamedTuple

from once.linkstate.messages import Subscription

Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Kept:
    """One subscription of ours: ``until_us`` is its deadline while it is suspended (None
    while it is attached; ``math.inf`` for a durable group's stand-in, kept until a member
    comes back or the subscription is closed)."""

    sub: Subscription
    until_us: float | None = None


class Had(NamedTuple):
    """What a group member that ended here had answered, of the messages not settled then."""

    group: str
    scope: str
    gids: tuple[bytes, ...]
    pattern: str = ""  # a group of a pattern's (``GroupId.pattern``)


class MemoryStore:
    def __init__(self) -> None:
        self.kept: dict[Key, Kept] = {}
        self.ended: dict[Key, float] = {}  # key -> until (wall clock, microseconds): it ended here
        # a group member's, that ended here: its group and the messages (gids) it had answered
        # that were not settled yet (a root a publisher resumed at asks: ``core/inquiry.py``)
        self.had: dict[Key, Had] = {}
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

    def end(self, key: Key, until_us: float, now_us: float, had: Had | None = None) -> None:
        """``key`` ended here: not ours any more; remembered as ended until ``until_us``
        (what ended before ``now_us`` is forgotten), with what it ``had`` if it was a
        member of a group."""
        self.kept.pop(key, None)
        self.ended = {k: u for k, u in self.ended.items() if u > now_us}
        self.had = {k: h for k, h in self.had.items() if k in self.ended}
        self.ended[key] = until_us
        if had is not None:
            self.had[key] = had
        else:
            self.had.pop(key, None)

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
                ended = item.pop("ended", None)
                if ended is not None:
                    self.ended[(ended[0], ended[1])] = until
                    had = item.get("had")
                    if had is not None:
                        self.had[(ended[0], ended[1])] = Had(had["group"], had["scope"],
                                                             tuple(bytes.fromhex(g) for g in had["gids"]),
                                                             had.get("pattern", ""))
                    continue
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

    def end(self, key: Key, until_us: float, now_us: float, had: Had | None = None) -> None:
        super().end(key, until_us, now_us, had)
        self._write()

    def _write(self) -> None:
        items: list[dict[str, object]] = [{**asdict(k.sub), "until_us": k.until_us} for k in self.kept.values()]
        for key, until in self.ended.items():
            item: dict[str, object] = {"ended": list(key), "until_us": until}
            had = self.had.get(key)
            if had is not None:
                item["had"] = {"group": had.group, "scope": had.scope, "gids": [g.hex() for g in had.gids],
                               "pattern": had.pattern}
            items.append(item)
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
