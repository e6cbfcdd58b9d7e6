"""Raw bytes against the frame decoder and the message header check (a few seconds in CI).

Whatever the bytes, the frame reader yields frames or raises ``DecodeError``/``FramingError``
(the peer's error, closed with the right condition), and the engine never reports
``amqp:internal-error``. ``check`` either accepts a payload, and then the router can
always mark it redelivered, or raises ``DecodeError``. Longer runs: set
``ONCE_FUZZ_EXAMPLES`` (the count is reported in BENCHMARKS.md).
"""

from __future__ import annotations

import os
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from once.router.adaptors.amqp.message import check, delivery_count, mark_redelivered
from once.router.amqp.codec import dumps
from once.router.amqp.connection import Connection, Mode
from once.router.amqp.errors import ProtocolError
from once.router.amqp.events import ConnectionFailed
from once.router.amqp.frames import AMQP_HEADER, FrameReader
from once.router.amqp.types import Described, ulong

EXAMPLES = int(os.environ.get("ONCE_FUZZ_EXAMPLES", "600"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))

# Bodies that start like the performatives the fast paths take (transfer 0x14, disposition 0x15).
bodies = st.one_of(
    st.binary(max_size=40),
    st.tuples(st.sampled_from([b"\x00\x53\x14", b"\x00\x53\x15", b"\x00\x53\x13", b"\x00\x53"]),
              st.binary(max_size=30)).map(b"".join),
    st.tuples(st.just(b"\x00\x53\x15\xc0"), st.integers(0, 12).map(lambda n: bytes([n])),
              st.integers(0, 8).map(lambda n: bytes([n])), st.binary(max_size=12)).map(b"".join),
)


def _frame(body: bytes, ftype: int = 0) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, ftype, 0) + body


@FUZZ
@given(st.lists(bodies, min_size=1, max_size=4), st.sampled_from([0, 1]))
def test_frame_reader_raises_only_protocol_errors(bodies_, ftype):
    reader = FrameReader(65536)
    reader.feed(b"".join(_frame(b, ftype) for b in bodies_))
    try:
        for _ in reader.frames():
            pass
    except ProtocolError:
        pass


@FUZZ
@given(st.lists(bodies, min_size=1, max_size=4))
def test_engine_never_fails_with_internal_error(bodies_):
    server = Connection(Mode.SERVER, "server")
    events = server.receive_data(AMQP_HEADER + b"".join(_frame(b) for b in bodies_))
    failed = [e for e in events if isinstance(e, ConnectionFailed)]
    assert all(e.condition != "amqp:internal-error" for e in failed), failed


fields = st.one_of(st.none(), st.booleans(), st.integers(-2, 2**33), st.text(max_size=3), st.binary(max_size=3),
                   st.lists(st.integers(0, 3), max_size=2))
headers = st.lists(fields, max_size=7).map(lambda fs: dumps(Described(ulong(0x70), fs)))
payloads = st.one_of(
    st.binary(max_size=30),
    st.tuples(headers, st.sampled_from([b"", b"\x00\x53\x77\xa1\x02hi"])).map(b"".join),
    st.tuples(st.just(b"\x00\x53\x70"), st.binary(max_size=20)).map(b"".join),
)


@FUZZ
@given(payloads, st.integers(1, 3))
def test_header_check_guards_redelivery(payload, extra):
    try:
        check(payload)
    except ProtocolError:
        return
    marked = mark_redelivered(payload, extra)
    check(marked)
    assert delivery_count(marked) >= extra
