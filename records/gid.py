"""The network-wide id of a delivery (DESIGN.md "gid").

Rule, exactly: ``gid = blake2b-128(container-id, link name, incarnation, tag, generation)``.

* ``incarnation`` changes on every fresh (non-resuming) attach of the publisher link, so
  Proton's habit of restarting tags at 0 on each new link never collides with the tags
  of the link before.
* ``generation`` counts earlier deliveries of this incarnation that carried the same tag
  and were settled (AMQP allows a tag to be reused once its delivery is settled). The
  root remembers the generation of the last ``RETIRED_TAGS`` settled tags of each link
  incarnation; a tag reused later than that restarts at generation 0, which is safe
  because by then no record of the old delivery exists anywhere.
"""

from __future__ import annotations

import hashlib
import struct

RETIRED_TAGS = 1024
_Q = struct.Struct(">Q")


def compute_gid(container_id: str, link_name: str, incarnation: int, tag: bytes, generation: int = 0) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    c = container_id.encode()
    n = link_name.encode()
    h.update(_Q.pack(len(c)))
    h.update(c)
    h.update(_Q.pack(len(n)))
    h.update(n)
    h.update(_Q.pack(incarnation))
    h.update(_Q.pack(generation))
    h.update(tag)
    return h.digest()


def gid_prefix(container_id: str, link_name: str, incarnation: int) -> bytes:
    """The fixed part of the hash input for one link incarnation (hashed per message)."""
    c = container_id.encode()
    n = link_name.encode()
    return _Q.pack(len(c)) + c + _Q.pack(len(n)) + n + _Q.pack(incarnation)


def gid_from_prefix(prefix: bytes, tag: bytes, generation: int = 0) -> bytes:
    return hashlib.blake2b(prefix + _Q.pack(generation) + tag, digest_size=16).digest()


_GEN0 = _Q.pack(0)


class GidHasher:
    """``gid_from_prefix`` for one link incarnation, with the prefix hashed once: each
    message copies the hash state instead of hashing the prefix again (half the cost)."""

    __slots__ = ("prefix", "_state")

    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix
        self._state = hashlib.blake2b(prefix, digest_size=16)

    def gid(self, tag: bytes, generation: int = 0) -> bytes:
        h = self._state.copy()
        h.update((_Q.pack(generation) if generation else _GEN0) + tag)
        return h.digest()
