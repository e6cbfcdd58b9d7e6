"""Claims (``client/outbox/claims.py``) on SQLite and a real PostgreSQL: each table served
by one relay at a time, shared fairly, taken over when its relay stops renewing, and a
relay that lost a table deletes nothing of it."""

from __future__ import annotations

import time

import pytest
from once.client.outbox.claims import ClaimLost, Claims
from once.client.outbox.dialect import connect
from once.client.outbox.schema import init


def _two(db_url: str, lease: float = 5.0) -> tuple[Claims, Claims, list]:
    conns = [connect(db_url), connect(db_url)]
    tables = init(conns[0], shards=2, partitions=2).tables()
    return Claims(conns[0], "a", tables, lease), Claims(conns[1], "b", tables, lease), conns


def test_relays_share_the_tables_fairly_and_never_hold_one_together(db_url: str):
    a, b, conns = _two(db_url)
    assert a.round()[0] == [(0, 0), (0, 1), (1, 0), (1, 1)]  # alone: every table
    assert b.round() == ([], [], [])  # another came: nothing free yet
    taken, lost, excess = a.round()  # it sees two relays: half is its share
    assert (taken, lost, excess) == ([], [], [(1, 0), (1, 1)])
    for key in excess:
        a.give_back(key)
    assert b.round()[0] == [(1, 0), (1, 1)]
    assert set(a.held).isdisjoint(b.held) and set(a.held) | set(b.held) == {(0, 0), (0, 1), (1, 0), (1, 1)}
    b.leave()  # a clean stop: its tables free at once
    assert a.round()[0] == [(1, 0), (1, 1)]
    for c in conns:
        c.close()


def test_a_relay_that_stops_renewing_loses_its_tables_and_deletes_nothing_of_them(db_url: str):
    a, b, conns = _two(db_url, lease=0.2)
    a.round()
    deadline = time.monotonic() + 10
    while not b.held:  # (a renews no more, as if dead or paused: its lease runs out)
        assert time.monotonic() < deadline, "b never took a's tables"
        b.round()
    cur = conns[0].cursor()
    with pytest.raises(ClaimLost):
        a.fence(cur, next(iter(b.held)))  # a wakes and would delete: fenced
    conns[0].rollback()
    assert a.round()[1]  # its renewal finds them lost
    for c in conns:
        c.close()
