"""What one client's many topics and patterns cost (issue 49, items 8 and 9): the work of a
subscription, of a message to a new topic and of a credit pass does not grow with the
number of subscriptions, patterns or idle publishers there are. Measured as the lines of
Python run (``sys.settrace``), a count, never a time: the same on a busy machine. Before,
a subscription walked every subscriber twice, a message to a new topic tried every
pattern here and in the network's table, and a credit pass looked at every link."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from once.linkstate.messages import SubEvent, Subscription
from once.linkstate.subscriptions import SubscriberTable
from once.router.config import Settings
from once.router.core import Core
from support.batched import batched
from support.routes import TestRoutes
from test_core import Pub, Sub

N = 10_000


def lines_run(call: Callable[[], Any]) -> int:
    """How many lines of Python ``call`` runs (every frame it enters counted)."""
    count = 0

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        call()
    finally:
        sys.settrace(None)
    return count


def _core() -> Core:
    return batched(Core("A", Settings(max_in_flight=100_000), clock=lambda: 0.0, routes=TestRoutes()))


def test_a_subscription_costs_the_same_beside_ten_thousand_others():
    core = _core()
    port = Sub()
    for i in range(N):
        core.add_subscriber(port, f"t/{i}/x", "many", f"s{i}", False)
    core.suspend_subscriber(core.tables.topics.find(("many", "s7")), 1e9)
    one = lines_run(lambda: core.add_subscriber(port, "t/new/x", "many", "new", False))
    suspended = lines_run(core.suspended)
    pattern = lines_run(lambda: core.add_subscriber(port, "p/+/x", "many", "pattern", False))
    assert one < 400 and suspended < 50 and pattern < 400, (one, suspended, pattern)
    assert [s.key for s in core.suspended()] == [("many", "s7")]


def test_a_message_to_a_new_topic_does_not_try_every_pattern():
    core = _core()
    port = Sub()
    for i in range(N):
        core.add_subscriber(port, f"p/{i}/+", "many", f"p{i}", False)
    table = SubscriberTable("A")
    for i in range(N):
        table.on_event(SubEvent("B", i + 1, True, Subscription("B", f"q/{i}/#", "far", f"q{i}", since=1)), "B", set())
    topics = core.tables.topics
    local = lines_run(lambda: topics.get("p/17/new"))
    remote = lines_run(lambda: table.routers_for("q/17/new/topic"))
    members = lines_run(lambda: table.subscribers_of("B", "q/17/new/topic"))
    assert local < 200 and remote < 200 and members < 200, (local, remote, members)
    assert [s.key for s in topics.get("p/17/new", {}).values()] == [("many", "p17")]
    assert table.routers_for("q/17/new/topic") == {"B"} and table.routers_for("r/1") == set()
    assert [s.key for s in table.subscribers_of("B", "q/17/new/topic")] == [("far", "q17")]


def test_a_credit_pass_costs_the_same_beside_ten_thousand_publishers_that_hold_their_credit():
    """Links that hold the credit they may (each its connection's, as AMQP clients' are)
    are parked: a pass after one of them sends looks at that one."""
    core = batched(Core("A", Settings(max_in_flight=1_000_000), clock=lambda: 0.0, routes=TestRoutes()))
    pubs = [core.add_publisher(Pub(), f"t/{i}", f"c{i}", "l", False, group=i) for i in range(N)]
    for pub in pubs:  # each sends its first message, then holds the credit it was given
        core.bare.publish(pub, b"1", b"m", True, None)
    core.after_batch()
    assert all(p.credit > 1 and p.parked for p in pubs)
    busy = pubs[5]
    core.bare.publish(busy, b"2", b"m", True, None)
    one = lines_run(core.after_batch)
    assert one < 1_000, one
    assert list(core.credit.active) == [] and busy.credit > 1


def test_an_mqtt_clients_publishers_take_no_credit_and_no_pass_looks_at_them():
    """An MQTT client's publisher per topic sends without credit (its adaptor stops reading
    the client past the byte bounds): 10,000 of them are in no credit pass."""
    core = _core()
    pubs = [core.add_publisher(Pub(), f"t/{i}", "many", f"mqtt:t/{i}", False, group="many", credited=False)
            for i in range(N)]
    for pub in pubs:
        core.bare.publish(pub, b"1", b"m", True, None)
    core.after_batch()
    amqp = core.add_publisher(Pub(), "u", "other", "l", False, group="other")
    core.credit.want_pass()
    one = lines_run(core.after_batch)
    assert one < 1_000, one
    assert all(p.credit == 0 for p in pubs) and amqp.credit == 1 and len(core.records) == 0
