from __future__ import annotations

import pytest
from once.records.gid import GidHasher, compute_gid, gid_from_prefix, gid_prefix
from once.records.outcomes import Outcome, OutcomeKind
from once.records.table import DuplicateGid, Record, RecordTable, SubState

ERR = Outcome(OutcomeKind.REJECTED)


def _record(gid: bytes = b"g" * 16, presettled: bool = False) -> Record:
    return Record(gid, "t", b"body", ("c", "l", 1), b"tag", 0, presettled)


def test_record_completes_when_every_waiter_is_terminal():
    r = _record()
    r.add_waiter("a")
    r.add_waiter("b")
    r.add_waiter("a")  # idempotent
    assert r.pending == 2
    assert r.resolve("a", SubState.ACCEPTED) is False
    assert r.resolve("a", SubState.ACCEPTED) is False  # twice changes nothing
    assert r.resolve("b", SubState.REJECTED, ERR) is True
    assert r.rejection is ERR and r.complete


def test_dropping_a_waiter_stops_waiting_for_it():
    r = _record()
    r.add_waiter("a")
    r.add_waiter("b")
    r.resolve("a", SubState.ACCEPTED)
    assert r.drop_waiter("b") is True
    assert r.drop_waiter("a") is False and r.pending == 0


def test_table_refuses_duplicate_gid_and_frees():
    t = RecordTable()
    r = t.add(_record())
    with pytest.raises(DuplicateGid):
        t.add(_record())
    assert r.gid in t and len(t) == 1
    assert not t.finished(r) or r.pending == 0
    r.publisher_settled = True
    assert t.finished(r)
    t.free(r)
    assert len(t) == 0 and t.get(r.gid) is None


def test_table_counts_the_bytes_its_messages_hold():
    t = RecordTable()
    a = t.add(_record(b"a" * 16))
    t.add(Record(b"b" * 16, "t", b"x" * 1000, ("c", "l", 1), b"tag2", 0, False))
    assert t.bytes == 1004
    t.free(a)
    t.free(a)  # freeing twice counts once
    assert t.bytes == 1000 and t.freed == 4


def test_gid_depends_on_every_part_and_prefix_form_agrees():
    base = compute_gid("c", "l", 1, b"t", 0)
    assert len(base) == 16
    assert base == gid_from_prefix(gid_prefix("c", "l", 1), b"t", 0)
    hasher = GidHasher(gid_prefix("c", "l", 1))  # (the copied hash state is not spent by a use)
    assert [hasher.gid(b"t"), hasher.gid(b"t", 3), hasher.gid(b"t")] == [base, compute_gid("c", "l", 1, b"t", 3), base]
    others = {compute_gid("c2", "l", 1, b"t", 0), compute_gid("c", "l2", 1, b"t", 0), compute_gid("c", "l", 2, b"t", 0),
              compute_gid("c", "l", 1, b"t2", 0), compute_gid("c", "l", 1, b"t", 1)}
    assert base not in others and len(others) == 5
    # Length-prefixed parts: moving a byte between container and link changes the gid.
    assert compute_gid("ab", "c", 1, b"t") != compute_gid("a", "bc", 1, b"t")


def test_rare_fields_read_their_defaults_and_hold_what_is_written():
    """The rare fields live in ``Rare``: a record that only reads them, or writes their
    defaults back, never allocates one; one written keeps its value."""
    r = _record()
    assert r.followed is None
    r.followed = None
    assert r.rare is None
    r.followed = {("B", ("c", "l"))}
    assert r.rare is not None and r.followed == {("B", ("c", "l"))}
