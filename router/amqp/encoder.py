"""Encoder for every AMQP 1.0 type: ``encode(value, out)`` appends the smallest encoding of
a value to a bytearray (arrays: one shared constructor, wide when any element needs it)."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from .decoder import _B, _H, _I, _II, _Q, _b, _d, _f, _h, _i, _q
from .types import (
    UUID,
    Array,
    Described,
    TypeCode,
    byte,
    char,
    decimal32,
    decimal64,
    decimal128,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)

# ---------------------------------------------------------------- encoding


def _enc_null(v: Any, out: bytearray) -> None:
    out.append(0x40)


def _enc_bool(v: bool, out: bytearray) -> None:
    out.append(0x41 if v else 0x42)


def _range(v: int, lo: int, hi: int, name: str) -> None:
    if not lo <= v <= hi:
        raise ValueError(f"{v} out of range for AMQP {name}")


def _enc_ubyte(v: int, out: bytearray) -> None:
    _range(v, 0, 0xFF, "ubyte")
    out += b"\x50" + _B.pack(v)


def _enc_byte(v: int, out: bytearray) -> None:
    _range(v, -0x80, 0x7F, "byte")
    out += b"\x51" + _b.pack(v)


def _enc_ushort(v: int, out: bytearray) -> None:
    _range(v, 0, 0xFFFF, "ushort")
    out += b"\x60" + _H.pack(v)


def _enc_short(v: int, out: bytearray) -> None:
    _range(v, -0x8000, 0x7FFF, "short")
    out += b"\x61" + _h.pack(v)


def _enc_uint(v: int, out: bytearray) -> None:
    if v == 0:
        out.append(0x43)
    elif 0 < v < 256:
        out += b"\x52" + _B.pack(v)
    else:
        _range(v, 0, 0xFFFFFFFF, "uint")
        out += b"\x70" + _I.pack(v)


def _enc_ulong(v: int, out: bytearray) -> None:
    if v == 0:
        out.append(0x44)
    elif 0 < v < 256:
        out += b"\x53" + _B.pack(v)
    else:
        _range(v, 0, 0xFFFFFFFFFFFFFFFF, "ulong")
        out += b"\x80" + _Q.pack(v)


def _enc_int(v: int, out: bytearray) -> None:
    if -128 <= v <= 127:
        out += b"\x54" + _b.pack(v)
    else:
        _range(v, -0x80000000, 0x7FFFFFFF, "int")
        out += b"\x71" + _i.pack(v)


def _enc_long(v: int, out: bytearray) -> None:
    if -128 <= v <= 127:
        out += b"\x55" + _b.pack(v)
    else:
        _range(v, -(1 << 63), (1 << 63) - 1, "long")
        out += b"\x81" + _q.pack(v)


def _enc_float(v: float, out: bytearray) -> None:
    out += b"\x72" + _f.pack(v)


def _enc_double(v: float, out: bytearray) -> None:
    out += b"\x82" + _d.pack(v)


def _enc_char(v: str, out: bytearray) -> None:
    if len(v) != 1:
        raise ValueError("AMQP char holds exactly one code point")
    out += b"\x73" + _I.pack(ord(v))


def _enc_timestamp(v: int, out: bytearray) -> None:
    out += b"\x83" + _q.pack(v)


def _enc_raw(code: int, n: int) -> Callable[[bytes, bytearray], None]:
    def enc(v: bytes, out: bytearray) -> None:
        if len(v) != n:
            raise ValueError(f"AMQP decimal needs {n} bytes, got {len(v)}")
        out.append(code)
        out += v

    return enc


def _enc_uuid(v: uuid.UUID, out: bytearray) -> None:
    out.append(0x98)
    out += v.bytes


def _enc_var(raw: bytes, small: int, large: int, out: bytearray) -> None:
    n = len(raw)
    if n < 256:
        out.append(small)
        out.append(n)
    else:
        out.append(large)
        out += _I.pack(n)
    out += raw


def _enc_binary(v: bytes, out: bytearray) -> None:
    _enc_var(bytes(v), 0xA0, 0xB0, out)


def _enc_string(v: str, out: bytearray) -> None:
    _enc_var(v.encode("utf-8"), 0xA1, 0xB1, out)


def _enc_symbol(v: str, out: bytearray) -> None:
    _enc_var(v.encode("ascii"), 0xA3, 0xB3, out)


def _compound(body: bytearray | bytes, count: int, small: int, large: int, out: bytearray) -> None:
    if len(body) + 1 < 256 and count < 256:
        out.append(small)
        out.append(len(body) + 1)
        out.append(count)
    else:
        out.append(large)
        out += _II.pack(len(body) + 4, count)
    out += body


def _enc_list(v: list[Any] | tuple[Any, ...], out: bytearray) -> None:
    if not v:
        out.append(0x45)
        return
    body = bytearray()
    for item in v:
        encode(item, body)
    _compound(body, len(v), 0xC0, 0xD0, out)


def _enc_map(v: dict[Any, Any], out: bytearray) -> None:
    body = bytearray()
    for k, item in v.items():
        encode(k, body)
        encode(item, body)
    _compound(body, 2 * len(v), 0xC1, 0xD1, out)


def _enc_described(v: Described, out: bytearray) -> None:
    out.append(0x00)
    encode(v.descriptor, out)
    encode(v.value, out)


# Wide, fixed constructors for array elements: every element of an array shares one.
_WIDE: dict[TypeCode, Callable[[Any, bytearray], None]] = {}


def _wide_var(code: int, conv: Callable[[Any], bytes]) -> Callable[[Any, bytearray], None]:
    def enc(v: Any, out: bytearray) -> None:
        raw = conv(v)
        out.append(code)
        out += _I.pack(len(raw))
        out += raw

    return enc


def _wide_fixed(code: int, st: struct.Struct) -> Callable[[Any, bytearray], None]:
    def enc(v: Any, out: bytearray) -> None:
        out.append(code)
        out += st.pack(v)

    return enc


def _wide_list(v: list[Any], out: bytearray) -> None:
    body = bytearray()
    for item in v:
        encode(item, body)
    out.append(0xD0)
    out += _II.pack(len(body) + 4, len(v))
    out += body


def _wide_map(v: dict[Any, Any], out: bytearray) -> None:
    body = bytearray()
    for k, item in v.items():
        encode(k, body)
        encode(item, body)
    out.append(0xD1)
    out += _II.pack(len(body) + 4, 2 * len(v))
    out += body


def _wide_array(v: Array, out: bytearray) -> None:
    _enc_array(v, out, force_wide=True)


_WIDE.update(
    {
        TypeCode.NULL: lambda v, out: out.append(0x40),
        TypeCode.BOOLEAN: lambda v, out: out.extend((0x56, 1 if v else 0)),
        TypeCode.UBYTE: _wide_fixed(0x50, _B),
        TypeCode.USHORT: _wide_fixed(0x60, _H),
        TypeCode.UINT: _wide_fixed(0x70, _I),
        TypeCode.ULONG: _wide_fixed(0x80, _Q),
        TypeCode.BYTE: _wide_fixed(0x51, _b),
        TypeCode.SHORT: _wide_fixed(0x61, _h),
        TypeCode.INT: _wide_fixed(0x71, _i),
        TypeCode.LONG: _wide_fixed(0x81, _q),
        TypeCode.FLOAT: _wide_fixed(0x72, _f),
        TypeCode.DOUBLE: _wide_fixed(0x82, _d),
        TypeCode.TIMESTAMP: _wide_fixed(0x83, _q),
        TypeCode.CHAR: lambda v, out: _enc_char(v, out),
        TypeCode.DECIMAL32: _enc_raw(0x74, 4),
        TypeCode.DECIMAL64: _enc_raw(0x84, 8),
        TypeCode.DECIMAL128: _enc_raw(0x94, 16),
        TypeCode.UUID: _enc_uuid,
        TypeCode.BINARY: _wide_var(0xB0, bytes),
        TypeCode.STRING: _wide_var(0xB1, lambda s: s.encode("utf-8")),
        TypeCode.SYMBOL: _wide_var(0xB3, lambda s: s.encode("ascii")),
        TypeCode.LIST: _wide_list,
        TypeCode.MAP: _wide_map,
        TypeCode.ARRAY: _wide_array,
    }
)


def _enc_array(v: Array, out: bytearray, force_wide: bool = False) -> None:
    element = _WIDE[v.type]
    body = bytearray()
    if v.descriptor is not None:
        body.append(0x00)
        encode(v.descriptor, body)
    body.append(v.type.value)
    scratch = bytearray()
    for item in v.items:
        scratch.clear()
        element(item, scratch)
        body += memoryview(scratch)[1:]  # the shared constructor is written once, above
    if force_wide:
        out.append(0xF0)
        out += _II.pack(len(body) + 4, len(v.items))
        out += body
    else:
        _compound(body, len(v.items), 0xE0, 0xF0, out)


_ENCODERS: dict[type, Callable[[Any, bytearray], None]] = {
    type(None): _enc_null,
    bool: _enc_bool,
    ubyte: _enc_ubyte,
    byte: _enc_byte,
    ushort: _enc_ushort,
    short: _enc_short,
    uint: _enc_uint,
    ulong: _enc_ulong,
    int32: _enc_int,
    int: _enc_long,
    float32: _enc_float,
    float: _enc_double,
    char: _enc_char,
    timestamp: _enc_timestamp,
    decimal32: _enc_raw(0x74, 4),
    decimal64: _enc_raw(0x84, 8),
    decimal128: _enc_raw(0x94, 16),
    UUID: _enc_uuid,
    bytes: _enc_binary,
    bytearray: _enc_binary,
    memoryview: _enc_binary,
    str: _enc_string,
    symbol: _enc_symbol,
    list: _enc_list,
    tuple: _enc_list,
    dict: _enc_map,
    Described: _enc_described,
    Array: _enc_array,
}


def encode(value: Any, out: bytearray) -> None:
    """Append the encoding of ``value`` to ``out``."""
    f = _ENCODERS.get(type(value))
    if f is not None:
        f(value, out)
        return
    amqp = getattr(value, "amqp_encode", None)
    if amqp is not None:
        amqp(out)
        return
    raise TypeError(f"no AMQP encoding for {type(value).__name__}")


def dumps(value: Any) -> bytes:
    out = bytearray()
    encode(value, out)
    return bytes(out)
