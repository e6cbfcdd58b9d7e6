"""What a router tells every router about a consumer group member that closed there, and
what a router that took an older attach of it back from its journal does with that
(``router/core/inquiry.py``, ``Ended``). Pure: one core, a clock the test moves, a routes
port that records what the core sends."""

from __future__ import annotations

from typing import Any

from once.records.membership import GroupId, Member
from once.records.owed import Said
from once.router.config import Settings
from once.router.core.facade import Core
from once.router.core.messages import Answer, Ask, Ended, Handed, Told
from once.router.core.ports import Alone
from support.batched import batched


class Sub:
    """A subscriber's link that takes everything (none of these tests delivers)."""

    def credit(self) -> int:
        return 100

    def deliver(self, record: Any, settled: bool, redelivery: int) -> Any:
        return record

    def settle(self, handle: Any) -> None:
        pass

    def draining(self) -> bool:
        return False

    def drained(self) -> None:
        pass

KEY = ("c", "g|m1")
GROUP = GroupId("g")


class Routes(Alone):
    """Two other routers, B and C, both reachable; what the core sends them is kept."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, tuple[Any, ...]]] = []
        self.members: dict[GroupId, tuple[Member, ...]] = {}  # group members at B and C

    def group_members(self, topic: str) -> dict[GroupId, tuple[Member, ...]]:
        return self.members

    def remote_routers(self, topic: str) -> set[str]:
        return {m.router for ms in self.members.values() for m in ms}

    def keys_at(self, topic: str, router: str) -> frozenset[tuple[str, str]]:
        return frozenset(m.key for ms in self.members.values() for m in ms if m.router == router)

    def send_to(self, router: str, items: tuple[Any, ...]) -> None:
        self.sent.append((router, items))

    def reachable(self) -> set[str]:
        return {"B", "C"}

    def all_routers(self) -> set[str]:
        return {"B", "C"}


def _core(now: list[float]) -> tuple[Core, Routes]:
    routes = Routes()
    return batched(Core("A", Settings(), clock=lambda: now[0], routes=routes)), routes


def test_a_restored_member_that_closed_elsewhere_after_it_attached_here_moves_there():
    now = [1.0]
    core, _ = _core(now)
    core.adopt_subscriber("orders", *KEY, until=31.0, group=GROUP, since=100)  # (from our journal)
    core.control("B", (Ended(KEY, 50),))  # an older attach of it closed at B: ours is newer
    assert core.ended_elsewhere() == [] and core.subscribed("orders", KEY)
    core.control("C", (Ended(KEY, 200),))  # it resumed at C after it attached here, and closed there
    moved = core.ended_elsewhere()
    assert [s.key for s in moved] == [KEY] and not core.subscribed("orders", KEY)
    assert core.copies is not None and core.copies.dest.departed[KEY][0] == "C"  # answered ``moved``, to C
    assert core.ended_elsewhere() == []  # once


def test_a_member_attached_here_stays_whatever_another_router_says():
    now = [1.0]
    core, _ = _core(now)
    core.add_subscriber(Sub(), "orders", *KEY, False, group=GROUP, since=100)
    core.control("B", (Ended(KEY, 200),))
    assert core.ended_elsewhere() == [] and core.live_here(KEY)


def test_a_member_that_closes_here_is_told_to_every_router_again_until_its_time_ends():
    now = [1.0]
    core, routes = _core(now)
    sub, _ = core.add_subscriber(Sub(), "orders", *KEY, False, group=GROUP, since=100)
    core.remove_subscriber(sub)
    core.member_had(KEY)  # (the network asks it when a subscription of ours ends)
    core.after_batch()
    told = {router for router, items in routes.sent if Ended(KEY, 100) in items}
    assert told == {"B", "C"}
    s = Settings()
    until = 1.0 + max(s.router_dead_after, s.publisher_grace, s.subscriber_grace)
    rounds = 0
    while now[0] < until + 2 * s.router_dead_after:
        now[0] += 0.25
        routes.sent.clear()
        core.expire(now[0])
        core.after_batch()
        if any(Ended(KEY, 100) in items for _, items in routes.sent):
            rounds += 1
            assert now[0] < until
    assert rounds >= int((until - 1.0) / s.router_dead_after) - 1


class Pub:
    def grant(self, credit: int) -> None:
        pass

    def outcome(self, handle: Any, outcome: Any, settle: bool) -> None:
        pass


def test_a_root_asks_about_what_a_resuming_publisher_names_before_it_comes_and_keeps_the_answers():
    """The publisher resends what its map names as its credit allows, maybe long after:
    the root asks every router at once, asks again every ``router_dead_after`` until the
    message comes, and what it was told then stands when it does."""
    now = [1.0]
    core, routes = _core(now)
    member = Member(("c", "g|m2"), "B", 5)
    routes.members = {GROUP: (member,)}
    pub = core.add_publisher(Pub(), "orders", "p", "out", True, incarnation=7)
    gid = pub.gids.gid(b"t1")
    core.publisher_resume_map(pub, {b"t1": None})
    core.after_batch()
    asked = {router for router, items in routes.sent for i in items if type(i) is Ask and i.gid == gid}
    assert asked == {"B", "C"}
    # B says the member there had it (it resumed there with it in its map); C knows nothing
    core.control("B", (Told(gid, ((member.key, GROUP, "B", True),)),))
    core.control("C", (Told(gid, ()),))
    routes.sent.clear()
    now[0] += Settings().router_dead_after
    core.expire(now[0])
    core.after_batch()
    assert {router for router, items in routes.sent for i in items if type(i) is Ask and i.gid == gid} == {"B", "C"}
    assert core.copies is not None
    assert core.copies.inquiry.early[gid].heard == [(member.key, GROUP, "B", True)]
    # it comes; this time B does not say so (it forgot), and the root keeps the member that had it
    record = core.publish(pub, b"t1", b"m", False, "h1")
    assert record is not None and record.resent and gid not in core.copies.inquiry.early
    core.control("B", (Told(gid, ()),))
    core.control("C", (Told(gid, ()),))
    assert record.chosen is not None and set(record.chosen) == {member.key}


def test_a_router_leaving_hands_over_what_a_member_that_closed_there_had_and_the_others_answer_for_it():
    """Only the router a member closed at knows what it had (``Destination.left_had``). Left
    with it, a root still asking hears nobody had it and gives it to a second member (fresh
    ``--elastic`` churn seed 969268099062): leaving, it hands it to every router, and each
    keeps it, answers for it and tells it as its own for as long as the leaver would have."""
    now = [1.0]
    leaver, routes = _core(now)
    assert leaver.copies is not None
    leaver.copies.endings.left(KEY, GROUP, (b"g1", b"g2"), until=9.0)  # (it closed here)
    leaver.hand_over()
    leaver.after_batch()
    handed = {router: i for router, items in routes.sent for i in items if type(i) is Handed}
    assert set(handed) == {"B", "C"}
    item = handed["B"]
    assert (item.key, item.group, set(item.gids), item.ttl) == (KEY, GROUP, {b"g1", b"g2"}, 8.0)

    # a member that ended there having had nothing: that it ended goes too (a router that
    # took an older attach of it back from its journal stops waiting for it)
    routes.sent.clear()
    leaver.copies.endings.gone[("c", "g|m2")] = (70, 20.0)
    leaver.copies.endings.member_groups[("c", "g|m2")] = GROUP
    leaver.hand_over()
    leaver.after_batch()
    assert Handed(("c", "g|m2"), GROUP, (), 19.0, 70) in [i for _, items in routes.sent for i in items]

    keeper, kept = _core(now)  # (as B, say: its routes are "the others")
    keeper.control("A", (item,))
    keeper.after_batch()
    told = {router for router, items in kept.sent for i in items
            if type(i) is Answer and i.gid == b"g1" and i.said == ((KEY, Said.ACCEPTED, None),)}
    assert told >= {"B", "C"}  # (every router: one of them may be the root)
    kept.sent.clear()
    keeper.control("C", (Ask(b"g1", "orders", 5),))  # a root asks
    keeper.after_batch()
    answers = [i for router, items in kept.sent if router == "C" for i in items if type(i) is Told]
    assert [m[:2] for a in answers for m in a.members if m[3]] == [(KEY, GROUP)]
    # told again every ``router_dead_after`` while it is kept; then forgotten
    s = Settings()
    kept.sent.clear()
    now[0] += s.router_dead_after
    keeper.expire(now[0])
    keeper.after_batch()
    assert any(type(i) is Answer and i.gid == b"g2" for _, items in kept.sent for i in items)
    now[0] = 9.0 + 2 * s.router_dead_after
    keeper.expire(now[0])
    assert keeper.copies is not None and KEY not in keeper.copies.dest.left_had
