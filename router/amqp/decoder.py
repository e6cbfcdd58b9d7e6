"""Strict decoder for every AMQP 1.0 type (Part 1 of the specification).

``decode(buf, pos) -> (value, pos)`` reads one value; any truncated, oversized or
malformed input raises ``DecodeError`` (never IndexError, struct.error or a hang: every
length is checked against the buffer before it is used).

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
        items: list[Any] = []
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
        if code in _ZERO_WIDTH and count > 0x10000:  # (null is one: its value is None)
            raise DecodeError(f"array of {count} zero-width elements refused")
        items: list[Any] = []
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
_ZERO_WIDTH: dict[int, object] = {0x40: None, 0x41: True, 0x42: False, 0x43: uint(0), 0x44: ulong(0), 0x45: []}
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
