"""A stuck consumer is bounded (issue 49, item 10, ``router/core/stalls.py``): a subscriber
that holds deliveries and answers none for its limit is stalled; one that answers, or
holds nothing, or is at-most-once, is not."""

from __future__ import annotations

from once.router.config import Settings
from once.router.core import ACCEPTED, Core
from once.router.core.stalls import Stalls, holding
from support.batched import batched
from support.routes import TestRoutes
from test_core import Pub, Sub


def _core() -> Core:
    return batched(Core("A", Settings(), clock=lambda: 0.0, routes=TestRoutes()))


def test_a_subscriber_holding_deliveries_that_answers_none_is_stalled_at_its_limit_and_not_before():
    core = _core()
    port, idle_port, stingy_port, quick_port = Sub(credit=1), Sub(), Sub(credit=0), Sub(credit=1)
    stuck = core.add_subscriber(port, "jobs", "c", "stuck", False)[0]
    stingy = core.add_subscriber(stingy_port, "jobs", "c", "stingy", False)[0]  # grants no credit: they queue
    quick = core.add_subscriber(quick_port, "jobs", "c", "quick", False)[0]
    idle = core.add_subscriber(idle_port, "other", "c", "idle", False)[0]
    at_most_once = core.add_subscriber(Sub(credit=0), "jobs", "c", "amo", True)[0]
    pub = core.add_publisher(Pub(), "jobs", "p", "l", False)
    core.publish(pub, b"1", b"m", False, "h1")
    assert holding(stuck) == 1 and holding(stingy) == 1 and holding(idle) == 0
    stalls = Stalls()
    subs = [stuck, stingy, quick, idle, at_most_once]
    assert stalls.check(subs, 0.0, lambda s: 10.0) == []
    core.subscriber_update(quick, port_record(quick_port), None, ACCEPTED, True)  # quick answers
    assert stalls.check(subs, 9.9, lambda s: 10.0) == []
    core.publish(pub, b"2", b"m", False, "h2")  # quick holds the next one from now on
    got = stalls.check(subs, 10.0, lambda s: 10.0)
    assert [(s.link_name, limit, held) for s, limit, held in got] == [("stuck", 10.0, 2), ("stingy", 10.0, 2)]
    assert stalls.check(subs, 15.0, lambda s: 10.0) == []  # (each is told once; its router acts on it)
    assert [s.link_name for s, _, _ in stalls.check(subs, 20.0, lambda s: 10.0)] == ["quick"]  # (held since 9.9)
    assert [s.link_name for s, _, _ in stalls.check(subs, 40.0, lambda s: 0.0)] == []  # 0: never


def port_record(port: Sub):
    return port.sent[-1][0]
