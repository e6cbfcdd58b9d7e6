"""The forwarding core through a test adaptor: no sockets, no engine."""

from __future__ import annotations

from typing import Any

import pytest
from once.router.config import Settings
from once.router.core import ACCEPTED, RELEASED, Core, Outcome, OutcomeKind, TagInUse
from support.routes import TestRoutes


class Pub:
    def __init__(self) -> None:
        self.credit_grants: list[int] = []
        self.outcomes: list[tuple[Any, Any, bool]] = []

    def grant(self, credit: int) -> None:
        self.credit_grants.append(credit)

    def outcome(self, handle: Any, outcome: Any, settle: bool) -> None:
        self.outcomes.append((handle, outcome, settle))


class Sub:
    def __init__(self, credit: int = 100) -> None:
        self._credit = credit
        self.sent: list[tuple[Any, bool, int]] = []
        self.settled: list[Any] = []

    def credit(self) -> int:
        return self._credit

    def deliver(self, record: Any, settled: bool, redelivery: int) -> Any:
        self._credit -= 1
        self.sent.append((record, settled, redelivery))
        return ("handle", len(self.sent))

    def settle(self, handle: Any) -> None:
        self.settled.append(handle)

    def draining(self) -> bool:
        return False

    def drained(self) -> None:
        pass


def _core(router_id: str = "A", **kw: Any) -> Core:
    return Core(router_id, Settings(**{"protocol": 2, **kw}), clock=lambda: 0.0, routes=TestRoutes())


def test_outcome_waits_for_all_subscribers_then_settles_everyone():
    core = _core()
    s1, s2, p = Sub(), Sub(), Pub()
    a, _ = core.add_subscriber(s1, "t", "c1", "l", False)
    b, _ = core.add_subscriber(s2, "t", "c2", "l", False)
    pub = core.add_publisher(p, "t", "cp", "lp", settle_second=False)
    rec = core.publish(pub, b"0", b"m", False, "pub-handle")
    assert len(s1.sent) == len(s2.sent) == 1 and p.outcomes == []
    core.subscriber_update(a, rec, s1.sent[0], ACCEPTED, settled=False)
    assert p.outcomes == []
    core.subscriber_update(b, rec, s2.sent[0], ACCEPTED, settled=True)
    assert p.outcomes == [("pub-handle", ACCEPTED, True)]
    assert s1.settled == [("handle", 1)] and s2.settled == []  # only the one still unsettled
    assert len(core.records) == 0


def test_rejection_is_reported_after_all_are_terminal():
    core = _core()
    s1, s2, p = Sub(), Sub(), Pub()
    a, _ = core.add_subscriber(s1, "t", "c1", "l", False)
    b, _ = core.add_subscriber(s2, "t", "c2", "l", False)
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    rec = core.publish(pub, b"0", b"m", False, "h")
    core.subscriber_update(a, rec, None, Outcome(OutcomeKind.REJECTED), True)
    assert p.outcomes == []
    core.subscriber_update(b, rec, None, ACCEPTED, True)
    assert p.outcomes[0][1].kind is OutcomeKind.REJECTED


def test_release_redelivers_up_to_the_limit_then_rejects():
    core = _core(max_redeliveries=2)
    s, p = Sub(), Pub()
    sub, _ = core.add_subscriber(s, "t", "c", "l", False)
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    rec = core.publish(pub, b"0", b"m", False, "h")
    core.subscriber_update(sub, rec, "h1", RELEASED, True)
    core.subscriber_update(sub, rec, "h2", Outcome(OutcomeKind.MODIFIED, delivery_failed=True), True)
    assert [r for _, _, r in s.sent] == [0, 1, 2]
    core.subscriber_update(sub, rec, "h3", RELEASED, True)
    assert len(s.sent) == 3
    assert p.outcomes[0][1].condition == "once:redelivery-limit"


def test_undeliverable_here_counts_as_rejection():
    core = _core()
    s, p = Sub(), Pub()
    sub, _ = core.add_subscriber(s, "t", "c", "l", False)
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    rec = core.publish(pub, b"0", b"m", False, "h")
    core.subscriber_update(sub, rec, "h1", Outcome(OutcomeKind.MODIFIED, undeliverable_here=True), True)
    assert p.outcomes[0][1].condition == "once:undeliverable-here"


def test_window_bounds_credit():
    core = _core(max_in_flight=10, link_credit=100)
    s, p = Sub(credit=0), Pub()
    core.add_subscriber(s, "t", "c", "l", False)
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    assert p.credit_grants == [1]  # one message first: its size is not known yet
    core.publish(pub, b"0", b"m", False, 0)
    core.replenish()
    assert p.credit_grants == [1, 9]  # the window's room: 10 in flight at most
    for i in range(1, 10):
        core.publish(pub, b"%d" % i, b"m", False, i)
    core.after_batch()
    assert p.credit_grants == [1, 9] and len(core.records) == 10


def test_tag_reuse_while_unsettled_is_refused_and_after_settlement_gets_a_new_gid():
    core = _core()
    s, p = Sub(), Pub()
    sub, _ = core.add_subscriber(s, "t", "c", "l", False)
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    first = core.publish(pub, b"same", b"m1", False, "h1")
    try:
        core.publish(pub, b"same", b"m2", False, "h2")
        raise AssertionError("reuse of an unsettled tag was accepted")
    except TagInUse:
        pass
    core.subscriber_update(sub, first, None, ACCEPTED, True)
    second = core.publish(pub, b"same", b"m2", False, "h2")
    assert second.gid != first.gid and second.generation == 1


def test_new_incarnation_on_reattach_makes_tag_zero_a_new_delivery():
    core = _core()
    s, p = Sub(), Pub()
    core.add_subscriber(s, "t", "c", "l", False)
    pub1 = core.add_publisher(p, "t", "cp", "lp", False)
    a = core.publish(pub1, b"\x00", b"m", False, "h")
    core.remove_publisher(pub1)
    pub2 = core.add_publisher(p, "t", "cp", "lp", False)
    b = core.publish(pub2, b"\x00", b"m", False, "h")
    assert pub2.incarnation != pub1.incarnation and a.gid != b.gid
    assert len(s.sent) == 2


def test_order_is_kept_per_subscriber_when_credit_arrives_late():
    core = _core()
    s, p = Sub(credit=0), Pub()
    sub, _ = core.add_subscriber(s, "t", "c", "l", False)
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    for i in range(5):
        core.publish(pub, b"%d" % i, b"%d" % i, False, i)
    s._credit = 5
    core.pump(sub)
    assert [r.payload for r, _, _ in s.sent] == [b"0", b"1", b"2", b"3", b"4"]


def test_same_subscriber_key_displaces_the_old_link():
    core = _core()
    s1, s2 = Sub(), Sub()
    old, _ = core.add_subscriber(s1, "t", "c", "l", False)
    new, displaced = core.add_subscriber(s2, "t", "c", "l", False)
    assert displaced is old and not old.attached and core.topics["t"][("c", "l")] is new


class HopP:
    """A test port for a downstream router."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, frozenset]] = []
        self.keys: list[Any] = []
        self.settled: list[Any] = []
        self.markers: list[Any] = []

    def credit(self) -> int:
        return 100

    def forward(self, record: Any, dests: frozenset, settled: bool, keys: Any = None) -> Any:
        self.sent.append((record, dests))
        if keys is not None:
            self.keys.append(keys)
        return ("hop", len(self.sent))

    def settle(self, handle: Any) -> None:
        self.settled.append(handle)

    def marker(self, msg: Any) -> None:
        self.markers.append(msg)


def _routed(core: Core, table: dict[str, str], remote: set[str]) -> None:
    def route(dests, exclude):
        out, stuck = {}, set()
        for d in dests:
            h = table.get(d)
            if h is None or h == exclude or h not in core.hops:
                stuck.add(d)
            else:
                out.setdefault(h, set()).add(d)
        return out, stuck

    core.routes.routing = route
    core.routes.remote = lambda topic: set(remote)


def test_root_waits_for_downstream_hops_and_settles_them():
    core = _core()
    hb = HopP()
    core.add_hop("B", hb)
    _routed(core, {"B": "B", "C": "B"}, {"B", "C"})
    p = Pub()
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    rec = core.publish(pub, b"0", b"m", False, "h")
    assert hb.sent == [(rec, frozenset({"B", "C"}))] and p.outcomes == []
    core.hop_update(core.hops["B"], rec, ("hop", 1), ACCEPTED, False)
    assert p.outcomes == [("h", ACCEPTED, True)] and hb.settled == [("hop", 1)]
    assert len(core.records) == 0


def test_lost_hop_reroutes_in_doubt_records_and_parks_unroutable():
    core = _core()
    hb, hc = HopP(), HopP()
    core.add_hop("B", hb)
    core.add_hop("C", hc)
    table = {"B": "B", "C": "C"}
    _routed(core, table, {"B", "C"})
    pub = core.add_publisher(Pub(), "t", "cp", "lp", False)
    rec = core.publish(pub, b"0", b"m", False, "h")
    table["C"] = "B"  # the graph now says: C via B
    core.hop_lost("C")
    assert hb.sent[-1] == (rec, frozenset({"C"}))  # a new copy for C through B
    assert core.records.get(rec.gid).pending == 1  # B was reopened for C
    core.hop_lost("B")  # nothing left: parked
    assert rec in core.parked and rec.parked == {"B", "C"}
    core.add_hop("B", hb)
    core.retry_parked()
    assert hb.sent[-1] == (rec, frozenset({"B", "C"}))


def test_reforward_through_a_hop_that_already_answered_waits_again():
    core = _core()
    hb = HopP()
    core.add_hop("B", hb)
    core.add_hop("C", HopP())
    table = {"B": "B", "C": "C"}
    _routed(core, table, {"B", "C"})
    p = Pub()
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    rec = core.publish(pub, b"0", b"m", False, "h")
    core.hop_update(core.hops["B"], rec, ("hop", 1), ACCEPTED, False)  # B answered for itself
    table["C"] = "B"
    core.hop_lost("C")  # C's copy now goes through B, which must answer again
    assert p.outcomes == []
    core.hop_update(core.hops["B"], rec, ("hop", 2), ACCEPTED, False)
    assert p.outcomes and p.outcomes[0][1] is ACCEPTED


def test_forwarded_gid_seen_twice_is_delivered_once_and_answered_twice():
    core = _core()
    s = Sub()
    core.add_subscriber(s, "t", "c", "l", False)
    up1, up2 = Pub(), Pub()
    u1 = core.add_upstream("X", up1)
    u2 = core.add_upstream("Y", up2)
    gid = b"g" * 16
    rec = core.forwarded(u1, "d1", gid, "t", b"m", frozenset({"A"}), False, 0)
    again = core.forwarded(u2, "d2", gid, "t", b"m", frozenset({"A"}), False, 0)
    assert again is rec and len(s.sent) == 1
    sub = next(iter(core.topics["t"].values()))
    core.subscriber_update(sub, rec, None, ACCEPTED, True)
    assert ("d1", ACCEPTED, False) in up1.outcomes and ("d2", ACCEPTED, False) in up2.outcomes


def test_retrying_a_still_unroutable_record_keeps_it_waiting():
    core = _core()
    _routed(core, {}, {"C"})  # C has subscribers but no route
    p = Pub()
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    rec = core.publish(pub, b"0", b"m", False, "h")
    assert rec in core.parked
    for _ in range(3):
        core.retry_parked()  # the graph changed, but C is still unreachable
    assert p.outcomes == [] and rec.pending == 1 and rec in core.parked


def test_parked_record_follows_its_subscriber_to_another_router():
    core = _core()
    hb = HopP()
    core.add_hop("B", hb)
    table = {"B": "B"}
    remote = {"C"}
    _routed(core, table, remote)
    core.routes.moves = lambda topic, origin: {"B": frozenset({("client", "k")})} if origin == "C" and "B" in remote else {}
    p = Pub()
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    rec = core.publish(pub, b"0", b"m", False, "h")
    assert rec in core.parked and hb.sent == []
    remote.clear()
    remote.add("B")  # the key attached again at B: C no longer counts
    core.retry_parked()
    assert hb.sent == [(rec, frozenset({"B"}))] and rec not in core.parked
    core.hop_update(core.hops["B"], rec, ("hop", 1), ACCEPTED, False)
    assert p.outcomes and p.outcomes[0][1] is ACCEPTED


def test_parked_record_follows_a_moved_subscriber_while_others_still_wait_at_the_dead_router():
    """s1 left dead C for this router; s2 has not moved yet, so C still counts. s1 must get
    what was parked for C now (ahead of anything newer), not when s2 finally moves."""
    core = _core()
    _routed(core, {}, {"C"})  # C is unreachable and still has a subscriber (s2)
    moved: dict = {}
    core.routes.moves = lambda topic, origin: dict(moved) if origin == "C" else {}
    p = Pub()
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    old = core.publish(pub, b"0", b"old", False, "h0")
    s1 = Sub(credit=0)
    core.add_subscriber(s1, "t", "client", "s1", False)  # s1 resumed here
    moved["A"] = frozenset({("client", "s1")})
    core.retry_parked()
    new = core.publish(pub, b"1", b"new", False, "h1")  # newer: reaches s1 directly
    s1._credit = 10  # its credit arrives only now: the order is what was queued
    core.pump(core.topics["t"][("client", "s1")])
    assert [r for r, _, _ in s1.sent] == [old, new]
    assert old in core.parked and old.parked == {"C"}  # still waited for at C, for s2
    core.retry_parked()
    assert [r for r, _, _ in s1.sent] == [old, new]  # followed once, never twice


def test_suspended_subscriber_that_moved_hands_its_deliveries_over():
    core = _core()
    hb = HopP()
    core.add_hop("B", hb)
    _routed(core, {"B": "B"}, set())
    s, p = Sub(credit=0), Pub()
    sub, _ = core.add_subscriber(s, "t", "client", "k", False)
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    rec = core.publish(pub, b"0", b"m", False, "h")
    core.suspend_subscriber(sub, until=100.0)
    core.subscriber_moved(sub, "B")
    assert hb.sent == [(rec, frozenset({"B"}))]
    assert p.outcomes == [] and rec.pending == 1  # now waiting for B, not for the vanished link
    core.hop_update(core.hops["B"], rec, ("hop", 1), ACCEPTED, False)
    assert p.outcomes and p.outcomes[0][1] is ACCEPTED
    assert core.expire_suspended(1000.0) == []  # nothing left to expire: it moved


def test_hand_over_from_a_downstream_hop_is_answered_alone_and_its_settlement_settles_nothing_else():
    core = _core()
    hc = HopP()
    core.add_hop("C", hc)
    _routed(core, {"C": "C"}, {"C"})
    up_a, up_c = Pub(), Pub()
    ua = core.add_upstream("X", up_a)
    uc = core.add_upstream("C", up_c)
    s = Sub()
    gid = b"h" * 16
    rec = core.forwarded(ua, "from-x", gid, "t", b"m", frozenset({"C"}), False, 0)  # transit: X -> us -> C
    assert hc.sent == [(rec, frozenset({"C"}))]
    sub, _ = core.add_subscriber(s, "t", "client", "k", False)  # the key moved here from C...
    core.forwarded(uc, "from-c", gid, "t", b"m", frozenset({"A"}), False, 0, frozenset({("client", "k")}))
    assert len(s.sent) == 1 and s.sent[0][2] == 1  # ...and C handed its delivery over, marked
    core.subscriber_update(sub, rec, s.sent[0], ACCEPTED, True)
    assert up_c.outcomes == [("from-c", ACCEPTED, False)]  # answered for the key alone
    assert up_a.outcomes == []  # the record itself still waits for C
    core.upstream_settled(uc, rec)  # C settles its hand-over: the record stays
    assert rec.gid in core.records and not rec.publisher_settled


@pytest.mark.parametrize("queued", [True, False], ids=["queued", "in-flight"])
def test_answer_to_an_earlier_copy_does_not_cover_a_newer_copy_on_the_same_hop(queued: bool):
    """B answers the record it had; meanwhile a hand-over for a subscriber that moved to B
    went on the same hop (or waits there for credit). That answer must not count for the
    hand-over: the record would complete and the new copy would never be sent or waited for."""
    core = _core()
    hb = HopP()
    core.add_hop("B", hb)
    _routed(core, {"B": "B"}, {"B"})
    s, p = Sub(credit=0), Pub()
    sub, _ = core.add_subscriber(s, "t", "client", "k", False)
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    rec = core.publish(pub, b"0", b"m", False, "h")
    assert hb.sent == [(rec, frozenset({"B"}))]
    if queued:
        hb.credit = lambda: 0  # type: ignore[method-assign]
    core.suspend_subscriber(sub, until=100.0)
    core.subscriber_moved(sub, "B")  # k moved to B
    assert len(hb.sent) == (1 if queued else 2)
    core.hop_update(core.hops["B"], rec, ("hop", 1), ACCEPTED, False)  # B's answer for the first copy
    assert p.outcomes == [] and rec.pending == 1
    if queued:
        del hb.credit
        core.pump_hop(core.hops["B"])
    assert hb.sent == [(rec, frozenset({"B"}))] * 2  # the hand-over went after all
    core.hop_update(core.hops["B"], rec, ("hop", 2), ACCEPTED, False)
    assert p.outcomes and p.outcomes[0][1] is ACCEPTED


def test_record_parked_for_a_dead_router_goes_at_once_to_its_subscriber_that_moved():
    """No route to C, whose subscriber already attached at B: the record goes to B for that
    key now, not at the next change of the graph."""
    core = _core()
    hb = HopP()
    core.add_hop("B", hb)
    _routed(core, {"B": "B"}, {"C"})
    core.routes.moves = lambda topic, origin: {"B": frozenset({("client", "k")})} if origin == "C" else {}
    p = Pub()
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    rec = core.publish(pub, b"0", b"m", False, "h")
    assert rec in core.parked and rec.parked == {"C"}
    assert hb.sent == [(rec, frozenset({"B"}))] and hb.keys == [frozenset({("client", "k")})]


def test_moved_subscriber_gets_its_queue_in_publish_order_when_its_attach_completes():
    """Deliveries owed to a subscriber that moved here reach this router by several paths,
    the newest first; the root's stamps put them back in order before anything goes out."""
    core = _core()
    up = core.add_upstream("B", Pub())
    s = Sub()
    sub, _ = core.add_subscriber(s, "t", "client", "k", False)
    s._credit = 0  # its attach is not complete: nothing goes out yet
    newer = core.forwarded(up, "h2", b"n" * 16, "t", b"new", frozenset({"A"}), False, 0, born=200)
    older = core.forwarded(up, "h1", b"o" * 16, "t", b"old", frozenset({"A"}), False, 0,
                           frozenset({("client", "k")}), born=100)  # the hand-over, later
    s._credit = 10
    core.attach_completed(sub)
    assert [r for r, _, _ in s.sent] == [older, newer]
    assert [redelivery for _, _, redelivery in s.sent] == [1, 0]


def test_root_stamps_increase_even_if_the_wall_clock_steps_back():
    times = iter([500, 400, 400])
    core = Core("A", Settings(protocol=2), wall=lambda: next(times), routes=TestRoutes())
    pub = core.add_publisher(Pub(), "t", "cp", "lp", False)
    borns = [core.publish(pub, bytes([i]), b"m", False, i).born for i in range(3)]
    assert borns == [500, 501, 502]


def test_marker_goes_out_only_behind_the_deliveries_queued_before_it_and_survives_a_lost_hop():
    core = _core()
    hb, hc = HopP(), HopP()
    core.add_hop("B", hb)
    core.add_hop("C", hc)
    table = {"B": "B"}
    _routed(core, table, {"B"})
    rerouted: list = []
    core.routes.rerouted = rerouted
    hb.credit = lambda: 0  # type: ignore[method-assign]
    pub = core.add_publisher(Pub(), "t", "cp", "lp", False)
    rec = core.publish(pub, b"0", b"m", False, "h")
    assert [h.peer for h in core.marker_hops("B")] == ["B"]
    core.queue_marker(core.hops["B"], "mark")
    assert hb.sent == [] and hb.markers == []
    del hb.credit
    core.pump_hop(core.hops["B"])
    assert hb.sent == [(rec, frozenset({"B"}))] and hb.markers == ["mark"]
    hb.credit = lambda: 0  # type: ignore[method-assign]
    core.queue_marker(core.hops["B"], "mark2")
    table["B"] = "C"
    core.hop_lost("B")
    assert hc.sent == [(rec, frozenset({"B"}))] and rerouted == ["mark2"]  # re-routed after the record


def test_a_bounce_waiting_only_on_a_parked_destination_is_answered_once_that_is_dropped():
    """C handed back a destination that has no route from here either: its answer waits
    for the parked destination. When the retry finds nobody wants it any more, C must be
    answered; each of us waiting on the other's answer would hang both for good."""
    core = _core()
    hc = HopP()
    core.add_hop("C", hc)
    up_c = Pub()
    uc = core.add_upstream("C", up_c)
    _routed(core, {"C": "C", "E": "C"}, {"E", "X"})
    pub = core.add_publisher(Pub(), "t", "cp", "lp", False)
    rec = core.publish(pub, b"0", b"m", False, "h")
    assert rec in core.parked  # X: no route
    core.routes.remote = lambda topic: {"E"}  # X's subscriber moved; the retry drops X
    core.retry_parked()
    core.forwarded(uc, "from-c", rec.gid, "t", b"m", frozenset({"X"}), False, 0)  # C hands X back
    # Nobody wants X any more: it is not parked again, and C is answered at once.
    assert rec not in core.parked and up_c.outcomes == [("from-c", ACCEPTED, False)]


def _r2_held_at_c() -> tuple[Core, HopP, Pub, Any, Any, Any]:
    """C still routed A through B when r1 came from B: r1 went back. C's routes then changed
    (A via D) before r2 came: r2 waits at C."""
    core = _core(router_id="C")
    hb, hd, up = HopP(), HopP(), Pub()
    core.add_hop("B", hb)
    core.add_hop("D", hd)
    ub = core.add_upstream("B", up)
    table = {"A": "B"}
    _routed(core, table, set())
    r1 = core.forwarded(ub, "b1", b"1" * 16, "t", b"m1", frozenset({"A"}), False, 0)
    assert hb.sent == [(r1, frozenset({"A"}))]  # back to B: the only way to A it knows
    table["A"] = "D"
    r2 = core.forwarded(ub, "b2", b"2" * 16, "t", b"m2", frozenset({"A"}), False, 0)
    assert hd.sent == [] and r2.pending == 1  # held here
    return core, hd, up, ub, r1, r2


def test_newer_delivery_waits_behind_older_ones_that_went_back_to_its_upstream():
    core, hd, _, ub, r1, r2 = _r2_held_at_c()
    core.forwarded(ub, "b1again", r1.gid, "t", b"m1", frozenset({"A"}), False, 0)  # B sends r1 on again
    assert hd.sent == [(r1, frozenset({"A"})), (r2, frozenset({"A"}))]


def test_held_delivery_goes_when_the_older_one_is_answered_instead():
    core, hd, up, _, r1, r2 = _r2_held_at_c()
    core.hop_update(core.hops["B"], r1, ("hop", 1), ACCEPTED, False)  # B took A over and delivered r1
    assert hd.sent == [(r2, frozenset({"A"}))]
    core.hop_update(core.hops["D"], r2, ("hop", 1), ACCEPTED, False)
    assert [o[0] for o in up.outcomes] == ["b1", "b2"]


def test_root_sends_what_came_back_in_publish_order_with_what_it_held_meanwhile():
    """B's link to A came back while r1 and r2 were on their way round through C, which
    sends them back now that A is behind B again. Neither they nor r3, published
    meanwhile, may reach A out of publish order."""
    core = _core(router_id="B")
    ha, hc = HopP(), HopP()
    core.add_hop("A", ha)
    core.add_hop("C", hc)
    uc = core.add_upstream("C", Pub())
    table = {"A": "C"}
    _routed(core, table, {"A"})
    pub = core.add_publisher(Pub(), "t", "cp", "lp", False)
    r1, r2 = (core.publish(pub, bytes([i]), b"m", False, f"h{i}") for i in (1, 2))
    assert [r for r, _ in hc.sent] == [r1, r2]
    table["A"] = "A"
    core.forwarded(uc, "c1", r1.gid, "t", b"m", frozenset({"A"}), False, 0)  # C hands r1 back
    r3 = core.publish(pub, b"3", b"m", False, "h3")
    assert ha.sent == []  # r2 is still out with C: nothing newer overtakes it
    core.forwarded(uc, "c2", r2.gid, "t", b"m", frozenset({"A"}), False, 0)
    assert [r for r, _ in ha.sent] == [r1, r2, r3]


def test_a_delivery_routed_here_before_the_root_heard_of_a_move_follows_the_subscriber():
    """k moved from here to D (its client reconnected there while we live). C had not
    heard of it yet and routed a delivery here: answered without k, k would never get it."""
    clock = [0.0]
    core = Core("A", Settings(protocol=2), clock=lambda: clock[0], routes=TestRoutes())
    hd = HopP()
    core.add_hop("D", hd)
    _routed(core, {"D": "D"}, set())
    up_c = Pub()
    uc = core.add_upstream("C", up_c)
    s = Sub()
    sub, _ = core.add_subscriber(s, "t", "client", "k", False)
    core.suspend_subscriber(sub, until=100.0)
    core.subscriber_moved(sub, "D")
    rec = core.forwarded(uc, "from-c", b"r" * 16, "t", b"m", frozenset({"A"}), False, 0)
    assert hd.sent == [(rec, frozenset({"D"}))] and hd.keys == [frozenset({("client", "k")})]
    assert up_c.outcomes == []  # not before D answers for k
    core.hop_update(core.hops["D"], rec, ("hop", 1), ACCEPTED, False)
    assert up_c.outcomes == [("from-c", ACCEPTED, False)]
    clock[0] = 31.0  # past the subscriber grace (30 s): roots route to D themselves
    core.forwarded(uc, "later", b"s" * 16, "t", b"m", frozenset({"A"}), False, 0)
    assert len(hd.sent) == 1 and core.moved_away == {}


def test_publishers_get_no_credit_before_the_network_told_us_its_subscribers():
    """A router with neighbours that came up alone (or restarted while they were away)
    does not know who subscribes: a publish taken then would be accepted for nobody."""
    core = Core("A", Settings(protocol=2, max_in_flight=10, link_credit=100), clock=lambda: 0.0, unsynced=True)
    p = Pub()
    core.add_publisher(p, "t", "cp", "lp", False)
    core.replenish()
    assert p.credit_grants == [] and core.unsynced
    core.synced()  # the first neighbour's sync came in
    assert p.credit_grants == [1] and not core.unsynced
