"""Who may do what: the topology's ``policy`` section, per user and per user group.

    policy:
      users:
        alice: {publish: ["orders/eu/#"], subscribe: ["orders/+/new"], groups: ["billing-*"]}
      groups:                       # the user groups of the users file (``groups: [...]``)
        operators: {publish: ["#"], subscribe: ["#"], groups: ["*"]}
      default: {subscribe: ["public/#"]}   # everyone else, anonymous included
      hosts:                        # limits per source host, by address or network
        "10.0.0.0/8": {max_connections: 20, max_in_flight_bytes: 67108864}

A user may do what its own entry or any of its groups' entries allows; a user with neither
gets ``default``; without ``default``, nothing. Without a ``policy`` section everything is
allowed (the router's behaviour before there were policies).

Limits (``LIMITS``) bound what one user, and what one source host, holds on a router at
once (``router/security/quotas.py`` counts). A user's limit is the most generous of its rules'; a
host's is set by the most specific network that names it (each host of a network has the
network's limits to itself). Both apply: the one passed first refuses.

Topic patterns are the network's (``records/names.py``): levels split on ``/``, ``+`` (or
``*``) one level, a last ``#`` the rest. A subscription to a pattern is allowed when an
allowed pattern covers every topic it can match. Consumer groups are named by glob
patterns (``billing-*``), as in the topology's ``groups``.

Every check answers None (allowed) or the refusal's description, which names the rule
that decided: it goes back to the client with ``amqp:unauthorized-access``.

The rules hold across the network: a router checks the subscriptions other routers tell
it of (the user travels with each: ``Subscription.owner``) and the messages they forward
(the publishing user travels with each copy), not only its own clients' attaches.
"""

from __future__ import annotations

import fnmatch
import ipaddress
from dataclasses import dataclass, field
from functools import lru_cache

from once.records.names import pattern_error


@dataclass(frozen=True, slots=True)
class Rule:
    where: str  # the topology key it came from, for refusals: "policy.users.alice"
    publish: tuple[str, ...] = ()
    subscribe: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()  # consumer group names (globs)
    # limits on what the user holds at once, across the router's connections (None: the router's own)
    limits: tuple[tuple[str, int], ...] = ()


LIMITS = ("max_connections", "max_sessions", "max_links", "max_message_size", "max_in_flight_bytes", "subscriber_stall")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class HostRule:
    network: Network
    where: str  # "policy.hosts.10.0.0.0/8"
    limits: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Policy:
    users: dict[str, Rule] = field(default_factory=dict)
    groups: dict[str, Rule] = field(default_factory=dict)
    default: Rule | None = None
    hosts: tuple[HostRule, ...] = ()  # most specific first

    def host_limit(self, host: str, name: str) -> tuple[int, str] | None:
        """The limit ``name`` of a client from ``host`` and the rule that sets it: the most
        specific network holding the host that sets one; None when none does."""
        if not self.hosts:
            return None
        address = _address(host)
        if address is None:
            return None
        for rule in self.hosts:
            if address.version == rule.network.version and address in rule.network:
                for k, v in rule.limits:
                    if k == name:
                        return v, f"{rule.where}.{name}"
        return None

    def rules(self, user: str, user_groups: tuple[str, ...]) -> list[Rule]:
        found = [r for r in (self.users.get(user), *(self.groups.get(g) for g in user_groups)) if r is not None]
        if not found and self.default is not None:
            found.append(self.default)
        return found

    def may_publish(self, user: str, user_groups: tuple[str, ...], topic: str) -> str | None:
        rules = self.rules(user, user_groups)
        if any(covers(p, topic) for r in rules for p in r.publish):
            return None
        return _refusal(user, "publish to", topic, rules, "publish")

    def may_subscribe(self, user: str, user_groups: tuple[str, ...], name: str) -> str | None:
        rules = self.rules(user, user_groups)
        if any(covers(p, name) for r in rules for p in r.subscribe):
            return None
        return _refusal(user, "subscribe to", name, rules, "subscribe")

    def limit(self, user: str, user_groups: tuple[str, ...], name: str) -> tuple[int, str] | None:
        """The user's limit ``name`` and the rule that sets it: the most generous of its
        rules that set one (a user in two groups has the larger); None when none does."""
        best: tuple[int, str] | None = None
        for r in self.rules(user, user_groups):
            for k, v in r.limits:
                if k == name and (best is None or v > best[0]):
                    best = (v, f"{r.where}.{name}")
        return best

    def may_join(self, user: str, user_groups: tuple[str, ...], group: str) -> str | None:
        rules = self.rules(user, user_groups)
        if any(fnmatch.fnmatchcase(group, g) for r in rules for g in r.groups):
            return None
        return _refusal(user, "join consumer group", group, rules, "groups")


@lru_cache(maxsize=4096)
def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None
    # (an IPv4 client on a dual-stack listener shows as ::ffff:a.b.c.d: its IPv4 rules hold)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def host_rules(raw: dict[str, tuple[tuple[str, int], ...]]) -> tuple[HostRule, ...]:
    """``policy.hosts`` as rules, most specific first (ValueError names a bad network)."""
    rules = [HostRule(ipaddress.ip_network(k, strict=False), f"policy.hosts.{k}", v) for k, v in raw.items()]
    return tuple(sorted(rules, key=lambda r: -r.network.prefixlen))


def _refusal(user: str, verb: str, what: str, rules: list[Rule], key: str) -> str:
    if not rules:
        return f"user {user or 'anonymous'} may not {verb} {what!r}: no policy entry for the user, its groups, or a default"
    said = "; ".join(f"{r.where}.{key}: {', '.join(getattr(r, key)) or '(none)'}" for r in rules)
    return f"user {user or 'anonymous'} may not {verb} {what!r} ({said})"


def _level_list(pattern: str) -> tuple[str, ...]:
    return tuple("+" if level == "*" else level for level in pattern.split("/"))


@lru_cache(maxsize=8192)
def covers(allowed: str, name: str) -> bool:
    """Whether every topic ``name`` (a topic or a pattern) can be is matched by ``allowed``."""
    return _covers(_level_list(allowed), tuple(name.split("/")))


def _covers(a: tuple[str, ...], n: tuple[str, ...]) -> bool:
    for i, level in enumerate(a):
        if level == "#":
            return True  # the rest, whatever it is (the parent level included)
        if i >= len(n):
            return False
        if n[i] == "#":
            return False  # (``#`` reaches any depth: only a ``#`` covers it)
        if level == "+":
            continue  # any one level, a ``+`` included
        if n[i] != level:
            return False  # (a literal covers only itself, not a ``+``)
    return len(n) == len(a)


def policy_error(pattern: str) -> str | None:
    """What is wrong with a policy's topic pattern (None: it is valid)."""
    if not pattern:
        return "an empty pattern"
    return pattern_error("/".join(_level_list(pattern)))
