"""Each failure the OS-process soaks found (BENCHMARKS.md, issue 4 and issue 13), replayed
as a named scenario on the in-process network: same topology shape, same faults in the
same order, traffic throughout, and DESIGN.md's invariants checked at the end (nothing
lost, nothing processed twice, per-publisher order, one outcome each, no state left).

The mechanism each one exposed also has a pure core or control-plane test (named in
each docstring); these check the whole path: cores, control planes, links and clients.
"""

from __future__ import annotations

from once.sim.net import Fault, SimNet
from once.sim.schedules import START, TOPOLOGIES

MESSAGES = 120
INTERVAL = 0.01


def _run(topology: str, publishers: dict[str, list[str]], subscribers: dict[str, list[str]],
         faults: list[Fault], seed: int = 1) -> SimNet:
    net = SimNet(seed, TOPOLOGIES[topology])
    net.start()
    for name, prefs in subscribers.items():
        net.add_subscriber(name, "t", prefs)
    pubs = [net.add_publisher(name, "t", prefs) for name, prefs in publishers.items()]
    net.run_until(START)
    assert all(c.attached for c in net.publishers + net.subscribers), "not attached before traffic"
    for pub in pubs:
        net.publish_at(pub, [START + i * INTERVAL for i in range(MESSAGES)])
    for f in faults:
        net.schedule(f)
    end = max([START + MESSAGES * INTERVAL] + [f.at + f.duration for f in faults])
    net.run_until(end)
    assert net.run_to_end(end + 60.0), "stalled: " + "; ".join(net.check().violations)
    net.run_until(net.loop.now + net.settings.publisher_grace + 1.0)
    return net


def _ok(net: SimNet) -> None:
    v = net.check()
    assert v.ok, v.violations
    assert all(len(s.effects) == sum(p.next for p in net.publishers) for s in net.subscribers)


def test_seed_4_a_delivery_waits_behind_older_ones_that_went_back_around_a_link_cut():
    """Ring, a link on the path cut under load: what was rerouted back through its
    upstream must not be overtaken (core: ``_pinned``/held, test_core's held tests)."""
    _ok(_run("ring4", {"p0": ["A"]}, {"s0": ["C"], "s1": ["D"]},
             [Fault(1.3, "cut", ("B", "C"), 0.6), Fault(1.5, "cut", ("A", "B"), 0.5)]))


def test_seed_13_a_router_back_with_an_empty_table_takes_its_subscribers_back():
    """The subscriber's router died, then a second one; the first came back with an empty
    table and the network must not accept deliveries without its subscriber
    (linkstate: test_a_restarted_router_takes_its_subscribers_back_and_its_events_count)."""
    _ok(_run("line3", {"p0": ["A"]}, {"s0": ["C"], "s1": ["A"]},
             [Fault(1.2, "kill", ("C",), 0.5), Fault(1.5, "kill", ("B",), 0.6)]))


def test_seeds_16_and_47_a_moved_subscriber_gets_what_it_was_owed_first_and_in_order():
    """Its router died; it attached elsewhere; deliveries held for it elsewhere and new ones
    reach it by several paths: its attach completes behind every router's hand-over
    marker and its queue goes out in the root's order (core: attach_completed)."""
    _ok(_run("ring5", {"p0": ["A"]}, {"s0": ["D", "B"], "s1": ["E"]},
             [Fault(1.4, "kill", ("D",), 1.0)]))


def test_seed_42_the_adopting_root_serves_the_old_roots_moved_subscribers():
    """The publisher's router died with a subscriber of its own; both moved to another
    router, which adopts the resent deliveries and owes them to that subscriber
    (core: _adopt / _owed_elsewhere)."""
    _ok(_run("line3", {"p0": ["A", "B"]}, {"s0": ["A", "B"], "s1": ["C"]},
             [Fault(1.5, "kill", ("A",), 1.0)]))


def test_seed_47_an_answer_to_an_earlier_copy_does_not_cover_a_newer_one():
    """A reroute and a hand-over send a second copy on a hop that is still answering the
    first: the first answer must not count for the second
    (test_core: test_answer_to_an_earlier_copy_does_not_cover_a_newer_copy_on_the_same_hop)."""
    _ok(_run("ring4", {"p0": ["A"]}, {"s0": ["C", "D"], "s1": ["B"]},
             [Fault(1.3, "cut", ("B", "C"), 0.5), Fault(1.35, "drop", ("s0",)), Fault(1.6, "kill", ("C",), 0.8)]))


def test_seed_57_a_restarted_routers_new_attach_is_not_taken_for_its_earlier_life():
    """Subscription events are numbered from the router's start: the subscriber's
    reattach to its restarted router completes (linkstate: the restart tests)."""
    _ok(_run("line3", {"p0": ["A"]}, {"s0": ["C"]}, [Fault(1.3, "kill", ("C",), 0.4)]))


def test_seed_203_a_publisher_resuming_elsewhere_reaches_the_old_roots_subscribers():
    """The publisher resumed at another router that held forwarded copies complete for its
    own part of the network only: those are in doubt to the publisher, resent, adopted,
    and reach the subscribers that moved away from the dead root (core: test_core_resume)."""
    _ok(_run("line3", {"p0": ["A", "B"]}, {"s0": ["A", "C"], "s1": ["B"], "s2": ["C"]},
             [Fault(1.4, "kill", ("A",), 1.5)]))


def test_seed_227_a_router_with_no_neighbour_yet_takes_no_publishes():
    """A restarted router whose links are not up yet knows no subscribers: it must not
    accept publishes for want of them (no publisher credit before the first sync)."""
    net = _run("line3", {"p0": ["A"]}, {"s0": ["C"], "s1": ["B"]},
               [Fault(1.2, "cut", ("A", "B"), 2.0), Fault(1.3, "kill", ("A",), 0.3)])
    _ok(net)


def test_a_subscriber_back_elsewhere_before_its_old_router_noticed_gets_its_order():
    """The in-process network's seeds 141, 1062, 1669: the client's connection broke and it
    attached at C before B noticed; B sent its hand-over marker at once, so the attach at
    C completed before B handed over what it held for the old link, and newer deliveries
    overtook those. B's marker now waits until B has seen the link go."""
    net = SimNet(27, TOPOLOGIES["triangle"])
    net.edge_detect_delay = lambda: 0.3  # type: ignore[method-assign]
    net.reconnect_delay = lambda: 0.02  # type: ignore[method-assign]
    net.start()
    net.add_subscriber("s0", "t", ["B", "C"])
    net.add_subscriber("s1", "t", ["C"])
    pub = net.add_publisher("p0", "t", ["A"])
    net.run_until(START)
    net.publish_at(pub, [START + i * 0.002 for i in range(300)])
    net.schedule(Fault(1.2, "drop", ("s0",)))
    net.run_until(3.0)
    assert net.run_to_end(60.0)
    net.run_until(net.loop.now + net.settings.publisher_grace + 1.0)
    _ok(net)
