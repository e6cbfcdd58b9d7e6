"""Bugs the in-process network found (``sim/``), each pinned down on one core.

(Those of several routers replay as named seeds in the in-process network itself:
``tests/sim/test_issue24_seeds.py``, ``test_protocol_seeds.py``, ``test_routing.py``;
the bounded exhaustive mode explores their situations in every placement of their
faults: ``sim/explore.py``.)"""

from __future__ import annotations

from once.router.config import Settings
from once.router.core import ACCEPTED, Core
from support.batched import batched
from support.routes import TestRoutes
from test_core import Pub, Sub  # (tests/router is on the path, like tests/)


def test_an_answer_after_settlement_is_settled_at_once():
    """Seed 78: a subscriber came back and accepted a redelivery of a record whose
    publisher had settled already; nobody settled that delivery and the record stayed."""
    core = batched(Core("A", Settings(), routes=TestRoutes()))
    s = Sub()
    sub, _ = core.add_subscriber(s, "t", "c", "l", False)
    pub_port = Pub()
    pub = core.add_publisher(pub_port, "t", "c", "p", True, incarnation=1)
    other = Sub()
    core.add_subscriber(other, "t", "c", "other", False)
    rec = core.publish(pub, b"\x00", b"m", False, "pd")
    core.subscriber_update(core.topics["t"][("c", "other")], rec, other.sent[0], ACCEPTED, False)
    core.publisher_settled(pub, rec)  # settlement relayed while `sub` still has it unsettled
    assert s.settled  # (the relay settled its first delivery)
    # it comes back and takes the record over; the redelivery is answered after settlement
    s2 = Sub()
    new, _ = core.add_subscriber(s2, "t", "c", "l", False)
    core.pump(new)
    handle = rec.unsettled[new]
    core.subscriber_update(new, rec, handle, ACCEPTED, False)
    assert handle in s2.settled and rec.gid not in core.records
