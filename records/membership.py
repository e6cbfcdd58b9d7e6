"""Consumer groups: who the members of a group are, and which one gets a message (pure).

A group is a set of subscribers of one topic that share its messages: each message goes
to one member (seed 000's stateless receivers, seed 003's "stateless" mode). Every router
holds the same member table, because membership travels with the subscriptions; the
root (the publisher's router) makes the choice and the copy carries it.

The rule, stated once (``docs/groups.md`` says the same):

* Members are ordered by subscriber key (container-id, link name): every router sorts
  the same table the same way.
* A message with a key (AMQP ``group-id``) goes to member ``crc32(key) mod N`` of that
  table: one key sticks to one member while membership is stable, so its messages stay
  in order. When the table changes, a key this root still has messages out for (not
  answered yet) stays with the member they went to until they are answered, and only
  then follows the new table (seed 000's "activate at a future sequence number", with
  the root's own answers as the clock): one key's messages never overtake each other
  across a rebalance.
* A message without a key from a publisher that can resume (our client library: it
  resends what had no outcome under the same identity wherever it resumes) goes to
  member ``crc32(gid) mod N``: a router that takes over from a dead one chooses the
  member the first one chose, which may have processed it already.
* Any other message without a key goes to the member with the fewest messages this root
  has given it that are not answered yet; ties go round-robin from the member after the
  one chosen last. A slow member collects answers slowly and so is given less, and an
  idle member is never passed over for one with a backlog.
* A member that releases a message or goes away is replaced for that message by the
  same rule over the members that have not had it yet.
* An exclusive group (seed 003's "stateful" mode: one active member, the others passive
  standbys) gives everything to its active member: the one that has waited longest
  (earliest attach; ties by key). When it goes, the next one in that order takes over,
  first with what the old one had not accepted. A group is exclusive when any member
  asked for it.
"""

from __future__ import annotations

import zlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from mypy_extensions import mypyc_attr

from .names import is_pattern

Key = tuple[str, str]  # a subscriber's (container-id, link name)


@dataclass(frozen=True, slots=True, order=True)
class GroupId:
    """A group of one topic: its subscription name, and for a group that is not global the
    container-id that scopes it (JMS shared subscriptions: QPIDJMS-220's ``global``). A
    group whose members subscribed to a pattern (``records/names.py``) is a group of every
    topic it matches, and another group than one of the same name on a topic: ``pattern``
    says which (MQTT 5.0 4.8.2: ``$share/g/a/+`` and ``$share/g/a/b`` are two)."""

    name: str
    scope: str = ""  # "" for a global group
    pattern: str = ""  # the pattern its members subscribed to ("": a topic)

    @classmethod
    def of(cls, name: str, scope: str, topic: str) -> GroupId:
        """The group ``name`` (``scope``) of subscribers attached under ``topic``."""
        return cls(name, scope, topic if is_pattern(topic) else "")

    def __str__(self) -> str:
        return self.name if not self.scope else f"{self.scope}/{self.name}"


@dataclass(frozen=True, slots=True)
class Member:
    key: Key
    router: str  # where it is attached
    since: int = 0  # when it attached (the router's wall clock, microseconds)
    exclusive: bool = False  # it asked for an exclusive group (one active member)


def _by_key(m: Member) -> Key:
    return m.key


# A tuple subclass (cheap to compare and hash) stays an interpreted class when compiled.
@mypyc_attr(native_class=False)
class Table(tuple[Member, ...]):
    """A group's members in the order every router agrees on, and what each message would
    otherwise work out again: whether the group is exclusive, and its active member."""

    exclusive: bool
    leader: Member | None

    def __new__(cls, members: Iterable[Member]) -> Table:
        t = tuple.__new__(cls, sorted(members, key=_by_key))
        t.exclusive = any(m.exclusive for m in t)
        t.leader = active(t) if t.exclusive else None
        return t


def key_slot(key: bytes, n: int) -> int:
    return zlib.crc32(key) % n


class Chooser:
    """The root's side of the choice: the answers it still waits for from each member."""

    def __init__(self) -> None:
        self.outstanding: dict[Key, int] = {}
        self._last: dict[GroupId, tuple[Table, int]] = {}  # the table and position chosen last
        # (group, message key) -> (member, its messages with that key not answered yet)
        self.sticky: dict[tuple[GroupId, bytes], tuple[Key, int]] = {}

    def choose(self, group: GroupId, members: Table, key: bytes | None,
               exclude: Collection[Key] = ()) -> Member | None:
        """The member of ``members`` that gets a message with ``key``, leaving out
        ``exclude`` (those that had it); None when nobody is left."""
        if exclude:
            members = Table(m for m in members if m.key not in exclude)
        if not members:
            return None
        if members.exclusive:
            return members.leader
        if key is not None:
            held = self.sticky.get((group, key))
            if held is not None:
                for m in members:
                    if m.key == held[0]:
                        return m  # its earlier messages with this key are still out there
            return members[key_slot(key, len(members))]
        load = self.outstanding
        n = len(members)
        start = 0
        last = self._last.get(group)
        if last is not None:
            # round-robin among equals: begin after the one chosen last
            table, i = last
            if table is members:
                start = (i + 1) % n
            else:  # the table changed since: after the last one's key
                key_last = table[i].key
                start = next((j for j, m in enumerate(members) if m.key > key_last), 0)
        best = start
        best_load = -1
        for j in range(n):
            i = (start + j) % n
            lm = load.get(members[i].key, 0)
            if best_load < 0 or lm < best_load:
                best, best_load = i, lm
                if lm == 0:
                    break
        self._last[group] = (members, best)
        return members[best]

    def given(self, member: Key, group: GroupId | None = None, key: bytes | None = None) -> None:
        self.outstanding[member] = self.outstanding.get(member, 0) + 1
        if key is not None and group is not None:
            # (after a pass-on the key's messages still out follow the member it went to)
            held = self.sticky.get((group, key))
            self.sticky[(group, key)] = (member, (held[1] if held else 0) + 1)

    def answered(self, member: Key, group: GroupId | None = None, key: bytes | None = None) -> None:
        n = self.outstanding.get(member, 0) - 1
        if n > 0:
            self.outstanding[member] = n
        else:
            self.outstanding.pop(member, None)
        if key is not None and group is not None:
            held = self.sticky.get((group, key))
            if held is not None:
                if held[1] > 1:
                    self.sticky[(group, key)] = (held[0], held[1] - 1)
                else:
                    del self.sticky[(group, key)]


def active(members: tuple[Member, ...]) -> Member:
    """An exclusive group's active member: the one that has waited longest."""
    return min(members, key=lambda m: (m.since, m.key))


def merged(local: Mapping[GroupId, Mapping[Key, Member]],
           remote: Mapping[GroupId, Iterable[Member]]) -> dict[GroupId, Table]:
    """Our own members and the rest of the network's, one table per group (a key attached
    both here and elsewhere counts once: here)."""
    out: dict[GroupId, dict[Key, Member]] = {}
    for group, ms in remote.items():
        out.setdefault(group, {}).update((m.key, m) for m in ms)
    for group, ours in local.items():
        out.setdefault(group, {}).update(ours)
    return {g: Table(ms.values()) for g, ms in out.items() if ms}
