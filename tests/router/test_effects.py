"""The core answers with effects (``router/core/effects.py``): no entry call reaches a port
before it returns; what the calls of a batch decided reaches the ports when the batch
ends (``Core.after_batch``), and there only. The core is driven bare here, several calls
to a batch, through ports that raise if the core calls them while the adaptor is inside
one of its calls. (The simulator's ports check the same on every call of every sweep:
``sim/links.py``; the adaptors' in ``tests/adaptors/test_ports_after_the_batch.py``.)"""

from __future__ import annotations

from typing import Any

import pytest
from once.router.config import Settings
from once.router.core import ACCEPTED, RELEASED, Core, OutcomeKind, Refused
from once.router.core.lifecycle import LinkLifecycle, SubscriberAttach
from test_copies import Hop, Routes, answer, key
from test_core import Pub, Sub
from test_lifecycle import Plane

T = "t"


class Adaptor:
    """Knows when it is inside a core call; every port it hands the core raises then, and
    logs each call the core makes on it."""

    def __init__(self) -> None:
        self.inside = False
        self.log: list[tuple[str, str]] = []

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        self.inside = True
        try:
            return fn(*args, **kwargs)
        finally:
            self.inside = False

    def port(self, name: str, port: Any) -> Any:
        adaptor = self

        class Guarded:
            def __getattr__(self, method: str) -> Any:
                inner = getattr(port, method)

                def called(*args: Any) -> Any:
                    if adaptor.inside:
                        raise AssertionError(f"the core called {name}.{method} inside an entry call")
                    adaptor.log.append((name, method))
                    return inner(*args)

                return called

        return Guarded()

    def end(self, core: Core) -> list[tuple[str, str]]:
        """The batch ends: what reached the ports."""
        self.log.clear()
        core.after_batch()
        done = [c for c in self.log if c[1] not in ("credit", "draining")]
        self.log.clear()
        return done


def _core(**kw: Any) -> tuple[Core, Routes]:
    routes = Routes("A")
    return Core("A", Settings(**kw), clock=lambda: 0.0, wall=lambda: 1_000_000, routes=routes), routes


def test_no_entry_call_reaches_a_port_before_it_returns_and_the_batch_end_carries_what_they_decided():
    core, routes = _core()
    a = Adaptor()
    routes.next_hop = {"B": "B"}
    routes.where = {key("far"): "B"}
    hop = Hop()
    a.call(core.add_hop, "B", a.port("hop", hop))
    s, p = Sub(), Pub()
    sub, _ = a.call(core.add_subscriber, a.port("sub", s), T, "c", "near", False)
    routes.where[key("near")] = "A"
    pub = a.call(core.add_publisher, a.port("pub", p), T, "cp", "lp", False)
    assert a.end(core) == [("pub", "grant")] and p.grants == [1]

    # three messages in one batch: nothing reaches a port until it ends
    records = [a.call(core.publish, pub, bytes([i]), b"m", False, f"h{i}") for i in range(3)]
    assert s.sent == [] and hop.copies == [] and a.log == []
    done = a.end(core)
    assert done.count(("sub", "deliver")) == 3 and done.count(("hop", "copy")) == 3
    assert [c.gid for c in hop.copies] == [r.gid for r in records]
    assert done.count(("pub", "grant")) <= 1  # the link hears its credit once a batch

    # the near subscriber accepts one and releases another; the far router answers one
    a.call(core.subscriber_update, sub, records[0], s.sent[0][0], ACCEPTED, False)
    a.call(core.subscriber_update, sub, records[1], ("handle", 2), RELEASED, True)
    a.call(core.control, "B", (answer(hop.copies[0], "B"),))
    assert a.log == [] and p.outcomes == []
    done = a.end(core)
    assert ("pub", "outcome") in done and p.outcomes == [("h0", ACCEPTED, True)]
    assert s.sent[-1][0] is records[1] and s.sent[-1][2] == 1  # sent again, marked, as the batch ended
    assert ("sub", "settle") in done  # (the accepted one's settlement, relayed as the root settled)

    # the subscriber goes; the messages it held are answered for it as the batch ends
    a.call(core.remove_subscriber, sub)
    a.call(core.control, "B", tuple(answer(c, "B") for c in hop.copies[1:]))
    assert a.log == []
    a.end(core)
    assert sorted(h for h, _, _ in p.outcomes) == ["h0", "h1", "h2"]


def test_a_message_nobody_waits_for_is_answered_as_the_batch_ends_not_inside_its_publish():
    """MQTT needed two flags for this (an outcome, and a settlement, inside ``publish``,
    before the adaptor had the record to note): the outcome comes as the batch ends, when
    the adaptor holds the record."""
    core, _ = _core()
    a = Adaptor()
    p = Pub()
    pub = a.call(core.add_publisher, a.port("pub", p), "nobody", "cp", "lp", True)  # (settles second)
    a.end(core)
    record = a.call(core.publish, pub, b"0", b"m", False, "h0")
    assert p.outcomes == [] and pub.live[b"0"] is record
    assert ("pub", "outcome") in a.end(core) and p.outcomes == [("h0", ACCEPTED, False)]
    a.call(core.publisher_settled, pub, record)
    a.end(core)
    assert len(core.records) == 0


def test_a_port_that_calls_the_core_while_the_batch_ends_has_what_it_caused_carried_out_in_the_same_end():
    """An adaptor that answers an outcome by settling (MQTT's PUBACK, a publisher that
    settles at once) calls the core from inside ``after_batch``: the core takes the call
    and carries its effects out before ``after_batch`` returns."""
    core, _ = _core()
    s = Sub()
    sub, _ = core.add_subscriber(s, T, "c", "s", False)

    class Settles(Pub):
        def outcome(self, handle: Any, outcome: Any, settle: bool) -> None:
            super().outcome(handle, outcome, settle)
            core.publisher_settled(pub, core.records.records[gid])

    p = Settles()
    pub = core.add_publisher(p, T, "cp", "lp", True)
    record = core.publish(pub, b"0", b"m", False, "h0")
    gid = record.gid
    core.after_batch()
    core.subscriber_update(sub, record, s.sent[0][0], ACCEPTED, False)
    core.after_batch()
    assert p.outcomes == [("h0", ACCEPTED, False)]
    assert s.settled == [("handle", 1)] and len(core.records) == 0  # settled and freed in that same end


def test_a_message_a_subscriber_can_never_take_is_refused_by_value_and_rejected_for_it_alone():
    """A port that cannot deliver (an MQTT client's maximum packet size) returns ``Refused``
    instead of calling back into the core while it is sending."""
    core, _ = _core()

    class TooSmall(Sub):
        def deliver(self, record: Any, settled: bool, redelivery: int) -> Any:
            return Refused("a message of 1 bytes; the client takes at most 0")

    small, fine, p = TooSmall(), Sub(), Pub()
    core.add_subscriber(small, T, "c", "small", False)
    ok, _ = core.add_subscriber(fine, T, "c", "fine", False)
    pub = core.add_publisher(p, T, "cp", "lp", False)
    record = core.publish(pub, b"0", b"m", False, "h0")
    core.after_batch()
    assert len(fine.sent) == 1 and p.outcomes == []
    core.subscriber_update(ok, record, fine.sent[0][0], ACCEPTED, True)
    core.after_batch()
    [(_, outcome, _)] = p.outcomes
    assert outcome.kind is OutcomeKind.REJECTED and "takes at most 0" in outcome.description


def test_a_link_that_attaches_again_steals_the_old_one_as_the_batch_ends():
    core, _ = _core()
    a = Adaptor()
    links = LinkLifecycle(core, Plane())
    first, second = Sub(), Sub()
    stolen: list[str] = []
    first.stolen = lambda: stolen.append("first")  # type: ignore[method-assign]
    a.call(links.attach_subscriber, a.port("first", first), SubscriberAttach(T, "c", "s"), lambda *_: None)
    a.call(links.attach_subscriber, a.port("second", second), SubscriberAttach(T, "c", "s"), lambda *_: None)
    assert stolen == []
    assert ("first", "stolen") in a.end(core) and stolen == ["first"]


@pytest.mark.parametrize("step", ["publish", "update"])
def test_the_guard_catches_a_port_called_inside_an_entry_call(step: str):
    """(The check itself can fail: a core that sends while inside ``publish`` is caught.)"""
    core, _ = _core()
    a = Adaptor()
    s, p = Sub(), Pub()
    sub, _ = core.add_subscriber(a.port("sub", s), T, "c", "s", False)
    pub = core.add_publisher(a.port("pub", p), T, "cp", "lp", False)
    core.after_batch()
    record = core.publish(pub, b"0", b"m", False, "h0")
    core.after_batch()
    with pytest.raises(AssertionError, match="inside an entry call"):
        if step == "publish":
            a.call(lambda: (core.publish(pub, b"1", b"m", False, "h1"), core.after_batch()))
        else:
            a.call(lambda: (core.subscriber_update(sub, record, s.sent[0][0], ACCEPTED, True), core.after_batch()))
