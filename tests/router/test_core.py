"""The forwarding core through a test adaptor: no sockets, no engine."""

from __future__ import annotations

from typing import Any

from once.router.config import Settings
from once.router.core import ACCEPTED, RELEASED, Core, Outcome, OutcomeKind, TagInUse
from support.batched import batched
from support.routes import TestRoutes


class Pub:
    def __init__(self) -> None:
        self.grants: list[int] = []
        self.outcomes: list[tuple[Any, Any, bool]] = []

    def grant(self, credit: int) -> None:
        self.grants.append(credit)

    def outcome(self, handle: Any, outcome: Any, settle: bool) -> None:
        self.outcomes.append((handle, outcome, settle))


class Sub:
    def __init__(self, credit: int = 100) -> None:
        self.room = credit
        self.sent: list[tuple[Any, bool, int]] = []
        self.settled: list[Any] = []

    def credit(self) -> int:
        return self.room

    def deliver(self, record: Any, settled: bool, redelivery: int) -> Any:
        self.room -= 1
        self.sent.append((record, settled, redelivery))
        return ("handle", len(self.sent))

    def settle(self, handle: Any) -> None:
        self.settled.append(handle)

    def draining(self) -> bool:
        return False

    def drained(self) -> None:
        pass

    def activated(self) -> None:
        pass

    def stolen(self) -> None:
        pass

    def gids(self) -> list[bytes]:
        return [r.gid for r, _, _ in self.sent]


def _core(router_id: str = "A", **kw: Any) -> Core:
    return batched(Core(router_id, Settings(**kw), clock=lambda: 0.0, routes=TestRoutes()))


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
    assert p.grants == [1]  # one message first: its size is not known yet
    core.publish(pub, b"0", b"m", False, 0)
    core.replenish()
    assert p.grants == [1, 9]  # the window's room: 10 in flight at most
    for i in range(1, 10):
        core.publish(pub, b"%d" % i, b"m", False, i)
    core.after_batch()
    assert p.grants == [1, 9] and len(core.records) == 10


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
    s.room = 5
    core.pump(sub)
    assert [r.payload for r, _, _ in s.sent] == [b"0", b"1", b"2", b"3", b"4"]


def test_same_subscriber_key_displaces_the_old_link():
    core = _core()
    s1, s2 = Sub(), Sub()
    old, _ = core.add_subscriber(s1, "t", "c", "l", False)
    new, displaced = core.add_subscriber(s2, "t", "c", "l", False)
    assert displaced is old and not old.attached and core.topics["t"][("c", "l")] is new


def test_root_stamps_increase_even_if_the_wall_clock_steps_back():
    times = iter([500, 400, 400])
    core = batched(Core("A", Settings(), wall=lambda: next(times), routes=TestRoutes()))
    pub = core.add_publisher(Pub(), "t", "cp", "lp", False)
    borns = [core.publish(pub, bytes([i]), b"m", False, i).born for i in range(3)]
    assert borns == [500, 501, 502]


def test_publishers_get_no_credit_before_the_network_told_us_its_subscribers():
    """A router with neighbours that came up alone (or restarted while they were away)
    does not know who subscribes: a publish taken then would be accepted for nobody."""
    core = batched(Core("A", Settings(max_in_flight=10, link_credit=100), clock=lambda: 0.0, unsynced=True))
    p = Pub()
    core.add_publisher(p, "t", "cp", "lp", False)
    core.replenish()
    assert p.grants == [] and core.unsynced
    core.synced()  # the first neighbour's sync came in
    assert p.grants == [1] and not core.unsynced
