"""The policy's rules (``router/security/policy.py``): which rule decides, and pattern coverage."""

from __future__ import annotations

import pytest
from once.router.config import TopologyError, parse_topology
from once.router.security.policy import Policy, Rule, covers


@pytest.mark.parametrize("allowed, name, ok", [
    ("#", "a/b", True), ("#", "#", True), ("a/#", "a", True), ("a/#", "a/+/c", True), ("a/#", "b", False),
    ("a/+", "a/b", True), ("a/+", "a/+", True), ("a/*", "a/b", True), ("a/+", "a/#", False),
    ("a/+", "a/b/c", False), ("a/b", "a/+", False), ("a/b", "a/b", True), ("+/b", "x/b", True),
    ("a/+/c", "a/#", False), ("a/b/#", "a/#", False),
])
def test_an_allowed_pattern_covers_every_topic_a_name_can_be(allowed, name, ok):
    assert covers(allowed, name) is ok


def test_a_user_gets_its_own_rules_and_its_groups_else_the_default():
    p = Policy({"alice": Rule("policy.users.alice", publish=("a/#",))},
               {"ops": Rule("policy.groups.ops", publish=("ops/#",))}, Rule("policy.default", subscribe=("pub/#",)))
    assert p.may_publish("alice", ("ops",), "ops/x") is None and p.may_publish("alice", (), "a/1") is None
    assert "policy.users.alice.publish: a/#" in (p.may_publish("alice", (), "ops/x") or "")
    assert p.may_subscribe("carol", (), "pub/x") is None  # (no entry: the default)
    assert "policy.default.subscribe: pub/#" in (p.may_subscribe("carol", (), "a/1") or "")
    assert "no policy entry" in (Policy().may_publish("carol", (), "a") or "")


def test_the_policy_section_is_checked_with_one_line_errors():
    base = {"routers": {"A": {"listen": "127.0.0.1:0"}}}
    with pytest.raises(TopologyError, match="policy.users.alice.publish: expected topic patterns"):
        parse_topology({**base, "policy": {"users": {"alice": {"publish": ["a/#/b"]}}}}, "t.yaml")
    with pytest.raises(TopologyError, match=r"policy.users.alice.sub: unknown key"):
        parse_topology({**base, "policy": {"users": {"alice": {"sub": ["a"]}}}}, "t.yaml")
    p = parse_topology({**base, "policy": {"default": {"publish": "x/#"}}}, "t.yaml").policy
    assert p is not None and p.default == Rule("policy.default", publish=("x/#",))
    with pytest.raises(TopologyError, match=r"policy.hosts: expected IP addresses or networks .*10.0.0/33"):
        parse_topology({**base, "policy": {"hosts": {"10.0.0/33": {"max_connections": 1}}}}, "t.yaml")
    with pytest.raises(TopologyError, match=r"policy.hosts.10.0.0.0/8.publish: unknown key"):
        parse_topology({**base, "policy": {"hosts": {"10.0.0.0/8": {"publish": ["#"]}}}}, "t.yaml")


def test_a_hosts_limit_comes_from_the_most_specific_network_that_sets_it():
    base = {"routers": {"A": {"listen": "127.0.0.1:0"}}}
    p = parse_topology({**base, "policy": {"hosts": {
        "10.0.0.0/8": {"max_connections": 100, "max_links": 50},
        "10.1.0.0/16": {"max_connections": 10},
        "10.1.2.3": {"max_in_flight_bytes": 1000},
        "::1": {"max_connections": 2}}}}, "t.yaml").policy
    assert p is not None
    assert p.host_limit("10.1.2.3", "max_connections") == (10, "policy.hosts.10.1.0.0/16.max_connections")
    assert p.host_limit("10.1.2.3", "max_links") == (50, "policy.hosts.10.0.0.0/8.max_links")
    assert p.host_limit("10.1.2.3", "max_in_flight_bytes") == (1000, "policy.hosts.10.1.2.3.max_in_flight_bytes")
    assert p.host_limit("::ffff:10.9.9.9", "max_connections")[0] == 100  # (IPv4 on a dual-stack listener)
    assert p.host_limit("::1", "max_connections")[0] == 2
    assert p.host_limit("192.168.0.1", "max_connections") is None and p.host_limit("?", "max_links") is None
