"""Hand-over fences: pure bookkeeping of when an attach may complete."""

from __future__ import annotations

from once.linkstate.handover import Fences, split
from once.linkstate.messages import WHOLE, HandOver, from_dict, to_dict


def test_marker_round_trips_as_a_control_message():
    m = HandOver("B", "A", 7, WHOLE)
    assert from_dict(to_dict(m)) == m


def test_attach_completes_only_after_the_echo_and_every_routers_marker():
    f = Fences()
    f.open(1, {"B", "C"})
    assert not f.marker(HandOver("B", "A", 1, WHOLE))
    assert not f.echoed(1)  # C has not vouched yet
    assert f.marker(HandOver("C", "A", 1, WHOLE))
    assert 1 not in f


def test_markers_before_the_echo_wait_for_it():
    f = Fences()
    f.open(1, {"B"})
    assert not f.marker(HandOver("B", "A", 1, WHOLE))
    assert f.echoed(1)


def test_a_split_marker_counts_only_when_all_its_parts_arrived():
    parts = split(HandOver("C", "A", 3, WHOLE), 3)
    assert sum(p.weight for p in parts) == WHOLE and len(parts) == 3
    again = split(parts[1], 2)  # a router further on splits its part again
    f = Fences()
    f.open(3, {"C"})
    f.echoed(3)
    assert not f.marker(parts[0])
    assert not f.marker(again[0])
    assert not f.marker(parts[2])
    assert f.marker(again[1])


def test_markers_for_other_attaches_or_from_unknown_routers_change_nothing():
    f = Fences()
    f.open(1, {"B"})
    f.echoed(1)
    assert not f.marker(HandOver("B", "A", 2, WHOLE))
    assert not f.marker(HandOver("Z", "A", 1, WHOLE))
    assert f.owed(1) == {"B"}


def test_a_router_that_becomes_unreachable_is_no_longer_waited_for():
    f = Fences()
    f.open(1, {"B", "D"})
    f.open(2, {"B"})
    f.echoed(1)
    f.echoed(2)
    f.marker(HandOver("B", "A", 1, WHOLE))
    assert f.unreachable({"B"}) == [1]  # D died: attach 1 is complete; attach 2 still waits for B
    assert f.owed(2) == {"B"}


def test_giving_up_completes_only_an_echoed_attach():
    f = Fences()
    f.open(1, {"B"})
    assert not f.give_up(1)  # the echo still runs
    assert f.echoed(1)
