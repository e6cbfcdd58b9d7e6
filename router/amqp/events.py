"""Events the engine returns from ``Connection.receive_data``.

They are slotted and keyword-only, and not frozen (for speed: see ``_EV``), though nothing
changes an event once it is made; a handler matches on their type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# (at run time, not under TYPE_CHECKING: compiled, the events' fields are checked against
# these classes, and a module imported first with them unresolved crashed the interpreter)
from .endpoints import Delivery, Link, Session
from .performatives import Attach, Error, Open

# Not frozen: a frozen dataclass sets each field through object.__setattr__, three times
# the cost of a plain one, and the engine makes one event per delivery and per answer.
# Nothing mutates an event after it is made.
_EV = {"slots": True, "kw_only": True}
# The per-message ones write their ``__init__`` out: compiled, a dataclass's generated
# ``__init__`` still runs as Python code (170 ns a frame), a written one as C.
_HOT = {"slots": True, "init": False}


@dataclass(**_EV)
class SaslDone:
    """The SASL exchange ended; ``ok`` says whether the peer was authenticated."""

    ok: bool
    mechanism: str
    user: str | None
    # the user a refused PLAIN response claimed to be (for the log line; never the password)
    requested: str | None = None


@dataclass(**_EV)
class ConnectionOpened:
    open: Open


@dataclass(**_EV)
class ConnectionClosed:
    """The peer closed the connection (we have answered with our close)."""

    error: Error | None


@dataclass(**_EV)
class ConnectionFailed:
    """A protocol error: our close (or header) is queued; close the transport after writing it."""

    condition: str
    description: str


@dataclass(**_EV)
class SessionBegun:
    session: Session


@dataclass(**_EV)
class SessionEnded:
    session: Session
    error: Error | None


@dataclass(**_EV)
class LinkAttached:
    """The peer attached ``link``. ``reply_needed``: the peer initiated, answer with ``attach``."""

    link: Link
    attach: Attach
    reply_needed: bool


@dataclass(**_EV)
class LinkDetached:
    link: Link
    closed: bool
    error: Error | None


@dataclass(**_HOT)
class LinkFlow:
    """Credit or drain changed on ``link`` (for a sender: new credit to use)."""

    link: Link
    drain: bool
    properties: dict[Any, Any] | None  # news about the link (a router's ``once:active``)

    def __init__(self, *, link: Link, drain: bool, properties: dict[Any, Any] | None = None) -> None:
        self.link = link
        self.drain = drain
        self.properties = properties


@dataclass(**_HOT)
class DeliveriesReceived:
    """Deliveries the peer completed on ``link``, in order. The deliveries of one read that
    follow each other on one link are one event (a batch of transfers is handled as one)."""

    link: Link
    deliveries: list[Delivery]

    def __init__(self, *, link: Link, deliveries: list[Delivery]) -> None:
        self.link = link
        self.deliveries = deliveries


@dataclass(**_EV)
class DeliveryAborted:
    link: Link
    tag: bytes


@dataclass(**_HOT)
class DeliveryUpdated:
    """The peer's disposition: a new state and/or settlement for one of our deliveries."""

    delivery: Delivery
    state: Any
    settled: bool

    def __init__(self, *, delivery: Delivery, state: Any, settled: bool) -> None:
        self.delivery = delivery
        self.state = state
        self.settled = settled
