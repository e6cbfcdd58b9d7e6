"""Subscribers whose connection vanishes are suspended, not gone (issue 4, first part).

A standard client that comes back under the same container-id and link name gets again
what it had not accepted, marked as redelivered (delivery-count > 0, first-acquirer
false): at-least-once. Past its grace the subscription ends and nothing waits for it.
"""

from __future__ import annotations

import json
import queue
import signal
import urllib.request

import pytest
from support import holders
from support.proton_clients import ProtonPublisher, ProtonSubscriber
from support.proton_events import ContainerThread, StreamPublisher
from support.routers import wait_for

ACCEPTED = 36


@pytest.fixture(autouse=True)
def _reap_holders():
    yield
    holders.reap()


@pytest.fixture
def watched(tmp_path):
    from once.tools.topology_ports import free_port
    from support.routers import RouterProcess, write_topology

    r = RouterProcess(write_topology(tmp_path), args=("--http", f"127.0.0.1:{free_port()}"))
    yield r
    r.stop()


def _state(router, name: str) -> str | None:
    """The state the router's API gives subscription ``name`` (attached, suspended)."""
    with urllib.request.urlopen(router.http + "/api/links", timeout=10) as r:
        links = json.loads(r.read())
    items = links if isinstance(links, list) else links.get("links", [])
    return next((link["state"] for link in items if link.get("role") == "subscriber" and link.get("name") == name),
                None)


def test_killed_subscriber_is_waited_for_and_resumes_at_least_once_marked(watched):
    router = watched
    holder = holders.holder(router.url, "resumer", "sub")
    pub = StreamPublisher(router.url, "susp", 6)
    pub.limit = 5
    t = ContainerThread(pub)
    got = holders.lines(holder, 5)
    assert [g["body"] for g in got] == list(range(5)) and all(g["delivery_count"] == 0 for g in got)
    holder.send_signal(signal.SIGKILL)  # no detach, no close: the router must wait for it
    holder.wait()
    # (the router has seen the connection go: a message published before that could have
    # gone to the dead socket, and be marked when it comes again, rightly)
    wait_for(lambda: _state(router, "sub") == "suspended", what="the subscription suspended")
    t.call(pub.release_rest)  # published while it is suspended: waits for it too
    wait_for(lambda: pub.sent == 6, what="the sixth message sent")
    t.call(lambda: None)
    assert pub.outcome_count() == 0  # nothing is accepted while the subscriber is away
    back = ProtonSubscriber(router.url, "susp", name="sub", container_id="resumer")
    again = back.take(6)
    assert [m.body for m in again] == list(range(6))
    assert all(m.delivery_count >= 1 and m.first_acquirer is False for m in again[:5])
    assert again[5].delivery_count == 0  # never sent before: not a redelivery
    wait_for(lambda: pub.accepted() == 6, what="all six accepted after the resume")
    back.close()
    t.stop()


def test_suspended_subscriber_expires_after_its_grace(make_router):
    r = make_router(settings={"subscriber_grace": "1s"})
    holder = holders.holder(r.url, "gone", "sub")
    pub = ProtonPublisher(r.url, "susp")
    outcome = pub.send("m")
    assert holders.lines(holder, 1)[0]["body"] == "m"
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with pytest.raises(queue.Empty):
        outcome.get(timeout=0.5)  # still suspended: waited for
    assert outcome.get(timeout=10) == ACCEPTED  # past its grace nothing waits for it
    assert pub.send_wait("after") == ACCEPTED
    pub.close()


def test_clean_close_ends_the_subscription_at_once(router):
    sub = ProtonSubscriber(router.url, "susp", name="clean", auto_accept=False)
    pub = ProtonPublisher(router.url, "susp")
    outcome = pub.send("m")
    assert sub.get().body == "m"
    sub.close()  # close frame: expiry-policy session-end applies, the subscription is gone
    assert outcome.get(timeout=5) == ACCEPTED
    pub.close()


def test_a_client_that_comes_back_on_another_live_router_gets_what_it_missed(tmp_path):
    from support.routers import Network

    net = Network("line3.yaml", tmp_path)
    try:
        holder = holders.holder(net["C"].url, "wanderer", "sub")
        pub = StreamPublisher(net["A"].url, "susp", 8)
        pub.limit = 5
        t = ContainerThread(pub)
        assert [g["body"] for g in holders.lines(holder, 5)] == list(range(5))
        holder.send_signal(signal.SIGKILL)  # the client dies; its router C lives on
        holder.wait()
        t.call(pub.release_rest)
        back = ProtonSubscriber(net["B"].url, "susp", name="sub", container_id="wanderer")
        got = back.take(8)
        assert [m.body for m in got] == list(range(8))
        assert all(m.delivery_count >= 1 and m.first_acquirer is False for m in got[:5])
        # Well inside the 30s grace: C handed its deliveries over instead of holding them.
        wait_for(lambda: pub.accepted() == 8, 10, what="all accepted after the move")
        back.close()
        t.stop()
    finally:
        net.stop()
