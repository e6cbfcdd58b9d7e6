"""How an AMQP receiving link joins a consumer group: the JMS 2.0 shared-subscription
convention over AMQP 1.0 (what Qpid JMS implements, QPIDJMS-220).

* The router offers ``SHARED-SUBS`` in its open.
* A link whose source has the capability ``shared`` is a member of the group named by
  its subscription name: the link name up to the first ``|`` (Qpid JMS appends
  ``|global``, ``|volatile1``, ``|2`` ... to tell its links apart).
* With the capability ``global`` the group is the topic's group of that name, whoever
  attaches; without it the group belongs to the connection's container-id.
* The attach is answered with the source it came with, so both capabilities are echoed.
* ``once:resume`` among the link's desired capabilities: the client can resume the link
  with its unsettled map (our client library), so while its connection is down its
  deliveries wait for it for its grace instead of going to another member at once.

Which member gets a message is the core's business (``records/membership.py``); the
message's key is its AMQP ``group-id`` property (JMS ``JMSXGroupID``).
"""

from __future__ import annotations

from typing import Any

from records.membership import GroupId

from .amqp.codec import decode
from .amqp.errors import DecodeError
from .amqp.types import symbol
from .message import sections

SHARED_SUBS = symbol("SHARED-SUBS")
SHARED = symbol("shared")
GLOBAL = symbol("global")
RESUME = symbol("once:resume")

OFFERED = (SHARED_SUBS,)
PROPERTIES = 0x73
GROUP_ID_FIELD = 10  # message-id, user-id, to, subject, reply-to, correlation-id, content-type,
# content-encoding, absolute-expiry-time, creation-time, group-id


def _caps(value: Any) -> tuple:
    if value is None:
        return ()
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def group_of(source: Any, link_name: str, container_id: str) -> GroupId | None:
    """The group a receiving link's source asks to join, or None for a plain subscriber."""
    caps = _caps(getattr(source, "capabilities", None))
    if SHARED not in caps:
        return None
    name = link_name.split("|", 1)[0]
    return GroupId(name, "" if GLOBAL in caps else container_id)


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
                descriptor, pos = decode(payload, start + 1)
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
