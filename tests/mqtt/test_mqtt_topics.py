"""Topic names, filters, shared subscriptions and matching (MQTT 5.0 section 4.7, 4.8.2): pure."""

from __future__ import annotations

import pytest
from once.router.mqtt.codec import MqttError
from once.router.mqtt.codes import Reason
from once.router.mqtt.topics import Filter, check_filter, check_name, matches, parse_filter


@pytest.mark.parametrize("topic_filter, topic, expected", [
    ("sport/tennis/player1/#", "sport/tennis/player1", True),  # '#' matches the parent level too
    ("sport/tennis/player1/#", "sport/tennis/player1/ranking/wimbledon", True),
    ("sport/#", "sport", True),
    ("sport/tennis/+", "sport/tennis/player1", True),
    ("sport/tennis/+", "sport/tennis/player1/ranking", False),
    ("sport/+", "sport", False),
    ("sport/+", "sport/", True),  # an empty level is a level
    ("+/+", "/finance", True),
    ("/+", "/finance", True),
    ("+", "/finance", False),
    ("#", "$SYS/monitor/Clients", False),  # '$' topics are not matched by a leading wildcard
    ("+/monitor/Clients", "$SYS/monitor/Clients", False),
    ("$SYS/#", "$SYS/monitor/Clients", True),
    ("$SYS/monitor/+", "$SYS/monitor/Clients", True),
    ("a/b", "a/b", True),
    ("a/b", "a/b/c", False),
    ("a//c", "a//c", True),
])
def test_matching_follows_the_specifications_examples(topic_filter, topic, expected):
    assert matches(check_filter(topic_filter), check_name(topic)) is expected


@pytest.mark.parametrize("bad", ["", "a/#/b", "a#", "a/b+", "+a", "##"])
def test_invalid_filters_are_refused_with_0x8f(bad):
    with pytest.raises(MqttError) as e:
        check_filter(bad)
    assert e.value.reason is Reason.TOPIC_FILTER_INVALID


@pytest.mark.parametrize("bad", ["", "a/+", "a/#", "+", "x#y"])
def test_a_topic_name_with_a_wildcard_or_empty_is_refused_with_0x90(bad):
    with pytest.raises(MqttError) as e:
        check_name(bad)
    assert e.value.reason is Reason.TOPIC_NAME_INVALID


def test_shared_subscriptions_name_their_group():
    assert parse_filter("$share/workers/jobs/+") == Filter("jobs/+", "workers")
    assert parse_filter("jobs/#") == Filter("jobs/#")
    for bad in ("$share/workers", "$share//jobs", "$share/w+/jobs", "$share/w#/jobs", "$share/workers/a/#/b"):
        with pytest.raises(MqttError) as e:
            parse_filter(bad)
        assert e.value.reason is Reason.TOPIC_FILTER_INVALID, bad
