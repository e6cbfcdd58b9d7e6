"""Hostile connections against a live router (issue 12): sockets that never finish the
handshake, floods of connections, password guessing and subscription theft. Each is
dealt with in a bounded time, logged without flooding the log, and costs the clients
already there nothing.

Other hosts are played by connecting from other loopback addresses (127.0.0.2, ...):
the traffic still goes to 127.0.0.1.
"""

from __future__ import annotations

import time

import pytest
from once.router.amqp.performatives import SaslInit, SaslMechanisms, SaslOutcome
from proton import ConnectionException, Delivery, LinkException
from proton.utils import BlockingConnection
from support.proton_clients import ProtonPublisher, ProtonSubscriber
from support.raw import AMQP_HEADER, SASL_HEADER, RawPeer
from support.routers import wait_for

ACCEPTED = Delivery.ACCEPTED


@pytest.fixture
def peers():
    opened: list[RawPeer] = []

    def make(r, source: str | None = None) -> RawPeer:
        opened.append(RawPeer(r.host, r.port, source=source))
        return opened[-1]

    yield make
    for p in opened:
        p.close()


def _pubsub_works(url: str, topic: str, **kw) -> None:
    sub = ProtonSubscriber(url, topic, name=f"{topic}-sub", **kw)
    pub = ProtonPublisher(url, topic, **kw)
    assert pub.send_wait("still here") == ACCEPTED
    assert sub.get().body == "still here"
    pub.close()
    sub.close()


def test_connections_that_never_open_are_closed_within_the_handshake_timeout(make_router, peers):
    r = make_router(settings={"handshake_timeout": "1s"})
    sub = ProtonSubscriber(r.url, "t", name="steady", auto_accept=False)
    pub = ProtonPublisher(r.url, "t")
    outcome = pub.send("in flight")
    assert sub.get().body == "in flight"
    start = time.monotonic()
    silent = peers(r)
    header_only = peers(r)
    header_only.send(AMQP_HEADER)
    sasl_only = peers(r)
    sasl_only.send(SASL_HEADER)
    assert header_only.read_header() == AMQP_HEADER
    assert sasl_only.read_header() == SASL_HEADER
    for peer in (silent, header_only, sasl_only):
        assert peer.at_eof(timeout=5.0)
    assert time.monotonic() - start < 4.0
    # The clients that did open were not touched: the held delivery completes normally.
    assert outcome.empty()
    sub.command("accept")
    assert outcome.get(timeout=10) == ACCEPTED
    pub.close()
    sub.close()
    lines = [line for line in r.stderr_lines() if "handshake timeout" in line]
    assert len(lines) == 1 and "127.0.0.1" in lines[0]  # one line per host per interval, however many


def _admitted(peer: RawPeer) -> bool:
    """Admitted connections answer our protocol header; refused ones are closed unread."""
    try:
        peer.send(AMQP_HEADER)
    except OSError:
        return False
    return peer.read_header() == AMQP_HEADER


def test_connection_limits_per_host_and_per_router(make_router, peers):
    r = make_router(settings={"max_connections": 6, "max_connections_per_host": 3, "handshake_timeout": "60s"})
    first = [peers(r, "127.0.0.2") for _ in range(3)]
    assert all(_admitted(p) for p in first)
    for _ in range(4):  # the host is at its limit: closed before a byte is read
        extra = peers(r, "127.0.0.2")
        assert extra.at_eof(timeout=5.0)
    # Another host is still served, at once.
    _pubsub_works(r.url, "other-host")
    assert all(_admitted(peers(r, "127.0.0.3")) for _ in range(3))
    # Six connections: the router is full, whichever host asks.
    assert peers(r, "127.0.0.4").at_eof(timeout=5.0)
    # One leaves: there is room again.
    first[0].close()
    wait_for(lambda: _admitted(peers(r, "127.0.0.4")), timeout=10, what="a connection admitted after one left")
    lines = r.stderr_lines()
    per_host = [line for line in lines if "refused connection from 127.0.0.2" in line]
    assert len(per_host) == 1 and "max_connections_per_host 3 reached" in per_host[0]
    assert any("refused connection from 127.0.0.4" in line and "max_connections 6 reached" in line for line in lines)


def _try_plain(where: tuple[str, int], user: str, password: str, source: str | None = None) -> int:
    """One SASL PLAIN attempt over a raw socket; the outcome code (0 ok, 1 auth)."""
    peer = RawPeer(where[0], where[1], source=source, timeout=30)
    try:
        peer.send(SASL_HEADER)
        assert peer.read_header() == SASL_HEADER
        peer.read_frames(until=SaslMechanisms)
        peer.send_frame(SaslInit(mechanism="PLAIN", initial_response=b"\x00" + user.encode() + b"\x00" + password.encode()),
                        sasl=True)
        return peer.read_frames(until=SaslOutcome)[-1].body.code
    finally:
        peer.close()


def _try_password(r, password: str, source: str) -> int:
    """One PLAIN attempt as alice at the router's client port."""
    return _try_plain((r.host, r.port), "alice", password, source)


def test_password_guessing_is_slowed_and_logged_per_host(make_router):
    r = make_router(users={"alice": "secret"}, auth={"allow_anonymous": False, "plain_without_tls": True})
    start = time.monotonic()
    for i in range(5):  # a user who mistypes a few times is not slowed
        assert _try_password(r, f"guess{i}", "127.0.0.2") == 1
    free = time.monotonic() - start
    assert free < 2.0
    start = time.monotonic()
    for i in range(5):
        assert _try_password(r, f"guess{i + 5}", "127.0.0.2") == 1
    slowed = time.monotonic() - start
    # Each attempt (a connection) from a slowed host waits for its turn, 0.25 s apart after
    # the sixth failure, then 0.5 s, 1 s: once per attempt, not per read of it (an attempt
    # is two reads, header then init: waiting at each took twice as long as docs/security.md says).
    assert 1.7 <= slowed < 3.0, slowed
    # Meanwhile another host is not slowed at all, and the right password works there.
    start = time.monotonic()
    ok = BlockingConnection(r.url, user="alice", password="secret", allowed_mechs="PLAIN", timeout=10)
    ok.close()
    assert time.monotonic() - start < 1.5
    lines = [line for line in r.stderr_lines() if "authentication failed" in line]
    assert lines and all("127.0.0.2" in line and "'alice'" in line for line in lines)
    assert len(lines) == 1  # nine failures inside the log interval: one line
    assert all("guess" not in line and "secret" not in line for line in lines)


def test_authorization_id_of_another_user_is_refused(make_router):
    r = make_router(users={"alice": "apw", "bob": "bpw"}, auth={"allow_anonymous": False, "plain_without_tls": True})
    assert _try_password(r, "apw", "127.0.0.1") == 0
    peer = RawPeer(r.host, r.port)
    peer.send(SASL_HEADER)
    peer.read_header()
    peer.read_frames(until=SaslMechanisms)
    peer.send_frame(SaslInit(mechanism="PLAIN", initial_response=b"bob\x00alice\x00apw"), sasl=True)
    assert peer.read_frames(until=SaslOutcome)[-1].body.code == 1
    peer.close()


def test_a_subscription_belongs_to_the_user_that_made_it(make_router):
    r = make_router(users={"alice": "apw", "mallory": "mpw"}, auth={"allow_anonymous": False, "plain_without_tls": True})
    alice = dict(user="alice", password="apw", allowed_mechs="PLAIN")
    sub = ProtonSubscriber(r.url, "mail", name="inbox", container_id="alice-app", auto_accept=False, **alice)
    pub = ProtonPublisher(r.url, "mail", **alice)
    outcome = pub.send("for alice")
    assert sub.get().body == "for alice"
    # Mallory knows the container-id and the link name: she is refused, alice keeps it.
    thief = BlockingConnection(r.url, container_id="alice-app", user="mallory", password="mpw", allowed_mechs="PLAIN",
                               timeout=10)
    with pytest.raises((LinkException, ConnectionException)) as refused:
        thief.create_receiver("mail", name="inbox")
    assert "amqp:unauthorized-access" in str(refused.value)
    thief.close()
    assert outcome.empty()
    sub.command("accept")
    assert outcome.get(timeout=10) == ACCEPTED
    sub.auto_accept = True
    assert pub.send_wait("again") == ACCEPTED
    assert sub.get().body == "again"
    # Alice herself may take it over (a reconnect, or a second link stealing the first).
    sub.close()
    again = ProtonSubscriber(r.url, "mail", name="inbox", container_id="alice-app", **alice)
    assert pub.send_wait("resumed") == ACCEPTED
    assert again.get().body == "resumed"
    again.close()
    pub.close()


def test_router_secret_guessing_is_slowed_and_logged_per_host(tmp_path):
    import yaml
    from support.routers import Network

    net = Network("line3.yaml", tmp_path)
    try:
        doc = yaml.safe_load(net.paths["B"].read_text())
        host, port = doc["routers"]["B"]["inter_router"].rsplit(":", 1)
        start = time.monotonic()
        for i in range(10):
            assert _try_plain((host, int(port)), "router:A", f"guess{i}") == 1
        # (before, 928 wrong secrets a second went unslowed and unlogged; the floor is the
        # turns booked 0.25 s, 0.5 s and 1 s apart, which a busy machine only raises)
        assert time.monotonic() - start >= 0.25 + 0.5 + 1
        lines = [line for line in net["B"].stderr_lines() if "authentication failed" in line]
        assert len(lines) == 1 and "inter-router" in lines[0] and "'router:A'" in lines[0]
        assert "guess" not in lines[0]
    finally:
        net.stop()
