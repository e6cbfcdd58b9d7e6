"""One router's part in the acceptance protocol (``docs/protocol.md``), on one ``Core`` fed
copies and control items by hand, with ports that keep what it does: what a root waits
for, sends again and settles; what a destination takes, holds, answers and forgets; what
a router in the middle passes on; what a root that took a message over chooses.

These are the behaviours the version 2 core tests asserted of several routers, on the
protocol the routers run (each docstring names the test it replaced); the same in the
in-process network: ``tests/sim/test_routing.py``."""


from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from once.records.gid import compute_gid
from once.records.membership import GroupId, Member, Table
from once.records.owed import Said
from once.router.config import Settings
from once.router.core import ACCEPTED, Core
from once.router.core.messages import Answer, Ask, Copy, CopyTarget, Settle, Told
from once.router.core.ports import Alone
from support.batched import batched
from test_core import Pub, Sub  # (tests/router is on the path, like tests/)

T = "t"  # the topic
G = GroupId("work")


# =====================================================================================
# One core: ports that keep what the core does


class Routes(Alone):
    """The network as one router sees it, as the test sets it: the next hop towards each
    router, where each subscriber key of the topic lives, the consumer groups' members
    elsewhere. The control items the core sends (answers, settlements, questions) are kept."""

    def __init__(self, me: str) -> None:
        self.me = me
        self.next_hop: dict[str, str] = {}  # router -> neighbour (none: unreachable)
        self.where: dict[tuple[str, str], str] = {}  # subscriber key -> its router (our own too)
        self.members: dict[GroupId, Table] = {}
        self.sent: list[tuple[str, tuple[Any, ...]]] = []

    def _keys(self) -> dict[tuple[str, str], str]:
        out = {k: r for k, r in self.where.items() if r != self.me}
        for ms in self.members.values():
            for m in ms:
                out.setdefault(m.key, m.router)
        return out

    def remote_routers(self, topic: str) -> set[str]:
        return set(self._keys().values())

    def route(self, dests: set[str], exclude: str | None) -> tuple[dict[str, set[str]], set[str]]:
        out: dict[str, set[str]] = {}
        stuck = set()
        for d in dests:
            hop = self.next_hop.get(d)
            if hop is None or hop == exclude:
                stuck.add(d)
            else:
                out.setdefault(hop, set()).add(d)
        return out, stuck

    def keys_at(self, topic: str, router: str) -> frozenset[tuple[str, str]]:
        return frozenset(k for k, r in self._keys().items() if r == router)

    def homes(self, keys: Iterable[tuple[str, str]]) -> dict[str, set[tuple[str, str]]]:
        known = {**self._keys(), **{k: r for k, r in self.where.items() if r == self.me}}
        out: dict[str, set[tuple[str, str]]] = {}
        for k in keys:
            if k in known:
                out.setdefault(known[k], set()).add(k)
        return out

    def group_members(self, topic: str) -> dict[GroupId, Table]:
        return self.members

    def send_to(self, router: str, items: tuple[Any, ...]) -> None:
        self.sent.append((router, items))

    def reachable(self) -> set[str]:
        return set(self.next_hop)

    def all_routers(self) -> set[str]:
        return set(self.next_hop) | set(self._keys().values())

    # what was sent
    def items(self, kind: type, to: str | None = None) -> list[tuple[str, Any]]:
        return [(r, i) for r, items in self.sent for i in items if type(i) is kind and (to is None or r == to)]


class Hop:
    """A neighbour's data link: the copies the core sends on it."""

    def __init__(self, credit: int = 100) -> None:
        self.copies: list[Copy] = []
        self.room = credit

    def credit(self) -> int:
        return self.room

    def copy(self, c: Copy) -> None:
        self.room -= 1
        self.copies.append(c)

    def targets(self) -> list[tuple[bytes, str, frozenset, int, int, bool]]:
        return [(c.gid, t.router, t.keys, t.position, t.low, t.redelivery) for c in self.copies for t in c.targets]


class One:
    """One version 3 router, its routes port and a clock the test moves."""

    def __init__(self, me: str, **settings: Any) -> None:
        self.now = 0.0
        self.routes = Routes(me)
        self.settings = Settings(**settings)
        self.core = batched(Core(me, self.settings, clock=lambda: self.now,
                         wall=lambda: 1_000_000_000 + int(self.now * 1e6), routes=self.routes))
        self.hops: dict[str, Hop] = {}
        self.ups: dict[str, Any] = {}

    def hop(self, peer: str, credit: int = 100) -> Hop:
        port = self.hops[peer] = Hop(credit)
        self.core.add_hop(peer, port)
        self.changed()  # (the network's view changes with the link: ``Network.link_up``)
        return port

    def arrive(self, frm: str, copy: Copy) -> None:
        """A neighbour passes us a copy."""
        up = self.ups.get(frm)
        if up is None:
            up = self.ups[frm] = self.core.add_upstream(frm, Pub())
        self.core.copy_arrived(up, copy)
        self.core.after_batch()

    def control(self, frm: str, *items: Any) -> None:
        self.core.control(frm, items)
        self.core.after_batch()

    def changed(self) -> None:
        """The graph or the subscriber table changed (what ``router/network.py`` calls)."""
        core = self.core
        core.membership_changed()
        core.follow_moved(self.routes.reachable() | {core.router_id})
        core.after_batch()

    def tick(self, until: float, step: float = 0.25) -> None:
        """Housekeeping until ``until`` (the router's 0.25 s tick)."""
        core = self.core
        while self.now < until:
            self.now = min(until, self.now + step)
            core.expire(self.now)
            core.expire_suspended(self.now)
            core.after_batch()

    def subscribe(self, name: str, credit: int = 100, group: GroupId | None = None) -> tuple[Any, Sub]:
        port = Sub(credit)
        sub, _ = self.core.add_subscriber(port, T, "c", name, False, group)
        self.routes.where[("c", name)] = self.core.router_id
        self.core.after_batch()
        return sub, port

    def publisher(self, incarnation: int | None = None, container: str = "cp", link: str = "lp") -> tuple[Any, Pub]:
        port = Pub()
        pub = self.core.add_publisher(port, T, container, link, False, incarnation)
        self.core.after_batch()
        return pub, port

    def publish(self, pub: Any, tag: bytes, payload: bytes = b"m", resumed: bool = False) -> Any:
        record = self.core.publish(pub, tag, payload, False, tag, 0, resumed)
        self.core.after_batch()
        return record

    def accept(self, sub: Any, port: Sub, record: Any) -> None:
        """The subscriber accepts its delivery of ``record`` (and leaves it unsettled)."""
        handle = next(("handle", i + 1) for i, (r, _, _) in enumerate(port.sent) if r is record)
        self.core.subscriber_update(sub, record, handle, ACCEPTED, False)
        self.core.after_batch()


def key(name: str) -> tuple[str, str]:
    return ("c", name)


def answer(copy: Copy, router: str, said: tuple = ()) -> Answer:
    """The destination ``router``'s answer for its part of ``copy``: every key accepted, or
    what ``said`` says per key."""
    t = next(t for t in copy.targets if t.router == router)
    return Answer(copy.gid, copy.stream, t.position, said)


def a_copy(gid: bytes, root: str, stream: bytes, to: str, keys: Iterable[str], position: int, low: int = 1,
           redelivery: bool = False, chosen: tuple = (), payload: bytes = b"m", presettled: bool = False,
           resent: bool = False) -> Copy:
    """A copy from ``root`` for subscribers ``keys`` at router ``to``, at ``position`` in the stream
    (``resent``: its publisher sent it again to that root)."""
    return Copy(gid, T, payload, presettled, 0, root, stream, 1, (CopyTarget(to, frozenset(key(k) for k in keys),
                                                                         position, low, redelivery),),
                frozenset({root}), chosen, resent=resent)


def accepted(pub: Pub) -> list[Any]:
    """The handles (our tags) of the publisher's deliveries it was told were accepted."""
    return [h for h, o, _ in pub.outcomes if o.kind is ACCEPTED.kind]


# -------------------------------------------------------------------------- the root


def test_the_root_waits_for_each_destinations_own_answer_whichever_way_its_copy_went_then_settles_each():
    """The root tells the publisher ``accepted`` only once every destination router answered
    for its own keys, and then settles every router it sent the message to. A copy sent
    again another way after a link was lost (C's copy, now through B) is waited for again:
    B's answer for its own keys does not answer for C's.

    Replaces test_root_waits_for_downstream_hops_and_settles_them,
    test_reforward_through_a_hop_that_already_answered_waits_again and the re-routing half
    of test_lost_hop_reroutes_in_doubt_records_and_parks_unroutable."""
    a = One("A")
    a.routes.next_hop = {"B": "B", "C": "C"}
    a.routes.where = {key("b"): "B", key("c"): "C"}
    hb, hc = a.hop("B"), a.hop("C")
    pub, p = a.publisher()
    rec = a.publish(pub, b"0")
    assert [t[1:5] for t in hb.targets()] == [("B", {key("b")}, 1, 1)]
    assert [t[1:5] for t in hc.targets()] == [("C", {key("c")}, 1, 1)]
    first = hb.copies[0]
    a.control("B", answer(first, "B"))
    assert p.outcomes == []  # C has not answered
    # C's link goes; the graph says C through B now: C's copy goes again, through B
    a.routes.next_hop["C"] = "B"
    a.core.hop_lost("C")
    a.changed()
    assert [t[1:5] for t in hb.targets()][1:] == [("C", {key("c")}, 1, 1)]
    a.control("B", answer(first, "B"))  # B again, for its own keys: still not C's answer
    assert p.outcomes == [] and rec.gid in a.core.records
    a.control("C", answer(hb.copies[1], "C"))
    assert accepted(p) == [b"0"]
    assert sorted(r for r, _ in a.routes.items(Settle)) == ["B", "C"]
    assert len(a.core.records) == 0


def test_a_root_that_cannot_reach_a_destination_keeps_waiting_and_sends_again_when_it_can():
    """Losing every way to a destination is no evidence about its subscribers: the root
    keeps the publisher waiting however often the graph changes and however long it
    takes, sends again when a way comes, and answers when the destination does.

    Replaces the parking half of test_lost_hop_reroutes_in_doubt_records_and_parks_unroutable,
    and test_retrying_a_still_unroutable_record_keeps_it_waiting."""
    a = One("A")
    a.routes.next_hop = {"B": "B", "C": "B"}
    a.routes.where = {key("c"): "C"}
    hb = a.hop("B")
    pub, p = a.publisher()
    rec = a.publish(pub, b"0")
    assert [t[1:4] for t in hb.targets()] == [("C", {key("c")}, 1)]
    a.routes.next_hop = {}
    a.core.hop_lost("B")  # nothing left: no way to C
    a.changed()
    for _ in range(3):
        a.changed()  # the graph changed, but C is still out of reach
    a.tick(120.0)  # (past every grace: it is C's to say its subscriber went, not ours)
    assert p.outcomes == [] and rec.gid in a.core.records
    assert rec.far.owed.pending == 1
    a.routes.next_hop = {"B": "B", "C": "B"}
    hb2 = a.hop("B")  # a way again
    assert [t[1:4] for t in hb2.targets()] == [("C", {key("c")}, 1)]
    a.control("C", answer(hb2.copies[0], "C"))
    assert accepted(p) == [b"0"] and len(a.core.records) == 0


@pytest.mark.parametrize("queued", [True, False], ids=["queued", "in-flight"])
def test_an_answer_for_one_copy_to_a_router_does_not_answer_a_newer_copy_to_it(queued: bool):
    """A subscriber of the root's moved to B, which had a copy of the message for its own
    subscriber already; the moved key's copy to B (queued behind B's credit, or on its
    way) is a copy of its own, at its own position: B's answer for the first copy does not
    answer it, and the publisher waits for both. Nothing is left to expire at the root: the
    key moved, its delivery with it.

    Replaces test_answer_to_an_earlier_copy_does_not_cover_a_newer_copy_on_the_same_hop
    (both parameters), test_an_answer_to_a_keyed_copy_does_not_answer_the_full_copy_before_it
    and test_suspended_subscriber_that_moved_hands_its_deliveries_over."""
    a = One("A")
    a.routes.next_hop = {"B": "B"}
    a.routes.where = {key("b"): "B"}
    hb = a.hop("B")
    k, kp = a.subscribe("k", credit=0)  # (its credit never came: the message waits for it here)
    pub, p = a.publisher()
    rec = a.publish(pub, b"0")
    assert [t[1:6] for t in hb.targets()] == [("B", {key("b")}, 1, 1, False)]
    if queued:
        hb.room = 0
    a.core.suspend_subscriber(k, until=100.0)
    a.routes.where[key("k")] = "B"
    a.core.subscriber_moved(k, "B")  # k attached at B: its delivery follows it there, marked
    a.core.after_batch()
    assert len(hb.copies) == (1 if queued else 2)
    a.control("B", answer(hb.copies[0], "B"))  # B's answer for the first copy
    assert p.outcomes == [] and rec.far.owed.pending == 1
    if queued:
        hb.room = 100
        a.core.pump_hop(a.core.hops["B"])
    assert [(t[1], t[2], t[3], t[5]) for t in hb.targets()][1:] == [("B", {key("k")}, 2, True)]
    a.control("B", answer(hb.copies[1], "B"))
    assert accepted(p) == [b"0"] and kp.sent == []
    assert a.core.expire_suspended(1000.0) == []  # nothing left to expire: it moved
    assert [r for r, _ in a.routes.items(Settle)] == ["B"]


def test_a_key_that_moved_is_answered_for_by_its_new_router_alone():
    """k moved from C to B while the message was on its way to C: the root sends k a copy
    at B, marked. B's answer speaks for k alone (C's other subscriber j still holds the
    publisher back), and C's answer ``moved`` for k changes nothing for k. Each router the
    message went to is settled, once.

    Replaces test_hand_over_from_a_downstream_hop_is_answered_alone_and_its_settlement_settles_nothing_else
    (the root's half; the destination's half is
    test_a_copy_that_comes_twice_or_from_two_roots_is_delivered_once_and_each_root_is_answered)."""
    a = One("A")
    a.routes.next_hop = {"B": "B", "C": "C"}
    a.routes.where = {key("j"): "C", key("k"): "C"}
    hb, hc = a.hop("B"), a.hop("C")
    pub, p = a.publisher()
    a.publish(pub, b"0")
    assert [t[1:3] for t in hc.targets()] == [("C", {key("j"), key("k")})]
    a.routes.where[key("k")] = "B"  # k attached at B
    a.changed()
    assert [t[1:6] for t in hb.targets()] == [("B", {key("k")}, 1, 1, True)]
    a.control("B", answer(hb.copies[0], "B"))
    assert p.outcomes == []  # j has not answered
    a.control("C", answer(hc.copies[0], "C", ((key("k"), Said.MOVED, None),)))
    assert p.outcomes == []  # (``moved`` says nothing of j)
    a.control("C", answer(hc.copies[0], "C", ((key("j"), Said.ACCEPTED, None), (key("k"), Said.MOVED, None))))
    assert accepted(p) == [b"0"]
    assert sorted(r for r, _ in a.routes.items(Settle)) == ["B", "C"]


# ------------------------------------------------------------------- a destination

GID = b"g" * 16


def test_a_copy_that_comes_twice_or_from_two_roots_is_delivered_once_and_each_root_is_answered():
    """A destination takes the same message again (the root sent its copy again; then the
    publisher resumed at another root, which sent its own): the subscriber gets it once,
    and once it accepted, each root hears the answer for its own copy. The older root's
    settlement lets go only its own copy: the delivery stays unsettled and the record
    stays until the newer root settles. A copy that comes after that is answered from the
    tombstone, never delivered again.

    Replaces test_forwarded_gid_seen_twice_is_delivered_once_and_answered_twice and the
    destination's half of test_hand_over_from_a_downstream_hop_is_answered_alone_and_its_settlement_settles_nothing_else."""
    d = One("D")
    s, sp = d.subscribe("s")
    first = a_copy(GID, "R1", b"R1/1", "D", ["s"], 1)
    d.arrive("X", first)
    d.arrive("Y", first)  # sent again, by another way
    d.arrive("Y", a_copy(GID, "R2", b"R2/1", "D", ["s"], 4, low=4, redelivery=True))  # the publisher resumed at R2
    assert sp.gids() == [GID]
    assert d.routes.items(Answer) == []  # not before s accepted
    rec = sp.sent[0][0]
    d.accept(s, sp, rec)
    answers = sorted((r, a.stream, a.position, a.said) for r, a in d.routes.items(Answer))
    assert answers == [("R1", b"R1/1", 1, ()), ("R2", b"R2/1", 4, ())]
    d.control("R1", Settle(GID))  # the older root lets go: R2 still holds the message
    assert sp.settled == [] and GID in d.core.records
    d.control("R2", Settle(GID))
    assert sp.settled == [("handle", 1)] and GID not in d.core.records
    d.routes.sent.clear()
    d.arrive("X", a_copy(GID, "R2", b"R2/1", "D", ["s"], 4, low=4, redelivery=True))  # late
    assert sp.gids() == [GID]
    assert [(r, a.position, a.said) for r, a in d.routes.items(Answer)] == [("R2", 4, ((key("s"), Said.ACCEPTED, None),))]


@pytest.mark.parametrize("order", [(3, 1, 2), (2, 3, 1), (3, 2, 1), (2, 1, 3)])
def test_copies_that_arrive_out_of_order_reach_the_subscriber_in_publish_order(order: tuple[int, ...]):
    """Copies of one stream come by different ways, the newest first (a subscriber that moved
    here is sent what it was owed, marked, while newer copies come by the shortest way; a
    copy that went round a lost link): the destination delivers them in the root's order,
    each once, marked as sent, and only once the subscriber's credit comes (its attach
    completed). A copy sent again after that is answered again, not delivered again.

    Replaces test_moved_subscriber_gets_its_queue_in_publish_order_when_its_attach_completes,
    test_newer_delivery_waits_behind_older_ones_that_went_back_to_its_upstream and
    test_root_sends_what_came_back_in_publish_order_with_what_it_held_meanwhile."""
    d = One("D")
    s, sp = d.subscribe("s", credit=0)  # its attach is not complete: nothing goes out yet
    gids = {n: bytes([n]) * 16 for n in (1, 2, 3)}
    copies = {n: a_copy(gids[n], "A", b"A/1", "D", ["s"], n, redelivery=n == 1) for n in (1, 2, 3)}
    for n in order:
        d.arrive("X" if n == 1 else "Y", copies[n])
    sp.room = 10
    d.core.pump(s)
    assert [(r.gid, mark) for r, _, mark in sp.sent] == [(gids[1], 1), (gids[2], 0), (gids[3], 0)]
    for r, _, _ in list(sp.sent):
        d.accept(s, sp, r)
    assert sorted(a.position for _, a in d.routes.items(Answer, "A")) == [1, 2, 3]
    d.arrive("Y", copies[1])  # its answer may have been lost: sent again
    assert len(sp.sent) == 3
    assert sorted(a.position for _, a in d.routes.items(Answer, "A")) == [1, 1, 2, 3]


def test_a_copy_held_behind_a_gap_goes_once_the_root_no_longer_needs_what_the_gap_was():
    """m1's copy to D was lost; m2's came and waits at D behind it (m2 must not overtake
    m1 there). Then m1's only key at D, k, moved to B: the root sends k both messages at B,
    in publish order, and needs nothing of m1 at D any more. Its next copy of m2 to D says
    so (``low``), and D delivers m2 to j at once and answers it, without m1 ever coming.
    D's copies are the root's own: the two routers' parts, fed to each other by hand.

    Replaces test_held_delivery_goes_when_the_older_one_is_answered_instead."""
    a, d = One("A"), One("D")
    a.routes.next_hop = {"B": "B", "D": "D"}
    a.routes.where = {key("k"): "D"}
    hb, hd = a.hop("B"), a.hop("D")
    k, kp = d.subscribe("k")
    pub, p = a.publisher()
    m1 = a.publish(pub, b"1")
    lost = hd.copies.pop()  # m1's copy to D never gets there
    assert lost.gid == m1.gid
    j, jp = d.subscribe("j")
    a.routes.where[key("j")] = "D"
    a.changed()
    m2 = a.publish(pub, b"2")
    d.arrive("A", hd.copies[-1])
    assert kp.sent == jp.sent == []  # m2 waits at D for m1
    # k leaves D for B
    d.core.suspend_subscriber(k, until=100.0)
    d.core.subscriber_moved(k, "B")
    d.core.after_batch()
    a.routes.where[key("k")] = "B"
    a.changed()
    assert [(t[0], t[1], t[2], t[5]) for t in hb.targets()] == [
        (m1.gid, "B", {key("k")}, True), (m2.gid, "B", {key("k")}, True)]  # in publish order
    sent = len(hd.copies)
    a.tick(a.settings.router_dead_after)  # what has no answer goes again
    again = [(c.gid, t.keys, t.position, t.low) for c in hd.copies[sent:] for t in c.targets]
    assert again == [(m2.gid, {key("j")}, 2, 2)]  # only m2, only for j, and m1 is not needed
    d.arrive("A", hd.copies[-1])
    assert jp.gids() == [m2.gid] and kp.sent == []
    d.accept(j, jp, jp.sent[0][0])
    answers = [(a_.gid, a_.position) for _, a_ in d.routes.items(Answer, "A")]
    assert answers == [(m2.gid, 2)]


def test_a_copy_for_a_key_that_moved_away_is_answered_moved_for_as_long_as_a_late_copy_may_come():
    """k moved from here (A) to D. A copy its root sent before it heard of the move, even
    one a root cut off for longer than ``router_dead_after`` sends late, is not delivered
    here and not answered as if k had it: A answers ``moved`` (the root then sends it where
    k lives now: the next test). Past the subscriber grace A no longer knows k, and still
    answers nothing the root takes as final for k.

    Replaces test_a_delivery_routed_here_before_the_root_heard_of_a_move_follows_the_subscriber
    and test_a_delivery_a_cut_off_root_sends_late_still_follows_a_subscriber_that_moved
    (the destination's half)."""
    d = One("A", router_dead_after=3.0, subscriber_grace=30.0)
    k, kp = d.subscribe("k")
    d.core.suspend_subscriber(k, until=100.0)
    d.core.subscriber_moved(k, "D")
    d.tick(4.0)  # later than router_dead_after
    d.arrive("C", a_copy(GID, "C", b"C/1", "A", ["k"], 1))
    assert kp.sent == []
    assert [(r, a.said) for r, a in d.routes.items(Answer)] == [("C", ((key("k"), Said.MOVED, None),))]
    d.routes.sent.clear()
    d.tick(31.0)  # past the grace
    d.arrive("C", a_copy(b"h" * 16, "C", b"C/1", "A", ["k"], 2))
    said = [s for _, a in d.routes.items(Answer) for _, s, _ in a.said]
    assert kp.sent == [] and said and all(s not in (Said.ACCEPTED, Said.CLOSED, Said.EXPIRED) for s in said)


def test_the_root_sends_a_moved_keys_message_where_it_lives_now_and_delivers_it_itself_if_that_is_here():
    """A destination (A) answered ``moved`` for k before the root heard where k went: the
    root keeps waiting (``moved`` is no answer for k). When its subscriber table shows k
    at E (k went to D first, then on to E), the root sends k the message at E, marked, and
    nothing to D; the publisher hears ``accepted`` when E answers. A key that came to the
    root itself gets its message there, with nothing sent anywhere.

    Replaces test_a_late_copy_follows_a_moved_subscriber_to_where_it_lives_now,
    test_a_delivery_routed_here_before_the_root_heard_of_a_move_follows_the_subscriber and
    test_a_delivery_a_cut_off_root_sends_late_still_follows_a_subscriber_that_moved (the
    root's half)."""
    c = One("C")
    c.routes.next_hop = {"A": "A", "D": "D", "E": "E"}
    c.routes.where = {key("k"): "A"}
    ha, hd, he = c.hop("A"), c.hop("D"), c.hop("E")
    pub, p = c.publisher()
    m = c.publish(pub, b"0")
    c.control("A", answer(ha.copies[0], "A", ((key("k"), Said.MOVED, None),)))
    assert p.outcomes == [] and hd.copies == he.copies == [] and len(ha.copies) == 1
    c.routes.where[key("k")] = "E"  # the root hears where k lives now
    c.changed()
    assert hd.copies == [] and [t[1:3] + (t[5],) for t in he.targets()] == [("E", {key("k")}, True)]
    assert p.outcomes == []
    c.control("E", answer(he.copies[0], "E"))
    assert accepted(p) == [b"0"] and m.gid not in c.core.records
    # k comes to the root itself while its next message is on its way to E
    m2 = c.publish(pub, b"1")
    sent = (len(ha.copies), len(hd.copies), len(he.copies))
    assert he.copies[-1].gid == m2.gid
    k, kp = c.subscribe("k")
    c.changed()
    c.control("E", answer(he.copies[-1], "E", ((key("k"), Said.MOVED, None),)))
    assert (len(ha.copies), len(hd.copies), len(he.copies)) == sent
    assert [(r.gid, mark) for r, _, mark in kp.sent] == [(m2.gid, 1)]
    assert p.outcomes[1:] == []
    c.accept(k, kp, m2)
    assert accepted(p) == [b"0", b"1"]


def test_copies_of_a_message_held_here_sent_again_and_again_do_not_use_up_a_neighbours_credit():
    """A neighbour passes us copies of a message we hold again and again (the root's
    re-sends, a moved subscriber's copies): answering them frees nothing here, yet the
    neighbour's transit credit must come back, or the network stalls (seed 627).

    Replaces test_copies_of_a_held_record_do_not_use_a_neighbours_credit_up_for_good."""
    d = One("D", max_in_flight=400, link_credit=40)
    d.subscribe("s", credit=0)  # (the message stays held here)
    up_port = Pub()
    up = d.ups["B"] = d.core.add_upstream("B", up_port)
    d.core.after_batch()
    first = up_port.grants[-1]
    assert first > 0
    c = a_copy(GID, "A", b"A/1", "D", ["s"], 1)
    for _ in range(3 * first):
        if up.credit <= 0:
            break
        d.arrive("B", c)
    assert up.credit > 0 and up_port.grants[-1] > 0 and len(d.core.records) == 1


def test_a_copy_for_a_key_that_moved_here_does_not_stand_for_the_other_subscribers_copy():
    """A copy for a subscriber that moved here (m, marked) came first, from the root the
    publisher was on then; a copy for every key here came next, from the root it resumed
    at. The subscriber that stayed (s) gets the message; m does not get it twice; and the
    second root hears its answer only once s, too, accepted.

    Replaces test_a_full_copy_after_a_keyed_one_reaches_every_local_subscriber."""
    d = One("D")
    m, mp = d.subscribe("m")
    s, sp = d.subscribe("s")
    d.arrive("B", a_copy(GID, "B", b"B/1", "D", ["m"], 3, low=3, redelivery=True))
    assert mp.gids() == [GID] and sp.sent == []
    d.arrive("C", a_copy(GID, "C", b"C/1", "D", ["m", "s"], 1))
    assert mp.gids() == [GID] and sp.gids() == [GID]
    rec = mp.sent[0][0]
    d.accept(m, mp, rec)
    assert d.routes.items(Answer, "C") == []  # not before s accepted
    d.accept(s, sp, rec)
    assert sorted((r, a.said) for r, a in d.routes.items(Answer)) == [("B", ()), ("C", ())]


def test_a_router_in_the_middle_passes_on_every_copy_for_a_router_and_answers_none():
    """Two copies of one message for C pass through B: one for a subscriber that moved to
    C, one for C's other subscribers. B passes both on, each with its own keys, keeps
    nothing of them and answers neither: only C answers, to the root.

    Replaces test_a_keyed_copy_covers_a_destination_only_for_its_keys."""
    b = One("B")
    b.routes.next_hop = {"C": "C"}
    hc = b.hop("C")
    b.arrive("A", a_copy(GID, "A", b"A/1", "C", ["moved"], 2, redelivery=True))
    b.arrive("A", a_copy(GID, "A", b"A/1", "C", ["stayed"], 1))
    assert [t[1:6] for t in hc.targets()] == [("C", {key("moved")}, 2, 1, True), ("C", {key("stayed")}, 1, 1, False)]
    assert all(c.visited == {"A", "B"} for c in hc.copies)
    assert b.routes.sent == [] and len(b.core.records) == 0


def test_a_copy_that_comes_back_to_a_router_it_visited_goes_no_further_and_is_answered_by_nobody():
    """A routes B's copy through D, and D (its view behind) through A: the copy comes back
    to its root. It is not sent round again, and nobody answers for B: the publisher hears
    ``accepted`` only from B itself, once B has the message (the root's own re-send).

    Replaces test_a_copy_sent_back_where_it_came_from_is_waited_for."""
    a = One("A")
    a.routes.next_hop = {"B": "D", "D": "D"}
    a.routes.where = {key("b"): "B"}
    hd = a.hop("D")
    pub, p = a.publisher()
    a.publish(pub, b"0")
    assert [t[1:4] for t in hd.targets()] == [("B", {key("b")}, 1)]
    back = hd.copies[0]
    back = Copy(back.gid, back.topic, back.payload, False, 0, back.root, back.stream, back.born, back.targets,
                frozenset({"A", "D"}))
    a.arrive("D", back)  # D sent it back
    assert len(hd.copies) == 1 and a.routes.sent == [] and p.outcomes == []
    a.tick(a.settings.router_dead_after)
    assert len(hd.copies) == 2  # the root's own re-send (D knows the way now)
    a.control("B", answer(hd.copies[1], "B"))
    assert accepted(p) == [b"0"]


def test_what_waits_for_a_router_out_of_reach_follows_its_subscriber_to_where_it_lives_now():
    """k's router C is out of reach; k attached at D since (and C no longer lists it). What
    the root published for k goes to k at D, marked, as soon as the root's table shows it
    there; the publisher hears ``accepted`` from D without C ever answering or being
    waited for any more.

    Replaces test_a_parked_delivery_follows_the_subscribers_its_router_had_when_it_parked,
    test_parked_record_follows_its_subscriber_to_another_router,
    test_record_parked_for_a_dead_router_goes_at_once_to_its_subscriber_that_moved,
    test_a_destination_whose_subscribers_all_moved_is_not_parked and
    test_a_bounce_waiting_only_on_a_parked_destination_is_answered_once_that_is_dropped
    (the root's part; the network's is
    test_a_message_for_a_subscriber_on_a_dead_router_follows_it_where_it_resumes)."""
    a = One("A")
    a.routes.next_hop = {"D": "D"}  # (no way to C)
    a.routes.where = {key("k"): "C"}
    hd = a.hop("D")
    pub, p = a.publisher()
    m = a.publish(pub, b"0")
    assert hd.copies == [] and m.far.owed.pending_at() == {"C": {key("k")}}
    a.routes.where[key("k")] = "D"
    a.changed()
    assert [t[1:4] + (t[5],) for t in hd.targets()] == [("D", {key("k")}, 1, True)]
    m1 = a.publish(pub, b"1")  # published after: straight to D
    assert [(t[0], t[5]) for t in hd.targets()][1:] == [(m1.gid, False)]
    a.control("D", answer(hd.copies[0], "D"))
    a.control("D", answer(hd.copies[1], "D"))
    assert accepted(p) == [b"0", b"1"] and len(a.core.records) == 0


def test_what_a_root_sends_again_after_losing_its_way_goes_in_publish_order():
    """Three messages were on their way to C through B when B's link went; three more were
    published while C was out of reach. When a way to C comes back (through D), all six go
    in publish order, at positions 1 to 6 (C delivers in that order whatever the order
    they come in).

    Replaces test_parked_records_are_retried_in_publish_order."""
    a = One("A")
    a.routes.next_hop = {"B": "B", "C": "B"}
    a.routes.where = {key("c"): "C"}
    hb = a.hop("B")
    pub, _ = a.publisher()
    old = [a.publish(pub, bytes([i])) for i in range(3)]
    assert [t[0] for t in hb.targets()] == [r.gid for r in old]
    a.routes.next_hop = {"B": "B"}
    a.changed()
    new = [a.publish(pub, bytes([i])) for i in range(3, 6)]
    a.routes.next_hop = {}
    a.core.hop_lost("B")
    a.changed()
    a.routes.next_hop = {"D": "D", "C": "D"}
    hd = a.hop("D")
    assert [(t[0], t[3]) for t in hd.targets()] == [(r.gid, i + 1) for i, r in enumerate(old + new)]


def test_a_publisher_that_resumes_at_a_destination_makes_it_the_root_and_its_late_subscriber_gets_the_message():
    """B's copy reached C for x; then another subscriber attached at C, and the publisher
    (B died) resumed at C and sent the message again. C holds it already: it becomes its
    root, and the subscriber that attached here meanwhile gets it too (marked), x not
    again; the publisher hears ``accepted`` once both accepted.

    Replaces test_a_new_root_serves_its_own_subscribers_the_forwarded_copy_never_reached."""
    c = One("C")
    x, xp = c.subscribe("x")
    gid = compute_gid("cp", "lp", 7, b"\x00")
    c.arrive("B", Copy(gid, T, b"m", False, 0, "B", b"B/1", 1, (CopyTarget("C", frozenset({key("x")}), 1, 1),),
                       frozenset({"B"})))
    assert xp.gids() == [gid]
    late, lp = c.subscribe("late")
    pub, p = c.publisher(incarnation=7)  # the publisher resumes here, with the message in its map
    c.core.publisher_resume_map(pub, {b"\x00": None})
    rec = c.publish(pub, b"\x00", resumed=True)
    assert rec is not None and rec.gid == gid and rec.local
    assert [(r.gid, mark) for r, _, mark in lp.sent] == [(gid, 1)] and len(xp.sent) == 1
    c.accept(x, xp, rec)
    assert p.outcomes == []
    c.accept(late, lp, rec)
    assert accepted(p) == [b"\x00"]


# ------------------------------------------------------------------ consumer groups


def _carry(frm: One, to: One) -> int:
    """The control items ``frm`` sent ``to``, handed over (what the control links do)."""
    me = to.core.router_id
    mine = [items for r, items in frm.routes.sent if r == me]
    frm.routes.sent = [(r, items) for r, items in frm.routes.sent if r != me]
    for items in mine:
        to.control(frm.core.router_id, *items)
    return len(mine)


def _members_at_c() -> tuple[One, Hop]:
    c = One("C")
    c.routes.next_hop = {"E": "E"}
    c.routes.members = {G: Table([Member(key("g1"), "E", 1), Member(key("g2"), "E", 2)])}
    return c, c.hop("E")


def test_a_second_roots_choice_gives_the_message_to_the_member_that_had_it_from_the_first():
    """Root A chose member g2 (at E) for a message and g2 processed it; A died, and the
    publisher resumed at C, which never saw the message. By its own rule C would give it
    to g1; it asks every router first, E tells it g2 had it, and C keeps g2: g1 never gets
    the message, g2 does not get it twice, and the publisher hears ``accepted`` from C.

    Replaces test_a_second_roots_choice_does_not_stand_where_the_first_ones_member_has_it."""
    tag = b"\x02"
    gid = compute_gid("cp", "lp", 7, tag)
    # (C's own rule, had nobody had the message: g1)
    alone, _ = _members_at_c()
    pub0, _ = alone.publisher(incarnation=7)
    assert set(alone.publish(pub0, tag).chosen) == {key("g1")}

    e = One("E")
    g1, g1p = e.subscribe("g1", group=G)
    g2, g2p = e.subscribe("g2", group=G)
    e.arrive("A", Copy(gid, T, b"m", False, 0, "A", b"A/1", 1, (CopyTarget("E", frozenset({key("g2")}), 1, 1),),
                       frozenset({"A"}), ((key("g2"), G, "E"),)))
    assert g2p.gids() == [gid] and g1p.sent == []
    e.accept(g2, g2p, g2p.sent[0][0])

    c, he = _members_at_c()
    pub, p = c.publisher(incarnation=7)  # A died; the publisher resumes here
    c.core.publisher_resume_map(pub, {tag: None})
    c.core.after_batch()
    assert [i.gid for _, i in c.routes.items(Ask, "E")] == [gid]  # C asks before it chooses
    _carry(c, e)
    told = [i for _, i in e.routes.items(Told, "C")]
    named = [m for t in told for m in t.members]
    assert (key("g2"), G, "E", True) in named and {m[0] for m in named} == {key("g2")}  # g2 had it
    assert not any(t.unsure for t in told)
    while _carry(e, c) + _carry(c, e):
        pass
    rec = c.publish(pub, tag, resumed=True)
    while _carry(c, e) + _carry(e, c):
        pass
    assert rec.chosen is not None and set(rec.chosen) == {key("g2")}
    assert [t[1:3] for t in he.targets()] == [("E", {key("g2")})]  # for g2 alone
    e.arrive("C", he.copies[-1])
    assert g1p.sent == [] and len(g2p.sent) == 1
    _carry(e, c)
    assert accepted(p) == [tag]


def test_copies_for_a_group_name_only_the_member_chosen_for_the_message_wherever_the_members_go():
    """A group's members g1 and g2 and a plain subscriber x live at E. The root's copy to E
    names x and the one member it chose; when they all move to F, the copy that follows
    them names the same two keys and no other member. At a destination, only the keys a
    copy names get it, though both members live there.

    Replaces test_a_copy_for_particular_keys_reaches_only_members_chosen_for_it."""
    a = One("A")
    a.routes.next_hop = {"E": "E", "F": "F"}
    a.routes.where = {key("x"): "E"}
    a.routes.members = {G: Table([Member(key("g1"), "E", 1), Member(key("g2"), "E", 2)])}
    he, hf = a.hop("E"), a.hop("F")
    pub, p = a.publisher()
    rec = a.publish(pub, b"0")
    chosen = set(rec.chosen)
    assert len(chosen) == 1 and chosen <= {key("g1"), key("g2")}
    assert [t[1:3] for t in he.targets()] == [("E", {key("x")} | chosen)]
    a.routes.where = {key("x"): "F"}
    a.routes.members = {G: Table([Member(key("g1"), "F", 3), Member(key("g2"), "F", 4)])}
    a.changed()
    assert [t[1:3] + (t[5],) for t in hf.targets()] == [("F", {key("x")} | chosen, True)]
    # a destination with both members delivers to the one a copy names
    e = One("E")
    g1, g1p = e.subscribe("g1", group=G)
    g2, g2p = e.subscribe("g2", group=G)
    e.arrive("A", Copy(GID, T, b"m", False, 0, "A", b"A/1", 1, (CopyTarget("E", frozenset({key("g1")}), 1, 1),),
                       frozenset({"A"}), ((key("g1"), G, "E"),)))
    assert g1p.gids() == [GID] and g2p.sent == []


def test_a_members_message_waits_for_its_unreachable_router_and_goes_to_another_member_only_on_its_word():
    """The root chose member c9, at D, which is out of reach; a member m attached at the
    root since. However long D stays out of reach, even past the subscriber grace, the
    message is not given to m: c9 may still be attached there, behind a partition, and
    have it (protocol version 3, section 7: no grace rule of the root's own). When D says
    c9's grace expired there, the message goes to m, marked, and the publisher hears
    ``accepted`` once m accepted.

    Replaces test_a_members_share_waits_for_its_unreachable_router_for_the_grace_then_goes_to_another.
    Version 2 passed the message on after ``subscriber_grace`` on the root's own clock;
    version 3 does so on D's evidence only (``docs/protocol.md``, section 7)."""
    a = One("A", subscriber_grace=30.0)
    a.routes.members = {G: Table([Member(key("c9"), "D", 1)])}
    pub, p = a.publisher()
    rec = a.publish(pub, b"0")
    assert rec.chosen == {key("c9"): (G, "D")}
    m, mp = a.subscribe("m", group=G)
    a.changed()
    a.tick(29.0)
    assert mp.sent == []
    a.tick(120.0)  # past the grace: still D's to say
    assert mp.sent == [] and p.outcomes == []
    a.routes.next_hop = {"D": "D"}
    hd = a.hop("D")  # D is back, with c9 expired there
    assert [t[1:3] for t in hd.targets()] == [("D", {key("c9")})]
    a.control("D", answer(hd.copies[0], "D", ((key("c9"), Said.EXPIRED, None),)))
    assert [(r.gid, mark) for r, _, mark in mp.sent] == [(rec.gid, 1)]
    assert p.outcomes == []
    a.accept(m, mp, rec)
    assert accepted(p) == [b"0"]


def test_a_message_settled_without_its_unreachable_root_is_answered_not_delivered_however_late_its_copy_comes():
    """Issue 48's first class: D took a copy from root A, its subscriber accepted, and A
    stayed out of reach (its publisher attached to it throughout, so A holds the message
    and sends it again when it can). D settles its record without A after
    ``publisher_grace`` (its deliveries are settled), but keeps the tombstone until A
    settles it: a copy A sends 80 s later is answered from it, never handed again; D
    answers A again once A is reachable, and the tombstone goes ``publisher_grace`` after
    A's settlement. (Forgotten after its grace, the copy went to the subscriber a second
    time, unmarked: line3 with B-C cut for 28 s, a message handed at 1.3 s and at 31.5 s.)"""
    d = One("D", publisher_grace=10.0, router_dead_after=3.0)
    s, sp = d.subscribe("s")
    d.arrive("A", a_copy(GID, "A", b"A/1", "D", ["s"], 1))
    d.accept(s, sp, sp.sent[0][0])
    d.tick(80.0)  # A unreachable all along
    tombs = d.core.copies.dest.tombstones
    assert GID not in d.core.records and sp.settled == [("handle", 1)]
    assert GID in tombs
    d.routes.sent.clear()
    d.arrive("A", a_copy(GID, "A", b"A/1", "D", ["s"], 1, redelivery=True))  # healed: A sends it again
    assert sp.gids() == [GID]  # once
    assert [(r, a.position, a.said) for r, a in d.routes.items(Answer)] == [("A", 1, ((key("s"), Said.ACCEPTED, None),))]
    d.routes.sent.clear()
    d.routes.next_hop["A"] = "A"
    d.tick(84.0)
    again = [(r, a.position) for r, a in d.routes.items(Answer)]
    assert again and set(again) == {("A", 1)}  # answered again (each ``router_dead_after``): A is reachable
    d.control("A", Settle(GID))
    d.tick(84.0 + 10.0 - 0.5)
    assert GID in tombs  # (a publisher that resumes within its grace may send it through another root)
    d.tick(84.0 + 10.0 + 1.0)
    assert GID not in tombs and not d.core.copies.dest.awaiting


@pytest.mark.parametrize("tag", [b"x", b""])
def test_pre_settled_deliveries_that_reuse_a_tag_are_each_a_message_of_their_own(tag: bytes):
    """AMQP lets a settled delivery's tag be used again (Qpid JMS sends every pre-settled
    message with the empty tag). They shared one gid: with real routers and a Proton
    sender reusing tag ``x``, the subscriber at the root got 200 of 200 and the one two
    routers away 1 of 200, the rest taken for repeats. Each pre-settled delivery now has
    a gid of its own, distinct from every unsettled delivery's of the same tag."""
    a = One("A")
    hop = a.hop("B")
    a.routes.next_hop["C"] = "B"
    a.routes.where[key("far")] = "C"
    a.changed()
    s, sp = a.subscribe("near")
    pub, _ = a.publisher()
    for i in range(3):
        a.core.publish(pub, tag, b"m%d" % i, True, None, 0, False)
        a.core.after_batch()
    unsettled = a.publish(pub, tag, b"u")
    gids = sp.gids()
    assert len(gids) == 4 and len(set(gids)) == 4 and unsettled.gid in gids
    sent = [t[0] for t in hop.targets()]
    assert len(sent) == 4 and set(sent) == set(gids)


# ------------------------------------------------------- pre-settled among unsettled ones
# A pre-settled copy is never sent again (nothing waits for its answer), so one that comes
# late can only come out of its publisher's order: at most once, it is dropped
# (``docs/protocol.md``, section 5). Messages m1..m4; "P": pre-settled.

M1, M2P, M3, M4, M5P = (bytes([n]) * 16 for n in (1, 2, 3, 4, 5))


def test_a_pre_settled_copy_that_comes_after_newer_copies_of_its_stream_is_dropped():
    """m2P went by a slow way; m3 was sent again by a detour with ``low`` past m2P's
    position (the root waits for nobody's answer there). m3 is delivered, and m2P, come
    after it, is not (plain seed 794 of ``once sim --presettled``)."""
    d = One("D")
    s, sp = d.subscribe("s")
    d.arrive("X", a_copy(M1, "A", b"A/1", "D", ["s"], 1))
    d.arrive("Y", a_copy(M3, "A", b"A/1", "D", ["s"], 3, low=3, redelivery=True))
    d.arrive("X", a_copy(M2P, "A", b"A/1", "D", ["s"], 2, low=1, presettled=True))
    assert sp.gids() == [M1, M3]
    assert d.core.stats["presettled_late"] == 1


def test_a_pre_settled_copy_held_behind_a_gap_a_newer_stream_filled_is_dropped():
    """The old root's m1 was lost on its way, and m2P and m3 wait behind it. The publisher
    resumed at R2 and sent m1 and m3 again (m2P it forgot once sent) and then m4: all
    three are delivered. When the old root's m1 comes at last, what it frees is older than
    m4: m3 is answered from its record, m2P is dropped, not handed after m4 (plain seed
    921 of ``once sim --presettled``)."""
    d = One("D")
    s, sp = d.subscribe("s")
    d.arrive("X", a_copy(M2P, "A", b"A/1", "D", ["s"], 2, presettled=True))
    d.arrive("X", a_copy(M3, "A", b"A/1", "D", ["s"], 3))
    assert sp.gids() == []  # behind m1's gap
    for n, gid in enumerate((M1, M3, M4), 1):
        d.arrive("Y", a_copy(gid, "R2", b"R2/1", "D", ["s"], n, redelivery=gid != M4, resent=gid != M4))
    d.arrive("X", a_copy(M1, "A", b"A/1", "D", ["s"], 1, redelivery=True))  # sent again
    assert sp.gids() == [M1, M3, M4]
    assert d.core.held == {}


@pytest.mark.parametrize("old_first", [False, True])
def test_a_pre_settled_copy_of_a_stream_a_newer_one_overtook_is_dropped_and_only_then(old_first: bool):
    """The publisher resumed at R2 and sent m1 there again (R2's copy says so: ``resent``)
    and then m3. If R2's copies come first, the old root's m1 tells D that stream is behind,
    and its m2P, which comes after m3, is dropped (hard seed 279 of ``once sim
    --presettled``). If the old root's come first, all is in order: m2P is delivered, and
    R2's m1 tells D the old stream is behind now, not R2's: its pre-settled m4P is
    delivered too. Either way a pre-settled m5P the old root sent before the publisher
    moved, come last, is not delivered after R2's newer messages."""
    d = One("D")
    s, sp = d.subscribe("s")
    old = [a_copy(M1, "A", b"A/1", "D", ["s"], 1), a_copy(M2P, "A", b"A/1", "D", ["s"], 2, presettled=True)]
    new = [a_copy(M1, "R2", b"R2/1", "D", ["s"], 1, redelivery=True, resent=True),
           a_copy(M3, "R2", b"R2/1", "D", ["s"], 2),
           a_copy(M4, "R2", b"R2/1", "D", ["s"], 3, presettled=True)]
    for c in old + new if old_first else new + old:
        d.arrive("X", c)
    d.arrive("X", a_copy(M5P, "A", b"A/1", "D", ["s"], 3, presettled=True))
    assert sp.gids() == ([M1, M2P, M3, M4] if old_first else [M1, M3, M4])



def test_a_group_members_release_is_answered_as_soon_as_its_copy_is_final_here():
    """Root R sent D a copy for plain subscriber s and, later, one for group member g (passed
    on to it). g releases it while s has not accepted yet: the root hears ``released`` for
    g's copy at once, not once s accepts too. (Held back, a root that was paused never
    heard it, and sent g the message again where g moved, while the root the publisher
    resumed at chose another member: fresh churn seed 969800362670, two members processed
    it.) s's copy is answered when s accepts."""
    from once.records.outcomes import RELEASED
    d = One("D")
    s, sp = d.subscribe("s")
    g, gp = d.subscribe("g|g", group=G)
    d.arrive("R", a_copy(GID, "R", b"R/1", "D", ["s"], 1))
    d.arrive("R", a_copy(GID, "R", b"R/1", "D", ["g|g"], 2, redelivery=True))
    record = gp.sent[0][0]
    d.core.subscriber_update(g, record, ("handle", 1), RELEASED, False)
    d.core.after_batch()
    assert [(a.position, a.said) for _, a in d.routes.items(Answer, "R")] == [
        (2, ((key("g|g"), Said.RELEASED, None),))]
    d.accept(s, sp, sp.sent[0][0])
    assert {a.position for _, a in d.routes.items(Answer, "R")} == {1, 2}
