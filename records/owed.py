"""Who one message is owed to, as its root keeps it (``docs/protocol.md``, sections 4, 6
and 7; ``router/core/copies.py`` applies it).

The root fixes the owed set when the message is published: subscriber keys, each with
the router the copy went to. It stops waiting for a key only on evidence:
- the key's own answer (``accepted`` or ``rejected``), from whichever router it came;
- its subscription closed, or its grace expired, as reported by the router holding it
  now (a router it left knows nothing of it);
- the root's own grace rule (``expire``).

Losing a router is no evidence. ``moved`` and ``unknown`` answers change nothing,
because the root re-targets a key only on what its subscriber table shows (``moved``
here), nor is ``released`` (a group member gave the message back). A member of a group
that released the message or left is replaced by the root's next choice (``replace``).
Pure: no clock, no I/O. The caller sends the copies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum

from .membership import Key
from .outcomes import Outcome


class KeyState(Enum):
    PENDING = "pending"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    CLOSED = "closed"  # its subscription ended before it answered
    EXPIRED = "expired"  # it stayed away past its grace
    REPLACED = "replaced"  # a group member whose share went to another member
    HERE = "here"  # it attached at the root itself: a local subscriber there now, waited for as such


class Said(Enum):
    """What a router said about a key in its answer."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    CLOSED = "closed"
    EXPIRED = "expired"
    MOVED = "moved"  # it left this router (for the one named, as far as this router knows)
    UNKNOWN = "unknown"  # this router holds no such subscription
    # a group member's copy from a root that is not the one choosing now: another root the
    # publisher resumed at asked whom the message went to (router/core/inquiry.py)
    TAKEN = "taken"
    # a group member released the message (AMQP ``released``, or ``modified`` without
    # undeliverable-here): the root gives it to another member, or back to it when nobody
    # else is left (``docs/protocol.md`` section 8). Not final: the root replaces the key.
    RELEASED = "released"


_FINAL_FROM_ANYWHERE = {Said.ACCEPTED: KeyState.ACCEPTED, Said.REJECTED: KeyState.REJECTED}
_FINAL_FROM_ITS_ROUTER = {Said.CLOSED: KeyState.CLOSED, Said.EXPIRED: KeyState.EXPIRED, Said.TAKEN: KeyState.CLOSED}


class Owed:
    __slots__ = ("_where", "shared", "states", "pending", "rejection")

    def __init__(self, owed: Mapping[Key, str], shared: bool = False) -> None:
        """``shared``: ``owed`` is the topic's plan, one mapping for every message (it is
        read here until a key moves, then copied: most messages never need their own)."""
        self._where: Mapping[Key, str] = owed if shared else dict(owed)
        self.shared = shared
        self.states: dict[Key, KeyState] = dict.fromkeys(owed, KeyState.PENDING)
        self.pending = len(self.states)
        self.rejection: Outcome | None = None  # the first rejection: the publisher hears it

    @property
    def where(self) -> Mapping[Key, str]:
        """key -> the router its copy went to last."""
        return self._where

    def _set_where(self, key: Key, router: str) -> None:
        if self.shared:
            self._where, self.shared = dict(self._where), False
        self._where[key] = router  # type: ignore[index]  # (our own copy now)

    @property
    def complete(self) -> bool:
        return self.pending == 0

    def _final(self, key: Key, state: KeyState) -> bool:
        self.states[key] = state
        self.pending -= 1
        return self.pending == 0

    def answer(self, key: Key, router: str, said: Said, error: Outcome | None = None) -> bool:
        """``router`` answered for ``key``; True when this completed the message. Answers
        are idempotent: a key that is final stays as it is."""
        if self.states.get(key) is not KeyState.PENDING:
            return False
        state = _FINAL_FROM_ANYWHERE.get(said)
        if state is None and self._where[key] == router:
            state = _FINAL_FROM_ITS_ROUTER.get(said)
        if state is None:
            return False  # moved, unknown, or a router it left: the table decides where it is
        if state is KeyState.REJECTED and self.rejection is None:
            self.rejection = error
        return self._final(key, state)

    def accepted_at(self, keys: Iterable[Key], router: str) -> bool:
        """Every key of ``keys`` still owed at ``router`` accepted (a destination's usual
        answer names no key: all of its copy's); True when this completed the message."""
        states, where = self.states, self._where
        done = False
        for key in keys:
            if states.get(key) is KeyState.PENDING and where[key] == router and self._final(key, KeyState.ACCEPTED):
                done = True
        return done

    def moved(self, key: Key, router: str) -> bool:
        """The subscriber table shows ``key`` at ``router`` now. Returns True if a copy must
        go there for it: it is still owed and its copy went elsewhere."""
        if self.states.get(key) is not KeyState.PENDING or self._where[key] == router:
            return False
        self._set_where(key, router)
        return True

    def add(self, key: Key, router: str) -> None:
        """``key`` is owed the message too, its copy sent to ``router`` (a local subscriber of
        the root's moved away: the root waits for it there now). A key that had come to the
        root (``here``) and leaves again is owed again."""
        if self.states.get(key, KeyState.HERE) is KeyState.HERE:
            self._set_where(key, router)
            self.states[key] = KeyState.PENDING
            self.pending += 1

    def back_here(self, key: Key) -> None:
        """``key`` (replaced, or given up) gets the message again at the root itself: waited
        for there as a local subscriber, and owed again where it goes if it moves away
        (``add``)."""
        if self.states.get(key) in (KeyState.REPLACED, KeyState.CLOSED):
            self.states[key] = KeyState.HERE

    def here(self, key: Key) -> bool:
        """``key`` attached at the root: the root waits for it as a local subscriber now; True
        when this completed the message (for the remote keys)."""
        if self.states.get(key) is not KeyState.PENDING:
            return False
        return self._final(key, KeyState.HERE)

    def expire(self, key: Key) -> bool:
        """The grace rule fired at the root (``docs/protocol.md``, section 7); True when this
        completed the message."""
        if self.states.get(key) is not KeyState.PENDING:
            return False
        return self._final(key, KeyState.EXPIRED)

    def replace(self, key: Key, by: Key, router: str) -> None:
        """A group member ``key`` released the message or left: it goes to ``by`` (the root's
        next choice, at ``router``) instead."""
        if self.states.get(key) is KeyState.PENDING:
            self.states[key] = KeyState.REPLACED
            self.pending -= 1
        if by not in self.states:
            self._set_where(by, router)
            self.states[by] = KeyState.PENDING
            self.pending += 1

    def again(self, key: Key, router: str) -> None:
        """Group member ``key`` released the message and gets it again, its copy sent to
        ``router`` (every member released it: it goes back to one)."""
        if self.states.get(key) is not KeyState.PENDING:
            self.states[key] = KeyState.PENDING
            self.pending += 1
        self._set_where(key, router)

    def pending_at(self, routers: Iterable[str] | None = None) -> dict[str, set[Key]]:
        """The keys still owed, by the router their copy went to (only ``routers``, if given)."""
        only = None if routers is None else set(routers)
        out: dict[str, set[Key]] = {}
        for key, state in self.states.items():
            if state is KeyState.PENDING:
                router = self._where[key]
                if only is None or router in only:
                    out.setdefault(router, set()).add(key)
        return out
