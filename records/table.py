"""Per-delivery acceptance records (seed 002, "Delivery records kept for topic").

Pure data and transitions: no I/O, no clock of its own. A record is created when the
root receives a publisher's delivery and lists every subscriber (on a single router;
downstream hops too in a network) that must reach a terminal state before the
publisher is told the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class SubState(Enum):
    IN_DOUBT = 0
    ACCEPTED = 1
    REJECTED = 2


class DuplicateGid(Exception):
    pass


@dataclass(slots=True, eq=False)
class Record:
    gid: bytes
    topic: str
    payload: bytes
    publisher: Any  # the publisher's identity (container-id, link name, incarnation)
    tag: bytes  # the publisher's original delivery tag
    generation: int
    presettled: bool
    message_format: int = 0
    created: float = 0.0
    states: dict[Any, SubState] = field(default_factory=dict)
    pending: int = 0  # waiters still in doubt
    rejection: Any = None  # the first rejecting waiter's error, if any
    publisher_handle: Any = None  # the adaptor's handle to answer the publisher with
    publisher_settled: bool = False
    outcome_sent: bool = False
    # waiter -> the adaptor's handle of our delivery to it while it is unsettled
    unsettled: dict[Any, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.pending == 0

    def add_waiter(self, waiter: Any) -> None:
        if waiter not in self.states:
            self.states[waiter] = SubState.IN_DOUBT
            self.pending += 1

    def resolve(self, waiter: Any, state: SubState, error: Any = None) -> bool:
        """Record a waiter's terminal state; return True when this completed the record."""
        old = self.states.get(waiter)
        if old is not SubState.IN_DOUBT:
            return False
        self.states[waiter] = state
        if state is SubState.REJECTED and self.rejection is None:
            self.rejection = error
        self.pending -= 1
        return self.pending == 0

    def drop_waiter(self, waiter: Any) -> bool:
        """A waiter went away (closed its subscription): stop waiting for it."""
        old = self.states.pop(waiter, None)
        self.unsettled.pop(waiter, None)
        if old is SubState.IN_DOUBT:
            self.pending -= 1
            return self.pending == 0
        return False


class RecordTable:
    """All live records of one router, by gid."""

    __slots__ = ("records",)

    def __init__(self) -> None:
        self.records: dict[bytes, Record] = {}

    def __len__(self) -> int:
        return len(self.records)

    def __contains__(self, gid: bytes) -> bool:
        return gid in self.records

    def get(self, gid: bytes) -> Record | None:
        return self.records.get(gid)

    def add(self, record: Record) -> Record:
        if record.gid in self.records:
            raise DuplicateGid(record.gid.hex())
        self.records[record.gid] = record
        return record

    def free(self, record: Record) -> None:
        self.records.pop(record.gid, None)

    def finished(self, record: Record) -> bool:
        """A record can be freed once its outcome is known and settlement went everywhere."""
        return record.pending == 0 and (record.presettled or record.publisher_settled) and not record.unsettled
