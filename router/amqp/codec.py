"""Strict encoder and decoder for every AMQP 1.0 type (Part 1 of the specification).

``decode(buf, pos) -> (value, pos)`` reads one value; any truncated, oversized or
malformed input raises ``DecodeError`` (never IndexError, struct.error or a hang: every
length is checked against the buffer before it is used). ``encode(value, out)`` appends
the smallest encoding of a value to a bytearray.

Composite types (performatives, terminus, delivery states, ...) register a factory
under their descriptor, so decoding a described list yields the dataclass directly.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from .errors import DecodeError
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

_B = struct.Struct(">B")
_b = struct.Struct(">b")
_H = struct.Struct(">H")
_h = struct.Struct(">h")
_I = struct.Struct(">I")
_i = struct.Struct(">i")
_Q = struct.Struct(">Q")
_q = struct.Struct(">q")
_f = struct.Struct(">f")
_d = struct.Struct(">d")
_BB = struct.Struct(">BB")
_II = struct.Struct(">II")

Decoder = Callable[[bytes, int], "tuple[Any, int]"]

# descriptor code -> factory(list of fields) -> object; filled by register_composite.
COMPOSITES: dict[int, Callable[[list[Any]], Any]] = {}
# symbolic descriptor -> numeric code, for peers that use the symbolic form.
SYMBOLIC: dict[str, int] = {}


def register_composite(code: int, name: str, factory: Callable[[list[Any]], Any]) -> None:
    COMPOSITES[code] = factory
    SYMBOLIC[name] = code


# ---------------------------------------------------------------- decoding


def _short(buf: bytes, pos: int, n: int) -> DecodeError:
    return DecodeError(f"truncated input: need {n} bytes at offset {pos}, have {len(buf) - pos}")


def _fixed(st: struct.Struct, wrap: Callable[[Any], Any] | None) -> Decoder:
    n = st.size
    unpack = st.unpack_from

    def dec(buf: bytes, pos: int) -> tuple[Any, int]:
        if pos + n > len(buf):
            raise _short(buf, pos, n)
        v = unpack(buf, pos)[0]
        return (wrap(v) if wrap is not None else v), pos + n

    return dec


def _const(value: Any) -> Decoder:
    def dec(buf: bytes, pos: int) -> tuple[Any, int]:
        return value, pos

    return dec


def _boolean(buf: bytes, pos: int) -> tuple[Any, int]:
    if pos >= len(buf):
        raise _short(buf, pos, 1)
    v = buf[pos]
    if v > 1:
        raise DecodeError(f"invalid boolean byte 0x{v:02x}")
    return v == 1, pos + 1


def _char(buf: bytes, pos: int) -> tuple[Any, int]:
    if pos + 4 > len(buf):
        raise _short(buf, pos, 4)
    cp = _I.unpack_from(buf, pos)[0]
    if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
        raise DecodeError(f"invalid char code point {cp:#x}")
    return char(chr(cp)), pos + 4


def _raw(n: int, wrap: Callable[[bytes], Any]) -> Decoder:
    def dec(buf: bytes, pos: int) -> tuple[Any, int]:
        end = pos + n
        if end > len(buf):
            raise _short(buf, pos, n)
        return wrap(bytes(buf[pos:end])), end

    return dec


def _uuid(b: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=b)


def _variable(width: int, kind: str) -> Decoder:
    size_st = _B if width == 1 else _I

    def dec(buf: bytes, pos: int) -> tuple[Any, int]:
        if pos + width > len(buf):
            raise _short(buf, pos, width)
        n = size_st.unpack_from(buf, pos)[0]
        start = pos + width
        end = start + n
        if end > len(buf):
            raise _short(buf, start, n)
        raw = bytes(buf[start:end])
        if kind == "bin":
            return raw, end
        try:
            if kind == "str":
                return raw.decode("utf-8"), end
            return symbol(raw.decode("ascii")), end
        except UnicodeDecodeError as e:
            raise DecodeError(f"invalid {kind} encoding: {e.reason}") from None

    return dec


def _compound_header(buf: bytes, pos: int, width: int) -> tuple[int, int, int]:
    """Return (count, first item offset, end offset) of a list/map body."""
    if width == 1:
        if pos + 2 > len(buf):
            raise _short(buf, pos, 2)
        size, count = _BB.unpack_from(buf, pos)
    else:
        if pos + 8 > len(buf):
            raise _short(buf, pos, 8)
        size, count = _II.unpack_from(buf, pos)
    if size < width:
        raise DecodeError(f"compound size {size} smaller than its count field")
    end = pos + width + size
    if end > len(buf):
        raise _short(buf, pos + width, size)
    # Every element takes at least one byte: a larger count is a lie, refuse it early.
    if count > size - width:
        raise DecodeError(f"compound count {count} cannot fit in {size} bytes")
    return count, pos + 2 * width, end


def _list(width: int) -> Decoder:
    def dec(buf: bytes, pos: int) -> tuple[Any, int]:
        count, p, end = _compound_header(buf, pos, width)
        sub = buf[:end]
        items = []
        append = items.append
        for _ in range(count):
            v, p = decode(sub, p)
            append(v)
        if p != end:
            raise DecodeError(f"list body has {end - p} bytes beyond its {count} elements")
        return items, end

    return dec


def _map(width: int) -> Decoder:
    def dec(buf: bytes, pos: int) -> tuple[Any, int]:
        count, p, end = _compound_header(buf, pos, width)
        if count % 2:
            raise DecodeError(f"map has an odd element count {count}")
        sub = buf[:end]
        out: dict[Any, Any] = {}
        for _ in range(count // 2):
            k, p = decode(sub, p)
            v, p = decode(sub, p)
            try:
                out[k] = v
            except TypeError:
                raise DecodeError(f"map key of type {type(k).__name__} is not supported") from None
        if p != end:
            raise DecodeError(f"map body has {end - p} bytes beyond its {count} elements")
        return out, end

    return dec


def _array(width: int) -> Decoder:
    def dec(buf: bytes, pos: int) -> tuple[Any, int]:
        count, p, end = _compound_header(buf, pos, width)
        sub = buf[:end]
        if p >= end:
            raise DecodeError("array without an element constructor")
        code = sub[p]
        p += 1
        descriptor = None
        if code == 0x00:
            descriptor, p = decode(sub, p)
            if p >= end:
                raise DecodeError("described array without an element constructor")
            code = sub[p]
            p += 1
        element = _DECODERS[code]
        if element is None or code == 0x00:
            raise DecodeError(f"invalid array element constructor 0x{code:02x}")
        if _ZERO_WIDTH.get(code) is not None and count > 0x10000:
            raise DecodeError(f"array of {count} zero-width elements refused")
        items = []
        append = items.append
        for _ in range(count):
            v, p = element(sub, p)
            append(v)
        if p != end:
            raise DecodeError(f"array body has {end - p} bytes beyond its {count} elements")
        return Array(_ARRAY_TYPE[code], tuple(items), descriptor), end

    return dec


def _described(buf: bytes, pos: int) -> tuple[Any, int]:
    descriptor, pos = decode(buf, pos)
    value, pos = decode(buf, pos)
    if isinstance(descriptor, int) and not isinstance(descriptor, bool):
        code = descriptor
    elif isinstance(descriptor, str):
        code = SYMBOLIC.get(descriptor, -1)
    else:
        raise DecodeError(f"descriptor of type {type(descriptor).__name__} is not allowed")
    factory = COMPOSITES.get(code)
    if factory is None:
        return Described(descriptor, value), pos
    if not isinstance(value, list):
        raise DecodeError(f"composite 0x{code:x} is not a list")
    return factory(value), pos


_DECODERS: list[Decoder | None] = [None] * 256
_ZERO_WIDTH = {0x40: None, 0x41: True, 0x42: False, 0x43: uint(0), 0x44: ulong(0), 0x45: []}
for _code, _val in _ZERO_WIDTH.items():
    _DECODERS[_code] = _const(_val)
_DECODERS[0x45] = lambda buf, pos: ([], pos)  # a fresh list each time: lists are mutable
_DECODERS[0x00] = _described
_DECODERS[0x56] = _boolean
_DECODERS[0x50] = _fixed(_B, ubyte)
_DECODERS[0x51] = _fixed(_b, byte)
_DECODERS[0x52] = _fixed(_B, uint)
_DECODERS[0x53] = _fixed(_B, ulong)
_DECODERS[0x54] = _fixed(_b, int32)
_DECODERS[0x55] = _fixed(_b, None)
_DECODERS[0x60] = _fixed(_H, ushort)
_DECODERS[0x61] = _fixed(_h, short)
_DECODERS[0x70] = _fixed(_I, uint)
_DECODERS[0x71] = _fixed(_i, int32)
_DECODERS[0x72] = _fixed(_f, float32)
_DECODERS[0x73] = _char
_DECODERS[0x74] = _raw(4, decimal32)
_DECODERS[0x80] = _fixed(_Q, ulong)
_DECODERS[0x81] = _fixed(_q, None)
_DECODERS[0x82] = _fixed(_d, None)
_DECODERS[0x83] = _fixed(_q, timestamp)
_DECODERS[0x84] = _raw(8, decimal64)
_DECODERS[0x94] = _raw(16, decimal128)
_DECODERS[0x98] = _raw(16, _uuid)
_DECODERS[0xA0] = _variable(1, "bin")
_DECODERS[0xA1] = _variable(1, "str")
_DECODERS[0xA3] = _variable(1, "sym")
_DECODERS[0xB0] = _variable(4, "bin")
_DECODERS[0xB1] = _variable(4, "str")
_DECODERS[0xB3] = _variable(4, "sym")
_DECODERS[0xC0] = _list(1)
_DECODERS[0xC1] = _map(1)
_DECODERS[0xD0] = _list(4)
_DECODERS[0xD1] = _map(4)
_DECODERS[0xE0] = _array(1)
_DECODERS[0xF0] = _array(4)

_ARRAY_TYPE: dict[int, TypeCode] = {c.value: c for c in TypeCode}
_ARRAY_TYPE.update(
    {
        0x41: TypeCode.BOOLEAN, 0x42: TypeCode.BOOLEAN, 0x43: TypeCode.UINT, 0x52: TypeCode.UINT,
        0x44: TypeCode.ULONG, 0x53: TypeCode.ULONG, 0x54: TypeCode.INT, 0x55: TypeCode.LONG,
        0xA0: TypeCode.BINARY, 0xA1: TypeCode.STRING, 0xA3: TypeCode.SYMBOL, 0x45: TypeCode.LIST,
        0xC0: TypeCode.LIST, 0xC1: TypeCode.MAP, 0xE0: TypeCode.ARRAY,
    }
)


def decode(buf: bytes, pos: int = 0) -> tuple[Any, int]:
    """Decode one value at ``pos``; return it and the offset just past it."""
    if pos >= len(buf):
        raise DecodeError(f"truncated input: constructor expected at offset {pos}")
    f = _DECODERS[buf[pos]]
    if f is None:
        raise DecodeError(f"invalid constructor 0x{buf[pos]:02x} at offset {pos}")
    try:
        return f(buf, pos + 1)
    except RecursionError:
        raise DecodeError("nesting too deep") from None


def decode_all(buf: bytes) -> Any:
    """Decode exactly one value that fills ``buf``."""
    value, pos = decode(buf, 0)
    if pos != len(buf):
        raise DecodeError(f"{len(buf) - pos} trailing bytes after value")
    return value


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
