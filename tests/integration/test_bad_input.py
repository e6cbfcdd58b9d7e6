"""Bad input against a live router, where a real socket and real clients matter: a wrong
SASL password (Proton), and a bare AMQP header without SASL (Proton). The frame-level
cases run in-process: ``tests/adaptors/test_amqp_bad_input.py``."""

from __future__ import annotations

import pytest
from once.router.amqp.performatives import (
    SaslInit,
    SaslMechanisms,
    SaslOutcome,
)
from proton import ConnectionException
from proton.utils import BlockingConnection
from support.proton_clients import ProtonPublisher, ProtonSubscriber
from support.raw import SASL_HEADER, RawPeer

ACCEPTED = 36


@pytest.fixture
def connect():
    peers: list[RawPeer] = []

    def make(r) -> RawPeer:
        peers.append(RawPeer(r.host, r.port))
        return peers[-1]

    yield make
    for p in peers:
        p.close()


def test_wrong_sasl_password(make_router, connect):
    r = make_router(users={"alice": "secret"}, auth={"allow_anonymous": False, "plain_without_tls": True})
    peer = connect(r)
    peer.send(SASL_HEADER)
    assert peer.read_header() == SASL_HEADER
    mechs = peer.read_frames(until=SaslMechanisms)[-1].body
    assert "PLAIN" in mechs.sasl_server_mechanisms and "ANONYMOUS" not in mechs.sasl_server_mechanisms
    peer.send_frame(SaslInit(mechanism="PLAIN", initial_response=b"\x00alice\x00wrong"), sasl=True)
    outcome = peer.read_frames(until=SaslOutcome)[-1].body
    assert outcome.code == 1  # auth
    assert peer.at_eof()
    with pytest.raises(ConnectionException):
        BlockingConnection(r.url, user="alice", password="wrong", allowed_mechs="PLAIN", timeout=5)
    ok = BlockingConnection(r.url, user="alice", password="secret", allowed_mechs="PLAIN", timeout=5)
    ok.create_sender("t")
    ok.close()
    # Anonymous is refused when the topology says so, with or without a SASL layer.
    with pytest.raises(ConnectionException):
        BlockingConnection(r.url, sasl_enabled=False, timeout=5)


def test_bare_amqp_header_without_sasl_works(router):
    sub = ProtonSubscriber(router.url, "bare", name="bare", sasl_enabled=False)
    pub = ProtonPublisher(router.url, "bare", sasl_enabled=False)
    assert pub.send_wait("no sasl") == ACCEPTED
    assert sub.get().body == "no sasl"
    sub.close()
    pub.close()


