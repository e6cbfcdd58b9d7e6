"""Persistent MQTT sessions in the network (issue 26): paho-mqtt 2.x clients with a
session expiry resume at another router, and QoS 2 stays exactly once across a router's
SIGKILL. Routers are OS processes on free ports."""

from __future__ import annotations

import threading

import pytest
from support.mqtt_failover import FailoverPaho
from support.routers import Network


@pytest.fixture
def line3(tmp_path):
    net = Network("line3.yaml", tmp_path)
    yield net
    net.stop()


@pytest.fixture
def mesh3(tmp_path):
    net = Network("mesh3.yaml", tmp_path)
    yield net
    net.stop()


def _bodies(n: int) -> list[bytes]:
    return [f"body {i}".encode() for i in range(n)]


def test_a_persistent_session_resumes_at_another_router_and_gets_what_it_was_owed(line3):
    sub = FailoverPaho([line3["C"].mqtt, line3["B"].mqtt], "owed-sub")
    sub.wait(lambda s: s.present, what="CONNACK")
    assert sub.present == [False]
    sub.client.subscribe([("plant/owed", 2)])
    sub.wait(lambda s: s.subacks, what="SUBACK")
    sub.close()  # (a clean DISCONNECT: the session stays, 300 s)
    pub = FailoverPaho([line3["A"].mqtt], "owed-pub")
    bodies = _bodies(20)
    mids = [pub.client.publish("plant/owed", b, qos=2).mid for b in bodies]
    back = FailoverPaho([line3["B"].mqtt], "owed-sub", clean=False)  # resumes at another router
    back.wait(lambda s: len(s.received) >= 20, what="the owed messages")
    pub.wait(lambda p: p.acked >= set(mids), what="every PUBCOMP")
    assert back.present == [True]  # (the router it resumed at knew the session)
    assert back.received == bodies
    # (never sent to it before, under any packet id: DUP 0, as MQTT 3.3.1.1 says of a
    # first attempt; they came marked, issue 50, item 12)
    assert [m.dup for m in back.messages] == [False] * 20
    for c in (pub, back):
        c.close()


def test_a_clean_start_ends_the_old_session_and_its_subscriptions(line3):
    sub = FailoverPaho([line3["C"].mqtt], "clean-sub")
    sub.client.subscribe([("plant/clean", 2)])
    sub.wait(lambda s: s.subacks, what="SUBACK")
    sub.close()
    again = FailoverPaho([line3["B"].mqtt], "clean-sub")  # clean start: the old session ends
    again.wait(lambda s: s.present, what="CONNACK")
    assert again.present == [False]
    pub = FailoverPaho([line3["A"].mqtt], "clean-pub")
    mid = pub.client.publish("plant/clean", b"nobody waits", qos=2).mid
    pub.wait(lambda p: mid in p.acked, what="PUBCOMP with no subscriber left")
    assert again.received == []
    for c in (pub, again):
        c.close()


@pytest.mark.slow
@pytest.mark.parametrize("killed", ["publisher's", "subscriber's"])
def test_qos2_is_exactly_once_across_a_sigkill_of_a_router(mesh3, killed):
    """A publisher at A and a subscriber at B, both QoS 2 with persistent sessions; one of
    their routers is SIGKILLed under load and the client moves to C. (slow: the default
    suite runs the harness scenarios mqtt-publisher-router-dies and
    mqtt-subscriber-router-dies, which do this with our clients beside.)"""
    sub = FailoverPaho([mesh3["B"].mqtt, mesh3["C"].mqtt], "kill-sub")
    sub.client.subscribe([("plant/kill", 2)])
    sub.wait(lambda s: s.subacks, what="SUBACK")
    pub = FailoverPaho([mesh3["A"].mqtt, mesh3["C"].mqtt], "kill-pub")
    bodies = _bodies(400)
    mids: list[int] = []
    sent = threading.Event()

    def publish() -> None:
        for b in bodies:
            mids.append(pub.client.publish("plant/kill", b, qos=2).mid)
        sent.set()
    threading.Thread(target=publish, daemon=True).start()
    pub.wait(lambda p: len(p.acked) >= 100, what="the first 100 acknowledged")
    mesh3["A" if killed == "publisher's" else "B"].proc.kill()
    assert sent.wait(60)
    pub.wait(lambda p: p.acked >= set(mids), timeout=90, what="every message acknowledged")
    sub.wait(lambda s: len(s.received) >= len(bodies), timeout=60, what="every message received")
    assert len(set(sub.received)) == len(sub.received), "duplicated"
    assert sub.received == bodies  # none lost, none twice, in order
    assert (pub if killed == "publisher's" else sub).at == 1  # (it did move)
    for c in (pub, sub):
        c.close()



def _member(where: tuple[str, int], client_id: str, expiry: int, clean: bool = True) -> FailoverPaho:
    """A shared-subscription member that answers nothing by itself (PUBACK by hand)."""
    m = FailoverPaho([where], client_id, expiry=expiry, manual_ack=True, clean=clean)
    if clean:
        m.client.subscribe([("$share/workers/jobs", 1)])
        m.wait(lambda s: s.subacks, what="SUBACK")
    return m


def _cut(m: FailoverPaho) -> None:
    """Its network dies: no DISCONNECT, the job it was sent unanswered."""
    m.stop = True
    m.thread.join(5)
    m.client.socket().close()


@pytest.mark.parametrize("expiry", [0, 2])
def test_a_shared_members_unanswered_message_goes_to_another_member_when_its_session_ends(tmp_path, expiry):
    """MQTT 5.0 4.8.2: when a member's session ends with a message it never answered (at
    once without a session expiry, else when it expires), the group's other members get it
    (the opposite of emqx#12257, which drops it)."""
    net = Network("line3.yaml", tmp_path, settings={"subscriber_grace": "1s"})
    try:
        first = _member(net["B"].mqtt, "member-1", expiry)
        pub = FailoverPaho([net["A"].mqtt], "jobs-pub")
        mid = pub.client.publish("jobs", b"job 1", qos=1).mid
        first.wait(lambda s: s.received, what="the job at the first member")
        second = _member(net["C"].mqtt, "member-2", 300)
        _cut(first)
        second.wait(lambda s: s.received, timeout=30, what="the job handed to the other member")
        assert second.received == [b"job 1"]
        second.client.ack(second.messages[0].mid, 1)
        pub.wait(lambda p: mid in p.acked, what="PUBACK once the other member answered")
        for c in (pub, second):
            c.close()
    finally:
        net.stop()


def test_a_shared_member_that_resumes_its_session_gets_its_unanswered_message_again_not_another(tmp_path):
    net = Network("line3.yaml", tmp_path, settings={"subscriber_grace": "1s"})
    try:
        first = _member(net["B"].mqtt, "member-1", 300)
        pub = FailoverPaho([net["A"].mqtt], "jobs-pub")
        mid = pub.client.publish("jobs", b"job 1", qos=1).mid
        first.wait(lambda s: s.received, what="the job at the first member")
        second = _member(net["C"].mqtt, "member-2", 300)
        _cut(first)
        back = _member(net["C"].mqtt, "member-1", 300, clean=False)  # resumes, at another router
        back.wait(lambda s: s.received, timeout=30, what="the job again")
        assert back.messages[0].payload == b"job 1" and back.messages[0].dup
        back.client.ack(back.messages[0].mid, 1)
        pub.wait(lambda p: mid in p.acked, what="PUBACK once the resumed member answered")
        assert second.received == []  # (complete: nobody else can get it now)
        for c in (pub, second, back):
            c.close()
    finally:
        net.stop()
