"""Protocol version 3 on the wire (``router/adaptors/amqp/copies_wire.py``): copies and the
routed control items, both ways, and what a malformed header does. Pure."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from once.records.membership import GroupId
from once.records.outcomes import Outcome, OutcomeKind
from once.records.owed import Said
from once.router.adaptors.amqp.copies_wire import pack_copy, routed_from_bytes, routed_to_bytes, unpack_copy
from once.router.amqp.errors import DecodeError
from once.router.core.messages import Answer, Ask, Copy, CopyTarget, Ended, Forgot, Handed, Routed, Settle, Told

names = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), min_size=1, max_size=12)
keys = st.frozensets(st.tuples(names, names), max_size=3)
targets = st.builds(CopyTarget, names, keys, st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), st.booleans())
chosen = st.lists(st.tuples(st.tuples(names, names), st.builds(GroupId, names, st.text(max_size=5).filter(
    lambda s: "\x00" not in s), st.sampled_from(("", "t/+", "a/#"))), names), max_size=2).map(tuple)
copies = st.builds(Copy, st.binary(min_size=16, max_size=16), names, st.binary(max_size=64), st.booleans(),
                   st.integers(0, 2**32 - 1), names, st.binary(min_size=1, max_size=20), st.integers(0, 2**64 - 1),
                   st.lists(targets, max_size=3).map(tuple), st.frozensets(names, max_size=4), chosen,
                   resent=st.booleans())


@settings(max_examples=300, deadline=None)
@given(copies)
def test_a_copy_reads_back_as_it_was_written(copy: Copy):
    back = unpack_copy(copy.gid, pack_copy(copy) + copy.payload)
    assert back == dataclasses.replace(copy, visited=frozenset(copy.visited))


def test_a_copy_read_twice_from_its_cached_parts_is_the_same():
    copy = Copy(b"g" * 16, "t", b"m", False, 0, "A", b"A/1", 5, (CopyTarget("C", frozenset({("c", "s")}), 3, 1),),
                frozenset({"A", "B"}))
    wire = pack_copy(copy) + b"m"
    assert unpack_copy(copy.gid, wire) == unpack_copy(copy.gid, wire) == copy


def test_every_truncation_of_a_copy_header_is_a_decode_error():
    copy = Copy(b"g" * 16, "t", b"", False, 0, "A", b"A/1", 5,
                (CopyTarget("C", frozenset({("c", "s")}), 3, 1), CopyTarget("D", frozenset(), 4, 2, True)), frozenset({"A"}),
                (((("c", "g|x"), GroupId("x"), "D")),))
    header = pack_copy(copy)
    for cut in range(len(header)):
        with pytest.raises(DecodeError):
            unpack_copy(copy.gid, header[:cut])
    assert unpack_copy(copy.gid, header) == copy


@pytest.mark.parametrize("bad", [b"\x00\x05abc", b"\x00\x01\x00\x00\x00", b"\x00\x02\xff\xff"])
def test_a_malformed_copy_header_is_a_decode_error(bad: bytes):
    with pytest.raises(DecodeError):
        unpack_copy(b"g" * 16, bad)


def test_answers_and_settlements_read_back_for_their_router_and_pass_unread_through_others():
    items = (Answer(b"g1", b"A/1", 7, ()), Answer(b"g2", b"A/1", 8, ((("c", "s"), Said.ACCEPTED, None),
                                                                   (("c", "t"), Said.REJECTED,
                                                                    Outcome(OutcomeKind.REJECTED, "x:y", "no")))),
             Settle(b"g3"))
    wire = routed_to_bytes(Routed("A", "C", items, 5))
    at_a = routed_from_bytes(wire, "A")
    assert at_a == Routed("A", "C", items, 5)
    at_b = routed_from_bytes(wire, "B")  # in the middle: not read, passed on as it is
    assert at_b.items == () and at_b.blob
    assert routed_from_bytes(routed_to_bytes(at_b), "A") == at_a
    for cut in (1, 3, len(wire) - 1):
        with pytest.raises(DecodeError):
            routed_from_bytes(wire[:cut], "A")


def test_runs_of_answers_and_settlements_read_back_in_order_and_every_truncation_fails():
    """Consecutive "every key accepted" answers of one stream go as one run, settlements as
    another; whatever breaks a run (a gap, another stream, an answer naming keys) starts
    a new item. Read back, the items are the same, in the same order."""
    said = ((("c", "s"), Said.MOVED, None),)
    items = (Answer(b"g1", b"A/1", 7, ()), Answer(b"g2", b"A/1", 8, ()), Answer(b"g3", b"A/1", 9, ()),
             Answer(b"g4", b"A/1", 11, ()), Answer(b"g5", b"B/2", 12, ()), Answer(b"g6", b"B/2", 13, said),
             Settle(b"s1"), Settle(b"s2"), Forgot(b"f1"), Answer(b"g7", b"B/2", 14, ()),
             Answer(b"g8", b"B/2", 15, ()), Settle(b"s3"))
    wire = routed_to_bytes(Routed("A", "C", items, 5))
    assert routed_from_bytes(wire, "A").items == items
    for cut in range(1, len(wire)):  # (a cut between items reads as the items before it)
        try:
            got = routed_from_bytes(wire[:cut], "A").items
        except DecodeError:
            continue
        assert got == items[:len(got)] and len(got) < len(items)


def test_questions_about_group_members_and_their_answers_read_back_between_other_items():
    """``Ask`` (a root that took a resent message over) and ``Told`` (what a router knows of
    its members, unsure, or taken by a root that asked later), ``Ended`` (a member closed) and
    ``Handed`` (what members that closed at a router leaving the network had) read back as
    written, amid answers and settlements; every truncation is a decode error or fewer items."""
    told = Told(b"g2", ((("c", "g|m1"), GroupId("g"), "B", True), (("c", "g|m2"), GroupId("h", "x", "t/#"), "C", False)))
    items = (Answer(b"g1", b"A/1", 7, ()), Ask(b"g2", "orders", 1_700_000_000_000_001), told,
             Told(b"g3", (), True), Told(b"g4", (), False, True, 1_700_000_000_000_001), Ended(("c", "g|m1"), 1_700_000_000_000_002),
             Handed(("c", "g|m1"), GroupId("h", "x", "t/#"), (b"g5", b"g6"), 7.5, 1_700_000_000_000_003),
             Handed(("c", "g|m2"), GroupId("g"), (), 0.0, 0), Settle(b"s1"))
    wire = routed_to_bytes(Routed("A", "C", items, 5))
    assert routed_from_bytes(wire, "A").items == items
    for cut in range(1, len(wire)):
        try:
            got = routed_from_bytes(wire[:cut], "A").items
        except DecodeError:
            continue
        assert got == items[:len(got)] and len(got) < len(items)
