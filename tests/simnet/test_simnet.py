"""The in-process network itself: it carries traffic, and each kind of fault is survived."""

from __future__ import annotations

import pytest

from simnet.net import Fault, SimNet
from simnet.schedules import START, TOPOLOGIES


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
