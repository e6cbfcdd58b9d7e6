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


@pytest.mark.parametrize("killed", ["publisher's", "subscriber's"])
def test_qos2_is_exactly_once_across_a_sigkill_of_a_router(mesh3, killed):
    """A publisher at A and a subscriber at B, both QoS 2 with persistent sessions; one of
    their routers is SIGKILLed under load and the client moves to C."""
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
