"""Publish-subscribe through one real router process with standard Proton clients."""

from __future__ import annotations

import queue

import pytest
from support.proton_clients import ProtonPublisher, ProtonSubscriber

ACCEPTED = 36
REJECTED = 37


def test_every_subscriber_gets_every_message_once_in_order(router):
    subs = [ProtonSubscriber(router.url, "news", name=f"s{i}") for i in range(3)]
    pub = ProtonPublisher(router.url, "news")
    outcomes = [pub.send(f"m{i}") for i in range(50)]
    assert [o.get(timeout=20) for o in outcomes] == [ACCEPTED] * 50
    for s in subs:
        assert [m.body for m in s.take(50)] == [f"m{i}" for i in range(50)]
        with pytest.raises(queue.Empty):
            s.messages.get(timeout=0.2)
        s.close()
    pub.close()


def test_acceptance_waits_for_the_subscriber_that_has_not_accepted(router):
    fast = ProtonSubscriber(router.url, "gate", name="fast")
    slow = ProtonSubscriber(router.url, "gate", name="slow", auto_accept=False)
    pub = ProtonPublisher(router.url, "gate")
    outcome = pub.send("hold")
    assert fast.get().body == "hold"
    assert slow.get().body == "hold"
    with pytest.raises(queue.Empty):  # fast accepted, slow holds: the publisher must still wait
        outcome.get(timeout=0.5)
    slow.command("accept")
    assert outcome.get(timeout=10) == ACCEPTED
    for c in (fast, slow, pub):
        c.close()


def test_a_rejecting_subscriber_makes_the_outcome_rejected(router):
    ok = ProtonSubscriber(router.url, "rj", name="ok")
    no = ProtonSubscriber(router.url, "rj", name="no", auto_accept=False)
    pub = ProtonPublisher(router.url, "rj")
    outcome = pub.send("x")
    assert no.get().body == "x"
    no.command("reject")
    assert outcome.get(timeout=10) == REJECTED
    assert ok.get().body == "x"
    for c in (ok, no, pub):
        c.close()


def test_released_message_is_redelivered_marked(router):
    sub = ProtonSubscriber(router.url, "rel", name="r", auto_accept=False)
    pub = ProtonPublisher(router.url, "rel")
    outcome = pub.send("again")
    first = sub.get()
    assert first.delivery_count == 0
    sub.command("release")
    again = sub.get()
    assert again.body == "again"
    assert again.delivery_count >= 1 and again.first_acquirer is False
    sub.command("accept")
    assert outcome.get(timeout=10) == ACCEPTED
    sub.close()
    pub.close()


def test_no_subscribers_is_accepted(router):
    pub = ProtonPublisher(router.url, "nobody")
    assert pub.send_wait("void") == ACCEPTED
    pub.close()


def test_five_mib_message(router):
    sub = ProtonSubscriber(router.url, "big", name="big")
    pub = ProtonPublisher(router.url, "big")
    body = bytes(range(256)) * (5 * 1024 * 4)  # 5 MiB
    assert len(body) == 5 * 1024 * 1024
    outcome = pub.send(body)
    got = sub.get(timeout=30)
    assert got.body == body
    assert outcome.get(timeout=30) == ACCEPTED
    sub.close()
    pub.close()


def test_subscriber_attached_after_send_does_not_get_it_but_later_ones_do(router):
    pub = ProtonPublisher(router.url, "late")
    assert pub.send_wait("before") == ACCEPTED
    sub = ProtonSubscriber(router.url, "late", name="late")
    assert pub.send_wait("after") == ACCEPTED
    assert sub.get().body == "after"
    with pytest.raises(queue.Empty):
        sub.messages.get(timeout=0.3)
    sub.close()
    pub.close()


def test_detached_subscriber_no_longer_holds_acceptance(router):
    stays = ProtonSubscriber(router.url, "det", name="stays")
    leaves = ProtonSubscriber(router.url, "det", name="leaves", auto_accept=False)
    pub = ProtonPublisher(router.url, "det")
    outcome = pub.send("m")
    assert leaves.get().body == "m"
    leaves.close()  # closing detach: its subscription is gone, nothing waits for it
    assert outcome.get(timeout=10) == ACCEPTED
    stays.close()
    pub.close()


def test_message_properties_and_body_pass_through_untouched(router):
    sub = ProtonSubscriber(router.url, "props", name="p")
    pub = ProtonPublisher(router.url, "props")
    pub.send_wait({"k": [1, 2.5, "three"]}, subject="subj", properties={"color": "red"}, id="mid-1")
    m = sub.get()
    assert m.body == {"k": [1, 2.5, "three"]}
    assert m.subject == "subj" and m.properties == {"color": "red"} and m.id == "mid-1"
    sub.close()
    pub.close()



def test_topics_are_isolated(router):
    a = ProtonSubscriber(router.url, "topic-a", name="a")
    b = ProtonSubscriber(router.url, "topic-b", name="b")
    pa = ProtonPublisher(router.url, "topic-a")
    pb = ProtonPublisher(router.url, "topic-b")
    assert pa.send_wait("for a") == ACCEPTED
    assert pb.send_wait("for b") == ACCEPTED
    assert a.get().body == "for a" and b.get().body == "for b"
    with pytest.raises(queue.Empty):
        a.messages.get(timeout=0.2)
    with pytest.raises(queue.Empty):
        b.messages.get(timeout=0.2)
    for c in (a, b, pa, pb):
        c.close()


def test_per_publisher_order_with_interleaved_publishers(router):
    sub = ProtonSubscriber(router.url, "mix", name="mix")
    pubs = [ProtonPublisher(router.url, "mix", name=f"p{i}") for i in range(3)]
    outcomes = [(i, n, pubs[i].send(f"{i}:{n}")) for n in range(30) for i in range(3)]
    assert all(o.get(timeout=20) == ACCEPTED for _, _, o in outcomes)
    got = [m.body for m in sub.take(90)]
    for i in range(3):
        assert [b for b in got if b.startswith(f"{i}:")] == [f"{i}:{n}" for n in range(30)]
    for c in (sub, *pubs):
        c.close()
