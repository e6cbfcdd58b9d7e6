"""Consumer groups in the core, one router, through test adaptors (no sockets)."""

from __future__ import annotations

from typing import Any

from once.records.membership import Chooser, GroupId, Member, Table, key_slot
from once.router.config import Settings
from once.router.core import ACCEPTED, RELEASED, Core
from support.batched import batched
from support.routes import TestRoutes
from test_core import Pub, Sub

G = GroupId("work")


def _core(**kw: Any) -> Core:
    # a test message "key:rest" carries the key "key"
    return batched(Core("A", Settings(**kw), clock=lambda: 0.0,
                message_key=lambda payload: payload.split(b":")[0] if b":" in payload else None, routes=TestRoutes()))


def _accept_all(core: Core, sub: Any, port: Sub) -> int:
    n = 0
    for record, _, _ in list(port.sent):
        if record.states.get(sub) is not None and record.gid in core.records:
            core.subscriber_update(sub, record, None, ACCEPTED, True)
            n += 1
    return n


def test_each_message_goes_to_one_member_and_every_plain_subscriber():
    core = _core()
    m1, m2, plain, p = Sub(), Sub(), Sub(), Pub()
    a, _ = core.add_subscriber(m1, "t", "c1", "w|global", False, G)
    b, _ = core.add_subscriber(m2, "t", "c2", "w|global", False, G)
    s, _ = core.add_subscriber(plain, "t", "c3", "all", False)
    pub = core.add_publisher(p, "t", "cp", "lp", settle_second=False)
    for i in range(10):
        core.publish(pub, str(i).encode(), b"m%d" % i, False, i)
    assert len(plain.sent) == 10
    assert len(m1.sent) + len(m2.sent) == 10
    assert {r.gid for r, _, _ in m1.sent}.isdisjoint({r.gid for r, _, _ in m2.sent})
    assert len(m1.sent) == len(m2.sent) == 5  # nobody answered: the load stays even
    assert all(redelivery == 0 for _, _, redelivery in m1.sent + m2.sent)
    _accept_all(core, s, plain)
    assert p.outcomes == []  # the members have not answered yet
    _accept_all(core, a, m1)
    _accept_all(core, b, m2)
    assert [o for _, o, _ in p.outcomes] == [ACCEPTED] * 10
    assert len(core.records) == 0


def test_a_member_that_answers_is_given_more_than_one_that_does_not():
    core = _core()
    fast, slow, p = Sub(1000), Sub(1000), Pub()
    f, _ = core.add_subscriber(fast, "t", "c1", "w", False, G)
    core.add_subscriber(slow, "t", "c2", "w", False, G)
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    for i in range(100):
        core.publish(pub, str(i).encode(), b"m", False, i)
        _accept_all(core, f, fast)
    assert len(fast.sent) > 90 and len(slow.sent) < 10


def test_messages_with_one_key_stay_on_one_member_in_order():
    core = _core()
    ports = [Sub() for _ in range(3)]
    for i, port in enumerate(ports):
        core.add_subscriber(port, "t", f"c{i}", "w", False, G)
    p = Pub()
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    for i in range(30):
        core.publish(pub, str(i).encode(), b"%s:%d" % (b"abc"[i % 3:i % 3 + 1], i), False, i)
    for key in (b"a", b"b", b"c"):
        holders = [port for port in ports if any(r.payload.startswith(key + b":") for r, _, _ in port.sent)]
        assert len(holders) == 1
        seq = [int(r.payload.split(b":")[1]) for r, _, _ in holders[0].sent if r.payload.startswith(key + b":")]
        assert seq == sorted(seq) and len(seq) == 10


def test_a_released_message_goes_to_another_member_marked_and_back_once_every_member_released_it():
    """A member that releases a message (it cannot take it now) has it go to a member that
    has not had it, marked, by the rule of the first choice less those chosen before (a
    router the publisher resumes at chooses the same); once every member released it, it
    goes back to one of them (``docs/protocol.md`` section 8)."""
    core = _core()
    m1, m2, p = Sub(), Sub(), Pub()
    a, _ = core.add_subscriber(m1, "t", "c1", "w", False, G)
    b, _ = core.add_subscriber(m2, "t", "c2", "w", False, G)
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    rec = core.publish(pub, b"0", b"m", False, "h")
    first, other = (a, m1), (b, m2)
    if not m1.sent:
        first, other = other, first
    handle = ("handle", 1)
    core.subscriber_update(first[0], rec, handle, RELEASED, False)
    assert first[1].settled == [handle]  # the released delivery is settled: it is done there
    assert len(first[1].sent) == 1  # not again to it
    assert len(other[1].sent) == 1 and other[1].sent[0][2] == 1  # to the other, marked as a possible repeat
    assert p.outcomes == []
    core.subscriber_update(other[0], rec, ("handle", 2), RELEASED, False)  # everyone released it
    assert len(other[1].sent) + len(first[1].sent) == 3  # back to one of them, marked
    back = first if len(first[1].sent) == 2 else other
    assert back[1].sent[-1][2] >= 1
    assert p.outcomes == []
    core.subscriber_update(back[0], rec, None, ACCEPTED, True)
    assert p.outcomes == [("h", ACCEPTED, True)]
    assert len(core.records) == 0


def test_the_only_member_gets_a_released_message_again():
    core = _core()
    m1, p = Sub(), Pub()
    a, _ = core.add_subscriber(m1, "t", "c1", "w", False, G)
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    rec = core.publish(pub, b"0", b"m", False, "h")
    core.subscriber_update(a, rec, m1.sent[0], RELEASED, False)
    assert len(m1.sent) == 2 and m1.sent[1][2] == 1


def test_a_member_that_leaves_hands_what_it_had_not_accepted_to_another():
    core = _core()
    m1, m2, p = Sub(), Sub(), Pub()
    a, _ = core.add_subscriber(m1, "t", "c1", "w", False, G)
    b, _ = core.add_subscriber(m2, "t", "c2", "w", False, G)
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    for i in range(6):
        core.publish(pub, str(i).encode(), b"m", False, i)
    assert len(m1.sent) == 3
    _accept_all(core, b, m2)
    core.remove_subscriber(a)
    assert len(m2.sent) == 6 and [r for _, _, r in m2.sent[3:]] == [1, 1, 1]
    assert len(p.outcomes) == 3
    _accept_all(core, b, m2)
    assert len(p.outcomes) == 6 and len(core.records) == 0


def test_a_group_whose_last_member_left_is_not_waited_for():
    core = _core()
    m1, plain, p = Sub(), Sub(), Pub()
    a, _ = core.add_subscriber(m1, "t", "c1", "w", False, G)
    s, _ = core.add_subscriber(plain, "t", "c3", "all", False)
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    rec = core.publish(pub, b"0", b"m", False, "h")
    core.subscriber_update(s, rec, None, ACCEPTED, True)
    core.remove_subscriber(a)
    assert p.outcomes == [("h", ACCEPTED, True)]
    core.publish(pub, b"1", b"m", False, "h1")
    assert len(plain.sent) == 2 and len(m1.sent) == 1


def test_two_groups_on_one_topic_each_get_every_message_once():
    core = _core()
    ports = {g: [Sub(), Sub()] for g in ("x", "y")}
    for g, pair in ports.items():
        for i, port in enumerate(pair):
            core.add_subscriber(port, "t", f"{g}{i}", "l", False, GroupId(g))
    p = Pub()
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    for i in range(8):
        core.publish(pub, str(i).encode(), b"m", False, i)
    for pair in ports.values():
        assert sorted(r.gid for port in pair for r, _, _ in port.sent) == sorted(r.gid for r in core.records.records.values())


def test_a_group_that_is_not_global_is_scoped_by_container():
    assert GroupId("w", "c1") != GroupId("w", "c2") != GroupId("w")


def test_the_choice_rule():
    members = Table([Member(("c", "b"), "B"), Member(("c", "a"), "A"), Member(("c", "c"), "C")])
    assert [m.key[1] for m in members] == ["a", "b", "c"]
    chooser = Chooser()
    # round-robin among equals, then the least loaded
    picks = []
    for _ in range(3):
        m = chooser.choose(G, members, None)
        chooser.given(m.key)
        picks.append(m.key[1])
    assert sorted(picks) == ["a", "b", "c"]
    chooser.answered(("c", "b"))
    assert chooser.choose(G, members, None).key == ("c", "b")
    # a key always maps to the same member, and to nobody once everyone had it
    assert len({chooser.choose(G, members, b"k").key for _ in range(5)}) == 1
    assert chooser.choose(G, members, b"k", exclude=[m.key for m in members]) is None


def test_a_key_stays_with_its_member_across_a_join_until_its_messages_are_answered():
    core = _core()
    first, p = Sub(), Pub()
    a, _ = core.add_subscriber(first, "t", "c1", "w", False, G)
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    # a key that the two-member table gives to the newcomer
    key = next(k for k in (b"k%d" % i for i in range(100))
               if Table([Member(("c1", "w"), "A"), Member(("c2", "w"), "A")])[
                   key_slot(k, 2)].key == ("c2", "w"))
    r1 = core.publish(pub, b"1", key + b":1", False, 1)
    newcomer = Sub()
    b, _ = core.add_subscriber(newcomer, "t", "c2", "w", False, G)
    core.publish(pub, b"2", key + b":2", False, 2)
    assert len(first.sent) == 2 and not newcomer.sent  # 1 is still out at the first member: 2 follows it
    core.subscriber_update(a, r1, None, ACCEPTED, True)
    _accept_all(core, a, first)
    core.publish(pub, b"3", key + b":3", False, 3)
    assert [r.payload for r, _, _ in newcomer.sent] == [key + b":3"]  # answered: the key moved on


class Member_(Sub):
    """A subscriber port that notes being made the active member."""

    def __init__(self) -> None:
        super().__init__()
        self.activations = 0

    def activated(self) -> None:
        self.activations += 1


def test_an_exclusive_group_gives_everything_to_the_member_that_waited_longest():
    core = _core()
    first, second, p = Member_(), Member_(), Pub()
    a, _ = core.add_subscriber(first, "t", "c2", "w", False, G, since=10, exclusive=True)
    b, _ = core.add_subscriber(second, "t", "c1", "w", False, G, since=20, exclusive=True)
    assert core.is_active(a) is True and core.is_active(b) is False
    assert first.activations == 1 and second.activations == 0
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    for i in range(5):
        core.publish(pub, str(i).encode(), b"%d" % i, False, i)
    assert [r.payload for r, _, _ in first.sent] == [b"0", b"1", b"2", b"3", b"4"] and not second.sent
    core.subscriber_update(a, first.sent[0][0], None, ACCEPTED, True)
    core.remove_subscriber(a)  # the active one goes: the standby takes over, in order
    assert second.activations == 1 and core.is_active(b) is True
    for i in range(5, 7):
        core.publish(pub, str(i).encode(), b"%d" % i, False, i)
    assert [(r.payload, m) for r, _, m in second.sent] == [(b"1", 1), (b"2", 1), (b"3", 1), (b"4", 1), (b"5", 0), (b"6", 0)]
    _accept_all(core, b, second)
    assert len(p.outcomes) == 7 and len(core.records) == 0


def test_a_member_asking_for_exclusive_makes_the_group_exclusive_and_plain_members_see_no_activation():
    core = _core()
    shared = Member_()
    a, _ = core.add_subscriber(shared, "t", "c1", "w", False, G, since=1)
    assert core.is_active(a) is None  # a shared group has no active member
    excl = Member_()
    b, _ = core.add_subscriber(excl, "t", "c2", "w", False, G, since=2, exclusive=True)
    assert core.is_active(a) is True and core.is_active(b) is False


def test_a_durable_groups_last_member_stands_in_until_a_member_attaches_again():
    t = [0.0]
    core = batched(Core("A", Settings(), clock=lambda: t[0], routes=TestRoutes()))
    first, p = Sub(), Pub()
    a, _ = core.add_subscriber(first, "t", "c1", "w", False, G)
    assert core.last_member(a)
    core.stand_in(a)  # its link went (not closed): the group lives on
    pub = core.add_publisher(p, "t", "cp", "lp", False)
    for i in range(3):
        core.publish(pub, str(i).encode(), b"%d" % i, False, i)
    t[0] = 3600.0
    assert core.expire_suspended(t[0]) == [] and p.outcomes == []  # they wait, however long
    later = Sub()
    b, _ = core.add_subscriber(later, "t", "c2", "w", False, G)
    assert not core.last_member(b)
    assert core.expire_suspended(t[0]) == [a]  # the stand-in gives way to the new member
    assert [r.payload for r, _, _ in later.sent] == [b"0", b"1", b"2"]
    _accept_all(core, b, later)
    assert len(p.outcomes) == 3 and len(core.records) == 0


def test_a_resumable_publishers_message_goes_to_the_same_member_whichever_router_chooses():
    def root(router_id: str) -> tuple[Core, Any]:
        core = batched(Core(router_id, Settings(), clock=lambda: 0.0, routes=TestRoutes()))
        for i in range(3):
            core.add_subscriber(Sub(), "t", f"c{i}", "w", False, G)
        # our client library carries its incarnation: the same gids at any router
        return core, core.add_publisher(Pub(), "t", "cp", "lp", False, incarnation=7)

    a, pa = root("A")
    first = [next(iter(a.publish(pa, b"%d" % i, b"m", False, i).chosen)) for i in range(12)]
    assert len(set(first)) > 1  # spread over the members
    b, pb = root("B")  # the publisher resumed here after A died: it resends the same tags
    other = b.add_publisher(Pub(), "t", "cq", "lq", False)
    for i in range(2):  # B's members have other work out: the load differs from A's
        b.publish(other, b"o%d" % i, b"o", False, ("o", i))
    again = [next(iter(b.publish(pb, b"%d" % i, b"m", False, i).chosen)) for i in range(12)]
    assert again == first
