"""What users and hosts hold against the policy's limits (``router/security/quotas.py``), pure:
connections counted as they enter and leave, sessions and links summed over a
principal's connections (as each last reported), one byte budget shared by a user's
links, SIGHUP's new limits, refusals counted, idle budgets swept."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from once.router.config import Settings, Topology, parse_topology
from once.router.security.limits import RateLimitedLog
from once.router.security.quotas import Quotas


@dataclass
class Owner:
    topology: Topology
    id: str = "A"
    settings: Settings = field(default_factory=Settings)
    guard_log: RateLimitedLog = field(default_factory=lambda: RateLimitedLog(logging.getLogger("test.guard")))


class Conn:
    def __init__(self, links: int = 0) -> None:
        self.links = links

    def holds(self, what: str) -> int:
        return self.links if what == "links" else 0


def _quotas(policy: dict[str, Any]) -> Quotas:
    return Quotas(Owner(parse_topology({"routers": {"A": {"listen": "127.0.0.1:0"}}, "policy": policy}, "t.yaml")))


def test_connections_are_counted_per_user_and_per_host_and_the_first_limit_passed_refuses():
    q = _quotas({"users": {"alice": {"max_connections": 2}}, "hosts": {"10.0.0.0/8": {"max_connections": 3}}})
    a1, a2, a3, b1, b2 = Conn(), Conn(), Conn(), Conn(), Conn()
    assert q.enter(a1, "alice", "10.0.0.1", 1, "p") is None and q.enter(a2, "alice", "10.0.0.1", 2, "p") is None
    assert q.enter(a3, "alice", "10.0.0.2", 3, "p") == \
        "user alice may hold 2 connections on this router (policy.users.alice.max_connections)"
    q.leave(a3, "alice", "10.0.0.2")
    assert q.enter(b1, "bob", "10.0.0.1", 4, "p") is None  # (the host's third)
    assert q.enter(b2, "bob", "10.0.0.1", 5, "p") == \
        "host 10.0.0.1 may hold 3 connections on this router (policy.hosts.10.0.0.0/8.max_connections)"
    q.leave(b2, "bob", "10.0.0.1")
    q.leave(a1, "alice", "10.0.0.1")
    assert q.enter(b2, "bob", "10.0.0.1", 6, "p") is None  # one left: room again
    q.leave(b2, "bob", "10.0.0.1")
    q.leave(b1, "bob", "10.0.0.1")
    q.leave(a2, "alice", "10.0.0.1")
    assert q.held == {}  # nothing left behind


def test_links_count_over_the_users_connections_the_asking_one_by_what_it_says():
    q = _quotas({"users": {"alice": {"max_links": 5}}})
    one, two = Conn(links=3), Conn(links=1)
    q.enter(one, "alice", "h", 1, "p")
    q.enter(two, "alice", "h", 2, "p")
    assert q.over("alice", "h", "max_links", q.holding("links", 2, two), 2, "p") is None  # 3 + 2
    assert q.over("alice", "h", "max_links", q.holding("links", 3, two), 2, "p") == \
        "user alice may hold 5 links on this router (policy.users.alice.max_links)"
    assert q.over("bob", "h", "max_links", q.holding("links", 99, two), 2, "p") is None  # (no limit for bob)


def test_a_users_links_share_one_purse_and_a_reload_changes_its_limit():
    q = _quotas({"users": {"alice": {"max_in_flight_bytes": 1000}},
                 "hosts": {"10.0.0.0/8": {"max_in_flight_bytes": 5000, "max_message_size": 300}}})
    (user, host), (again, _) = q.purses("alice", "10.0.0.1"), q.purses("alice", "10.0.0.2")
    assert user is again and (user.limit, host.limit) == (1000, 5000)
    assert q.purses("bob", "192.168.0.1") == ()
    assert q.max_message_size("bob", "10.0.0.7") == 300 and q.max_message_size("bob", "::1") == Settings().max_message_size
    user.bytes = 900
    assert q.arrivals_over("alice", "192.168.0.1", 200, False) is user
    assert q.arrivals_over("alice", "192.168.0.1", 100, False) is None
    user.bytes = 0  # (a message larger than the budget still goes alone, as credit lets it)
    assert q.arrivals_over("alice", "192.168.0.1", 5000, True) is None
    assert q.arrivals_over("alice", "192.168.0.1", 5000, False) is user
    user.bytes = 900
    owner = q.router
    owner.topology = parse_topology({"routers": {"A": {"listen": "127.0.0.1:0"}},  # type: ignore[misc]
                                     "policy": {"users": {"alice": {"max_in_flight_bytes": 2000}}}}, "t.yaml")
    q.reloaded()
    assert user.limit == 2000 and host.limit > 1 << 60  # (no longer limited: it bounds nothing)


def test_a_user_groups_limits_hold_for_each_member_and_the_most_generous_rule_wins():
    from dataclasses import replace

    from once.router.config import Auth
    from once.router.security.users import User

    q = _quotas({"groups": {"small": {"max_connections": 1}, "large": {"max_connections": 3}},
                 "default": {"max_connections": 2}})
    q.router.topology = replace(q.router.topology, auth=Auth(users={  # type: ignore[misc]
        "ann": User("ann", {}, ("small",)), "bea": User("bea", {}, ("small", "large"))}))
    ann, bea = [Conn(), Conn()], [Conn() for _ in range(4)]
    assert q.enter(ann[0], "ann", "h1", 1, "p") is None
    assert q.enter(ann[1], "ann", "h1", 2, "p") == \
        "user ann may hold 1 connections on this router (policy.groups.small.max_connections)"
    assert [q.enter(c, "bea", "h2", 3 + i, "p") for i, c in enumerate(bea)][-1] == \
        "user bea may hold 3 connections on this router (policy.groups.large.max_connections)"
    assert q.enter(Conn(), "cid", "h3", 9, "p") is None  # (no groups: the default's 2)


def test_a_connection_taking_over_another_is_not_counted_against_it_and_idle_purses_go():
    q = _quotas({"users": {"erin": {"max_connections": 1}}, "hosts": {"::/0": {"max_in_flight_bytes": 100}}})
    old, new = Conn(), Conn()
    assert q.enter(old, "erin", "::1", 1, "p") is None
    # (the same MQTT client again, over a half-open socket: the old one is taken over)
    assert q.enter(new, "erin", "::1", 2, "p", replacing=old) is None
    q.leave(old, "erin", "::1")
    (purse,) = q.purses("erin", "::1")
    q.leave(new, "erin", "::1")
    assert q.held == {} and q.purses("erin", "::1")[0] is not purse  # (gone once idle: made anew)


def test_refusals_are_counted_by_limit_and_per_principal_and_the_per_principal_ones_are_bounded(monkeypatch):
    import once.router.security.quotas as quotas

    q = _quotas({"hosts": {"::/0": {"max_connections": 1}}, "default": {"publish": ["#"]}})
    for i in range(5):  # each host's second connection refused for its host's limit
        first, second = Conn(), Conn()
        assert q.enter(first, "", f"2001:db8::{i}", i, "p") is None
        assert q.enter(second, "", f"2001:db8::{i}", i, "p") is not None
        q.leave(second, "", f"2001:db8::{i}")
        q.leave(first, "", f"2001:db8::{i}")
    q.count_refusal("publish", ("user", "mallory"))
    assert q.refusals["max_connections"] == 5 and q.refusals["publish"] == 1
    assert q.refused_by[("host", "2001:db8::4")] == {"max_connections": 1}
    assert ("user", "anonymous") not in q.refused_by  # (the host's limit refused them, not the user's)
    assert ("user", "mallory") in q.principals_known() and q.held == {}
    # A flood from many addresses keeps the totals, and the most recent principals only
    monkeypatch.setattr(quotas, "REFUSALS_KEPT", 3)
    for i in range(5, 10):
        q.count_refusal("max_connections", ("host", f"2001:db8::{i}"))
    assert list(q.refused_by) == [("host", "2001:db8::7"), ("host", "2001:db8::8"), ("host", "2001:db8::9")]
    assert q.refusals["max_connections"] == 10
    assert q.limits(("host", "2001:db8::1")) == {"max_connections": (1, "policy.hosts.::/0.max_connections")}


def test_a_principals_sessions_and_links_are_the_sum_of_what_its_connections_last_reported():
    q = _quotas({"users": {"alice": {"max_links": 5}}, "hosts": {"10.0.0.0/8": {"max_links": 6}}})
    one, two, bob = Conn(links=1), Conn(), Conn(links=2)
    q.enter(one, "alice", "10.0.0.1", 1, "p")
    q.enter(two, "alice", "10.0.0.2", 2, "p")
    q.enter(bob, "bob", "10.0.0.1", 3, "p")
    assert q.holding_now(("user", "alice")) == (0, 1) and q.holding_now(("host", "10.0.0.1")) == (0, 3)
    two.links = 3  # (it attached three: counted once it reports, at the end of its batch)
    assert q.holding_now(("user", "alice")) == (0, 1)
    q.report(two)
    assert q.holding_now(("user", "alice")) == (0, 4) and q.holding_now(("host", "10.0.0.2")) == (0, 3)
    # one asking for its second link: 2 + alice's other 3 = 5, within her 5; its third is not
    assert q.over("alice", "10.0.0.1", "max_links", q.holding("links", 2, one), 1, "p") is None
    assert q.over("alice", "10.0.0.1", "max_links", q.holding("links", 3, one), 1, "p") == \
        "user alice may hold 5 links on this router (policy.users.alice.max_links)"
    # bob's third link at host 10.0.0.1: his 3 and alice's 1 there, within the host's 6
    assert q.over("bob", "10.0.0.1", "max_links", q.holding("links", 3, bob), 3, "p") is None
    assert q.over("bob", "10.0.0.1", "max_links", q.holding("links", 6, bob), 3, "p") == \
        "host 10.0.0.1 may hold 6 links on this router (policy.hosts.10.0.0.0/8.max_links)"
    q.leave(two, "alice", "10.0.0.2")
    assert q.holding_now(("user", "alice")) == (0, 1) and q.holding_now(("host", "10.0.0.2")) == (0, 0)
    q.report(two)  # (gone: nothing)
    for c, user in ((one, "alice"), (bob, "bob")):
        q.leave(c, user, "10.0.0.1")
    assert q.held == {} and q.totals == {} and q.reported == {}


def test_a_message_too_large_counts_for_whose_policy_limit_refused_it_and_not_the_routers_own():
    q = _quotas({"users": {"erin": {"max_message_size": 1000}}, "hosts": {"10.0.0.0/8": {"max_message_size": 5000}}})
    q.refused_size("erin", "10.0.0.1")  # (erin's 1000 binds, not the host's 5000)
    q.refused_size("bob", "10.0.0.1")  # (the host's)
    q.refused_size("bob", "192.168.0.1")  # (the router's own limit: not the policy's doing)
    assert q.refusals["max_message_size"] == 2
    assert q.refused_by == {("user", "erin"): {"max_message_size": 1}, ("host", "10.0.0.1"): {"max_message_size": 1}}


def test_the_byte_budget_of_a_principal_gone_is_dropped_once_its_records_are_let_go():
    q = _quotas({"hosts": {"::/0": {"max_in_flight_bytes": 1000}}})
    left = []
    for i in range(200):  # each host leaves with 100 bytes in flight, let go after it left
        host = f"2001:db8::{i}"
        c = Conn()
        q.enter(c, "", host, i, "p")
        (purse,) = q.purses("", host)
        purse.bytes += 100
        q.leave(c, "", host)
        left.append(purse)
        purse.bytes -= 100
    assert len(q._purses) <= 2 * 64 + 1  # (swept as they doubled)
    assert q.principals_known() == [] and q._purses == {}
