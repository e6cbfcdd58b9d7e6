"""Session, link and delivery endpoint state held by the engine.

These are plain mutable records; the transitions live in ``connection.py``.
"""

from __future__ import annotations

from collections import deque
from enum import Enum
from typing import Any

from .performatives import ReceiverSettleMode, Role, SenderSettleMode, Source, Target


class EndpointState(Enum):
    UNMAPPED = "unmapped"
    SENT = "sent"  # our begin/attach went out, the peer's has not come
    RECEIVED = "received"  # the peer's came, ours has not gone
    MAPPED = "mapped"
    CLOSE_SENT = "close-sent"
    CLOSED = "closed"


class Delivery:
    """One message on one link. ``context`` is the application's slot (a router record)."""

    # (ten slots: 112 bytes; two more were 128, and there are two of these per delivery routed)
    __slots__ = ("link", "delivery_id", "tag", "payload", "settled", "state", "local_settled",
                 "resume", "message_format", "context")

    def __init__(self, link: Link, delivery_id: int, tag: bytes, payload: bytes, settled: bool, state: Any = None,
                 resume: bool = False, message_format: int = 0) -> None:
        self.link = link
        self.delivery_id = delivery_id
        self.tag = tag
        self.payload = payload
        self.settled = settled  # settled by the peer
        self.state = state  # the peer's delivery state
        self.local_settled = False
        self.resume = resume
        self.message_format = message_format
        self.context: Any = None

    def __repr__(self) -> str:
        return f"Delivery(id={self.delivery_id}, tag={self.tag!r}, settled={self.settled}, state={self.state})"


class Link:
    __slots__ = ("session", "name", "handle", "remote_handle", "role", "state", "source", "target",
                 "snd_settle_mode", "rcv_settle_mode", "remote_attach", "delivery_count", "credit", "available",
                 "drain", "max_message_size", "partial", "partial_size", "partial_chunks", "context", "detach_error",
                 "remote_max_message_size", "revoked", "is_sender")

    def __init__(self, session: Session, name: str, handle: int, role: Role) -> None:
        self.session = session
        self.name = name
        self.handle = handle
        self.remote_handle: int | None = None
        self.role = role  # our role (never changes)
        self.is_sender = role is Role.SENDER  # (asked per transfer: an attribute, not a property)
        self.state = EndpointState.UNMAPPED
        self.source: Source | None = None
        self.target: Target | None = None
        self.snd_settle_mode = SenderSettleMode.MIXED
        self.rcv_settle_mode = ReceiverSettleMode.FIRST
        self.remote_attach: Any = None
        self.delivery_count = 0
        self.credit = 0
        self.available = 0
        self.drain = False
        self.max_message_size = 0  # ours, 0 = no limit
        self.remote_max_message_size = 0
        self.partial: Delivery | None = None  # a multi-frame delivery being received
        self.partial_size = 0
        self.partial_chunks: list[bytes] = []  # its frames' payloads so far
        self.context: Any = None
        self.detach_error: Any = None
        # Receiver: credit taken back by a flow with less link-credit. Transfers the peer
        # sent before that flow reached it are still legal; they draw on this.
        self.revoked = 0

    @property
    def attached(self) -> bool:
        return self.state is EndpointState.MAPPED

    def __repr__(self) -> str:
        return f"Link({self.name!r}, {self.role.name.lower()}, handle={self.handle}, {self.state.value})"


class Session:
    __slots__ = ("channel", "remote_channel", "state", "next_outgoing_id", "next_incoming_id", "incoming_window",
                 "outgoing_window", "remote_incoming_window", "remote_outgoing_window", "initial_incoming_window",
                 "next_delivery_id", "links", "remote_links", "outgoing", "incoming", "blocked", "pending_dispositions",
                 "context", "handle_max")

    def __init__(self, channel: int, incoming_window: int) -> None:
        self.channel = channel
        self.remote_channel: int | None = None
        self.state = EndpointState.UNMAPPED
        self.next_outgoing_id = 0
        self.next_incoming_id = 0
        self.incoming_window = incoming_window
        self.initial_incoming_window = incoming_window
        self.outgoing_window = 0x7FFFFFFF
        self.remote_incoming_window = 0
        self.remote_outgoing_window = 0
        self.next_delivery_id = 0
        self.handle_max = 0xFFFFFFFF
        self.links: dict[int, Link] = {}  # by our handle
        self.remote_links: dict[int, Link] = {}  # by the peer's handle
        self.outgoing: dict[int, Delivery] = {}  # our unsettled deliveries, by delivery-id
        self.incoming: dict[int, Delivery] = {}  # the peer's unsettled deliveries, by delivery-id
        # transfer frames waiting for the peer's window: (head, payload)
        self.blocked: deque[tuple[bytes | bytearray, bytes | memoryview]] = deque()
        self.pending_dispositions: list[tuple[Role, int, bool, Any]] = []
        self.context: Any = None

    def __repr__(self) -> str:
        return f"Session(channel={self.channel}, {self.state.value})"
