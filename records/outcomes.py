"""A delivery's outcome as the core sees it, protocol-neutral: what an adaptor translates
its protocol's delivery states into, and what a record keeps of a rejection."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class OutcomeKind(Enum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    RELEASED = "released"  # give it to someone (or the same one) again
    MODIFIED = "modified"  # released, with annotations: maybe not here again
    RECEIVED = "received"  # progress only, not an outcome yet


@dataclass(frozen=True, slots=True)
class Outcome:
    """A delivery's state as the core sees it; ``condition``/``description`` for a rejection."""

    kind: OutcomeKind
    condition: str = ""
    description: str = ""
    delivery_failed: bool = False
    undeliverable_here: bool = False

    @property
    def final(self) -> bool:
        return self.kind is not OutcomeKind.RECEIVED


ACCEPTED = Outcome(OutcomeKind.ACCEPTED)
RELEASED = Outcome(OutcomeKind.RELEASED)


__all__ = ["ACCEPTED", "RELEASED", "Outcome", "OutcomeKind"]
