"""Bad input against a live router: the right error, one log line, nothing else harmed."""

from __future__ import annotations

import struct

import pytest
from once.router.amqp.performatives import (
    Close,
    Disposition,
    End,
    Role,
    SaslInit,
    SaslMechanisms,
    SaslOutcome,
    Transfer,
)
from proton import ConnectionException
from proton.utils import BlockingConnection
from support.proton_clients import ProtonPublisher, ProtonSubscriber
from support.raw import AMQP_HEADER, SASL_HEADER, RawPeer

ACCEPTED = 36


def _frame(body: bytes, channel: int = 0) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, 0, channel) + body


def _close_condition(peer: RawPeer) -> str:
    frames = peer.read_frames(until=Close)
    assert frames and isinstance(frames[-1].body, Close), f"no close frame in {frames}"
    error = frames[-1].body.error
    assert error is not None
    return error.condition


@pytest.fixture
def connect():
    peers: list[RawPeer] = []

    def make(r) -> RawPeer:
        peers.append(RawPeer(r.host, r.port))
        return peers[-1]

    yield make
    for p in peers:
        p.close()


@pytest.fixture
def held(router):
    """An in-flight delivery: a subscriber holds it unaccepted, the publisher waits."""
    sub = ProtonSubscriber(router.url, "held", name="holder", auto_accept=False)
    pub = ProtonPublisher(router.url, "held")
    outcome = pub.send("precious")
    assert sub.get().body == "precious"
    yield sub, pub, outcome
    sub.close()
    pub.close()


def _assert_untouched(held) -> None:
    sub, pub, outcome = held
    assert outcome.empty()
    sub.command("accept")
    assert outcome.get(timeout=10) == ACCEPTED
    sub.auto_accept = True
    assert pub.send_wait("after") == ACCEPTED
    assert sub.get().body == "after"


def test_garbage_instead_of_protocol_header(router, held, connect):
    peer = connect(router)
    peer.send(b"GET / HTTP/1.1\r\n\r\n")
    assert peer.read_header() in (AMQP_HEADER, SASL_HEADER)  # the header we do speak
    assert peer.at_eof()
    _assert_untouched(held)
    assert any("unsupported protocol header" in line for line in router.stderr_lines())


def test_malformed_frame_body_is_a_decode_error(router, held, connect):
    peer = connect(router)
    peer.open_amqp()
    peer.send(_frame(b"\x00\x53\x13\xc0\x05\xff\xff\xff\xff"))  # a flow whose list lies about its count
    assert _close_condition(peer) == "amqp:decode-error"
    assert peer.at_eof()
    _assert_untouched(held)


def test_truncated_performative_is_a_decode_error(router, held, connect):
    peer = connect(router)
    peer.open_amqp()
    peer.send(_frame(b"\x00\x53\x11\xc0\x20\x04\x43"))  # begin: list claims 32 bytes, frame ends
    assert _close_condition(peer) == "amqp:decode-error"
    _assert_untouched(held)


def test_frame_over_max_frame_size(router, held, connect):
    peer = connect(router)
    peer.open_amqp()
    peer.send(struct.pack(">IBBH", 70_000, 2, 0, 0) + b"\x00" * 100)
    assert _close_condition(peer) == "amqp:connection:framing-error"
    _assert_untouched(held)


def test_unknown_performative(router, held, connect):
    peer = connect(router)
    peer.open_amqp()
    peer.send(_frame(b"\x00\x53\x30\x45"))
    assert _close_condition(peer) == "amqp:decode-error"
    _assert_untouched(held)


def test_transfer_on_unattached_link_ends_the_session_only(router, held, connect):
    peer = connect(router)
    peer.open_amqp()
    peer.begin()
    peer.send_frame(Transfer(handle=7, delivery_id=0, delivery_tag=b"t", message_format=0), payload=b"\x00\x53\x77\x45")
    frames = peer.read_frames(until=End)
    assert frames[-1].body.error.condition == "amqp:session:unattached-handle"
    # The connection itself is still open: a clean close is answered.
    peer.send_frame(Close())
    frames = peer.read_frames(until=Close)
    assert frames[-1].body.error is None
    _assert_untouched(held)


def test_disposition_for_unknown_delivery_is_a_no_op(router, held, connect):
    peer = connect(router)
    peer.open_amqp()
    peer.begin()
    peer.send_frame(Disposition(role=Role.RECEIVER, first=1000, last=2000, settled=True))
    peer.send_frame(Close())
    frames = peer.read_frames(until=Close)
    assert not any(isinstance(f.body, End) for f in frames)
    assert frames[-1].body.error is None
    _assert_untouched(held)


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


def test_one_log_line_per_bad_connection(router, connect):
    for body in (b"\x00\x53\x30\x45", b"\x00\x53\x13\xc0\x05\xff\xff\xff\xff"):
        peer = connect(router)
        peer.open_amqp()
        peer.send(_frame(body))
        _close_condition(peer)
    lines = [line for line in router.stderr_lines() if "closed connection" in line]
    assert len(lines) == 2
    assert all("amqp:decode-error" in line for line in lines)
