"""Router networks as OS processes with standard Proton clients (issue 3)."""

from __future__ import annotations

import queue

import pytest
import yaml
from proton import ConnectionException
from proton.utils import BlockingConnection
from support.proton_clients import ProtonPublisher, ProtonSubscriber
from support.routers import Network

ACCEPTED = 36


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


def _everyone_gets_everything_in_order(net: Network, n: int = 40) -> None:
    subs = {r: ProtonSubscriber(net[r].url, "news", name=f"sub-{r}") for r in "ABC"}
    pub = ProtonPublisher(net["A"].url, "news")
    outcomes = [pub.send(f"m{i}") for i in range(n)]
    assert [o.get(timeout=30) for o in outcomes] == [ACCEPTED] * n
    for r, s in subs.items():
        assert [m.body for m in s.take(n)] == [f"m{i}" for i in range(n)], r
        with pytest.raises(queue.Empty):
            s.messages.get(timeout=0.2)
    for c in (*subs.values(), pub):
        c.close()


def test_line3_every_subscriber_once_in_order(line3):
    _everyone_gets_everything_in_order(line3)


def test_mesh3_every_subscriber_once_in_order(mesh3):
    _everyone_gets_everything_in_order(mesh3)


def test_acceptance_waits_for_the_farthest_subscriber(line3):
    near = ProtonSubscriber(line3["A"].url, "far", name="near")
    far = ProtonSubscriber(line3["C"].url, "far", name="far", auto_accept=False)
    pub = ProtonPublisher(line3["A"].url, "far")
    outcome = pub.send("x")
    assert near.get().body == "x" and far.get().body == "x"
    with pytest.raises(queue.Empty):
        outcome.get(timeout=0.5)
    far.command("accept")
    assert outcome.get(timeout=10) == ACCEPTED
    for c in (near, far, pub):
        c.close()


def test_subscriber_on_c_gets_what_a_publishes_right_after_its_attach(line3):
    pub = ProtonPublisher(line3["A"].url, "fresh")
    for i in range(5):
        sub = ProtonSubscriber(line3["C"].url, "fresh", name=f"s{i}")  # returns when the attach completed
        assert pub.send_wait(f"hello {i}") == ACCEPTED
        assert sub.get(timeout=10).body == f"hello {i}"
        sub.close()
    pub.close()


def test_detach_on_c_stops_the_network_waiting(line3):
    stays = ProtonSubscriber(line3["A"].url, "det", name="stays")
    leaves = ProtonSubscriber(line3["C"].url, "det", name="leaves", auto_accept=False)
    pub = ProtonPublisher(line3["A"].url, "det")
    outcome = pub.send("m")
    assert leaves.get().body == "m"
    leaves.close()
    assert outcome.get(timeout=10) == ACCEPTED
    assert pub.send_wait("after") == ACCEPTED  # nobody on C any more: not waited for
    stays.close()
    pub.close()


def test_rejection_far_away_reaches_the_publisher(line3):
    no = ProtonSubscriber(line3["C"].url, "rj", name="no", auto_accept=False)
    pub = ProtonPublisher(line3["A"].url, "rj")
    outcome = pub.send("x")
    assert no.get().body == "x"
    no.command("reject")
    assert outcome.get(timeout=10) == 37
    no.close()
    pub.close()


def test_a_client_cannot_pose_as_a_router(line3):
    doc = yaml.safe_load(line3.paths["B"].read_text())
    url = "amqp://" + doc["routers"]["B"]["inter_router"]
    with pytest.raises(ConnectionException):  # anonymous: the inter-router port offers PLAIN only
        BlockingConnection(url, timeout=5)
    with pytest.raises(ConnectionException):  # the right user name, the wrong secret
        BlockingConnection(url, user="router:A", password="guess", allowed_mechs="PLAIN", timeout=5)
    with pytest.raises(ConnectionException):  # the secret, but not a neighbour of B
        BlockingConnection(url, user="router:Z", password="change-me-before-production", allowed_mechs="PLAIN", timeout=5)


def test_ring5_delivers_to_every_router(tmp_path):
    net = Network("ring5.yaml", tmp_path)
    try:
        subs = {r: ProtonSubscriber(net[r].url, "ring", name=f"sub-{r}") for r in "ABCDE"}
        pub = ProtonPublisher(net["A"].url, "ring")
        outcomes = [pub.send(i) for i in range(30)]
        assert [o.get(timeout=30) for o in outcomes] == [ACCEPTED] * 30
        for s in subs.values():
            assert [m.body for m in s.take(30)] == list(range(30))
        for c in (*subs.values(), pub):
            c.close()
    finally:
        net.stop()
