"""What the acceptance protocol keeps per message and per sequence (``docs/protocol.md``;
``router/core/copies.py`` applies it): a root's numbering of its copies to one router, and
a record's version 3 state at its root and at a destination. Pure data."""

from __future__ import annotations

from .membership import Key
from .outcomes import Outcome
from .owed import Owed, Said

Take = tuple[str, bytes, int, frozenset[Key]]  # (root, stream, position, keys): a copy a destination took


class Positions:
    """A root's sequence of copies to one router in one stream: the next position, and the
    positions it has no answer for (in order: the first is ``low``)."""

    __slots__ = ("next", "unanswered", "floor")

    def __init__(self) -> None:
        self.next = 1
        self.unanswered: dict[int, bytes | None] = {}  # position -> the gid sent there
        self.floor = 1  # no position below it is unanswered

    def low(self) -> int:
        """The first unanswered position (``next`` if none). Positions are added in order
        and only ever removed, so the first one only grows: found from ``floor`` on, not
        as the dict's first key, which costs a scan past every entry removed since the
        dict last resized (0.4 us a call with 1,000 copies in flight, three per answer)."""
        floor, unanswered, end = self.floor, self.unanswered, self.next
        while floor < end and floor not in unanswered:
            floor += 1
        self.floor = floor
        return floor


class Far:
    """A record's version 3 state. At the root: the owed set, the stream, each router's
    sends ((position, keys, redelivery)), when it last sent. At a destination: the copies
    it took (each is answered), when it first and last answered."""

    __slots__ = ("owed", "stream", "sends", "sent_at", "takes", "answered_at", "first_answer", "numbered", "earlier",
                 "settle_later", "heard")

    def __init__(self) -> None:
        self.owed: Owed | None = None
        self.stream = b""
        self.sends: dict[str, list[tuple[int, frozenset[Key], bool]]] = {}
        self.sent_at = 0.0
        self.takes: list[Take] = []
        self.answered_at: float | None = None
        self.first_answer: float | None = None
        self.numbered = True  # its positions may still hold ``low`` back (until the owed set is final)
        # at a destination that had forgotten the message (its tombstone): what its keys said then
        self.earlier: dict[Key, tuple[Said, Outcome | None]] | None = None
        # at the root: routers it settles when it frees the record (they had not answered)
        self.settle_later: frozenset[str] = frozenset()
        # at the root, for a group message: the copies (router, position, in ``stream``) a
        # destination answered. ``Positions.unanswered`` cannot say: it forgets a position once
        # nobody waits for it (its key moved), while the copy may still reach the member there
        self.heard: set[tuple[str, int]] | None = None
