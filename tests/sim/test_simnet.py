"""The in-process network itself: it carries traffic, and each kind of fault is survived."""

from __future__ import annotations

import pytest
from once.sim.net import Fault, SimNet
from once.sim.schedules import START, TOPOLOGIES


def _run(topology: str, faults: list[Fault], messages: int = 60, seed: int = 1) -> SimNet:
    net = SimNet(seed, TOPOLOGIES[topology])
    net.start()
    net.add_subscriber("s0", "t", ["C", "B", "A"])
    net.add_subscriber("s1", "t", ["A", "B", "C"])
    pub = net.add_publisher("p0", "t", ["B", "A", "C"])
    net.run_until(START)
    assert all(c.attached for c in net.publishers + net.subscribers)
    net.publish_at(pub, [START + i * 0.005 for i in range(messages)])
    for f in faults:
        net.schedule(f)
    assert net.run_to_end(60.0), "not settled"
    net.run_until(net.loop.now + net.settings.publisher_grace + 1)
    return net


def test_a_line_carries_every_message_to_every_subscriber_once_and_in_order():
    net = _run("line3", [])
    v = net.check()
    assert v.ok, v.violations
    assert [len(s.effects) for s in net.subscribers] == [60, 60]


@pytest.mark.parametrize("fault", [
    Fault(1.1, "kill", ("C",), 0.5),
    Fault(1.1, "kill", ("B",), 1.0),
    Fault(1.05, "cut", ("A", "C"), 0.4),
    Fault(1.05, "slow", ("A", "B"), 0.5, 0.05),
    Fault(1.1, "drop", ("p0",)),
    Fault(1.1, "crash", ("s0",), 0.3),
], ids=str)
def test_each_fault_kind_loses_and_repeats_nothing(fault: Fault):
    v = _run("triangle", [fault]).check()
    assert v.ok, v.violations


def test_the_same_seed_gives_the_same_run():
    a = _run("ring4", [Fault(1.1, "kill", ("C",), 0.5)], seed=7)
    b = _run("ring4", [Fault(1.1, "kill", ("C",), 0.5)], seed=7)
    assert a.loop.events == b.loop.events
    assert [s.effects for s in a.subscribers] == [s.effects for s in b.subscribers]


def _started(topology: str = "line3") -> SimNet:
    net = SimNet(3, TOPOLOGIES[topology])
    net.start()
    net.add_subscriber("s0", "t", ["C", "B", "A"])
    net.add_publisher("p0", "t", ["A", "B", "C"])
    net.run_until(START)
    return net


def test_a_silent_partition_longer_than_dead_after_takes_the_link_down_until_it_heals():
    net = _started()
    dead_after = net.settings.router_dead_after
    net.schedule(Fault(START, "silent", ("A", "B"), dead_after + 1.0))
    net.run_until(START + dead_after / 2)
    assert frozenset("AB") in net.conns and net.stall("A", "B") > 0  # held up, not lost (yet)
    net.run_until(START + dead_after + 0.5)
    assert frozenset("AB") not in net.conns  # declared dead by its ends
    net.run_until(START + dead_after + 4.0)
    assert frozenset("AB") in net.conns and net.stall("A", "B") == 0  # healed, redialled


def test_a_one_way_partition_holds_up_one_direction_only():
    net = _started()
    net.schedule(Fault(START, "oneway", ("A", "B"), 1.0))
    net.run_until(START + 0.1)
    assert net.stall("A", "B") > 0 and net.stall("B", "A") == 0


def test_a_paused_router_runs_nothing_until_it_resumes_and_a_skewed_one_tells_another_time():
    net = _started()
    net.schedule(Fault(START, "pause", ("B",), 0.5))
    net.schedule(Fault(START, "skew", ("C",), 1.0, -4.0))
    net.run_until(START + 0.2)
    b = net.routers["B"]
    ran: list[float] = []
    b.call_later(0.01, lambda: ran.append(net.loop.now))
    assert net.stall("A", "B") > 0 and net.stall("B", "C") > 0
    assert abs((net.routers["C"].wall() - net.routers["A"].wall()) + 4_000_000) < 10
    net.run_until(START + 1.0)
    assert ran and ran[0] >= START + 0.5  # its timer fired when it resumed


def test_a_crashed_publisher_publishes_nothing_while_down_and_resends_its_outbox_when_back():
    net = _started()
    pub = net.publishers[0]
    net.publish_at(pub, [START + 0.01 * i for i in range(10)])
    net.schedule(Fault(START + 0.025, "crash", ("p0",), 0.05))
    assert net.run_to_end(30.0)
    assert 0 < pub.next < 10  # the ones due while it was down were never published
    v = net.check()
    assert v.ok, v.violations
    assert len(net.subscribers[0].effects) == pub.next


def test_its_ports_refuse_a_call_the_core_makes_inside_an_entry_call():
    """Every port of the in-process network checks that its core is ending a batch
    (``sim/links.py``), so every sweep checks that no entry call reaches a port. A port
    called from inside a core call raises."""
    from once.sim.links import PortCalledInEntry

    net = _started()
    net.run_until(START + 0.5)
    router = net.routers["A"]
    [pub] = router.core.publishers
    with pytest.raises(PortCalledInEntry):
        pub.port.grant(1)  # (not from ``after_batch``: as a core that called it inside ``publish`` would)
