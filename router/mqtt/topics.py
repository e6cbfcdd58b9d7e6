"""MQTT topic names and filters: what is valid, shared subscriptions, and matching.

Pure. The rules are MQTT 5.0 section 4.7 (and 4.8.2 for ``$share/``), the same in 3.1.1
but for shared subscriptions: levels split on ``/``; ``+`` matches one level and ``#``
the rest (the parent level included), each alone in its level and ``#`` last; a topic
starting with ``$`` is not matched by a filter starting with a wildcard.
"""

from __future__ import annotations

from dataclasses import dataclass

from once.records import names

from .codec import MqttError
from .codes import Reason

SHARE = "$share/"


def check_name(topic: str) -> str:
    """A PUBLISH's topic name, or ``MqttError`` (0x90, topic name invalid)."""
    if not topic:
        raise MqttError(Reason.TOPIC_NAME_INVALID, "an empty topic name")
    if "+" in topic or "#" in topic:
        raise MqttError(Reason.TOPIC_NAME_INVALID, f"topic name {topic!r} holds a wildcard")
    return topic


def check_filter(topic_filter: str) -> str:
    """A subscription's topic filter (not shared), or ``MqttError`` (0x8F, topic filter invalid)."""
    if not topic_filter:
        raise MqttError(Reason.TOPIC_FILTER_INVALID, "an empty topic filter")
    levels = topic_filter.split("/")
    for i, level in enumerate(levels):
        if "#" in level and (level != "#" or i != len(levels) - 1):
            raise MqttError(Reason.TOPIC_FILTER_INVALID, f"topic filter {topic_filter!r}: '#' must be the last "
                                                         "level, alone")
        if "+" in level and level != "+":
            raise MqttError(Reason.TOPIC_FILTER_INVALID, f"topic filter {topic_filter!r}: '+' must be alone in "
                                                         "its level")
    return topic_filter


def is_wildcard(topic_filter: str) -> bool:
    return "+" in topic_filter or "#" in topic_filter


@dataclass(frozen=True, slots=True)
class Filter:
    """A SUBSCRIBE's filter as the router takes it: the pattern, and the shared group if any."""

    pattern: str
    group: str | None = None  # ``$share/GROUP/pattern``: a member of consumer group GROUP


def parse_filter(topic_filter: str) -> Filter:
    """``$share/GROUP/FILTER`` (MQTT 5.0 shared subscription) or a plain filter; ``MqttError`` if invalid."""
    if topic_filter.startswith(SHARE):
        group, sep, rest = topic_filter[len(SHARE):].partition("/")
        if not group or not sep or "+" in group or "#" in group:
            raise MqttError(Reason.TOPIC_FILTER_INVALID, f"shared subscription {topic_filter!r}: expected "
                                                         "$share/GROUP/FILTER")
        return Filter(check_filter(rest), group)
    return Filter(check_filter(topic_filter))


def matches(topic_filter: str, topic: str) -> bool:
    """Whether a valid filter matches a valid topic name (the network's rule, the same:
    ``records/names.py``)."""
    return names.matches(topic_filter, topic)
