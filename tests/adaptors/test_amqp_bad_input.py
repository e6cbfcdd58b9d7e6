"""Bad input on a client connection, in-process (``tests/support/inprocess.py``): the
right error, one log line, and nothing else harmed: a delivery held in flight by another
client's subscriber is still answered afterwards. (Real sockets and real Proton clients:
``tests/integration/test_bad_input.py``, for authentication and interoperation.)"""

from __future__ import annotations

import logging
import struct
from typing import Any

import pytest
from once.router.amqp.events import DeliveriesReceived, DeliveryUpdated, LinkAttached
from once.router.amqp.performatives import (
    Accepted,
    Close,
    Disposition,
    End,
    ReceiverSettleMode,
    Role,
    Source,
    Target,
    Transfer,
)
from support.inprocess import RawWire, Wire, router
from support.raw import AMQP_HEADER, SASL_HEADER


def _frame(body: bytes, channel: int = 0) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, 0, channel) + body


def _close_condition(peer: Any) -> str:
    frames = peer.read_frames(until=Close)
    assert frames and isinstance(frames[-1].body, Close), f"no close frame in {frames}"
    error = frames[-1].body.error
    assert error is not None
    return error.condition


class Held:
    """A delivery in flight: another client's subscriber holds it unaccepted, its publisher waits."""

    async def start(self, r: Any) -> Held:
        self.sub, self.pub = Wire(r, "holder", ("127.0.0.1", 45001)), Wire(r, "sender", ("127.0.0.1", 45002))
        self.rx = await self._link(self.sub, Role.RECEIVER, "rx")
        self.sub.client.flow(self.rx, 10)
        await self.sub.pump()
        self.tx = await self._link(self.pub, Role.SENDER, "tx")
        self.sent = self.pub.client.send(self.tx, b"t0", b"\x00Sw\xa1\x08precious")
        await self.pub.pump()
        [got] = [e for e in await self.sub.pump() if isinstance(e, DeliveriesReceived)]
        [self.delivery] = got.deliveries
        return self

    @staticmethod
    async def _link(wire: Wire, role: Role, name: str) -> Any:
        c = wire.client
        c.open()
        await wire.pump()
        session = c.begin()
        source, target = (Source(address="held"), Target()) if role is Role.RECEIVER else (Source(), Target(address="held"))
        link = c.attach(session, name, role, source=source, target=target, rcv_settle_mode=ReceiverSettleMode.FIRST)
        await wire.pump()
        assert any(e.link is link for e in wire.events if isinstance(e, LinkAttached))
        return link

    async def untouched(self) -> None:
        assert [e for e in await self.pub.pump() if isinstance(e, DeliveryUpdated)] == []
        self.sub.client.disposition(self.delivery, Accepted(), settled=True)
        await self.sub.pump()
        [outcome] = [e for e in await self.pub.pump() if isinstance(e, DeliveryUpdated)]
        assert outcome.delivery is self.sent and isinstance(outcome.state, Accepted)


@pytest.fixture
async def held_router() -> tuple[Any, Held]:
    r = router()
    return r, await Held().start(r)


async def test_garbage_instead_of_protocol_header(held_router, caplog):
    r, held = held_router
    peer = RawWire(r)
    with caplog.at_level(logging.INFO):
        peer.send(b"GET / HTTP/1.1\r\n\r\n")
    assert peer.read_header() in (AMQP_HEADER, SASL_HEADER)  # the header we do speak
    assert peer.at_eof()
    assert any("unsupported protocol header" in rec.getMessage() for rec in caplog.records)
    await held.untouched()


@pytest.mark.parametrize("bad, condition", [
    (_frame(b"\x00\x53\x13\xc0\x05\xff\xff\xff\xff"), "amqp:decode-error"),  # a flow whose list lies about its count
    (_frame(b"\x00\x53\x11\xc0\x20\x04\x43"), "amqp:decode-error"),  # begin: list claims 32 bytes, frame ends
    (struct.pack(">IBBH", 70_000, 2, 0, 0) + b"\x00" * 100, "amqp:connection:framing-error"),  # over max-frame-size
    (_frame(b"\x00\x53\x30\x45"), "amqp:decode-error"),  # an unknown performative
], ids=["lying-list", "truncated", "over-max-frame", "unknown-performative"])
async def test_a_bad_frame_closes_that_connection_with_its_condition(held_router, bad: bytes, condition: str):
    r, held = held_router
    peer = RawWire(r)
    peer.open_amqp()
    peer.send(bad)
    assert _close_condition(peer) == condition
    assert peer.at_eof()
    await held.untouched()


async def test_transfer_on_unattached_link_ends_the_session_only(held_router):
    r, held = held_router
    peer = RawWire(r)
    peer.open_amqp()
    peer.begin()
    peer.send_frame(Transfer(handle=7, delivery_id=0, delivery_tag=b"t", message_format=0), payload=b"\x00\x53\x77\x45")
    frames = peer.read_frames(until=End)
    assert frames[-1].body.error.condition == "amqp:session:unattached-handle"
    peer.send_frame(Close())  # the connection itself is still open: a clean close is answered
    frames = peer.read_frames(until=Close)
    assert frames[-1].body.error is None
    await held.untouched()


async def test_disposition_for_unknown_delivery_is_a_no_op(held_router):
    r, held = held_router
    peer = RawWire(r)
    peer.open_amqp()
    peer.begin()
    peer.send_frame(Disposition(role=Role.RECEIVER, first=1000, last=2000, settled=True))
    peer.send_frame(Close())
    frames = peer.read_frames(until=Close)
    assert not any(isinstance(f.body, End) for f in frames)
    assert frames[-1].body.error is None
    await held.untouched()


async def test_one_log_line_per_bad_connection(caplog):
    r = router()
    with caplog.at_level(logging.INFO):
        for i, body in enumerate((b"\x00\x53\x30\x45", b"\x00\x53\x13\xc0\x05\xff\xff\xff\xff")):
            peer = RawWire(r, ("127.0.0.1", 48100 + i))
            peer.open_amqp()
            peer.send(_frame(body))
            _close_condition(peer)
    lines = [rec.getMessage() for rec in caplog.records if "closed connection" in rec.getMessage()]
    assert len(lines) == 2 and all("amqp:decode-error" in line for line in lines)
