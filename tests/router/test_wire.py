from __future__ import annotations

import pytest

from router.amqp.errors import DecodeError
from router.wire import pack, unpack


def test_routing_header_roundtrip():
    msg = b"\x00\x53\x77\xa1\x02hi"
    born = 1_795_318_003_550_914
    for dests in (frozenset(), frozenset({"B"}), frozenset({"B", "C", "router-with-a-long-name"})):
        for presettled in (False, True):
            data = pack("tópic", dests, presettled, 7, "R", born) + msg
            assert unpack(data) == ("tópic", dests, presettled, 7, msg, None, "R", born)
            keys = frozenset({("client", "sub"), ("c2", "s2")})
            assert unpack(pack("tópic", dests, presettled, 7, "R2", born + 1, keys) + msg) == (
                "tópic", dests, presettled, 7, msg, keys, "R2", born + 1)


def test_header_without_the_stamp_is_a_decode_error():
    with pytest.raises(DecodeError):
        unpack(pack("t", frozenset({"B"}), False, 0, "A", 5)[:-8])


@pytest.mark.parametrize("bad", [b"", b"\x00\x00", b"\x00\x00\x00\x00\x00\x00\x05ab", b"\x00\x00\x00\x00\x00\x00\x01a\x03\x05B"])
def test_malformed_header_is_a_decode_error(bad):
    with pytest.raises(DecodeError):
        unpack(bad)
