"""Per-delivery acceptance records (seed 002, "Delivery records kept for topic").

Pure data and transitions: no I/O, no clock of its own. A record is created when the
root receives a publisher's delivery and lists every subscriber here (and, in a network,
a stand-in for the other routers' answers: ``far``) that must reach a terminal state
before the publisher is told the outcome.
"""

from __future__ import annotations

from collections.abc import Hashable
from enum import Enum
from typing import Any, Generic, TypeVar

from .few import Few
from .membership import GroupId, Key
from .outcomes import Outcome

# Who a record belongs to and who it waits for are the core's types (its publisher, its
# waiters: subscribers and stand-ins); the record is generic over them so that it stays
# below the core and is still typed there (``router/core/peers.py``: ``CoreRecord``).
P = TypeVar("P")  # the publisher
W = TypeVar("W", bound=Hashable)  # a waiter


class SubState(Enum):
    IN_DOUBT = 0
    ACCEPTED = 1
    REJECTED = 2


# The members as module constants for the per-message code: on Python 3.11 ``SubState.X``
# goes through EnumType.__getattr__ (~90 ns) where a global is ~12 ns.
IN_DOUBT, SUB_ACCEPTED, SUB_REJECTED = SubState.IN_DOUBT, SubState.ACCEPTED, SubState.REJECTED


class DuplicateGid(Exception):
    pass


class Rare:
    """A record's fields that stay at their defaults on most deliveries (subscribers that
    moved): they cost one slot on every record until the first of them is written
    (``Record``'s properties)."""

    __slots__ = ("followed",)

    def __init__(self) -> None:
        # (router, subscriber key) pairs the root already sent this record to after
        # those subscribers moved away from a dead router
        self.followed: set[tuple[str, Key]] | None = None


class Record(Generic[P, W]):
    """One delivery's record. A plain slotted class: it is built once per message."""

    __slots__ = ("gid", "topic", "payload", "publisher", "tag", "generation", "presettled", "message_format",
                 "states", "pending", "rejection", "publisher_handle", "publisher_settled", "outcome_sent", "unsettled",
                 "local", "born", "root", "chosen", "far", "resent", "arrived", "rare")

    def __init__(self, gid: bytes, topic: str, payload: bytes, publisher: P | None, tag: bytes, generation: int,
                 presettled: bool, message_format: int = 0) -> None:
        self.gid = gid
        self.topic = topic
        self.payload = payload
        self.publisher = publisher  # the publisher's identity (container-id, link name, incarnation)
        self.tag = tag  # the publisher's original delivery tag
        self.generation = generation
        self.presettled = presettled
        self.message_format = message_format
        self.states = Few()  # (one waiter, usually: two slots, not a dict)
        self.pending = 0  # waiters still in doubt
        self.rejection: Outcome | None = None  # the first rejecting waiter's error, if any
        self.publisher_handle: object = None  # the adaptor's handle to answer the publisher with
        self.publisher_settled = False
        self.outcome_sent = False
        # waiter -> the adaptor's handle of our delivery to it while it is unsettled (one,
        # usually: ``Few`` holds it in two slots, not a 224-byte dict)
        self.unsettled = Few()
        self.local = True  # created by our own publisher (we are root), not forwarded to us
        # The root's stamp (microseconds of its wall clock, strictly increasing there): the
        # journal's and the copies' time of publication.
        self.born = 0
        # When it came to us from its publisher (the root's monotonic clock, seconds): what
        # the router's publish-to-accepted and time-held measures count from.
        self.arrived = 0.0
        self.root = ""  # the router its publisher published it on
        # Consumer groups (``records/membership.py``): the member each group's copy goes
        # to, chosen by the root, and the router it was sent to for it: member key ->
        # (group, router). It travels with every copy; None on a topic with no groups.
        self.chosen: dict[Key, tuple[GroupId, str]] | None = None
        # In a network (``router/core/copies.py``): what the root sent and is owed, and the
        # copies a destination took and answers for; None on a record no other router has.
        self.far: Any = None
        # A publisher resuming here sent it again (the router it published on first may have
        # delivered it): every delivery of it is marked as a possible repeat.
        self.resent = False
        # What few records need (``Rare``): one slot here until one of them is written.
        self.rare: Rare | None = None

    def __repr__(self) -> str:
        return f"Record(gid={self.gid.hex()}, topic={self.topic!r}, pending={self.pending})"

    # ------------------------------------------------ the rare fields (``Rare``)

    def _rare(self) -> Rare:
        rare = self.rare
        if rare is None:
            rare = self.rare = Rare()
        return rare

    @property
    def followed(self) -> set[tuple[str, Key]] | None:
        rare = self.rare
        return rare.followed if rare is not None else None

    @followed.setter
    def followed(self, value: set[tuple[str, Key]] | None) -> None:
        if value is None and self.rare is None:
            return  # (the default: nothing to hold)
        self._rare().followed = value

    @property
    def complete(self) -> bool:
        return self.pending == 0

    def add_waiter(self, waiter: W) -> None:
        if waiter not in self.states:
            self.states[waiter] = IN_DOUBT
            self.pending += 1

    def reopen(self, waiter: W) -> None:
        """Wait for ``waiter`` again (a new copy went to a hop that had already answered)."""
        if self.states.get(waiter) is not IN_DOUBT:
            self.states[waiter] = IN_DOUBT
            self.pending += 1

    def resolve(self, waiter: W, state: SubState, error: Outcome | None = None) -> bool:
        """Record a waiter's terminal state; return True when this completed the record."""
        old = self.states.get(waiter)
        if old is not IN_DOUBT:
            return False
        self.states[waiter] = state
        if state is SUB_REJECTED and self.rejection is None:
            self.rejection = error
        self.pending -= 1
        return self.pending == 0

    def drop_waiter(self, waiter: W) -> bool:
        """A waiter went away (closed its subscription): stop waiting for it."""
        old = self.states.pop(waiter, None)
        self.unsettled.pop(waiter, None)
        if old is IN_DOUBT:
            self.pending -= 1
            return self.pending == 0
        return False


class RecordTable(Generic[P, W]):
    """All live records of one router, by gid, and the bytes their messages hold."""

    __slots__ = ("records", "bytes", "freed")

    def __init__(self) -> None:
        self.records: dict[bytes, Record[P, W]] = {}
        self.bytes = 0
        self.freed = 0  # bytes freed since the owner last reset it

    def __len__(self) -> int:
        return len(self.records)

    def __contains__(self, gid: bytes) -> bool:
        return gid in self.records

    def get(self, gid: bytes) -> Record[P, W] | None:
        return self.records.get(gid)

    def add(self, record: Record[P, W]) -> Record[P, W]:
        if record.gid in self.records:
            raise DuplicateGid(record.gid.hex())
        self.records[record.gid] = record
        self.bytes += len(record.payload)
        return record

    def enter(self, record: Record[P, W]) -> None:
        """``add`` for the per-message path: the caller has looked its gid up already."""
        self.records[record.gid] = record
        self.bytes += len(record.payload)

    # ------------------------------------------------------ a record's rules

    @staticmethod
    def complete(record: Record[P, W]) -> Outcome | None:
        """Every waiter reached a terminal state: the outcome is sent now (once); returns the
        first rejection, or None (accepted). The rule for when: after a waiter's answer that
        left none in doubt (``resolve`` or ``drop_waiter`` returned True), if the outcome has
        not been sent; the delivery part applies it on every answer."""
        record.outcome_sent = True
        return record.rejection

    @staticmethod
    def settle(record: Record[P, W]) -> list[tuple[W, Any]]:
        """Settlement reached ``record``: the waiters' deliveries still unsettled, to settle
        now (forgotten here)."""
        if not record.unsettled:
            return []
        out = record.unsettled.items()
        record.unsettled.clear()
        return out

    @staticmethod
    def finished(record: Record[P, W]) -> bool:
        """A record can be freed once its outcome is known and settlement went everywhere."""
        return record.pending == 0 and (record.presettled or record.publisher_settled) and not record.unsettled

    def release(self, record: Record[P, W]) -> bool:
        """Free ``record`` if nothing holds it any more (``finished``); True if it was freed
        by this call."""
        if self.finished(record) and self.records.pop(record.gid, None) is not None:
            size = len(record.payload)
            self.bytes -= size
            self.freed += size
            return True
        return False

    def free(self, record: Record[P, W]) -> None:
        if self.records.pop(record.gid, None) is not None:
            self.bytes -= len(record.payload)
            self.freed += len(record.payload)
