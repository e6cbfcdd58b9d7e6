"""Whose view is complete (the cold-start rule), pure: a router that restarted takes
completeness only from a neighbour that has synced itself, and a fresh router that hears a
view that is not complete stops taking its own for complete (``--elastic`` churn seeds
1057, 1151, 2482, 3431, 3955: a router that joined beside a restarted one)."""

from __future__ import annotations

from once.linkstate.engine import ControlPlane


def _restarted(name: str) -> ControlPlane:
    plane = ControlPlane(name)
    plane.complete = False  # (as ``Network`` sets it for a router whose state says it ran before)
    return plane


def test_a_restarted_router_takes_no_completeness_from_a_fresh_one_that_never_synced():
    fresh, restarted = ControlPlane("X"), _restarted("C")
    sync = fresh.sync_message()
    assert sync.complete and not sync.synced
    restarted.receive("X", sync)
    assert not restarted.complete


def test_a_restarted_router_takes_completeness_from_one_that_synced():
    a, b, restarted = ControlPlane("A"), ControlPlane("B"), _restarted("C")
    a.receive("B", b.sync_message())
    assert a.synced and a.complete
    restarted.receive("A", a.sync_message())
    assert restarted.complete


def test_a_fresh_router_that_hears_a_view_that_is_not_complete_waits_for_one_that_is():
    fresh, restarted = ControlPlane("X"), _restarted("C")
    r = fresh.receive("C", restarted.sync_message())
    assert r.cold and not fresh.complete
    a, b = ControlPlane("A"), ControlPlane("B")
    a.receive("B", b.sync_message())
    fresh.receive("A", a.sync_message())
    assert fresh.complete


def test_a_router_that_synced_keeps_its_view_complete_when_a_restarted_neighbour_syncs():
    a, b, restarted = ControlPlane("A"), ControlPlane("B"), _restarted("C")
    a.receive("B", b.sync_message())
    r = a.receive("C", restarted.sync_message())
    assert a.complete and not r.cold
