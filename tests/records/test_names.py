"""Topics and patterns (``records/names.py``): the one rule the core, the subscriber table
and the MQTT adaptor match by."""

from __future__ import annotations

import pytest
from once.records.names import is_pattern, matches, publisher_name_error, subscriber_name_error


@pytest.mark.parametrize(("name", "pattern"), [
    ("a/b", False), ("a/+/c", True), ("a/#", True), ("#", True), ("+", True),
    ("price+tax", False), ("a/b#c", False), ("", False), ("a//b", False),
])
def test_a_name_is_a_pattern_only_when_a_whole_level_is_a_wildcard(name, pattern):
    assert is_pattern(name) is pattern


@pytest.mark.parametrize(("pattern", "topic", "hit"), [
    ("a/b", "a/b", True), ("a/b", "a/c", False),
    ("a/+", "a/b", True), ("a/+", "a/b/c", False), ("a/+", "a", False), ("a/+", "a/", True),
    ("a/#", "a", True), ("a/#", "a/b/c", True), ("a/#", "b/a", False),
    ("+/+", "/x", True), ("#", "a/b", True), ("+/b/#", "x/b", True), ("+/b/#", "x/c/b", False),
    ("#", "$SYS/x", False), ("+/x", "$SYS/x", False), ("$SYS/#", "$SYS/x", True),
])
def test_matching_follows_mqtt(pattern, topic, hit):
    assert matches(pattern, topic) is hit


def test_publishers_send_to_topics_and_patterns_are_checked():
    assert publisher_name_error("a/b") is None
    assert "is a pattern" in (publisher_name_error("a/+") or "")
    assert subscriber_name_error("a/+") is None and subscriber_name_error("a/b") is None
    assert "last level" in (subscriber_name_error("a/#/b") or "")
