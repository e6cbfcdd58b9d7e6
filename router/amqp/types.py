"""AMQP 1.0 typed values that Python's own types cannot tell apart.

A plain ``int`` encodes as ``long``, ``float`` as ``double``, ``str`` as ``string``,
``bytes`` as ``binary``, ``list`` as ``list``, ``dict`` as ``map``. Every other AMQP
type has a marker subclass here so a value decoded from the wire re-encodes to the
same type (the property the Proton conformance tests check).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import IntEnum
from typing import Any


class ubyte(int):
    __slots__ = ()


class ushort(int):
    __slots__ = ()


class uint(int):
    __slots__ = ()


class ulong(int):
    __slots__ = ()


class byte(int):
    __slots__ = ()


class short(int):
    __slots__ = ()


class int32(int):
    __slots__ = ()


class float32(float):
    __slots__ = ()


class char(str):
    __slots__ = ()


class timestamp(int):
    """Milliseconds since the Unix epoch."""

    __slots__ = ()


class symbol(str):
    __slots__ = ()


# Decimals are carried as their raw IEEE 754 bytes: the router never does decimal
# arithmetic, and a raw carry cannot lose precision.
class decimal32(bytes):
    __slots__ = ()


class decimal64(bytes):
    __slots__ = ()


class decimal128(bytes):
    __slots__ = ()


UUID = uuid.UUID


@dataclass(frozen=True, slots=True)
class Described:
    """A described value whose descriptor the codec has no class for."""

    descriptor: Any
    value: Any


class TypeCode(IntEnum):
    """Fixed-width constructor codes used for array elements."""

    NULL = 0x40
    BOOLEAN = 0x56
    UBYTE = 0x50
    USHORT = 0x60
    UINT = 0x70
    ULONG = 0x80
    BYTE = 0x51
    SHORT = 0x61
    INT = 0x71
    LONG = 0x81
    FLOAT = 0x72
    DOUBLE = 0x82
    DECIMAL32 = 0x74
    DECIMAL64 = 0x84
    DECIMAL128 = 0x94
    CHAR = 0x73
    TIMESTAMP = 0x83
    UUID = 0x98
    BINARY = 0xB0
    STRING = 0xB1
    SYMBOL = 0xB3
    LIST = 0xD0
    MAP = 0xD1
    ARRAY = 0xF0


@dataclass(frozen=True, slots=True)
class Array:
    """An AMQP array: every element has one type (and optionally one descriptor)."""

    type: TypeCode
    items: tuple[Any, ...]
    descriptor: Any = None
