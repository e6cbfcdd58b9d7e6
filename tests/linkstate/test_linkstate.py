"""linkstate: pure, no I/O, no clock; driven through the in-process simulator."""

from __future__ import annotations

from dataclasses import replace

from once.linkstate.graph import LinkStateDB
from once.linkstate.messages import LinkStateAd, OriginState, SubEvent, Subscription, Sync, from_dict, to_dict
from once.linkstate.simulate import Network, simulate
from once.linkstate.subscriptions import SubscriberTable


def _net(edges: list[tuple[str, str]]) -> Network:
    names = sorted({n for e in edges for n in e})
    net = Network.of(names)
    for a, b in edges:
        net.link_up(a, b)
    net.run()
    return net


def test_next_hops_follow_shortest_paths_and_costs():
    db = LinkStateDB("A")
    db.set_neighbours({"B": 1, "C": 5})
    db.apply(LinkStateAd("B", 1, {"A": 1, "C": 1}))
    db.apply(LinkStateAd("C", 1, {"A": 5, "B": 1}))
    assert db.next_hops() == {"B": "B", "C": "B"}  # A-B-C costs 2, A-C costs 5
    assert db.route({"B", "C"}) == ({"B": {"B", "C"}}, set())
    assert db.route({"C"}, exclude="B") == ({}, {"C"})  # never back where it came from


def test_held_routes_wait_for_recompute_but_our_own_links_change_them_at_once():
    """The hold-down (``LinkStateDB.hold``): an advertisement from elsewhere is taken (and
    would be flooded) but the routes stay as computed until ``recompute``; our own links
    changing recompute them at once (a neighbour that went is never a next hop)."""
    db = LinkStateDB("A")
    db.hold = True
    db.set_neighbours({"B": 1})
    assert db.reachable() == set()  # (computed: B has not said it links to us yet)
    db.apply(LinkStateAd("B", 1, {"A": 1, "C": 1}))
    db.apply(LinkStateAd("C", 1, {"B": 1}))
    assert db.stale and db.reachable() == set()  # held
    db.recompute()
    assert not db.stale and db.next_hops() == {"B": "B", "C": "B"}
    db.apply(LinkStateAd("C", 2, {}))  # C lost its link to B
    assert db.stale and db.reachable() == {"B", "C"}  # held
    db.set_neighbours({})  # our link to B went: computed at once, with what came meanwhile
    assert not db.stale and db.reachable() == set()


def test_an_edge_needs_both_ends():
    db = LinkStateDB("A")
    db.set_neighbours({"B": 1})
    db.apply(LinkStateAd("B", 1, {"A": 1, "D": 1}))
    db.apply(LinkStateAd("D", 1, {}))  # D no longer lists B: the B-D edge is gone (D died or the link did)
    assert db.reachable() == {"B"}


def test_older_advertisements_are_ignored():
    db = LinkStateDB("A")
    assert db.apply(LinkStateAd("B", 2, {"A": 1}))
    assert not db.apply(LinkStateAd("B", 1, {}))
    assert db.ads["B"].neighbours == {"A": 1}


def test_line3_converges_and_reroutes_in_mesh3():
    line = _net([("A", "B"), ("B", "C")])
    assert line.planes["A"].lsdb.next_hops() == {"B": "B", "C": "B"}
    mesh = _net([("A", "B"), ("B", "C"), ("A", "C")])
    assert mesh.planes["A"].lsdb.next_hops()["C"] == "C"
    mesh.link_down("A", "C")
    mesh.run()
    assert mesh.planes["A"].lsdb.next_hops()["C"] == "B"
    mesh.link_up("A", "C")
    mesh.run()
    assert mesh.planes["A"].lsdb.next_hops()["C"] == "C"


def test_subscription_completes_only_after_every_router_applied_it():
    net = _net([("A", "B"), ("B", "C")])
    seq = net.subscribe("C", Subscription("C", "news", "cont", "link"))
    assert "A" not in [p for p in net.planes if net.planes[p].routers_for("news")]
    rounds = net.until_complete("C", seq)
    assert rounds == 4  # out to A over two links and the echo back
    for p in "ABC":
        assert net.planes[p].routers_for("news") == {"C"}


def test_detach_propagates():
    net = _net([("A", "B"), ("B", "C")])
    sub = Subscription("C", "news", "cont", "link")
    net.until_complete("C", net.subscribe("C", sub))
    net.until_complete("C", net.subscribe("C", sub, attached=False))
    assert all(not p.routers_for("news") for p in net.planes.values())


def test_lost_link_counts_as_acknowledged():
    net = _net([("A", "B"), ("B", "C")])
    seq = net.subscribe("A", Subscription("A", "t", "c", "l"))
    net.round()  # A -> B delivered; B forwarded to C
    net.link_down("B", "C")
    net.until_complete("A", seq)  # completes: C is unreachable now


def test_out_of_order_events_never_resurrect_a_detached_subscriber():
    t = SubscriberTable("X")
    sub = Subscription("O", "t", "c", "l")
    t.on_event(SubEvent("O", 2, False, sub), "N", set())
    t.on_event(SubEvent("O", 1, True, sub), "N", set())  # the older attach arrives late
    assert t.routers_for("t") == set()


def test_full_sync_heals_a_partition():
    net = _net([("A", "B"), ("B", "C")])
    net.link_down("B", "C")
    net.run()
    net.until_complete("C", net.subscribe("C", Subscription("C", "t", "c", "l")))
    net.until_complete("A", net.subscribe("A", Subscription("A", "t", "a", "l")))
    assert net.planes["A"].routers_for("t") == {"A"} and net.planes["C"].routers_for("t") == {"C"}
    net.link_up("B", "C")
    net.run()
    assert net.converged()
    assert net.planes["A"].routers_for("t") == {"A", "C"}


def test_messages_round_trip_through_dicts():
    sync = _net([("A", "B")]).planes["A"].sync_message()
    assert from_dict(to_dict(sync)) == sync
    ev = SubEvent("A", 3, True, Subscription("A", "t", "c", "l", True, 2.5))
    assert from_dict(to_dict(ev)) == ev
    held = SubEvent("A", 4, True, Subscription("A", "t", "c", "l", since=7, suspended=True))
    assert from_dict(to_dict(held)) == held
    assert isinstance(sync, Sync)


def test_hundred_routers_converge():
    r = simulate(n=100, degree=4.0, events=5, seed=3)
    assert r["routers"] == 100
    assert r["attach_complete_rounds_median"] <= 2 * r["diameter"] + 2
    assert r["messages_per_event_per_link"] <= 4


def test_a_key_that_moves_away_from_an_unreachable_router():
    net = _net([("A", "B"), ("B", "C"), ("A", "C")])
    k = Subscription("C", "t", "client", "sub", since=1)
    net.until_complete("C", net.subscribe("C", k))
    a = net.planes["A"]
    assert a.routers_for("t") == {"C"}
    net.link_down("A", "C")
    net.link_down("B", "C")  # C is dead as far as A and B can tell
    net.run()
    assert a.routers_for("t") == {"C"}  # its subscriber is suspended there: still waited for
    net.until_complete("B", net.subscribe("B", Subscription("B", "t", "client", "sub", since=2)))
    assert a.routers_for("t") == {"B"}  # the key moved to B: C no longer counts
    assert a.moved("t", "C") == {"B": frozenset({("client", "sub")})}


def test_a_restarted_router_takes_its_subscribers_back_and_its_events_count():
    net = _net([("A", "B"), ("B", "C")])
    net.until_complete("C", net.subscribe("C", Subscription("C", "t", "client", "sub", since=1)))
    net.until_complete("C", net.subscribe("C", Subscription("C", "t", "other", "sub", since=1)))
    net.restart("C")
    net.link_up("B", "C")
    net.run()
    # The network still routes to C for them; C must hold deliveries for them, not accept them.
    assert [s.key for s in net.adopted["C"]] == [("client", "sub"), ("other", "sub")]
    assert net.planes["C"].routers_for("t") == {"C"}
    # A detach of its new life is numbered past its old one: it takes effect everywhere.
    net.until_complete("C", net.subscribe("C", Subscription("C", "t", "other", "sub"), attached=False))
    assert net.converged()
    assert [s.key for s in net.planes["A"].table.subscriptions("C")] == [("client", "sub")]


def test_a_restarted_routers_empty_table_never_erases_its_subscribers_at_a_neighbour():
    """The in-process network's seed 14: C's first sync after its restart carried its new
    life's empty table, B took it and dropped C's subscribers, and B accepted deliveries
    without them until C had adopted them back. C announces its own state only once a
    neighbour's sync has come in (and it has adopted what it finds there)."""
    net = _net([("B", "C")])
    net.until_complete("C", net.subscribe("C", Subscription("C", "t", "client", "sub", since=1)))
    net.restart("C")
    net.link_up("B", "C")
    while net.queue:  # every message as it arrives: B must never lose sight of C's subscriber
        net.round()
        assert net.planes["B"].routers_for("t") == {"C"}
    assert [s.key for s in net.adopted["C"]] == [("client", "sub")]


def test_a_restarted_router_numbers_its_links_past_its_earlier_life():
    """The in-process network's seed-13 scenario: B (the middle of a line) had announced
    its links several times, died and restarted counting from 1 again. A kept B's last
    advertisement of its earlier life (higher numbered) and ignored the new ones: to A, B
    had no link to C, and C stayed unreachable for good. B hears its old advertisement
    back and announces its links again, numbered past it."""
    net = _net([("A", "B"), ("B", "C")])
    for _ in range(3):  # B's sequence number climbs
        net.link_down("B", "C")
        net.link_up("B", "C")
        net.run()
    net.link_down("B", "C")  # B's last word of that life: "only A"
    net.run()
    net.restart("B")
    net.link_up("A", "B")
    net.link_up("B", "C")
    net.run()
    assert net.planes["A"].lsdb.reachable() >= {"B", "C"}
    assert net.planes["C"].lsdb.reachable() >= {"A", "B"}


def test_a_stale_entry_at_a_reachable_router_does_not_count():
    """The key moved from C to A while C was down; C restarted holding it (adopted):
    the newer attach at A is where it lives, and C is not waited for."""
    net = _net([("A", "B"), ("B", "C")])
    net.until_complete("C", net.subscribe("C", Subscription("C", "t", "client", "sub", since=1)))
    net.restart("C")
    net.until_complete("A", net.subscribe("A", Subscription("A", "t", "client", "sub", since=2)))
    net.link_up("B", "C")
    net.run()
    assert net.adopted["C"][0].key == ("client", "sub")
    for plane in net.planes.values():
        assert plane.routers_for("t") == {"A"}
        assert plane.table.home(("client", "sub")) == "A"
    assert net.planes["B"].moved("t", "C") == {"A": frozenset({("client", "sub")})}


def test_a_restarted_router_whose_subscriber_came_back_before_its_links_is_heard():
    """The key moved from C to A while C was down; C restarted and the client came back
    to C before C's links were up. C's new attach is the newest everywhere: A must see
    the key moved (and hand over what it holds), not keep waiting for it."""
    net = _net([("A", "B"), ("B", "C")])
    net.until_complete("C", net.subscribe("C", Subscription("C", "t", "client", "sub", since=1)))
    net.restart("C")
    net.until_complete("A", net.subscribe("A", Subscription("A", "t", "client", "sub", since=2)))
    net.until_complete("C", net.subscribe("C", Subscription("C", "t", "client", "sub", since=3)))  # no links yet
    net.link_up("B", "C")
    net.run()
    for plane in net.planes.values():
        assert plane.table.home(("client", "sub")) == "C"
        assert plane.routers_for("t") == {"C"}
    assert net.planes["A"].moved("t", "A") == {"C": frozenset({("client", "sub")})}


def test_a_suspension_floods_and_a_stamp_past_it_moves_the_key():
    """Attaches made on both sides of a partition, on clocks that disagree: the client
    left C and resumed at A, whose clock stamped it older. C's suspension reaches every
    router; A, whose client is attached, stamps its attach again past C's (the router's
    part, ``Network._outrank``), and the key lives at A everywhere: C's is a
    left-over that moved there (``--hard --groups`` fresh seeds 396129155360,
    840217628598, 840217628795)."""
    net = _net([("A", "B"), ("B", "C")])
    at_c = Subscription("C", "t", "client", "sub", since=5)
    net.until_complete("C", net.subscribe("C", at_c))
    net.link_down("B", "C")
    net.run()
    at_a = Subscription("A", "t", "client", "sub", since=2)
    net.until_complete("A", net.subscribe("A", at_a))
    net.link_up("B", "C")
    net.run()
    net.subscribe("C", replace(at_c, suspended=True))
    net.run()
    for plane in net.planes.values():
        assert [s.suspended for s in plane.table.subscriptions("C")] == [True]
        assert plane.table.home(("client", "sub")) == "C"  # the newer stamp, until A's is stamped again
    net.until_complete("A", net.subscribe("A", replace(at_a, since=6)))
    for plane in net.planes.values():
        assert plane.table.home(("client", "sub")) == "A"
        assert plane.routers_for("t") == {"A"}
    assert net.planes["C"].moved("t", "C") == {"A": frozenset({("client", "sub")})}


def test_a_restarted_routers_taken_back_subscribers_are_suspended():
    net = _net([("A", "B"), ("B", "C")])
    net.until_complete("C", net.subscribe("C", Subscription("C", "t", "client", "old", since=1)))
    net.restart("C")
    net.link_up("B", "C")
    net.run()
    assert [s.suspended for s in net.adopted["C"]] == [True]
    assert [s.suspended for s in net.planes["A"].table.subscriptions("C")] == [True]
    restored = SubscriberTable("D").restore([Subscription("D", "t", "client", "kept", since=1)])
    assert [s.suspended for s in restored] == [True]


def test_a_restarted_router_with_more_events_than_its_earlier_life_still_takes_its_subscribers_back():
    net = _net([("A", "B"), ("B", "C")])
    net.until_complete("C", net.subscribe("C", Subscription("C", "t", "client", "old", since=1)))
    net.restart("C")
    for i in range(3):  # three events of the new life before the links are up
        net.subscribe("C", Subscription("C", "t", "client", f"new{i}", since=2))
    net.link_up("B", "C")
    net.run()
    assert [s.key for s in net.adopted["C"]] == [("client", "old")]
    keys = {s.key for s in net.planes["A"].table.subscriptions("C")}
    assert keys == {("client", "old"), ("client", "new0"), ("client", "new1"), ("client", "new2")}


def test_a_router_restarted_with_its_clock_behind_numbers_its_events_past_its_earlier_life():
    """Its new life's numbers start below its earlier life's last (the clock stepped back
    across the restart): its neighbours would take its new attaches for old news. It
    numbers past what they hold of it, and says its state again (``--hard --groups`` fresh
    seed 396129154652: a member resumed there stayed at its old router until its grace
    ended)."""
    net = _net([("A", "B"), ("B", "C")])
    for i in range(5):
        net.until_complete("C", net.subscribe("C", Subscription("C", "t", "client", f"old{i}", since=1)))
    old_last = net.planes["C"].table.seq
    net.restart("C", behind=1_000_003)
    assert net.planes["C"].table.seq < old_last
    net.link_up("B", "C")
    net.run()
    net.until_complete("C", net.subscribe("C", Subscription("C", "t", "member", "g", since=2)))
    assert net.planes["C"].table.seq > old_last
    for router in "AB":
        keys = {s.key for s in net.planes[router].table.subscriptions("C")}
        assert ("member", "g") in keys
        assert net.planes[router].table.home(("member", "g")) == "C"


def test_a_topic_reaches_the_routers_of_the_patterns_matching_it():
    t = SubscriberTable("X")
    t.on_event(SubEvent("B", 1, True, Subscription("B", "a/+", "c", "plus", since=1)), "B", set())
    t.on_event(SubEvent("C", 1, True, Subscription("C", "a/#", "c", "hash", since=1)), "C", set())
    t.on_event(SubEvent("D", 1, True, Subscription("D", "a/b", "c", "exact", since=1)), "D", set())
    assert t.routers_for("a/b") == {"B", "C", "D"}
    assert t.routers_for("a/b/c") == {"C"} and t.routers_for("x") == set()
    assert t.effective_routers("a/z", {"B", "C", "D"}) == {"B", "C"}
    assert t.keys_of("B", "a/b") == {("c", "plus")} and t.keys_of("B", "b/b") == frozenset()
    # the pattern leaves: a topic no longer reaches its router, and the table forgets it
    t.on_event(SubEvent("B", 2, False, Subscription("B", "a/+", "c", "plus")), "B", set())
    assert t.routers_for("a/b") == {"C", "D"} and set(t.patterns) == {"a/#"}


def test_a_gap_crosses_a_partition_with_the_sync_and_a_plain_detach_clears_it():
    """A router that gave a key up as a gap (``docs/protocol.md`` section 7) keeps it in
    its state: the far side hears of it when the partition heals, once."""
    net = _net([("A", "B"), ("B", "C")])
    sub = Subscription("A", "t", "c", "l", since=5)
    net.until_complete("A", net.subscribe("A", sub))
    net.link_down("A", "B")
    net.run()
    net.subscribe("A", replace(sub, gap=9), attached=False)  # given up while cut off
    net.run()
    assert net.planes["C"].table.gaps("A") == ()  # (not heard yet)
    net.link_up("A", "B")
    net.run()
    assert net.converged()
    [gap] = net.planes["C"].table.gaps("A")
    assert gap.key == ("c", "l") and gap.gap == 9 and gap.since == 5
    net.subscribe("A", replace(sub, gap=0), attached=False)  # cleared
    net.run()
    assert all(p.table.gaps("A") == () for p in net.planes.values())


def test_a_gap_is_learned_once_and_an_attach_at_its_router_ends_it():
    t = SubscriberTable("X")
    sub = Subscription("O", "t", "c", "l", since=5)
    t.on_event(SubEvent("O", 1, True, sub), "N", set())
    t.on_event(SubEvent("O", 2, False, replace(sub, gap=9)), "N", set())
    assert t.learned_gaps == [replace(sub, gap=9)]
    t.learned_gaps.clear()
    t.on_event(SubEvent("O", 3, False, replace(sub, gap=9)), "N", set())  # flooded again: no news
    assert t.learned_gaps == [] and [g.key for g in t.gaps("O")] == [("c", "l")]
    t.on_event(SubEvent("O", 4, True, replace(sub, since=8)), "N", set())  # attached there again
    assert t.gaps("O") == ()


def test_a_gap_round_trips_through_dicts():
    gap = SubEvent("A", 5, False, Subscription("A", "t", "c", "l", since=7, gap=11))
    assert from_dict(to_dict(gap)) == gap
    st = Sync((OriginState("A", 1, {"B": 1}, 5, (), (gap.subscription,)),))
    assert from_dict(to_dict(st)) == st
