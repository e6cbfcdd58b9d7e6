"""Messages across a network of routers (the in-process network, ``simnet``): what follows
a subscriber that moved, copies racing on two ways, a publisher that resumes at another
root, group members that move, all judged by the network's check.

These are the behaviours the version 2 core tests asserted of several routers (each
docstring names the test it replaced); one router's part of each: ``tests/router/test_copies.py``."""


from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import pytest
from once.records.membership import GroupId
from once.sim.net import Fault, SimNet
from once.sim.schedules import START, TOPOLOGIES

T = "t"  # the topic
G = GroupId("work")


# =====================================================================================
# The in-process network


class Done(NamedTuple):
    """A message a subscriber processed: which, at which router, whether it came marked, when."""

    tag: tuple[str, int]
    where: str
    marked: bool
    at: float


class Run:
    """A simulated network with its clients, and what happened when: when each publisher
    heard each outcome (and which subscribers had processed the message by then), each
    subscriber's processing (in order, where, marked or not) and every delivery it was
    handed (its gid and whether it came marked as a possible repeat)."""

    def __init__(self, topology: str, subscribers: Iterable[tuple[str, list[str]]] = (),
                 publishers: Iterable[tuple[str, list[str]]] = (("p", ["A"]),),
                 members: Iterable[tuple[str, list[str]]] = (), window: int = 20, seed: int = 1) -> None:
        net = self.net = SimNet(seed, TOPOLOGIES[topology])
        net.start()
        self.subs = {}
        for name, routers in subscribers:
            self.subs[name] = net.add_subscriber(name, T, routers)
        for name, routers in members:
            self.subs[name] = net.add_subscriber(name, T, routers, group="g")
        for s in self.subs.values():
            s.window = window  # (what it takes at once: the rest waits at its router)
        self.pubs = {name: net.add_publisher(name, T, routers) for name, routers in publishers}
        self.heard: dict[tuple[str, int], tuple[float, str, frozenset[str]]] = {}
        self.done: dict[str, list[Done]] = {name: [] for name in self.subs}
        self.wire: dict[str, list[tuple[tuple[str, int], int]]] = {name: [] for name in self.subs}
        for pub in self.pubs.values():
            self._watch_publisher(pub)
        for sub in self.subs.values():
            self._watch_subscriber(sub)
        net.run_until(START)
        assert all(c.attached for c in net.publishers + net.subscribers)

    def tag(self, gid: bytes) -> tuple[str, int]:
        for name, pub in self.pubs.items():
            for t in range(pub.next):
                if pub.gid(t) == gid:
                    return name, t
        raise AssertionError("a message nobody published")

    def _watch_publisher(self, pub: Any) -> None:
        record = pub._record

        def heard(tag: int, outcome: Any) -> None:
            gid = pub.gid(tag)
            had = frozenset(s.name for s in self.net.subscribers if gid in s.accepted)
            self.heard.setdefault((pub.name, tag), (self.net.loop.now, outcome.kind.value, had))
            record(tag, outcome)
        pub._record = heard

    def _watch_subscriber(self, sub: Any) -> None:
        processed, message = sub._processed, sub._message

        def on_processed(gid: bytes) -> None:
            n = len(sub.effects)
            where = sub.conn.router.id if sub.conn is not None else "-"
            processed(gid)
            if len(sub.effects) > n:
                self.done[sub.name].append(Done(self.tag(gid), where, gid in sub.redelivered, self.net.loop.now))

        def on_message(m: Any) -> None:
            self.wire[sub.name].append((self.tag(m.tag), m.redelivery))
            message(m)
        sub._processed, sub._message = on_processed, on_message

    def publish(self, times: Iterable[float], pub: str = "p") -> None:
        self.net.publish_at(self.pubs[pub], list(times))

    def fault(self, *faults: Fault) -> None:
        for f in faults:
            self.net.schedule(f)

    def finish(self, limit: float = 30.0) -> None:
        """Run until everything is settled, then past the tombstones' time; the run must be
        clean by every invariant ``SimNet.check`` judges."""
        assert self.net.run_to_end(limit), "not settled"
        self.net.run_until(self.net.loop.now + self.net.settings.publisher_grace + 1.0)
        self.net.tombstones_checked = True
        verdict = self.net.check()
        assert verdict.ok, verdict.violations

    def processed(self, sub: str) -> list[tuple[str, int]]:
        return [d.tag for d in self.done[sub]]

    def unmarked_once(self, sub: str) -> None:
        """Judged at the wire: every delivery not marked as a possible repeat is a new one."""
        fresh = [t for t, mark in self.wire[sub] if not mark]
        assert len(fresh) == len(set(fresh)), self.wire[sub]

    def told_after(self, tag: tuple[str, int], subs: Iterable[str]) -> float:
        """When the publisher heard ``accepted`` for ``tag``: only once each of ``subs`` had
        processed it."""
        at, kind, had = self.heard[tag]
        assert kind == "accepted" and set(subs) <= had, (tag, kind, had)
        return at


def test_a_message_for_a_subscriber_on_a_dead_router_follows_it_where_it_resumes():
    """s lives at C; C dies. A message published just then is owed to s at C: it waits
    (the publisher is not told) until s has resumed at B and processed it there, marked;
    the next message goes straight to s at B (unmarked) and is accepted while C is still
    dead: nothing waits for C, where nobody needs anything any more. s gets both once, in
    publish order.

    Replaces test_parked_record_follows_its_subscriber_to_another_router,
    test_record_parked_for_a_dead_router_goes_at_once_to_its_subscriber_that_moved,
    test_a_parked_delivery_follows_the_subscribers_its_router_had_when_it_parked,
    test_a_destination_whose_subscribers_all_moved_is_not_parked and
    test_a_bounce_waiting_only_on_a_parked_destination_is_answered_once_that_is_dropped
    (with the one-core test_what_waits_for_a_router_out_of_reach_follows_its_subscriber_to_where_it_lives_now)."""
    run = Run("line3", [("s", ["C", "B"])])
    run.fault(Fault(START, "kill", ("C",), 5.0))
    run.publish([START + 0.002, START + 1.0])
    run.finish()
    assert run.processed("s") == [("p", 0), ("p", 1)]
    assert [(d.where, d.marked) for d in run.done["s"]] == [("B", True), ("B", False)]
    run.told_after(("p", 0), ["s"])
    assert run.told_after(("p", 1), ["s"]) < START + 5.0  # C still dead
    run.unmarked_once("s")


def test_a_subscriber_that_left_a_dead_router_is_not_held_back_by_one_still_waiting_there():
    """s1 and s2 live at C; C dies. s1 resumes at B, s2 can only wait for C. What was
    published while C was dead goes to s1 at B at once, before anything newer, once each;
    the publisher hears ``accepted`` for it only once s2 had it too, after C came back,
    however often the graph changed meanwhile.

    Replaces test_parked_record_follows_a_moved_subscriber_while_others_still_wait_at_the_dead_router
    and test_retrying_a_still_unroutable_record_keeps_it_waiting (with the one-core
    test_a_root_that_cannot_reach_a_destination_keeps_waiting_and_sends_again_when_it_can)."""
    run = Run("line3", [("s1", ["C", "B"]), ("s2", ["C"])])
    run.fault(Fault(START, "kill", ("C",), 3.0))
    run.publish([START + 0.002, START + 1.0])
    run.finish()
    assert run.processed("s1") == run.processed("s2") == [("p", 0), ("p", 1)]
    s1, s2 = run.done["s1"], run.done["s2"]
    assert s1[0].where == "B" and s1[0].at < START + 3.0  # not when C came back
    assert s2[0].where == "C" and s2[0].at > START + 3.0
    assert run.told_after(("p", 0), ["s1", "s2"]) >= s2[0].at
    run.unmarked_once("s1")
    run.unmarked_once("s2")


@pytest.mark.parametrize("topology, cut", [("line3", False), ("triangle", True)],
                         ids=["line3", "triangle-link-to-its-new-router-cut"])
def test_a_subscriber_that_moves_gets_what_waited_for_it_in_publish_order_once(topology: str, cut: bool):
    """s, at the root A, takes one message at a time and works slowly; its connection drops
    with messages still waiting for it at A, and it resumes at B (where b lives). What
    waited for it follows it to B, in publish order, marked, each processed once; the
    publisher hears ``accepted`` for each only once both s and b processed it (B's answer
    for b's copy does not answer for s's); nothing is left at A to expire. On the
    triangle the A-B link is cut just then: what follows s goes round by C.

    Replaces test_suspended_subscriber_that_moved_hands_its_deliveries_over,
    test_moved_subscriber_gets_its_queue_in_publish_order_when_its_attach_completes and
    test_marker_goes_out_only_behind_the_deliveries_queued_before_it_and_survives_a_lost_hop
    (with the one-core tests for the answers:
    test_an_answer_for_one_copy_to_a_router_does_not_answer_a_newer_copy_to_it)."""
    run = Run(topology, [("s", ["A", "B"]), ("b", ["B"])], window=1)
    run.net.process_delay = lambda: 0.05  # (every subscriber takes 50 ms a message)
    n = 6
    run.publish(START + 0.001 * i for i in range(n))
    run.fault(Fault(START + 0.08, "drop", ("s",)))
    if cut:
        run.fault(Fault(START + 0.1, "cut", ("A", "B"), 1.0))
    run.finish()
    everything = [("p", i) for i in range(n)]
    assert run.processed("s") == run.processed("b") == everything
    at_a = [d for d in run.done["s"] if d.where == "A"]
    at_b = [d for d in run.done["s"] if d.where == "B"]
    assert at_a and at_b
    assert all(d.marked for d in at_b)  # it may have seen them at A: marked
    if cut:
        assert all(d.at < START + 1.1 for d in at_b)  # (while A-B was cut)
    for tag in everything:
        run.told_after(tag, ["s", "b"])
    run.unmarked_once("s")


def test_copies_that_race_on_two_ways_reach_the_subscriber_in_publish_order():
    """A sends to C through D. The A-D link slows down, then D loses its link to C: what
    was on its way through D is lost there, and the newer copies go through B and reach C
    first. C holds them until the older ones, sent again, fill the gap: s processes every
    message once, in publish order, and the publisher hears ``accepted`` for each only
    once s had it.

    Replaces test_newer_delivery_waits_behind_older_ones_that_went_back_to_its_upstream and
    test_root_sends_what_came_back_in_publish_order_with_what_it_held_meanwhile (with the
    one-core test_copies_that_arrive_out_of_order_reach_the_subscriber_in_publish_order)."""
    run = Run("ring4", [("s", ["C"])])
    n = 30
    run.publish(START + 0.005 * i for i in range(n))
    run.fault(Fault(START + 0.05, "slow", ("A", "D"), 1.0, 0.15), Fault(START + 0.1, "cut", ("D", "C"), 1.0))
    held = 0
    while run.net.loop.now < START + 1.0:
        run.net.run_until(run.net.loop.now + 0.01)
        held = max(held, run.net.routers["C"].core.copies.dest.held)
    run.finish()
    assert run.processed("s") == [("p", i) for i in range(n)]
    for i in range(n):
        run.told_after(("p", i), ["s"])
    run.unmarked_once("s")
    assert held > 0  # (the race happened: newer copies came first, and waited at C)


def test_members_that_move_with_messages_on_their_way_process_each_message_once():
    """A consumer group's members g1 and g2 and a plain subscriber x live at C; C dies with
    messages on their way, and all three resume at B. Every message is processed by
    exactly one member (what followed a member to B went to the member chosen for it,
    never to the other) and by x, in publish order; the publisher hears ``accepted`` only
    once x and the member that had it processed it.

    Replaces test_a_copy_for_particular_keys_reaches_only_members_chosen_for_it (with the
    one-core test_copies_for_a_group_name_only_the_member_chosen_for_the_message_wherever_the_members_go)."""
    run = Run("line3", [("x", ["C", "B"])], members=[("g1", ["C", "B"]), ("g2", ["C", "B"])], window=2)
    n = 12
    run.publish(START + 0.004 * i for i in range(n))
    run.fault(Fault(START + 0.02, "kill", ("C",), 2.0))
    run.finish()
    everything = [("p", i) for i in range(n)]
    assert run.processed("x") == everything
    g1, g2 = run.processed("g1"), run.processed("g2")
    assert sorted(g1 + g2) == everything and g1 and g2  # each once, by one member
    assert g1 == sorted(g1) and g2 == sorted(g2)
    assert any(d.where == "B" for d in run.done["g1"] + run.done["g2"])
    for tag in everything:
        run.told_after(tag, ["x", "g1" if tag in g1 else "g2"])
    for name in ("x", "g1", "g2"):
        run.unmarked_once(name)


def test_a_publisher_that_resumes_at_another_root_has_each_message_processed_once_in_order():
    """The root A dies with messages on their way to C (s, and member g1 of a group) and to
    B (b, and member g2); the publisher resumes at B, the new root, and sends again what it
    had no outcome for. Every subscriber processes every message once, in publish order,
    wherever its copies came from (C may have them from A and from B); each message is
    processed by one member of the group; the publisher hears ``accepted`` for each only
    once every subscriber and the member that had it processed it.

    The network's side of test_forwarded_gid_seen_twice_is_delivered_once_and_answered_twice,
    test_a_new_root_serves_its_own_subscribers_the_forwarded_copy_never_reached and
    test_a_second_roots_choice_does_not_stand_where_the_first_ones_member_has_it (their
    one-core tests: test_a_copy_that_comes_twice_or_from_two_roots_is_delivered_once_and_each_root_is_answered,
    test_a_publisher_that_resumes_at_a_destination_makes_it_the_root_and_its_late_subscriber_gets_the_message,
    test_a_second_roots_choice_gives_the_message_to_the_member_that_had_it_from_the_first)."""
    run = Run("triangle", [("s", ["C"]), ("b", ["B"])], publishers=[("p", ["A", "B"])],
              members=[("g1", ["C"]), ("g2", ["B"])], window=2)
    run.net.process_delay = lambda: 0.02
    n = 12
    run.publish(START + 0.004 * i for i in range(n))
    killed = START + 0.03
    run.fault(Fault(killed, "kill", ("A",), 2.0))
    run.finish()
    everything = [("p", i) for i in range(n)]
    assert run.processed("s") == run.processed("b") == everything
    g1, g2 = run.processed("g1"), run.processed("g2")
    assert sorted(g1 + g2) == everything and g1 == sorted(g1) and g2 == sorted(g2)
    resumed = [tag for tag in everything if run.heard[tag][0] > killed]
    assert len(resumed) > 1  # (answered by the new root)
    for tag in everything:
        run.told_after(tag, ["s", "b", "g1" if tag in g1 else "g2"])
    for name in run.subs:
        run.unmarked_once(name)
