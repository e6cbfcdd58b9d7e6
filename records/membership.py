"""Consumer groups: who the members of a group are, and which one gets a message (pure).

A group is a set of subscribers of one topic that share its messages: each message goes
to one member (seed 000's stateless receivers, seed 003's "stateless" mode). Every router
holds the same member table, because membership travels with the subscriptions; the
root (the publisher's router) makes the choice and the copy carries it.

The rule, stated once (README "Consumer groups" says the same):

* Members are ordered by subscriber key (container-id, link name): every router sorts
  the same table the same way.
* A message with a key (AMQP ``group-id``) goes to member ``crc32(key) mod N`` of that
  table: one key sticks to one member while membership is stable, so its messages stay
  in order.
* A message without a key goes to the member with the fewest messages this root has
  given it that are not answered yet; ties go round-robin from the member after the one
  chosen last. A slow member collects answers slowly and so is given less, and an idle
  member is never passed over for one with a backlog.
* A member that releases a message or goes away is replaced for that message by the
  same rule over the members that have not had it yet.
"""

from __future__ import annotations

import zlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

Key = tuple[str, str]  # a subscriber's (container-id, link name)


@dataclass(frozen=True, slots=True, order=True)
class GroupId:
    """A group of one topic: its subscription name, and for a group that is not global the
    container-id that scopes it (JMS shared subscriptions: QPIDJMS-220's ``global``)."""

    name: str
    scope: str = ""  # "" for a global group

    def __str__(self) -> str:
        return self.name if not self.scope else f"{self.scope}/{self.name}"


@dataclass(frozen=True, slots=True)
class Member:
    key: Key
    router: str  # where it is attached
    since: int = 0  # when it attached (the router's wall clock, microseconds)


def members_table(members: Iterable[Member]) -> tuple[Member, ...]:
    """A group's members in the order every router agrees on."""
    return tuple(sorted(members, key=lambda m: m.key))


def key_slot(key: bytes, n: int) -> int:
    return zlib.crc32(key) % n


class Chooser:
    """The root's side of the choice: the answers it still waits for from each member."""

    def __init__(self) -> None:
        self.outstanding: dict[Key, int] = {}
        self._last: dict[GroupId, Key] = {}

    def choose(self, group: GroupId, members: tuple[Member, ...], key: bytes | None,
               exclude: Collection[Key] = ()) -> Member | None:
        """The member of ``members`` (a ``members_table``) that gets a message with ``key``,
        leaving out ``exclude`` (those that had it); None when nobody is left."""
        if exclude:
            members = tuple(m for m in members if m.key not in exclude)
        if not members:
            return None
        if key is not None:
            return members[key_slot(key, len(members))]
        load = self.outstanding
        last = self._last.get(group)
        n = len(members)
        start = 0
        if last is not None:
            # round-robin among equals: begin after the one chosen last
            for i, m in enumerate(members):
                if m.key > last:
                    start = i
                    break
        best = None
        best_load = 0
        for j in range(n):
            m = members[(start + j) % n]
            lm = load.get(m.key, 0)
            if best is None or lm < best_load:
                best, best_load = m, lm
                if lm == 0:
                    break
        assert best is not None
        self._last[group] = best.key
        return best

    def given(self, key: Key) -> None:
        self.outstanding[key] = self.outstanding.get(key, 0) + 1

    def answered(self, key: Key) -> None:
        n = self.outstanding.get(key, 0) - 1
        if n > 0:
            self.outstanding[key] = n
        else:
            self.outstanding.pop(key, None)


def merged(local: Mapping[GroupId, Mapping[Key, Member]],
           remote: Mapping[GroupId, Iterable[Member]]) -> dict[GroupId, tuple[Member, ...]]:
    """Our own members and the rest of the network's, one table per group (a key attached
    both here and elsewhere counts once: here)."""
    out: dict[GroupId, dict[Key, Member]] = {}
    for group, ms in remote.items():
        out.setdefault(group, {}).update((m.key, m) for m in ms)
    for group, ms in local.items():
        out.setdefault(group, {}).update(ms)
    return {g: members_table(ms.values()) for g, ms in out.items() if ms}
