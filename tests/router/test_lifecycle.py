"""The link-lifecycle service (``router/core/lifecycle.py``) on one core, through a test
adaptor: no sockets, no engine, and a control plane that completes attaches when told."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from once.linkstate.messages import Subscription
from once.records.membership import GroupId
from once.router.config import Settings
from once.router.core import ACCEPTED, Core
from once.router.core.lifecycle import LinkLifecycle, SubscriberAttach
from support.batched import batched


class Plane:
    """The control plane as the service sees it: it keeps what it was told and completes an
    attach only when the test says every router has acknowledged it."""

    def __init__(self) -> None:
        self.events: list[tuple[Subscription, bool]] = []
        self.pending: list[Callable[[], None]] = []
        self.followed = 0
        self.owners: dict[tuple[str, str], set[str]] = {}
        self.suspensions: dict[tuple[str, str], float] = {}  # what the journal would keep
        self.stamps: dict[tuple[str, str], int] = {}  # the newest attach stamps the network knows

    def subscribe(self, sub: Subscription, attached: bool, on_complete: Callable[[], None] | None = None) -> None:
        self.events.append((sub, attached))
        if on_complete is not None:
            self.pending.append(on_complete)

    def follow_moved_subscribers(self) -> None:
        self.followed += 1

    def suspended(self, key: tuple[str, str], until_us: float) -> None:
        self.suspensions[key] = until_us

    def finished(self, sub: Subscription) -> None:
        self.subscribe(sub, False)

    def key_owners(self, key: tuple[str, str]) -> set[str]:
        return set(self.owners.get(key, ()))

    def newest_attach(self, key: tuple[str, str]) -> int:
        return self.stamps.get(key, 0)

    def acknowledge_all(self) -> None:
        pending, self.pending = self.pending, []
        for done in pending:
            done()


class Link:
    """A subscriber's or a publisher's link as an adaptor holds it."""

    def __init__(self, credit: int = 10) -> None:
        self._credit = credit
        self.sent: list[Any] = []
        self.grants: list[int] = []
        self.outcomes: list[Any] = []
        self.stolen_ = False

    def credit(self) -> int:
        return self._credit

    def deliver(self, record: Any, settled: bool, redelivery: int) -> Any:
        self._credit -= 1
        self.sent.append((record.gid, redelivery))
        return ("d", len(self.sent))

    def settle(self, handle: Any) -> None:
        pass

    def draining(self) -> bool:
        return False

    def drained(self) -> None:
        pass

    def activated(self) -> None:
        pass

    def stolen(self) -> None:
        self.stolen_ = True

    def grant(self, credit: int) -> None:
        self.grants.append(credit)

    def outcome(self, handle: Any, outcome: Any, settle: bool) -> None:
        self.outcomes.append((handle, outcome, settle))


def _service(**kw: Any) -> tuple[Core, LinkLifecycle, Plane]:
    now = [0.0]
    core = Core("A", Settings(**kw), clock=lambda: now[0], wall=lambda: 1)
    plane = Plane()
    # (each call on the three a batch of its own: ``support/batched.py``)
    return batched(core), batched(LinkLifecycle(core, plane), core), batched(plane, core)


def test_a_subscriber_attach_is_answered_only_once_the_network_has_it_and_then_delivers():
    core, links, plane = _service()
    answers: list[Any] = []
    port = Link(credit=0)  # (a link has no credit before its attach is answered)

    def answer(ours: Any, active: Any) -> None:
        answers.append((ours, active, list(port.sent)))
        port._credit = 10  # the client gives credit once attached

    sub = links.attach_subscriber(port, SubscriberAttach("t", "c", "s"), answer)
    assert answers == [] and plane.events[0][0].key == ("c", "s") and plane.events[0][1] is True
    pub, _ = links.attach_publisher(Link(), "t", "cp", "p", False, None, None)
    links.publisher_answered(pub)
    core.publish(pub, b"0", b"m", False, "h")
    plane.acknowledge_all()
    # answered with nothing sent yet; what waited goes right after the answer
    assert answers == [(None, None, [])] and len(port.sent) == 1 and sub.attached


def test_an_attach_is_stamped_past_every_stamp_the_network_knows_for_its_key():
    """Hard seeds 152 and 275: a router whose clock was seconds behind took a resuming
    subscriber; its older-looking stamp left the key living at the router it had left,
    which expired it there (and answered for it). The stamp is now past the newest known."""
    core, links, plane = _service()  # this router's wall clock reads 1
    plane.stamps[("c", "s")] = 5_000_000  # another router stamped the key's last attach
    links.attach_subscriber(Link(), SubscriberAttach("t", "c", "s"), lambda *_: None)
    links.attach_subscriber(Link(), SubscriberAttach("t", "c", "other"), lambda *_: None)
    assert [sub.since for sub, _ in plane.events] == [5_000_001, 1]


def test_a_second_link_with_the_same_key_steals_the_subscription():
    core, links, plane = _service()
    first, second = Link(), Link()
    links.attach_subscriber(first, SubscriberAttach("t", "c", "s"), lambda *_: None)
    links.attach_subscriber(second, SubscriberAttach("t", "c", "s"), lambda *_: None)
    assert first.stolen_ and not second.stolen_
    assert [s.port for s in core.topics["t"].values()] == [second]


def test_a_resuming_subscriber_is_not_sent_what_it_says_it_accepted():
    core, links, plane = _service()
    first = Link(credit=0)
    sub = links.attach_subscriber(first, SubscriberAttach("t", "c", "s"), lambda *_: None)
    plane.acknowledge_all()
    pub, _ = links.attach_publisher(Link(), "t", "cp", "p", False, None, None)
    links.publisher_answered(pub)
    rec = core.publish(pub, b"0", b"m", False, "h")
    assert rec is not None
    links.subscriber_gone(sub, suspend=True)
    assert plane.followed == 1 and sub.suspended_until is not None
    answers: list[Any] = []
    again = Link()
    links.attach_subscriber(again, SubscriberAttach("t", "c", "s", resumable=True, unsettled={rec.gid: ACCEPTED}),
                            lambda ours, active: answers.append(ours))
    plane.acknowledge_all()
    assert answers == [{rec.gid: ACCEPTED}] and again.sent == []
    assert len(core.records) == 0  # its answer completed the record


def test_a_closed_subscription_ends_network_wide_and_an_interrupted_one_waits_its_grace():
    core, links, plane = _service(subscriber_grace=30.0)
    a = links.attach_subscriber(Link(), SubscriberAttach("t", "c", "a"), lambda *_: None)
    b = links.attach_subscriber(Link(), SubscriberAttach("t", "c", "b"), lambda *_: None)
    links.subscriber_gone(a, suspend=False)
    assert plane.events[-1] == (Subscription("A", "t", "c", "a"), False) and not a.attached
    links.subscriber_gone(b, suspend=True, timeout=90.0)
    assert b.attached and b.suspended_until == 90.0  # the larger of its timeout and the grace


def test_a_group_member_that_cannot_resume_has_its_deliveries_passed_on_at_once():
    core, links, plane = _service()
    g = GroupId("g")
    m1, m2 = Link(), Link()
    a = links.attach_subscriber(m1, SubscriberAttach("t", "c", "g|1", group=g), lambda *_: None)
    links.attach_subscriber(m2, SubscriberAttach("t", "c", "g|2", group=g), lambda *_: None)
    plane.acknowledge_all()
    pub, _ = links.attach_publisher(Link(), "t", "cp", "p", False, None, None)
    links.publisher_answered(pub)
    for i in range(4):
        core.publish(pub, bytes([i]), b"m", False, i)
    held = len(m1.sent)
    assert held and len(m2.sent) < 4
    links.subscriber_gone(a, suspend=True)  # not resumable: like a close
    assert not a.attached and len(m2.sent) == 4


def test_the_last_member_of_a_durable_group_stands_in_for_it():
    core, links, plane = _service()
    member = links.attach_subscriber(Link(), SubscriberAttach("t", "c", "g|1", group=GroupId("g"), resumable=True),
                                     lambda *_: None)
    links.subscriber_gone(member, suspend=True, durable=True)
    assert member.attached and member.suspended_until == math.inf


def test_a_publisher_gets_credit_only_after_its_attach_is_answered_and_resumes_its_incarnation():
    core, links, plane = _service()
    port = Link()
    pub, ours = links.attach_publisher(port, "t", "cp", "p", True, None, None)
    assert ours is None and port.grants == []
    links.publisher_answered(pub)
    assert port.grants and port.grants[-1] > 0
    rec = core.publish(pub, b"7", b"m", False, "h")
    assert rec is not None
    links.publisher_gone(pub, suspend=True)
    again, ours = links.attach_publisher(Link(), "t", "cp", "p", True, pub.incarnation, {b"7": None, b"8": None})
    assert again.incarnation == pub.incarnation
    assert set(ours or {}) == {b"7"}  # what it never saw (8) is left out: the publisher resends it
