"""Resumption in the core (issue 4): incarnations, adoption, resume maps, placeholders."""

from __future__ import annotations

from typing import Any

from once.records.gid import gid_from_prefix, gid_prefix
from once.records.table import SubState
from once.router.config import Settings
from once.router.core import ACCEPTED, Core
from once.router.core.messages import Answer, Copy, CopyTarget
from support.batched import batched
from support.routes import TestRoutes
from test_core import Pub, Sub, _core

K = ("client", "k")


class Routes(TestRoutes):
    """Router X (a root that dies) and B, reached directly, where subscribers ``at_b`` live;
    what the core sends routers is kept."""

    def __init__(self) -> None:
        super().__init__()
        self.at_b: frozenset[tuple[str, str]] = frozenset()
        self.sent: list[tuple[str, tuple[Any, ...]]] = []

    def remote_routers(self, topic: str) -> set[str]:
        return {"B"} if self.at_b else set()

    def keys_at(self, topic: str, router: str) -> frozenset:
        return self.at_b if router == "B" else frozenset()

    def homes(self, keys: Any) -> dict[str, set]:
        there = set(keys) & self.at_b
        return {"B": there} if there else {}

    def route(self, dests: set[str], exclude: str | None) -> tuple[dict[str, set[str]], set[str]]:
        return ({"B": {"B"}} if "B" in dests else {}), set(dests) - {"B"}

    def send_to(self, router: str, items: tuple[Any, ...]) -> None:
        self.sent.append((router, items))

    def reachable(self) -> set[str]:
        return {"B"}


class HopPort:
    def __init__(self) -> None:
        self.copies: list[Copy] = []

    def credit(self) -> int:
        return 100

    def copy(self, copy: Copy) -> None:
        self.copies.append(copy)


def _net_core() -> tuple[Core, Routes]:
    routes = Routes()
    return batched(Core("A", Settings(), clock=lambda: 0.0, routes=routes)), routes


def _copy_from_x(core: Core, gid: bytes, keys: frozenset) -> None:
    """Root X's copy of message ``gid`` for ``keys`` here, the first of its stream to us."""
    up = core.add_upstream("X", Pub())
    core.copy_arrived(up, Copy(gid, "t", b"m", False, 0, "X", b"X/1", 1, (CopyTarget("A", keys, 1, 1),), frozenset({"X"})))
    core.after_batch()


def test_fresh_attaches_get_random_incarnations_and_a_resume_keeps_its_own():
    core = _core()
    a = core.add_publisher(Pub(), "t", "c", "l", False)
    b = core.add_publisher(Pub(), "t", "c", "l", False)
    assert a.incarnation != b.incarnation and a.incarnation > 0
    c = core.add_publisher(Pub(), "t", "c", "l", False, incarnation=a.incarnation)
    ra = core.publish(c, b"\x07", b"m", False, "h")
    assert ra.gid == gid_from_prefix(gid_prefix("c", "l", a.incarnation), b"\x07")


def test_suspended_publisher_keeps_its_deliveries_unsettled_until_its_grace_ends():
    core = _core()
    s = Sub()
    sub, _ = core.add_subscriber(s, "t", "cs", "ls", False)
    pub = core.add_publisher(Pub(), "t", "c", "l", settle_second=True)
    rec = core.publish(pub, b"0", b"m", False, "h")
    core.suspend_publisher(pub, until=10.0)
    core.subscriber_update(sub, rec, s.sent[0], ACCEPTED, False)
    assert s.settled == [] and rec.gid in core.records  # a resent copy would still merge with it
    core.expire_suspended(5.0)
    assert s.settled == []
    core.expire_suspended(10.0)
    assert s.settled == [("handle", 1)] and len(core.records) == 0


def test_resumed_publisher_adopts_its_record_and_nothing_is_delivered_twice():
    core = _core()
    s = Sub()
    sub, _ = core.add_subscriber(s, "t", "cs", "ls", False)
    old = core.add_publisher(Pub(), "t", "c", "l", settle_second=True)
    rec = core.publish(old, b"0", b"m", False, "h-old")
    core.suspend_publisher(old, until=10.0)
    p = Pub()
    new = core.add_publisher(p, "t", "c", "l", settle_second=True, incarnation=old.incarnation)
    assert core.publisher_resume_map(new, {b"0": None, b"1": None}) == {b"0": None}  # b"1": resend it
    again = core.publish(new, b"0", b"", False, "h-new", resumed=True)
    assert again is rec and len(s.sent) == 1
    core.subscriber_update(sub, rec, s.sent[0], ACCEPTED, False)
    assert p.outcomes == [("h-new", ACCEPTED, False)]
    core.suspend_publisher(new, until=10.0)  # gone again before it settled
    newer = core.add_publisher(Pub(), "t", "c", "l", settle_second=True, incarnation=old.incarnation)
    assert core.publisher_resume_map(newer, {b"0": None}) == {b"0": ACCEPTED}  # known, with its outcome
    core.publish(newer, b"0", b"", True, "h-settle", resumed=True)  # it adopts the outcome and settles
    assert s.settled == [("handle", 1)] and len(core.records) == 0


def test_a_resumed_transfer_nobody_knows_is_ignored():
    core = _core()
    pub = core.add_publisher(Pub(), "t", "c", "l", False, incarnation=5)
    assert core.publish(pub, b"9", b"", True, "h", resumed=True) is None and len(core.records) == 0


def test_resuming_subscriber_map_answers_for_it_and_placeholders_stop_late_copies():
    core = _core()
    s1 = Sub()
    sub, _ = core.add_subscriber(s1, "t", "cs", "ls", False)
    p = Pub()
    pub = core.add_publisher(p, "t", "c", "l", False)
    rec = core.publish(pub, b"0", b"m", False, "h")
    late_gid = gid_from_prefix(pub.gids.prefix, b"1")
    s2 = Sub()
    new, _ = core.add_subscriber(s2, "t", "cs", "ls", False)  # the same key comes back
    ours = core.resume_subscriber(new, {rec.gid: ACCEPTED, late_gid: ACCEPTED}, until=30.0)
    assert set(ours) == {rec.gid, late_gid}
    assert p.outcomes == [("h", ACCEPTED, True)]  # its word is its acceptance
    core.pump(new)
    assert s2.sent == []  # never sent again
    late = core.publish(pub, b"1", b"m", False, "h1")
    assert late.gid == late_gid and s2.sent == [] and late.states[new] is SubState.ACCEPTED
    assert p.outcomes[-1] == ("h1", ACCEPTED, True)
    core.expire_suspended(31.0)
    assert len(core.placeholders) == 0


def test_publisher_resuming_where_a_copy_waits_becomes_its_root():
    """Root X sent us a copy for our subscriber and died; its publisher resumes here. The
    record is ours to answer now: the resent message is not delivered again, and the
    publisher hears accepted once our subscriber accepts."""
    core, _ = _net_core()
    s = Sub()
    sub, _ = core.add_subscriber(s, "t", "cs", "ls", False)
    gid = gid_from_prefix(gid_prefix("c", "l", 42), b"0")
    _copy_from_x(core, gid, frozenset({("cs", "ls")}))
    assert len(s.sent) == 1
    core.upstream_lost("X")  # the root died
    p = Pub()
    pub = core.add_publisher(p, "t", "c", "l", True, incarnation=42)
    assert core.publisher_resume_map(pub, {b"0": None}) == {b"0": None}
    rec = core.publish(pub, b"0", b"m", False, "h", resumed=True)
    assert rec is not None and rec.gid == gid and rec.local and len(s.sent) == 1
    core.subscriber_update(sub, rec, s.sent[0], ACCEPTED, False)
    assert p.outcomes == [("h", ACCEPTED, False)]


def test_adopting_root_sends_to_routers_the_old_root_had_not_reached():
    """X's copy reached us, not B, whose subscriber k attached meanwhile: the publisher
    resuming here makes us root, we send B a copy, and the publisher hears accepted only
    once B answers for k."""
    core, routes = _net_core()
    hb = HopPort()
    core.add_hop("B", hb)
    s = Sub()
    core.add_subscriber(s, "t", "cs", "ls", False)
    gid = gid_from_prefix(gid_prefix("c", "l", 1), b"0")
    _copy_from_x(core, gid, frozenset({("cs", "ls")}))
    core.upstream_lost("X")
    routes.at_b = frozenset({K})
    core.membership_changed()
    core.follow_moved({"A", "B"})
    p = Pub()
    pub = core.add_publisher(p, "t", "c", "l", True, incarnation=1)
    rec = core.publish(pub, b"0", b"m", False, "h", resumed=True)
    assert rec is not None
    core.subscriber_update(core.topics["t"][("cs", "ls")], rec, s.sent[0], ACCEPTED, False)
    [copy] = hb.copies
    [target] = copy.targets
    assert copy.gid == gid and copy.root == "A" and (target.router, target.keys) == ("B", frozenset({K}))
    assert p.outcomes == []  # B has not answered
    core.control("B", (Answer(gid, copy.stream, target.position, ()),))
    assert p.outcomes == [("h", ACCEPTED, False)]


def test_adopting_root_delivers_to_the_old_roots_subscriber_that_moved_here():
    """X died with the message copied to us but not yet given to its own subscriber k. k
    and the publisher both resumed here: k gets it (marked: it may have had it) before the
    publisher hears accepted, although the copy was not for k."""
    core, _ = _net_core()
    s_here = Sub()
    here, _ = core.add_subscriber(s_here, "t", "cs", "ls", False)
    gid = gid_from_prefix(gid_prefix("c", "l", 7), b"0")
    _copy_from_x(core, gid, frozenset({("cs", "ls")}))
    core.upstream_lost("X")
    s = Sub()
    sub, _ = core.add_subscriber(s, "t", *K, False)  # k moved here from X
    core.routes.moves = lambda topic, origin: {"A": frozenset({K})} if origin == "X" else {}
    p = Pub()
    pub = core.add_publisher(p, "t", "c", "l", True, incarnation=7)
    assert core.publisher_resume_map(pub, {b"0": None}) == {b"0": None}
    rec = core.publish(pub, b"0", b"m", False, "h", resumed=True)
    assert rec is not None
    assert [r.gid for r, _, _ in s.sent] == [gid] and s.sent[0][2] == 1  # marked: k may have had it
    core.subscriber_update(here, rec, s_here.sent[0], ACCEPTED, False)
    assert p.outcomes == []
    core.subscriber_update(sub, rec, s.sent[0], ACCEPTED, False)
    assert p.outcomes == [("h", ACCEPTED, False)]


def test_a_copy_complete_here_is_still_in_doubt_for_a_publisher_resuming_here():
    """X copied it to us and died before its own subscriber k had it. Our subscriber
    accepted, so our part is complete, but that says nothing of k: the resuming publisher
    hears "in doubt" and sends it again, and k (now here) gets it before accepted."""
    core, _ = _net_core()
    s_here = Sub()
    here, _ = core.add_subscriber(s_here, "t", "cs", "ls", False)
    gid = gid_from_prefix(gid_prefix("c", "l", 9), b"0")
    _copy_from_x(core, gid, frozenset({("cs", "ls")}))
    rec = core.records.get(gid)
    assert rec is not None
    core.subscriber_update(here, rec, s_here.sent[0], ACCEPTED, False)
    assert rec.pending == 0
    core.upstream_lost("X")
    s = Sub()
    sub, _ = core.add_subscriber(s, "t", *K, False)  # k moved here from X
    core.routes.moves = lambda topic, origin: {"A": frozenset({K})} if origin == "X" else {}
    p = Pub()
    pub = core.add_publisher(p, "t", "c", "l", True, incarnation=9)
    assert core.publisher_resume_map(pub, {b"0": None}) == {b"0": None}
    core.publish(pub, b"0", b"m", False, "h", resumed=True)
    assert [r.gid for r, _, _ in s.sent] == [gid] and p.outcomes == []
    core.subscriber_update(sub, rec, s.sent[0], ACCEPTED, False)
    assert p.outcomes == [("h", ACCEPTED, False)]
