"""The hand-built transfer/disposition encodings and the fast transfer decoder agree
with the generic codec."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from once.router.amqp.codec import decode
from once.router.amqp.frames import FrameReader, _fast_transfer_at, build_frame
from once.router.amqp.performatives import Accepted, Disposition, Rejected, Role, Transfer
from once.router.amqp.transfer import encode_disposition, encode_transfer

u32 = st.integers(0, 2**32 - 1)
opt_u32 = st.none() | u32
tags = st.binary(max_size=32)


def _one_frame(data: bytes):
    r = FrameReader(1 << 30)
    r.feed(bytes(data))
    [f] = list(r.frames())
    return f


@settings(max_examples=300, deadline=None)
@given(ch=st.integers(0, 255), handle=u32, did=u32, tag=tags, settled=st.booleans(), more=st.booleans(),
       resume=st.booleans(), aborted=st.booleans(), payload=st.binary(max_size=64), state=st.sampled_from([None, Accepted()]))
def test_encode_transfer_decodes_to_the_same_transfer(ch, handle, did, tag, settled, more, resume, aborted, payload, state):
    f = _one_frame(encode_transfer(ch, handle, did, tag, 0, settled, more, state, resume, aborted, payload))
    t = f.body
    assert f.channel == ch and f.payload == payload
    assert (t.handle, t.delivery_id, t.delivery_tag, t.settled, t.more, t.resume, t.aborted) == (
        handle, did, tag, settled, more, resume, aborted)
    assert t.state == state


@settings(max_examples=300, deadline=None)
@given(handle=u32, did=opt_u32, tag=st.none() | tags, fmt=opt_u32, settled=st.none() | st.booleans(), more=st.booleans(),
       payload=st.binary(max_size=16))
def test_fast_decoder_agrees_with_generic(handle, did, tag, fmt, settled, more, payload):
    frame = build_frame(0, Transfer(handle=handle, delivery_id=did, delivery_tag=tag, message_format=fmt,
                                    settled=settled, more=more), payload)
    body = bytes(frame[8:])
    generic, end = decode(body, 0)
    fast = _fast_transfer_at(body, 0, len(body))
    if fast is not None:
        assert fast[0] == generic and body[fast[1]:] == body[end:]


@given(first=u32, span=st.integers(0, 1000), settled=st.booleans(), receiver=st.booleans(),
       state=st.sampled_from([None, Accepted(), Rejected()]))
def test_encode_disposition(first, span, settled, receiver, state):
    last = min(first + span, 2**32 - 1)
    d = _one_frame(encode_disposition(3, receiver, first, last, settled, state)).body
    assert isinstance(d, Disposition)
    assert d.role is (Role.RECEIVER if receiver else Role.SENDER)
    assert (d.first, d.last if d.last is not None else d.first, d.settled, d.state) == (first, last, settled, state)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=40))
def test_fast_decoder_never_crashes_on_garbage(tail):
    body = b"\x00\x53\x14" + tail
    result = _fast_transfer_at(body, 0, len(body))
    assert result is None or isinstance(result[0], Transfer)


@settings(max_examples=500, deadline=None)
@given(role=st.sampled_from(list(Role)), first=u32, last=st.none() | u32, settled=st.booleans(),
       state=st.sampled_from([None, Accepted(), Rejected()]), batchable=st.booleans())
def test_fast_disposition_agrees_with_generic(role, first, last, settled, state, batchable):
    from once.router.amqp.frames import _fast_disposition

    frame = build_frame(0, Disposition(role=role, first=first, last=last, settled=settled, state=state, batchable=batchable))
    body = bytes(frame[8:])
    generic, _ = decode(body, 0)
    fast = _fast_disposition(body)
    if fast is not None:
        assert fast == generic
    if state is None or isinstance(state, Accepted):
        assert fast is not None  # the common shapes take the fast path


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=24))
def test_fast_disposition_never_crashes_on_garbage(tail):
    from once.router.amqp.frames import _fast_disposition

    result = _fast_disposition(b"\x00\x53\x15" + tail)
    assert result is None or isinstance(result, Disposition)
