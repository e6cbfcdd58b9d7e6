"""Names a subscriber attaches under: a topic, or a pattern of topics (pure).

One syntax for the whole network, MQTT's (5.0 section 4.7), because an MQTT topic is an
AMQP address: levels split on ``/``; a level that is exactly ``+`` matches one level, a
last level that is exactly ``#`` matches the rest (the parent level included: ``a/#``
matches ``a``); a topic starting with ``$`` is not matched by a pattern starting with a
wildcard. ``+`` or ``#`` inside a longer level is an ordinary character (an AMQP address
``price+tax`` is a topic), so a name is a pattern only when a whole level is a wildcard.

Publishers send to topics only; subscribers attach to either, consumer group members too
(a group of a pattern is its own group: ``GroupId.pattern``). The core keeps its own
subscribers by name and asks ``matches`` which patterns a topic reaches
(``router/core/topics.py``); the network's subscriber table does the same
(``linkstate/subscriptions.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

WILDCARDS = ("+", "#")


def is_pattern(name: str) -> bool:
    """Whether ``name`` has a wildcard level (then it names a pattern, not a topic)."""
    if "+" not in name and "#" not in name:
        return False  # (the usual case, without splitting)
    return any(level in WILDCARDS for level in name.split("/"))


def pattern_error(name: str) -> str | None:
    """What is wrong with pattern ``name`` (``#`` not last), None when it is valid."""
    levels = name.split("/")
    if any(level == "#" for level in levels[:-1]):
        return f"{name!r}: '#' may only be the last level"
    return None


@lru_cache(maxsize=4096)
def _levels(pattern: str) -> tuple[tuple[str, ...], bool]:
    """A pattern's levels, and whether it starts with a wildcard (parsed once per pattern)."""
    levels = tuple(pattern.split("/"))
    return levels, levels[0] in WILDCARDS


def matches(pattern: str, topic: str) -> bool:
    """Whether valid pattern ``pattern`` matches ``topic`` (a topic matches itself)."""
    if pattern == topic:
        return True
    levels, wild_first = _levels(pattern)
    if wild_first and topic.startswith("$"):
        return False
    parts = topic.split("/")
    for i, level in enumerate(levels):
        if level == "#":
            return True
        if i >= len(parts) or (level != "+" and level != parts[i]):
            return False
    return len(levels) == len(parts)


class _Node:
    __slots__ = ("children", "name", "rest")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}  # the next level (a literal, or "+")
        self.name: str | None = None  # the pattern that ends here
        self.rest: str | None = None  # the pattern that ends here with "#" (it matches what follows, or nothing)


class PatternSet:
    """A set of patterns that answers, for a topic, the patterns matching it by walking the
    topic's levels (a trie of pattern levels), not by trying every pattern: with 10,000
    patterns a message to a new topic cost 19 ms of a router's time. Iterates, counts and
    tests membership as a set does."""

    __slots__ = ("_root", "_names")

    def __init__(self) -> None:
        self._root = _Node()
        self._names: dict[str, None] = {}  # (insertion order: iteration is the same on every run)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __bool__(self) -> bool:
        return bool(self._names)

    def add(self, pattern: str) -> None:
        if pattern in self._names:
            return
        self._names[pattern] = None
        node = self._root
        levels = pattern.split("/")
        last = len(levels) - 1
        for i, level in enumerate(levels):
            if level == "#" and i == last:
                node.rest = pattern
                return
            child = node.children.get(level)
            if child is None:
                child = node.children[level] = _Node()
            node = child
        node.name = pattern

    def discard(self, pattern: str) -> None:
        if pattern not in self._names:
            return
        del self._names[pattern]
        levels = pattern.split("/")
        rest = levels[-1] == "#"
        if rest:
            levels.pop()
        path = [self._root]
        for level in levels:
            path.append(path[-1].children[level])
        if rest:
            path[-1].rest = None
        else:
            path[-1].name = None
        for i in range(len(levels), 0, -1):  # (levels no pattern goes through any more go)
            node = path[i]
            if node.children or node.name is not None or node.rest is not None:
                break
            del path[i - 1].children[levels[i - 1]]

    def matching(self, topic: str) -> list[str]:
        """The patterns here that match ``topic`` (as ``matches`` says), each once."""
        out: list[str] = []
        parts = topic.split("/")
        n = len(parts)
        dollar = topic.startswith("$")  # (not matched by a pattern starting with a wildcard)
        stack = [(self._root, 0)]
        while stack:
            node, i = stack.pop()
            if node.rest is not None and (i or not dollar):
                out.append(node.rest)
            if i == n:
                if node.name is not None:
                    out.append(node.name)
                continue
            child = node.children.get(parts[i])
            if child is not None:
                stack.append((child, i + 1))
            if i or not dollar:
                plus = node.children.get("+")
                if plus is not None and plus is not child:
                    stack.append((plus, i + 1))
        return out


def publisher_name_error(name: str) -> str | None:
    """Why a publisher may not send to ``name`` (None: it may): only topics are published to."""
    if is_pattern(name):
        return f"{name!r} is a pattern ('+' or '#' as a level): a publisher sends to a topic"
    return None


def subscriber_name_error(name: str) -> str | None:
    """Why a subscriber may not attach under ``name`` (None: it may)."""
    return pattern_error(name) if is_pattern(name) else None
