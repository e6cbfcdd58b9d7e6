"""How a delivery is treated at a router: which of the topic's local subscribers get it.

"Fan out to every subscriber" is the one treatment today. Consumer groups (issue 14) are
the next: a group gets each message once, at one member, and that choice is made here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from records.table import Record

    from .peers import Subscriber


class Treatment(Protocol):
    def targets(self, record: Record, subscribers: dict[tuple[str, str], Subscriber],
                keys: frozenset | None) -> list[Subscriber]:
        """The local subscribers ``record`` goes to; ``keys``: only those (a copy re-targeted
        to subscribers that moved here), and only if they have not had it."""


class FanOut:
    """Every subscriber gets every message."""

    def targets(self, record: Record, subscribers: dict[tuple[str, str], Subscriber],
                keys: frozenset | None) -> list[Subscriber]:
        if keys is None:
            return list(subscribers.values())
        return [s for k, s in subscribers.items() if k in keys and s not in record.states]


FAN_OUT = FanOut()
