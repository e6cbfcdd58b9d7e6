"""A destination's tombstones (``router/core/destination.py``): each lives at least
``publisher_grace``, and under steady traffic no longer than that plus a bucket and a
tick. Pure: a clock the test moves, no network."""

from __future__ import annotations

from once.records.far import Far
from once.records.table import Record
from once.router.config import Settings
from once.router.core.destination import Destination
from once.router.core.tables import CoreTables

GRACE = 30.0


def _destination(now: list[float]) -> Destination:
    tables = CoreTables("D", Settings(publisher_grace=GRACE), lambda: now[0], lambda: 0, None)
    return Destination(tables, lambda router, item: None, set)


def _freed(dest: Destination, i: int) -> bytes:
    gid = i.to_bytes(16, "big")
    record = Record(gid, "t", b"m", None, gid, 0, False, 0)
    record.far = far = Far()
    far.takes.append(("A", b"A/1", i + 1, frozenset({("c", "s")})))
    dest.freed(record)
    return gid


def test_under_steady_traffic_tombstones_go_after_the_grace_and_not_before():
    now = [0.0]
    dest = _destination(now)
    kept: dict[bytes, float] = {}
    for i in range(12_000):  # 100 a second for two minutes, never a quarter second's pause
        now[0] = i * 0.01
        kept[_freed(dest, i)] = now[0]
        if i % 25 == 0:  # the housekeeping tick, every 0.25 s
            dest.expire(now[0])
            ages = [now[0] - kept[g] for g in dest.tombstones]
            assert max(ages) <= GRACE + 0.5  # forgotten within a bucket and a tick of their time
            gone = [g for g, t in kept.items() if g not in dest.tombstones]
            assert all(now[0] - kept[g] >= GRACE for g in gone)  # never early
    assert GRACE * 100 - 50 <= len(dest.tombstones) <= (GRACE + 0.5) * 100


def test_a_tombstone_kept_again_lives_its_full_grace_from_then():
    now = [0.0]
    dest = _destination(now)
    gid = _freed(dest, 0)
    now[0] = 20.0
    _freed(dest, 0)  # freed again (a record made again for it, by adoption)
    now[0] = 31.0
    dest.expire(now[0])
    assert gid in dest.tombstones  # its first bucket went; it was kept again at 20 s
    now[0] = 50.5
    dest.expire(now[0])
    assert gid not in dest.tombstones and not dest.tomb_stale
