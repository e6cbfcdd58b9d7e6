"""Codec conformance: values encoded by Proton decode in ours and the reverse."""

from __future__ import annotations

import uuid

import proton
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from once.router.amqp import types as t
from once.router.amqp.codec import decode, decode_all, dumps
from once.router.amqp.errors import DecodeError
from proton import Data

# --------------------------------------------------------------- strategies

_SCALARS = {
    "null": st.none(),
    "bool": st.booleans(),
    "ubyte": st.integers(0, 2**8 - 1).map(t.ubyte),
    "ushort": st.integers(0, 2**16 - 1).map(t.ushort),
    "uint": st.integers(0, 2**32 - 1).map(t.uint),
    "ulong": st.integers(0, 2**64 - 1).map(t.ulong),
    "byte": st.integers(-(2**7), 2**7 - 1).map(t.byte),
    "short": st.integers(-(2**15), 2**15 - 1).map(t.short),
    "int": st.integers(-(2**31), 2**31 - 1).map(t.int32),
    "long": st.integers(-(2**63), 2**63 - 1),
    "float": st.floats(width=32, allow_nan=False).map(t.float32),
    "double": st.floats(allow_nan=False),
    "char": st.characters(exclude_categories=("Cs",)).map(t.char),
    "timestamp": st.integers(-(2**63), 2**63 - 1).map(t.timestamp),
    "decimal32": st.binary(min_size=4, max_size=4).map(t.decimal32),
    "decimal64": st.binary(min_size=8, max_size=8).map(t.decimal64),
    "decimal128": st.binary(min_size=16, max_size=16).map(t.decimal128),
    "uuid": st.uuids(),
    "binary": st.binary(max_size=300),
    "string": st.text(max_size=300),
    "symbol": st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=300).map(t.symbol),
}
scalars = st.one_of(*_SCALARS.values())
# Map keys Python cannot tell apart (True == 1 == uint(1), symbol("a") == "a") would merge
# in a dict, so keys come from types that never compare equal to each other.
keys = st.one_of(_SCALARS["symbol"], _SCALARS["long"], _SCALARS["uuid"])

_ARRAYS = [
    (t.TypeCode.INT, _SCALARS["int"]), (t.TypeCode.UINT, _SCALARS["uint"]), (t.TypeCode.LONG, _SCALARS["long"]),
    (t.TypeCode.SYMBOL, _SCALARS["symbol"]), (t.TypeCode.STRING, _SCALARS["string"]), (t.TypeCode.UBYTE, _SCALARS["ubyte"]),
    (t.TypeCode.DOUBLE, _SCALARS["double"]), (t.TypeCode.ULONG, _SCALARS["ulong"]), (t.TypeCode.BOOLEAN, st.booleans()),
]
arrays = st.one_of(*(st.lists(s, max_size=20).map(lambda xs, c=c: t.Array(c, tuple(xs))) for c, s in _ARRAYS))


def _values(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.lists(children, max_size=8), st.dictionaries(keys, children, max_size=8))


values = st.recursive(st.one_of(scalars, arrays), _values, max_leaves=30)

# -------------------------------------------------- conversion to/from Proton

_PN_TYPE = {
    t.TypeCode.INT: Data.INT, t.TypeCode.UINT: Data.UINT, t.TypeCode.LONG: Data.LONG, t.TypeCode.SYMBOL: Data.SYMBOL,
    t.TypeCode.STRING: Data.STRING, t.TypeCode.UBYTE: Data.UBYTE, t.TypeCode.DOUBLE: Data.DOUBLE,
    t.TypeCode.ULONG: Data.ULONG, t.TypeCode.BOOLEAN: Data.BOOL,
}
_OUR_TYPE = {v: k for k, v in _PN_TYPE.items()}
_PN_SCALAR = [
    (t.ubyte, proton.ubyte), (t.ushort, proton.ushort), (t.uint, proton.uint), (t.ulong, proton.ulong),
    (t.byte, proton.byte), (t.short, proton.short), (t.int32, proton.int32), (t.float32, proton.float32),
    (t.char, proton.char), (t.timestamp, proton.timestamp), (t.symbol, proton.symbol),
]


def to_proton(v):
    for ours, theirs in _PN_SCALAR:
        if type(v) is ours:
            return theirs(v)
    if type(v) is t.decimal32:
        return proton.decimal32(int.from_bytes(v, "big"))
    if type(v) is t.decimal64:
        return proton.decimal64(int.from_bytes(v, "big"))
    if type(v) is t.decimal128:
        return proton.decimal128(bytes(v))
    if isinstance(v, t.Array):
        return proton.Array(proton.UNDESCRIBED, _PN_TYPE[v.type], *[to_proton(x) for x in v.items])
    if isinstance(v, list):
        return [to_proton(x) for x in v]
    if isinstance(v, dict):
        return {to_proton(k): to_proton(x) for k, x in v.items()}
    return v


def from_proton(v):
    for ours, theirs in _PN_SCALAR:
        if type(v) is theirs:
            return ours(v)
    if type(v) is proton.decimal32:
        return t.decimal32(int(v).to_bytes(4, "big"))
    if type(v) is proton.decimal64:
        return t.decimal64(int(v).to_bytes(8, "big"))
    if type(v) is proton.decimal128:
        return t.decimal128(bytes(v))
    if isinstance(v, proton.Array):
        return t.Array(_OUR_TYPE[v.type], tuple(from_proton(x) for x in v.elements))
    if isinstance(v, memoryview):
        return bytes(v)
    if isinstance(v, list):
        return [from_proton(x) for x in v]
    if isinstance(v, dict):
        return {from_proton(k): from_proton(x) for k, x in v.items()}
    return v


def proton_encode(v) -> bytes:
    d = Data()
    d.put_object(to_proton(v))
    return bytes(d.encode())


def proton_decode(b: bytes):
    d = Data()
    d.decode(b)
    d.rewind()
    d.next()
    return from_proton(d.get_object())


def same(a, b) -> bool:
    """Equality that also requires equal AMQP types, all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return len(a) == len(b) and all(k in b and same(v, b[k]) for k, v in a.items())
    if isinstance(a, t.Array):
        return a.type == b.type and len(a.items) == len(b.items) and all(same(x, y) for x, y in zip(a.items, b.items))
    return a == b


# -------------------------------------------------------------------- tests


@settings(max_examples=300, deadline=None)
@given(values)
def test_proton_encodes_we_decode(v):
    assert same(decode_all(proton_encode(v)), v)


@settings(max_examples=300, deadline=None)
@given(values)
def test_we_encode_proton_decodes(v):
    assert same(proton_decode(dumps(v)), v)


@settings(max_examples=300, deadline=None)
@given(values)
def test_roundtrip_ours(v):
    assert same(decode_all(dumps(v)), v)


@settings(max_examples=300, deadline=None)
@given(values)
def test_every_truncation_is_a_decode_error(v):
    encoded = dumps(v)
    for cut in range(len(encoded)):
        with pytest.raises(DecodeError):
            decode_all(encoded[:cut])


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_decode_error(data):
    try:
        decode(data, 0)
    except DecodeError:
        pass


@pytest.mark.parametrize(
    "raw, why",
    [
        (b"\xc0\x05\xff\x40", "count larger than the body"),
        (b"\xd0\xff\xff\xff\xff\x00\x00\x00\x01", "size past the end"),
        (b"\xc1\x02\x01\x40", "odd map count"),
        (b"\x56\x02", "boolean byte other than 0/1"),
        (b"\xa1\x02\xff\xfe", "invalid UTF-8"),
        (b"\xa3\x01\xff", "non-ASCII symbol"),
        (b"\x73\x00\x11\x00\x00", "char beyond Unicode"),
        (b"\x1f", "reserved constructor"),
        (b"\xe0\x03\x02\x00\x40", "array with a described element and no constructor"),
        (b"\xf0\x00\x00\x00\x05\xff\xff\xff\xff\x40", "array count larger than its body"),
        (b"\x00\xc0\x01\x00\x40", "list as a descriptor"),
    ],
)
def test_malformed_inputs_raise_decode_error(raw, why):
    with pytest.raises(DecodeError):
        decode_all(raw)


def test_compact_and_wide_encodings_both_decode():
    assert decode_all(b"\x43") == 0 and type(decode_all(b"\x43")) is t.uint
    assert decode_all(b"\x52\x05") == 5 and decode_all(b"\x70\x00\x00\x00\x05") == 5
    assert decode_all(b"\x45") == [] and decode_all(b"\xc0\x01\x00") == [] and decode_all(b"\xd0\x00\x00\x00\x04\x00\x00\x00\x00") == []
    assert decode_all(b"\xb1\x00\x00\x00\x02hi") == "hi" and decode_all(b"\xa1\x02hi") == "hi"


def test_decimal_is_carried_as_raw_bytes():
    raw = bytes(range(16))
    assert dumps(t.decimal128(raw)) == b"\x94" + raw
    assert decode_all(b"\x94" + raw) == raw


def test_uuid():
    u = uuid.uuid4()
    assert decode_all(dumps(u)) == u


def test_deep_nesting_is_a_decode_error_not_a_crash():
    assert isinstance(decode_all(b"\xc0\x02\x01\x45"), list)
    deep = b"\xd0\x00\x00\x00\x05\x00\x00\x00\x01" * 5000
    with pytest.raises(DecodeError):
        decode_all(deep)


@pytest.mark.parametrize("code", [0x40, 0x41, 0x42, 0x43, 0x44, 0x45])
def test_a_huge_array_of_zero_width_elements_is_refused_not_decoded(code: int):
    """An array's count is bounded by its size in bytes, but a zero-width element takes no
    bytes: 128 KiB of padding could claim 131,072 nulls (or trues, zeros, empty lists), each
    a Python object. Refused past 65,536 (null was let through: its value is None)."""
    body = (0x20000).to_bytes(4, "big") + bytes([code]) + bytes(0x20000)
    data = bytes([0xF0]) + len(body).to_bytes(4, "big") + body
    with pytest.raises(DecodeError, match="zero-width"):
        decode(data, 0)
