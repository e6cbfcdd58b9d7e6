"""The router's own subscribers by the name each attached under, and, for a topic a
message is published to, every one of them it reaches.

A name is a topic or a pattern of topics (``records/names.py``). Attach and detach write
by name (``add``/``discard``); the delivery path asks ``get(topic)``: the subscribers of
that topic and of every pattern matching it. Without patterns that is the name's own
table (one dictionary lookup, the hot path as it was). With patterns it is a merged table
made once per topic and kept until a subscriber comes or goes: a message costs a lookup,
not a walk over the patterns.

A key is under one name at a time (``Core.add_subscriber`` moves it), so a merged table
never holds a key twice.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, ValuesView
from typing import TYPE_CHECKING, overload

from once.records.names import PatternSet, is_pattern

if TYPE_CHECKING:
    from .peers import Subscriber

Key = tuple[str, str]
Subs = dict[Key, "Subscriber"]


class TopicIndex:
    __slots__ = ("own", "patterns", "views", "names", "suspended")

    def __init__(self) -> None:
        self.own: dict[str, Subs] = {}  # name -> the subscribers attached under it (never empty)
        self.patterns = PatternSet()  # the names in ``own`` that are patterns
        self.views: dict[str, Subs] = {}  # topic -> every subscriber it reaches (with patterns only)
        self.names: dict[Key, str] = {}  # key -> the name it is attached under (``find``)
        # those of them suspended (``Core.suspended``: a walk over every subscriber on each
        # subscription event made 10,000 subscriptions cost 45 s)
        self.suspended: dict[Subscriber, None] = {}

    # ------------------------------------------------------------- reading

    @overload
    def get(self, topic: str) -> Subs | None: ...

    @overload
    def get(self, topic: str, default: Subs) -> Subs: ...

    def get(self, topic: str, default: Subs | None = None) -> Subs | None:
        """Every subscriber here that a message to ``topic`` reaches (``default`` if none).
        The table returned is not to be written: attach and detach go through ``add`` and
        ``discard``."""
        if not self.patterns:
            return self.own.get(topic, default)
        view = self.views.get(topic)
        if view is None:
            if len(self.views) > 4096:
                self.views.clear()  # (bounded: many topics, each seen once)
            view = self.views[topic] = self._reaching(topic)
        return view if view else default

    def _reaching(self, topic: str) -> Subs:
        exact = self.own.get(topic)
        view: Subs = dict(exact) if exact else {}
        for name in self.patterns.matching(topic):
            if name != topic:
                view.update(self.own[name])
        return view

    def __contains__(self, topic: str) -> bool:
        """Whether a message to ``topic`` reaches a subscriber here."""
        return bool(self.get(topic))

    def __getitem__(self, name: str) -> Subs:
        """The subscribers attached under ``name`` itself."""
        return self.own[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.own)

    def __len__(self) -> int:
        return len(self.own)

    def items(self) -> ItemsView[str, Subs]:
        """Each name with the subscribers attached under it (every subscriber once)."""
        return self.own.items()

    def values(self) -> ValuesView[Subs]:
        return self.own.values()

    def find(self, key: Key) -> Subscriber | None:
        """Subscriber ``key``, under whichever name it attached."""
        name = self.names.get(key)
        return None if name is None else self.own[name].get(key)

    # ------------------------------------------------------------- writing

    def add(self, sub: Subscriber) -> None:
        """``sub`` attached (or was adopted) under its name, ``sub.topic``."""
        name = sub.topic
        subs = self.own.get(name)
        if subs is None:
            subs = self.own[name] = {}
            if is_pattern(name):
                self.patterns.add(name)
        old = subs.get(sub.key)
        if old is not None and old is not sub:
            self.suspended.pop(old, None)  # (taken over under its key: only ``sub`` is here now)
        subs[sub.key] = sub
        self.names[sub.key] = name
        self._changed(name)

    def discard(self, sub: Subscriber) -> bool:
        """``sub`` is gone from here; False if it was not the one under its key."""
        subs = self.own.get(sub.topic)
        if subs is None or subs.get(sub.key) is not sub:
            return False
        del subs[sub.key]
        self.suspended.pop(sub, None)
        if self.names.get(sub.key) == sub.topic:
            del self.names[sub.key]
        if not subs:
            del self.own[sub.topic]
            self.patterns.discard(sub.topic)
        self._changed(sub.topic)
        return True

    def _changed(self, name: str) -> None:
        """Who ``name`` reaches changed: the merged tables it is in are made again when next
        asked. A topic's is its own (10,000 subscriptions cleared every table 10,000 times);
        a pattern's, every one (a pattern comes and goes less often than a topic's
        subscriber)."""
        views = self.views
        if views:
            if name in self.patterns or name not in self.own and is_pattern(name):
                views.clear()
            else:
                views.pop(name, None)
