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


def publisher_name_error(name: str) -> str | None:
    """Why a publisher may not send to ``name`` (None: it may): only topics are published to."""
    if is_pattern(name):
        return f"{name!r} is a pattern ('+' or '#' as a level): a publisher sends to a topic"
    return None


def subscriber_name_error(name: str) -> str | None:
    """Why a subscriber may not attach under ``name`` (None: it may)."""
    return pattern_error(name) if is_pattern(name) else None
