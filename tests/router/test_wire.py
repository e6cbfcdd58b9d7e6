from __future__ import annotations

import pytest
from once.records.membership import GroupId
from once.router.adaptors.amqp.wire import pack, unpack
from once.router.amqp.errors import DecodeError


def test_routing_header_roundtrip():
    msg = b"\x00\x53\x77\xa1\x02hi"
    born = 1_795_318_003_550_914
    for dests in (frozenset(), frozenset({"B"}), frozenset({"B", "C", "router-with-a-long-name"})):
        for presettled in (False, True):
            data = pack("tópic", dests, presettled, 7, "R", born) + msg
            assert unpack(data) == ("tópic", dests, presettled, 7, msg, None, "R", born, None)
            keys = frozenset({("client", "sub"), ("c2", "s2")})
            assert unpack(pack("tópic", dests, presettled, 7, "R2", born + 1, keys) + msg) == (
                "tópic", dests, presettled, 7, msg, keys, "R2", born + 1, None)


def test_chosen_group_members_travel_with_the_copy():
    chosen = {("c1", "orders|global"): (GroupId("orders"), "B"), ("c2", "work"): (GroupId("work", "app-7"), "C"),
              ("c4", "any"): (GroupId("work", "", "t/+"), "C")}  # (a group of a pattern)
    keys = frozenset({("c3", "moved")})
    for k in (None, keys):
        out = unpack(pack("t", frozenset({"B", "C"}), False, 0, "A", 9, k, chosen) + b"m")
        assert out == ("t", frozenset({"B", "C"}), False, 0, b"m", k, "A", 9, chosen)


def test_a_chosen_entry_with_too_few_fields_is_a_decode_error():
    good = pack("t", frozenset({"B"}), False, 0, "A", 9, None, {("c", "l"): (GroupId("g"), "B")})
    with pytest.raises(DecodeError):
        unpack(good.replace(b"B\x00\x00g\x00\x00c\x00l", b"B\x00\x00g\x00\x00c\x01l"))


def test_a_target_key_without_its_separator_is_a_decode_error():
    """A key is a (container-id, link) pair; one that is not names no subscriber."""
    good = pack("t", frozenset({"B"}), False, 0, "A", 9, frozenset({("client", "sub")}))
    assert b"client\x00sub" in good
    with pytest.raises(DecodeError):
        unpack(good.replace(b"client\x00sub", b"client\x01sub"))


def test_header_without_the_stamp_is_a_decode_error():
    with pytest.raises(DecodeError):
        unpack(pack("t", frozenset({"B"}), False, 0, "A", 5)[:-8])


@pytest.mark.parametrize("bad", [b"", b"\x00\x00", b"\x00\x00\x00\x00\x00\x00\x05ab", b"\x00\x00\x00\x00\x00\x00\x01a\x03\x05B"])
def test_malformed_header_is_a_decode_error(bad):
    with pytest.raises(DecodeError):
        unpack(bad)


def test_recurring_headers_read_from_the_last_one_agree_with_a_full_read():
    a = pack("t", frozenset({"B", "C"}), False, 0, "A", 1)
    b = pack("t", frozenset({"B"}), True, 3, "A", 2)
    k = pack("t", frozenset({"B", "C"}), False, 0, "A", 3, frozenset({("c", "l")}))
    for data, want in [(a + b"m1", ("t", frozenset({"B", "C"}), False, 0, b"m1", None, "A", 1, None)),
                       (a + b"m2", ("t", frozenset({"B", "C"}), False, 0, b"m2", None, "A", 1, None)),
                       (b + b"", ("t", frozenset({"B"}), True, 3, b"", None, "A", 2, None)),
                       (k + b"m3", ("t", frozenset({"B", "C"}), False, 0, b"m3", frozenset({("c", "l")}), "A", 3, None)),
                       (a[:-8] + pack("t", frozenset(), False, 0, "A", 9)[-8:] + b"m4",
                        ("t", frozenset({"B", "C"}), False, 0, b"m4", None, "A", 9, None))]:
        assert unpack(data) == want
    unpack(a)
    with pytest.raises(DecodeError):
        unpack(a[:-1])  # the remembered head, without a whole stamp behind it
