"""Strict encoder and decoder for every AMQP 1.0 type (Part 1 of the specification):
``decoder.py`` reads (``decode``, ``decode_all``; malformed input is a ``DecodeError``),
``encoder.py`` writes (``encode``, ``dumps``). Composite types (performatives, terminus,
delivery states, ...) register a factory under their descriptor, so decoding a described
list yields the dataclass directly."""

from .decoder import COMPOSITES, SYMBOLIC, decode, decode_all, register_composite
from .encoder import dumps, encode

__all__ = ["COMPOSITES", "SYMBOLIC", "decode", "decode_all", "dumps", "encode", "register_composite"]
