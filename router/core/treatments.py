"""How a delivery is treated at a router: which of the topic's local subscribers get it.

"Fan out to every subscriber" is the treatment of a topic with no consumer group here.
Where groups have members here, a member gets a message only when the root chose it for
its group (``groups.py`` and ``records/membership.py`` make that choice).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from once.records.membership import Key
from once.records.names import PatternSet

if TYPE_CHECKING:
    from once.records.membership import GroupId, Member

    from .peers import CoreRecord, Subscriber


class Treatment(Protocol):
    def targets(self, record: CoreRecord, subscribers: dict[tuple[str, str], Subscriber],
                keys: frozenset[Key] | None) -> list[Subscriber]:
        """The local subscribers ``record`` goes to; ``keys``: only those (a copy re-targeted
        to subscribers that moved here), and only if they have not had it."""


class FanOut:
    """Every subscriber gets every message."""

    def targets(self, record: CoreRecord, subscribers: dict[tuple[str, str], Subscriber],
                keys: frozenset[Key] | None) -> list[Subscriber]:
        if keys is None:
            return list(subscribers.values())
        return [s for k, s in subscribers.items() if k in keys and s not in record.states]


FAN_OUT = FanOut()


class Grouped:
    """Every plain subscriber, and the members the root chose (``CoreRecord.chosen``)."""

    def targets(self, record: CoreRecord, subscribers: dict[tuple[str, str], Subscriber],
                keys: frozenset[Key] | None) -> list[Subscriber]:
        chosen = record.chosen or {}
        if keys is not None:
            # (a copy for particular keys reaches a member only if it was chosen, one that
            # followed a publisher to a new root too: the --groups soak's random-108)
            return [s for k, s in subscribers.items()
                    if k in keys and (s.group is None or k in chosen) and s not in record.states]
        return [s for k, s in subscribers.items() if (s.group is None or k in chosen) and s not in record.states]


GROUPED = Grouped()


class TopicTreatment:
    """The treatment of each topic here: grouped where consumer groups have members here,
    else the router's default (fan-out). The one seam the delivery path asks; the groups
    part keeps ``local_groups`` (this holds the same table, and only reads it)."""

    __slots__ = ("default", "local_groups", "patterns", "fan_out")

    def __init__(self, default: Treatment, local_groups: dict[str, dict[GroupId, dict[Key, Member]]],
                 patterns: PatternSet) -> None:
        self.default = default
        self.local_groups = local_groups
        self.patterns = patterns  # the names in ``local_groups`` that are patterns
        self.fan_out = default is FAN_OUT

    def grouped(self, topic: str) -> bool:
        """Whether a group here has members that a message to ``topic`` reaches."""
        return topic in self.local_groups or bool(self.patterns and self.patterns.matching(topic))

    def targets(self, record: CoreRecord, subscribers: dict[tuple[str, str], Subscriber],
                keys: frozenset[Key] | None) -> list[Subscriber]:
        if record.topic in self.local_groups or self.patterns and self.grouped(record.topic):
            return GROUPED.targets(record, subscribers, keys)
        if keys is None and self.fan_out:
            return list(subscribers.values())  # (FanOut's answer for a whole copy: one call less per message)
        return self.default.targets(record, subscribers, keys)
