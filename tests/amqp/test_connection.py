"""The engine's state machines, driven through in-memory connection pairs."""

from __future__ import annotations

import pytest
from once.router.amqp.connection import Connection, Mode
from once.router.amqp.errors import LocalProtocolError
from once.router.amqp.events import (
    ConnectionClosed,
    ConnectionFailed,
    DeliveriesReceived,
    DeliveryAborted,
    DeliveryUpdated,
    LinkAttached,
    LinkDetached,
    LinkFlow,
    SaslDone,
    SessionEnded,
)
from once.router.amqp.performatives import (
    Accepted,
    Close,
    Disposition,
    Error,
    Flow,
    ReceiverSettleMode,
    Rejected,
    Role,
    Transfer,
)
from once.router.amqp.sasl import SaslClientConfig, SaslServerConfig
from once.router.amqp.transfer import encode_transfer
from pair import Pair, frames_of
from support.sasl_users import plain_users


def _sent_pair(credit: int = 10, **kw) -> tuple[Pair, object, object]:
    p = Pair(**kw)
    p.open()
    clink, slink = p.link()
    p.server.flow(slink, credit)
    p.pump()
    return p, clink, slink


def _received(events: list) -> list:
    """The deliveries the events carry, in order (a batch of transfers is one event)."""
    return [d for e in events if isinstance(e, DeliveriesReceived) for d in e.deliveries]


def test_open_begin_attach_and_credit():
    p, clink, slink = _sent_pair(credit=7)
    assert clink.credit == 7 and clink.attached and slink.attached
    assert any(isinstance(e, LinkFlow) for e in p.client_events)


def test_transfer_and_accept_settles_both_sides():
    p, clink, slink = _sent_pair()
    d = p.client.send(clink, b"t1", b"payload")
    _, se = p.pump()
    [rx] = _received(se)
    assert rx.payload == b"payload" and rx.tag == b"t1" and not rx.settled
    p.server.disposition(rx, Accepted(), settled=True)
    ce, _ = p.pump()
    [up] = [e for e in ce if isinstance(e, DeliveryUpdated)]
    assert up.delivery is d and isinstance(up.state, Accepted) and up.settled
    assert clink.credit == 9 and clink.delivery_count == 1 and not any(d.link is clink for d in p.csession.outgoing.values())


def test_multi_frame_message_far_larger_than_max_frame_size():
    server = Connection(Mode.SERVER, "server", max_frame_size=1024)
    p, clink, slink = _sent_pair(server=server)
    body = bytes(range(256)) * 2000  # 512 KB through 1 KB frames
    p.client.send(clink, b"big", body)
    _, se = p.pump()
    [rx] = _received(se)
    assert rx.payload == body
    transfers = [f for f in frames_of(p.wire_to_server) if isinstance(f, Transfer)]
    assert len(transfers) > 500 and all(t.more for t in transfers[:-1]) and not transfers[-1].more
    assert slink.credit == 9  # one delivery, one credit, however many frames


def test_aborted_transfer_is_discarded():
    p, clink, slink = _sent_pair()
    ch, h = p.csession.channel, clink.handle
    p.client._out += encode_transfer(ch, h, 0, b"a", 0, False, True, None, False, False, b"part-1")
    p.client._out += encode_transfer(ch, h, None, None, 0, False, False, None, False, True, b"")
    p.csession.next_outgoing_id += 2
    _, se = p.pump()
    assert [type(e) for e in se] == [DeliveryAborted]
    assert se[0].tag == b"a"
    # The link is usable afterwards.
    clink.credit -= 1
    clink.delivery_count += 1
    p.csession.next_delivery_id = 1
    p.client.send(clink, b"b", b"whole")
    _, se = p.pump()
    assert [d.payload for d in _received(se)] == [b"whole"]


def test_drain_consumes_remaining_credit():
    p, clink, slink = _sent_pair(credit=0)
    p.server.flow(slink, 5, drain=True)
    ce, _ = p.pump()
    assert any(isinstance(e, LinkFlow) and e.drain for e in ce)
    p.client.send(clink, b"x", b"1")
    p.client.drained(clink)
    _, se = p.pump()
    assert clink.credit == 0 and clink.delivery_count == 5
    assert slink.credit == 0 and slink.delivery_count == 5
    assert any(isinstance(e, LinkFlow) for e in se)


def test_dispositions_go_out_as_ranges():
    p, clink, slink = _sent_pair(credit=100)
    for i in range(50):
        p.client.send(clink, b"%d" % i, b"m")
    _, se = p.pump()
    for d in _received(se):
        p.server.disposition(d, Accepted(), settled=True)
    before = len(p.wire_to_client)
    ce, _ = p.pump()
    dispositions = [f for f in frames_of(p.wire_to_client[before:]) if isinstance(f, Disposition)]
    assert len(dispositions) == 1
    assert (dispositions[0].first, dispositions[0].last) == (0, 49)
    assert sum(isinstance(e, DeliveryUpdated) for e in ce) == 50


def test_mixed_outcomes_split_ranges():
    p, clink, slink = _sent_pair(credit=100)
    for i in range(6):
        p.client.send(clink, b"%d" % i, b"m")
    _, se = p.pump()
    for i, d in enumerate(_received(se)):
        p.server.disposition(d, Rejected() if i == 3 else Accepted(), settled=True)
    before = len(p.wire_to_client)
    ce, _ = p.pump()
    ranges = [(f.first, f.last if f.last is not None else f.first, type(f.state).__name__)
              for f in frames_of(p.wire_to_client[before:]) if isinstance(f, Disposition)]
    assert ranges == [(0, 2, "Accepted"), (3, 3, "Rejected"), (4, 5, "Accepted")]
    assert [type(e.state).__name__ for e in ce] == ["Accepted"] * 3 + ["Rejected"] + ["Accepted"] * 2


def test_receiver_settle_mode_second():
    p = Pair()
    p.open()
    clink, slink = p.link(rcv_settle_mode=ReceiverSettleMode.SECOND)
    assert slink.rcv_settle_mode is ReceiverSettleMode.SECOND
    p.server.flow(slink, 1)
    p.pump()
    d = p.client.send(clink, b"t", b"x")
    _, se = p.pump()
    [rx] = _received(se)
    p.server.disposition(rx, Accepted(), settled=False)
    ce, _ = p.pump()
    assert ce[0].settled is False and isinstance(ce[0].state, Accepted)
    p.client.disposition(d, Accepted(), settled=True)
    _, se = p.pump()
    assert isinstance(se[0], DeliveryUpdated) and se[0].settled and se[0].delivery is rx


def test_presettled_transfer():
    p, clink, slink = _sent_pair()
    p.client.send(clink, b"t", b"x", settled=True)
    _, se = p.pump()
    assert _received(se)[0].settled and not p.ssession.incoming


def test_unsettled_map_and_incomplete_flag_are_read_and_written():
    p = Pair()
    p.open()
    unsettled = {b"tag-1": Accepted(), b"tag-2": None}
    clink = p.client.attach(p.csession, "resume-me", Role.RECEIVER, unsettled=unsettled, incomplete_unsettled=True)
    _, se = p.pump()
    ev = se[0]
    assert isinstance(ev, LinkAttached)
    assert ev.attach.unsettled == unsettled and ev.attach.incomplete_unsettled is True
    p.server.attach(p.ssession, "resume-me", ev.link.role, link=ev.link, unsettled={b"tag-1": Accepted()})
    ce, _ = p.pump()
    assert ce[0].attach.unsettled == {b"tag-1": Accepted()} and ce[0].attach.incomplete_unsettled is False
    assert clink.attached


def test_resumed_transfer_carries_resume_and_state():
    p, clink, slink = _sent_pair()
    p.client.send(clink, b"old", b"again", resume=True, state=Accepted())
    _, se = p.pump()
    [d] = _received(se)
    assert d.resume and isinstance(d.state, Accepted)
    assert slink.credit == 10  # a resumed delivery does not take credit


def test_idle_timeout_heartbeats_and_expiry():
    server = Connection(Mode.SERVER, "server", idle_timeout=1.0)
    p = Pair(server=server)
    p.client.open()
    p.pump()
    assert p.client.remote_idle_timeout == 1.0
    p.client.tick(0.0)
    p.server.tick(0.0)
    p.client.tick(0.6)  # over half the peer's idle timeout: an empty frame goes out
    before = len(p.wire_to_server)
    p.pump()
    assert b"\x00\x00\x00\x08\x02\x00\x00\x00" in b"".join(p.wire_to_server[before:])
    assert p.server.tick(0.7) is not None and not p.server.closed
    p.server.tick(2.0)  # nothing since 0.7: the server gives up
    assert p.server.closed
    closes = [f for f in frames_of([p.server.data_to_send()]) if isinstance(f, Close)]
    assert closes[0].error.condition == "amqp:resource-limit-exceeded"


def test_the_idle_timeout_counts_frames_not_bytes():
    """Bytes that never complete a frame (a stream broken mid-frame) do not keep a
    connection alive: it times out like a silent one."""
    server = Connection(Mode.SERVER, "server", idle_timeout=1.0)
    p = Pair(server=server)
    p.client.open()
    p.pump()
    p.server.tick(0.0)
    p.server.receive_data(b"\x00\x00\x40\x00\x02\x00\x00\x00")  # a 16 KiB frame's header, then a trickle
    for i in range(1, 20):
        p.server.receive_data(b"x")
        p.server.tick(i * 0.1)
    assert p.server.closed
    closes = [f for f in frames_of([p.server.data_to_send()]) if isinstance(f, Close)]
    assert closes[0].error.condition == "amqp:resource-limit-exceeded"


def test_transfers_of_one_read_on_one_link_are_one_event_in_order():
    p, clink, slink = _sent_pair(credit=20)
    for i in range(5):
        p.client.send(clink, b"%d" % i, b"m")
    se = p.server.receive_data(p.client.data_to_send())
    batches = [e for e in se if isinstance(e, DeliveriesReceived)]
    assert len(batches) == 1 and batches[0].link is slink
    assert [d.tag for d in batches[0].deliveries] == [b"%d" % i for i in range(5)]


def test_session_window_blocks_then_flows():
    server = Connection(Mode.SERVER, "server", incoming_window=4)
    p, clink, slink = _sent_pair(credit=20, server=server)
    for i in range(10):
        p.client.send(clink, b"%d" % i, b"m")
    _, se = p.pump()
    assert [d.tag for d in _received(se)] == [b"%d" % i for i in range(10)]
    assert not p.csession.blocked


def test_window_violation_ends_the_session():
    server = Connection(Mode.SERVER, "server", incoming_window=2)
    p, clink, slink = _sent_pair(credit=20, server=server)
    ch, h = p.csession.channel, clink.handle
    for i in range(3):  # ignore the window on purpose
        p.client._out += encode_transfer(ch, h, i, b"%d" % i, 0, True, False, None, False, False, b"m")
    _, se = p.pump()
    ended = [e for e in se if isinstance(e, SessionEnded)]
    assert ended and ended[0].error.condition == "amqp:session:window-violation"
    assert not p.server.closed


def test_max_frame_size_is_negotiated_down():
    client = Connection(Mode.CLIENT, "client", max_frame_size=1024)
    p = Pair(client=client)
    p.open()
    slink_role = Role.RECEIVER
    clink = p.client.attach(p.csession, "down", slink_role)
    _, se = p.pump()
    slink = se[0].link
    p.server.attach(p.ssession, "down", slink.role, link=slink)
    p.pump()
    p.client.flow(clink, 5)
    p.pump()
    p.server.send(slink, b"t", b"z" * 5000)
    ce, _ = p.pump()
    assert _received(ce)[-1].payload == b"z" * 5000
    assert max(len(c) for c in p.wire_to_client[-1:]) > 1024  # several frames in one write...
    sizes = [len(f) for f in _split_frames(b"".join(p.wire_to_client[-1:]))]
    assert max(sizes) <= 1024  # ...each within the client's max-frame-size


def _split_frames(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos:pos + 4], "big")
        out.append(data[pos:pos + size])
        pos += size
    return out


def test_send_without_credit_is_a_local_error():
    p, clink, slink = _sent_pair(credit=0)
    with pytest.raises(LocalProtocolError):
        p.client.send(clink, b"t", b"x")


def test_detach_and_close_are_answered():
    p, clink, slink = _sent_pair()
    p.client.detach(clink, error=Error(condition="amqp:internal-error", description="bye"))
    _, se = p.pump()
    assert isinstance(se[0], LinkDetached) and se[0].closed and se[0].error.description == "bye"
    p.client.close()
    _, se = p.pump()
    assert isinstance(se[-1], ConnectionClosed)
    assert p.client.closed and p.server.closed


def test_sasl_plain_and_wrong_password():
    auth = plain_users({"alice": "pw"}, allow_anonymous=False)
    cfg = SaslServerConfig(("PLAIN",), auth, allow_bare=False)
    ok = Pair(Connection(Mode.CLIENT, "c", sasl_client=SaslClientConfig("PLAIN", "alice", "pw")),
              Connection(Mode.SERVER, "s", sasl_server=cfg))
    ok.client.open()
    ce, se = ok.pump()
    assert SaslDone(ok=True, mechanism="PLAIN", user="alice") in se
    assert ok.server.remote_open is not None and ok.client.remote_open is not None
    bad = Pair(Connection(Mode.CLIENT, "c", sasl_client=SaslClientConfig("PLAIN", "alice", "nope")),
               Connection(Mode.SERVER, "s", sasl_server=cfg))
    bad.client.open()
    ce, se = bad.pump()
    assert SaslDone(ok=False, mechanism="PLAIN", user=None, requested="alice") in se
    assert any(isinstance(e, ConnectionFailed) for e in ce)
    assert bad.server.closed and bad.server.remote_open is None


def test_sasl_plain_authorization_id_must_be_the_user_itself():
    auth = plain_users({"alice": "pw", "bob": "bobpw"}, allow_anonymous=False)
    assert auth("PLAIN", b"\x00alice\x00pw") == "alice"
    assert auth("PLAIN", b"alice\x00alice\x00pw") == "alice"
    # refused: no user (a step that says whom the client claimed to be, for the log)
    assert not isinstance(auth("PLAIN", b"bob\x00alice\x00pw"), str)  # alice may not act as bob
    assert not isinstance(auth("PLAIN", b"\x00alice\x00bobpw"), str)
    assert auth("PLAIN", b"alice\x00pw") is None


def test_disposition_for_unknown_delivery_is_ignored():
    p, clink, slink = _sent_pair()
    p.client._out += bytes(__import__("once.router.amqp.frames", fromlist=["build_frame"]).build_frame(
        p.csession.channel, Disposition(role=Role.RECEIVER, first=99, last=4000000000, settled=True)))
    ce, se = p.pump()
    assert se == [] and not p.server.closed


def test_flow_with_bad_handle_ends_session():
    p, clink, slink = _sent_pair()
    from once.router.amqp.frames import build_frame

    p.client._out += bytes(build_frame(p.csession.channel, Flow(next_incoming_id=0, incoming_window=10, next_outgoing_id=0,
                                                                 outgoing_window=10, handle=42, delivery_count=0, link_credit=1)))
    _, se = p.pump()
    assert se[0].error.condition == "amqp:session:unattached-handle"


def test_credit_taken_back_still_admits_transfers_that_crossed_the_flow():
    p, clink, slink = _sent_pair(credit=3)
    # The client sends three before it sees our flow that takes the credit back.
    for tag in (b"a", b"b", b"c"):
        p.client.send(clink, tag, b"x")
    p.server.flow(slink, 0)
    se = p.server.receive_data(p.client.data_to_send())
    assert [d.tag for d in _received(se)] == [b"a", b"b", b"c"]
    assert not any(isinstance(e, LinkDetached) for e in se)
    p.pump()
    assert clink.credit == 0 and slink.credit == 0
    # Beyond what was ever granted, a transfer is still a violation.
    clink.credit = 1
    p.client.send(clink, b"d", b"x")
    _, se = p.pump()
    [detached] = [e for e in se if isinstance(e, LinkDetached)]
    assert detached.error.condition == "amqp:link:transfer-limit-exceeded"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_scram_over_challenge_and_response_frames(mechanism):
    from once.client.scram import scram
    from once.router.config import Auth
    from once.router.security.authn import client_sasl
    from once.router.security.users import User, make_secrets

    auth = Auth({"alice": User("alice", make_secrets("pw"))}, allow_anonymous=False)
    ok = Pair(Connection(Mode.CLIENT, "c", sasl_client=scram(mechanism, "alice", "pw")),
              Connection(Mode.SERVER, "s", sasl_server=client_sasl(auth, tls=False, peercert=None)))
    ok.client.open()
    ce, se = ok.pump()
    assert SaslDone(ok=True, mechanism=mechanism, user="alice") in se
    assert SaslDone(ok=True, mechanism=mechanism, user="alice") in ce
    assert ok.server.user == "alice" and ok.server.remote_open is not None and ok.client.remote_open is not None
    bad = Pair(Connection(Mode.CLIENT, "c", sasl_client=scram(mechanism, "alice", "nope")),
               Connection(Mode.SERVER, "s", sasl_server=client_sasl(auth, tls=False, peercert=None)))
    bad.client.open()
    ce, se = bad.pump()
    assert SaslDone(ok=False, mechanism=mechanism, user=None, requested="alice") in se
    assert any(isinstance(e, ConnectionFailed) for e in ce) and bad.server.remote_open is None


def test_a_scram_server_that_cannot_prove_it_holds_the_hash_is_refused_by_the_client():
    """A server that says OK without SCRAM's server signature (it never had the hash) is
    not the router we meant to reach: the client fails the connection."""
    from once.client.scram import scram
    from once.router.amqp.sasl import SaslStep
    from once.router.security.users import User, make_secrets, scram_exchange

    real = scram_exchange({"alice": User("alice", make_secrets("pw"))}, "SCRAM-SHA-256")

    def impostor(mechanism: str, response: bytes) -> SaslStep:
        first = real(response)
        return SaslStep(challenge=first.challenge, next=lambda _: SaslStep(user="alice", additional=b"v=Zm9yZ2Vk"))

    p = Pair(Connection(Mode.CLIENT, "c", sasl_client=scram("SCRAM-SHA-256", "alice", "pw")),
             Connection(Mode.SERVER, "s", sasl_server=SaslServerConfig(("SCRAM-SHA-256",), impostor)))
    p.client.open()
    ce, _ = p.pump()
    failed = [e for e in ce if isinstance(e, ConnectionFailed)]
    assert failed and "did not prove" in failed[0].description and p.client.remote_open is None
