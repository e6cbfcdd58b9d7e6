"""Publisher credit follows use (issue 12): idle links cannot hold the router's window."""

from __future__ import annotations

from typing import Any

from once.router.config import Settings
from once.router.core import ACCEPTED, Core
from once.router.core.ceiling import FIRST_CEILING
from once.router.core.purse import Purse
from support.batched import batched
from support.routes import TestRoutes
from test_core import Pub, Sub


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _core(clock: Clock, **kw: Any) -> Core:
    return batched(Core("A", Settings(**kw), clock=clock, routes=TestRoutes()))


def _send(core: Core, pub: Any, n: int, tag0: int = 0) -> None:
    for i in range(n):  # (one batch: the publishes, then its end)
        assert pub.credit > 0
        core.bare.publish(pub, str(tag0 + i).encode(), b"m", False, f"h{tag0 + i}")
    core.after_batch()


def test_a_new_link_starts_small_and_grows_with_use():
    clock = Clock()
    core = _core(clock, max_in_flight=10_000, link_credit=1000, initial_credit=16)
    port = Pub()
    pub = core.add_publisher(port, "t", "c", "l", False)
    assert pub.credit == 1  # until its first message shows how large they are
    _send(core, pub, 1)
    assert pub.credit == 16
    sent = 1
    for _ in range(10):
        n = pub.credit
        _send(core, pub, n, sent)
        sent += n
    # ... while what it holds unused stays within its first ceiling (beyond it only when a
    # probe shows more pays)
    assert pub.window == 1000 and pub.credit == FIRST_CEILING
    assert port.grants[:6] == [1, 16, 32, 64, 128, 256]


def test_idle_links_are_cut_back_and_grow_again_when_they_send():
    clock = Clock()
    core = _core(clock, max_in_flight=10_000, link_credit=1000, credit_idle=2.0)
    port = Pub()
    pub = core.add_publisher(port, "t", "c", "l", False)
    _send(core, pub, 1)
    _send(core, pub, 16, 1)
    _send(core, pub, pub.credit, 17)
    assert pub.credit > 16
    clock.now = 1.0
    assert core.reclaim_idle(clock.now) == 0  # it sent since the last sweep
    clock.now = 2.5
    assert core.reclaim_idle(clock.now) == 0  # quiet for 1.5 s only
    clock.now = 3.1
    assert core.reclaim_idle(clock.now) == 1
    assert pub.credit == 1 and port.grants[-1] == 1 and core.outstanding == 1
    _send(core, pub, 1, 100)  # its one message brings it back, doubling
    assert pub.credit == 2
    _send(core, pub, 2, 101)
    assert pub.credit == 4


def test_thousands_of_idle_links_do_not_starve_a_publisher_on_another_connection():
    clock = Clock()
    core = _core(clock, max_in_flight=10_000, link_credit=200, credit_idle=2.0)
    evil = [core.add_publisher(Pub(), "t", "evil", f"l{i}", False, group="evil") for i in range(2000)]
    # Links that never sent hold one credit each (their message size is not known).
    assert sum(p.credit for p in evil) == 2000
    for i, p in enumerate(evil[:500]):  # some send once, and would then take more
        _send(core, p, 1, i)
    # One connection holds at most a quarter of the window, however many links it opens.
    assert sum(p.credit for p in evil) == 2500
    good_port = Pub()
    good = core.add_publisher(good_port, "u", "good", "l", False, group="good")
    assert good.credit == 1
    sent = 0
    for step in range(12):
        clock.now = step * 0.5
        core.reclaim_idle(clock.now)
        n = good.credit
        _send(core, good, n, sent)
        sent += n
    # The quiet links were cut back to one credit each and the busy publisher's share is
    # the whole of link_credit: the window is not divided among links that do not send.
    assert sum(p.credit for p in evil) <= 2000
    assert max(p.credit for p in evil) == 1
    assert good.credit == 200
    assert core.outstanding + core.local_count <= 10_000


def _parking_holds(core: Core) -> None:
    """What the window keeps for parked links agrees with the links themselves."""
    window = core.credit
    parked = [p for p in core.publishers if p.parked]
    assert set(window.active) == {p for p in core.publishers if not p.parked}
    assert all(p.credit >= 1 and not p.purses for p in parked)
    assert window.parked == len(parked) and window.parked_bytes == sum(p.credit * p.size for p in parked)
    conns: dict[object, int] = {}
    for p in parked:
        conns[p.group] = conns.get(p.group, 0) + p.credit
    assert window.parked_conn == conns
    assert core.outstanding == sum(p.credit for p in core.publishers)


def test_a_credit_pass_looks_only_at_links_that_may_want_credit():
    clock = Clock()
    core = _core(clock, max_in_flight=10_000, link_credit=200, credit_idle=2.0)
    idle = [core.add_publisher(Pub(), "t", "idle", f"l{i}", False, group="idle") for i in range(2000)]
    good = core.add_publisher(Pub(), "u", "good", "l", False, group="good")
    _send(core, good, 1)
    # Links that hold their credit and can take no more before they send are skipped: the
    # idle ones' one credit, and the window of the one that sent.
    assert list(core.credit.active) == [] and good.credit == 16 and good.parked
    _parking_holds(core)
    _send(core, idle[7], 1)  # one sends: it is looked at again, its window opens, and it is parked with it
    assert idle[7].credit == 16 and idle[7].parked and list(core.credit.active) == []
    _parking_holds(core)
    core.publisher_credit_changed(idle[8], 0)  # one drains: a pass gives its one credit back
    assert idle[8].credit == 1
    _parking_holds(core)
    sent = 1
    for step in range(1, 10):
        clock.now = step * 0.5
        core.reclaim_idle(clock.now)
        n = good.credit
        _send(core, good, n, sent)
        sent += n
        _parking_holds(core)
    assert good.credit == 200  # (its window grew as it sent)
    assert idle[7].credit == 1 and idle[7].parked  # idle[7] went quiet: cut back to one, parked
    core.remove_publisher(idle[7])
    core.remove_publisher(idle[9])
    _parking_holds(core)


def test_links_parked_in_one_pass_count_once_against_their_connection():
    clock = Clock()
    core = batched(Core("A", Settings(max_in_flight=10_000, link_credit=200), clock=clock, unsynced=True, routes=TestRoutes()))
    links = [core.add_publisher(Pub(), "t", "c", f"l{i}", False, group="c") for i in range(2000)]
    assert core.outstanding == 0  # (no credit before the router knows the network)
    core.synced()  # one pass for all of them: each gets its one credit and is parked
    assert all(p.credit == 1 and p.parked for p in links)  # 2,000 within the connection's 2,500
    _parking_holds(core)


def test_credit_is_never_more_than_the_window_room():
    clock = Clock()
    core = _core(clock, max_in_flight=100, link_credit=80, initial_credit=64)
    sub = Sub(credit=0)  # holds everything: records stay in flight
    core.add_subscriber(sub, "t", "s", "l", False)
    pubs = [core.add_publisher(Pub(), "t", f"c{i}", "l", False, group=i) for i in range(3)]
    assert core.outstanding <= 100
    for i, pub in enumerate(pubs):
        _send(core, pub, pub.credit, i * 1000)
    assert core.local_count + core.outstanding <= 100


MB = 1 << 20


def test_credit_stops_at_the_link_and_router_byte_bounds():
    clock = Clock()
    core = _core(clock, max_in_flight=10_000, link_credit=2000, max_in_flight_bytes=40 * MB,
                 link_in_flight_bytes=16 * MB)
    core.add_subscriber(Sub(credit=0), "t", "s", "l", False)  # takes nothing: all stays in flight
    pubs = [core.add_publisher(Pub(), "t", f"c{i}", "l", False, group=i) for i in range(4)]
    body = b"x" * MB
    tags = 0
    for _ in range(40):
        for pub in pubs:
            while pub.credit:
                core.publish(pub, str(tags).encode(), body, False, tags)
                tags += 1
            core.replenish()
    assert all(p.bytes <= 16 * MB for p in pubs)
    # Within the bound, but for the first message of each link (its size was unknown):
    # those are granted one credit each, whatever the room.
    assert core.records.bytes <= 40 * MB + len(pubs) * MB
    assert core.records.bytes >= 38 * MB  # and it is used, not left idle
    assert all(p.credit == 0 for p in pubs)


def test_a_publisher_that_outgrows_its_guess_loses_its_credit():
    clock = Clock()
    core = _core(clock, link_credit=2000, link_in_flight_bytes=16 * MB)
    port = Pub()
    pub = core.add_publisher(port, "t", "c", "l", False)
    _send(core, pub, 1)  # small messages first (nobody holds them): its window grows
    for i in range(6):
        _send(core, pub, pub.credit, 100 + i * 1000)
    assert pub.credit > 100
    core.add_subscriber(Sub(credit=0), "t", "s", "l", False)
    core.publish(pub, b"big", b"x" * 17 * MB, False, "big")  # then one over the link's bound
    assert pub.credit == 0 and port.grants[-1] == 0
    core.replenish()
    assert pub.credit == 0


def test_a_neighbour_that_comes_up_later_gets_transit_credit_from_an_idle_one():
    # More neighbours than max_in_flight / link_credit: the first ones up took the whole
    # window, and before the rebalance a later one got none for good (its copies waited).
    clock = Clock()
    core = _core(clock, max_in_flight=400, link_credit=200)
    first = [core.add_upstream(p, Pub()) for p in ("B", "C")]
    assert [u.credit for u in first] == [200, 200]
    late_port = Pub()
    late = core.add_upstream("D", late_port)
    share = 400 // 3
    assert late.credit > 0 and late_port.grants[-1] == late.credit
    assert all(u.credit <= share for u in first)
    assert core.credit.transit_outstanding == sum(u.credit for u in (*first, late)) <= 400


def test_unused_credit_stays_under_the_ceiling_while_unanswered_deliveries_fill_the_window():
    # A subscriber that holds what it gets: the publisher may still have a whole window
    # unanswered; only what it could queue in front of the router is bounded. (Without the
    # pace's bound: with it, the window is probed up as a stopped publisher waits,
    # ``test_core_pace.py``.)
    clock = Clock()
    core = _core(clock, max_in_flight=10_000, link_credit=1000, initial_credit=16, queue_target=0)
    core.add_subscriber(Sub(credit=0), "t", "s", "l", False)
    pub = core.add_publisher(Pub(), "t", "c", "l", False)
    sent = 0
    for _ in range(40):
        assert pub.credit <= FIRST_CEILING
        n = pub.credit
        if not n:
            break
        _send(core, pub, n, sent)
        sent += n
    assert pub.in_flight == sent == 1000  # the window, not the ceiling, stopped it


def test_a_users_links_share_its_byte_budget_and_get_credit_again_as_it_frees():
    """The policy's max_in_flight_bytes for a user (one ``Purse`` its links share): credit
    stops when what its records hold reaches it, whatever the link and router bounds leave,
    and comes back as those records are let go. Another user's link is not held back."""
    clock = Clock()
    core = _core(clock, max_in_flight=10_000, link_credit=2000, max_in_flight_bytes=400 * MB,
                 link_in_flight_bytes=64 * MB)
    sub = Sub(credit=0)  # takes nothing yet: all stays in flight
    taker, _ = core.add_subscriber(sub, "t", "s", "l", False)
    purse = Purse(8 * MB, "policy.users.alice.max_in_flight_bytes")
    alices = [core.add_publisher(Pub(), "t", f"a{i}", "l", False, group=i, grant=False) for i in range(3)]
    for pub in alices:
        pub.purses = (purse,)
    bob = core.add_publisher(Pub(), "t", "b", "l", False, group="b")
    core.replenish()
    body = b"x" * MB
    tags = 0
    for _ in range(20):
        for pub in (*alices, bob):
            while pub.credit:
                core.publish(pub, str(tags).encode(), body, False, tags)
                tags += 1
            core.replenish()
    # Each link's first message had one credit before its size was known: three over at most.
    assert 6 * MB <= purse.bytes == sum(p.bytes for p in alices) <= 8 * MB + 3 * MB
    assert all(p.credit == 0 for p in alices)
    assert bob.bytes > 16 * MB  # (bob has no budget: the link bound is his)
    # The subscriber takes and accepts everything: alice's purse empties, and credit returns.
    sub.room = 10_000
    core.pump(taker)
    for record, _settled, _ in list(sub.sent):
        core.subscriber_update(taker, record, None, ACCEPTED, True)
    core.replenish()
    assert purse.bytes == 0
    assert 0 < sum(p.credit for p in alices) * MB <= 8 * MB  # (within the budget again)


def test_a_budget_given_on_reload_counts_what_the_links_hold_and_bounds_their_credit_from_then_on():
    """SIGHUP gives a user a max_in_flight_bytes it had not: its links already attached take
    the new ``Purse``, with the bytes their records hold, and get no credit past it."""
    clock = Clock()
    core = _core(clock, max_in_flight=10_000, link_credit=2000, max_in_flight_bytes=400 * MB,
                 link_in_flight_bytes=64 * MB)
    sub = Sub(credit=0)
    core.add_subscriber(sub, "t", "s", "l", False)
    pubs = [core.add_publisher(Pub(), "t", f"a{i}", "l", False, group=i) for i in range(2)]
    body = b"x" * MB
    tags = 0
    for pub in pubs:
        for _ in range(3):
            while not pub.credit:
                core.replenish()
            core.publish(pub, str(tags).encode(), body, False, tags)
            tags += 1
        core.replenish()
    assert all(p.credit > 0 for p in pubs) and sum(p.bytes for p in pubs) == 6 * MB
    purse = Purse(8 * MB, "policy.users.alice.max_in_flight_bytes")
    core.rebudget((pub, (purse,)) for pub in pubs)
    core.rebudget((pub, (purse,)) for pub in pubs)  # (again: nothing more)
    assert purse.bytes == 6 * MB and all(p.purses == (purse,) for p in pubs)
    # credit again within it: 2 MiB of room, at 1 MiB a message
    assert sum(p.credit for p in pubs) == 2
    for pub in pubs:
        while pub.credit:
            core.publish(pub, str(tags).encode(), body, False, tags)
            tags += 1
        core.replenish()
    assert purse.bytes == 8 * MB == sum(p.bytes for p in pubs) and all(p.credit == 0 for p in pubs)
