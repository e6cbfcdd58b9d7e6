"""How an AMQP receiving link joins a consumer group: the JMS 2.0 shared-subscription
convention over AMQP 1.0 (what Qpid JMS implements, QPIDJMS-220).

* The router offers ``SHARED-SUBS`` in its open.
* A link whose source has the capability ``shared`` is a member of the group named by
  its subscription name: the link name up to the first ``|`` (Qpid JMS appends
  ``|global``, ``|volatile1``, ``|2`` ... to tell its links apart).
* With the capability ``global`` the group is the topic's group of that name, whoever
  attaches; without it the group belongs to the connection's container-id.
* The attach is answered with the source it came with, so both capabilities are echoed.
* ``once:exclusive`` next to ``shared``: an exclusive group (one active member, the
  others standbys). The topology's ``groups:`` can make a subscription name a group of
  either kind without any capability (global then).
* The attach answer's properties say ``once:active`` true or false to an exclusive
  group's member; a standby that becomes active is sent a flow frame with
  ``once:active`` true (its credit unchanged), ahead of its first delivery.
* ``once:resume`` among the link's desired capabilities: the client can resume the link
  with its unsettled map (our client library), so while its connection is down its
  deliveries wait for it for its grace instead of going to another member at once.

Which member gets a message is the core's business (``records/membership.py``); the
message's key is its AMQP ``group-id`` property (JMS ``JMSXGroupID``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from once.records.membership import GroupId

from ...amqp.codec import decode
from ...amqp.errors import DecodeError
from ...amqp.types import symbol
from ...config import GroupMode
from .message import sections

SHARED_SUBS = symbol("SHARED-SUBS")
SHARED = symbol("shared")
GLOBAL = symbol("global")
RESUME = symbol("once:resume")
EXCLUSIVE = symbol("once:exclusive")
ACTIVE = symbol("once:active")

OFFERED = (SHARED_SUBS,)
PROPERTIES = 0x73
GROUP_ID_FIELD = 10  # message-id, user-id, to, subject, reply-to, correlation-id, content-type,
# content-encoding, absolute-expiry-time, creation-time, group-id


def _caps(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def group_of(source: Any, link_name: str, container_id: str,
             mode_of: Callable[[str], GroupMode | None] = lambda name: None) -> tuple[GroupId | None, bool]:
    """The group a receiving link joins (None: a plain subscriber), and whether it asked
    for an exclusive one. ``mode_of``: the topology's ``groups:`` by subscription name."""
    caps = _caps(getattr(source, "capabilities", None))
    name = link_name.split("|", 1)[0]
    if SHARED not in caps:
        mode = mode_of(name)
        if mode is None:
            return None, False
        return GroupId(name), mode is GroupMode.EXCLUSIVE
    exclusive = EXCLUSIVE in caps or mode_of(name) is GroupMode.EXCLUSIVE
    return GroupId(name, "" if GLOBAL in caps else container_id), exclusive


def can_resume(desired: Any) -> bool:
    return RESUME in _caps(desired)


def group_id(payload: bytes) -> bytes | None:
    """A message's ``group-id`` (its key for a consumer group), or None. The message was
    checked on arrival; one whose properties do not decode has no key."""
    if b"\x53\x73" not in payload and b"properties" not in payload:
        return None  # (no properties section: most messages, and no decode)
    try:
        for code, start, _ in sections(payload):
            if code == PROPERTIES:
                _, pos = decode(payload, start + 1)  # (the descriptor: sections() read it)
                fields, _ = decode(payload, pos)
                if isinstance(fields, list) and len(fields) > GROUP_ID_FIELD:
                    value = fields[GROUP_ID_FIELD]
                    if isinstance(value, str):
                        return value.encode()
                    if isinstance(value, bytes):
                        return value
                return None
    except DecodeError:
        return None
    return None
