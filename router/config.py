"""The topology file: one schema, validated with errors naming file, key and expectation."""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

from .security.policy import LIMITS, Policy, Rule, host_rules, policy_error
from .security.tls import VERSIONS, TlsSpec
from .security.users import User, UsersError, load_users


class TopologyError(ValueError):
    """A one-line message: ``FILE: KEY: what was expected, what was found``."""


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class RouterSpec:
    id: str
    listen: Address
    inter_router: Address | None = None
    http: Address | None = None  # metrics, health, management API, console (off when absent)
    mqtt: Address | None = None  # MQTT 3.1.1 and 5.0 clients (off when absent)
    amqps: Address | None = None  # AMQP clients over TLS (needs the topology's ``tls``)
    mqtts: Address | None = None  # MQTT clients over TLS (the same)
    # Running routers' ``inter_router`` addresses to join the network through (``--join``):
    # a router in nobody's file links to them and learns the network from them
    join: tuple[Address, ...] = ()
    # An edge router (``router/uplink.py``): interior routers of this file, in order of
    # preference, its clients are carried to; outside the routing protocol
    uplink: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LinkSpec:
    a: str
    b: str
    cost: int = 1


@dataclass(frozen=True, slots=True)
class Settings:
    max_in_flight: int = 10000
    link_credit: int = 2000
    subscriber_grace: float = 30.0
    # An attached subscriber that answers nothing for this long while it holds deliveries is
    # treated as gone: suspended, then its grace (``core/stalls.py``; 0: never). The
    # policy's ``subscriber_stall`` for its user or host, in seconds, takes its place.
    subscriber_stall: float = 300.0
    # A suspended subscriber is given up at its grace only when every router is reachable
    # (it cannot be attached behind a partition); with one out of reach, this much longer,
    # and then as a gap its live attach is told of (``docs/protocol.md`` section 7).
    partition_grace: float = 300.0
    # how long a publisher whose connection vanished may take to resume before its
    # unsettled deliveries are settled without it (and the orphan/placeholder lifetime)
    publisher_grace: float = 30.0
    idle_timeout: float = 60.0
    max_frame_size: int = 65536
    max_message_size: int = 100 * 1024 * 1024
    max_redeliveries: int = 5
    router_dead_after: float = 3.0  # an inter-router link silent this long is down (its idle timeout)
    # A hold-down: after the routes were computed for a link-state change from elsewhere, the
    # next such change waits this long, together with every one that comes meanwhile (0: none)
    route_hold: float = 0.05
    # from accept to the peer's open, SASL included: a socket that never gets there is closed
    handshake_timeout: float = 10.0
    # client connections; 0: a safe share of the descriptor limit (raised to its hard limit at start)
    max_connections: int = 0
    max_connections_per_host: int = 0  # 0: half of max_connections
    # Publisher credit follows use: a new link gets ``initial_credit``, doubling as it
    # sends up to ``link_credit``; a link holding credit unused for ``credit_idle`` keeps 1.
    initial_credit: int = 16
    credit_idle: float = 2.0
    max_connection_credit: int = 0  # what one connection's publishers hold together; 0: max(link_credit, max_in_flight / 4)
    # A publisher's window is probed as a rate and halved when its answers take this much
    # longer than the quickest lately: queueing (``core/pace.py``); 0: ``link_credit`` alone.
    queue_target: float = 0.0015
    # (Proton's blocking client puts every link of a connection on one session.)
    max_links_per_connection: int = 4096
    max_links_per_session: int = 1024
    # Memory is bounded in bytes as well as in messages: the message bytes a router holds,
    # and those of one publisher link (a larger message still goes, alone).
    max_in_flight_bytes: int = 256 * 1024 * 1024
    link_in_flight_bytes: int = 16 * 1024 * 1024
    # What one client connection's messages may hold, those still arriving included (a link's
    # first message, of a size unknown when it got its credit, draws on it); 0: the larger of
    # max_message_size and a quarter of max_in_flight_bytes.
    max_connection_bytes: int = 0


@dataclass(frozen=True, slots=True)
class Auth:
    users: dict[str, User] = field(default_factory=dict)  # the users file's (``users.py``): hashes only
    allow_anonymous: bool = True
    router_secret: str | None = None  # inter-router links without TLS authenticate with it (SASL PLAIN)
    plain_without_tls: bool = False  # PLAIN (and MQTT passwords) on connections without TLS too
    users_file: str | None = None  # where the users came from (its mode is checked: ``Router``)
    # The HTTP endpoint's views, metrics and console need a user of the users file (HTTP
    # Basic); health probes stay open. Without it, anonymous clients' container ids are
    # shown as digests (``router/http/views.py``: they are all an anonymous key's proof).
    http: bool = False


@dataclass(frozen=True, slots=True)
class Topology:
    path: str
    routers: dict[str, RouterSpec]
    links: tuple[LinkSpec, ...]
    settings: Settings
    auth: Auth
    # consumer groups by subscription name (``groups:``, a glob pattern -> mode): a
    # receiving link whose name matches joins the topic's group of that name
    groups: tuple[tuple[str, GroupMode], ...] = ()
    # TLS (``router/security/tls.py``): the ``amqps`` listeners, and mutual TLS on every inter-router link
    tls: TlsSpec | None = None
    # who may publish, subscribe and join what (``router/security/policy.py``); None: everyone everything
    policy: Policy | None = None

    def joins_to(self, me: str) -> set[str]:
        """The routers whose ``join`` names ``me``'s ``inter_router`` address: linked to it by
        the file as surely as by a link (``once topology dump`` writes a joiner's link so)."""
        spec = self.routers.get(me)
        ours = spec.inter_router if spec is not None else None
        if ours is None:
            return set()
        return {rid for rid, other in self.routers.items() if rid != me and ours in other.join}

    def group_mode(self, subscription: str) -> GroupMode | None:
        for pattern, mode in self.groups:
            if fnmatch.fnmatchcase(subscription, pattern):
                return mode
        return None


class GroupMode(Enum):
    SHARED = "shared"  # each message to one member (work sharing)
    EXCLUSIVE = "exclusive"  # one active member, the others standbys


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


class _Ctx:
    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, key: str, expected: str, got: Any) -> TopologyError:
        return TopologyError(f"{self.path}: {key}: expected {expected}, got {got!r}")

    def mapping(self, value: Any, key: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key, "a mapping", value)
        return value

    def keys(self, value: dict[str, Any], key: str, allowed: set[str]) -> None:
        for k in value:
            if k not in allowed:
                raise TopologyError(f"{self.path}: {key}.{k}: unknown key (expected one of {', '.join(sorted(allowed))})")

    def address(self, value: Any, key: str) -> Address:
        if not isinstance(value, str) or value.count(":") < 1:
            raise self.fail(key, "HOST:PORT", value)
        host, _, port = value.rpartition(":")
        if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise self.fail(key, "HOST:PORT with a port from 0 to 65535", value)
        return Address(host, int(port))

    def positive_int(self, value: Any, key: str, minimum: int = 1) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(key, f"an integer >= {minimum}", value)
        return value

    def duration(self, value: Any, key: str) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            return float(value)
        m = _DURATION.match(value) if isinstance(value, str) else None
        if m is None:
            raise self.fail(key, "a duration such as 30s, 500ms or 2m", value)
        return float(m.group(1)) * _UNITS[m.group(2)]


def _joins(ctx: _Ctx, value: Any, key: str) -> tuple[Address, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ctx.fail(key, "a list of HOST:PORT (running routers' inter_router addresses)", value)
    return tuple(ctx.address(v, f"{key}[{i}]") for i, v in enumerate(value))


def _uplinks(ctx: _Ctx, spec: dict[str, Any], key: str) -> tuple[str, ...]:
    value = spec.get("uplink")
    if value is None:
        return ()
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value) \
            or len(set(value)) != len(value):
        raise ctx.fail(f"{key}.uplink", "a list of interior router ids of this file, in order of preference", value)
    for other in ("inter_router", "join", "http", "amqps", "mqtts"):
        if spec.get(other) is not None:
            raise ctx.fail(f"{key}.{other}", "nothing, for an edge (it relays amqp and mqtt clients to its uplink, "
                           "outside the routing protocol)", spec.get(other))
    return tuple(value)


def _check_edges(ctx: _Ctx, routers: dict[str, RouterSpec]) -> None:
    """An edge's uplinks are interior routers of the file, each listening for what the edge takes."""
    for rid, spec in routers.items():
        for i, up in enumerate(spec.uplink):
            key = f"routers.{rid}.uplink[{i}]"
            if up == rid or up not in routers:
                raise ctx.fail(key, f"another router of {sorted(routers)}", up)
            if routers[up].uplink:
                raise ctx.fail(key, "an interior router (no uplink of its own)", up)
            if spec.mqtt is not None and routers[up].mqtt is None:
                raise ctx.fail(key, f"a router listening for mqtt (the edge {rid} takes mqtt clients)", up)


def load_topology(path: str | Path) -> Topology:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise TopologyError(f"{p}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise TopologyError(f"{p}: not a text file (a topology is YAML, see topologies/)") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise TopologyError(f"{p}: not valid YAML{where}: {getattr(e, 'problem', e)}") from None
    return parse_topology(data, str(p))


def parse_topology(data: Any, path: str = "<topology>") -> Topology:
    ctx = _Ctx(path)
    top = ctx.mapping(data, "(top level)")
    ctx.keys(top, "(top level)", {"routers", "links", "settings", "auth", "groups", "tls", "policy"})
    tls = _tls(ctx, Path(path).parent, top["tls"]) if top.get("tls") is not None else None
    routers_raw = ctx.mapping(top.get("routers"), "routers")
    if not routers_raw:
        raise ctx.fail("routers", "at least one router", routers_raw)
    routers: dict[str, RouterSpec] = {}
    for rid, spec in routers_raw.items():
        key = f"routers.{rid}"
        if not isinstance(rid, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", rid):
            raise ctx.fail(key, "a router id of letters, digits, '_', '.', '-'", rid)
        spec = ctx.mapping(spec, key)
        ctx.keys(spec, key, {"listen", "inter_router", "http", "mqtt", "amqps", "mqtts", "join", "uplink"})
        if "listen" not in spec:
            raise ctx.fail(f"{key}.listen", "HOST:PORT", None)
        ir = spec.get("inter_router")
        web, mqtt, amqps, mqtts = spec.get("http"), spec.get("mqtt"), spec.get("amqps"), spec.get("mqtts")
        for name, value in (("amqps", amqps), ("mqtts", mqtts)):
            if value is not None and tls is None:
                raise ctx.fail(f"{key}.{name}", "a top-level tls section (certificate, private_key, ca) for it", None)
        routers[rid] = RouterSpec(rid, ctx.address(spec["listen"], f"{key}.listen"),
                                  ctx.address(ir, f"{key}.inter_router") if ir is not None else None,
                                  ctx.address(web, f"{key}.http") if web is not None else None,
                                  ctx.address(mqtt, f"{key}.mqtt") if mqtt is not None else None,
                                  ctx.address(amqps, f"{key}.amqps") if amqps is not None else None,
                                  ctx.address(mqtts, f"{key}.mqtts") if mqtts is not None else None,
                                  _joins(ctx, spec.get("join"), f"{key}.join"), _uplinks(ctx, spec, key))
    _check_edges(ctx, routers)
    links_raw = top.get("links") or []
    if not isinstance(links_raw, list):
        raise ctx.fail("links", "a list", links_raw)
    links = []
    for i, item in enumerate(links_raw):
        key = f"links[{i}]"
        cost = 1
        if isinstance(item, dict):
            ctx.keys(item, key, {"between", "cost"})
            cost = ctx.positive_int(item.get("cost", 1), f"{key}.cost")
            item = item.get("between")
        if not isinstance(item, list) or len(item) != 2 or item[0] == item[1]:
            raise ctx.fail(key, "[A, B] naming two different routers", item)
        for end in item:
            if end not in routers:
                raise ctx.fail(key, f"a router of {sorted(routers)}", end)
            if routers[end].uplink:
                raise ctx.fail(key, f"interior routers ({end} is an edge: it has an uplink, and no links)", end)
        links.append(LinkSpec(str(item[0]), str(item[1]), cost))
    settings_raw = ctx.mapping(top.get("settings") or {}, "settings")
    ctx.keys(settings_raw, "settings", set(Settings.__slots__))
    s: dict[str, Any] = {}
    for k, v in settings_raw.items():
        key = f"settings.{k}"
        if k in ("subscriber_grace", "subscriber_stall", "partition_grace", "publisher_grace", "idle_timeout", "router_dead_after", "handshake_timeout",
                 "credit_idle", "queue_target", "route_hold"):
            s[k] = ctx.duration(v, key)
        elif k in ("max_connections", "max_connections_per_host", "max_connection_credit", "max_connection_bytes"):
            s[k] = ctx.positive_int(v, key, 0)
        elif k == "max_frame_size":
            s[k] = ctx.positive_int(v, key, 512)
        elif k == "max_redeliveries":
            s[k] = ctx.positive_int(v, key, 0)
        else:
            s[k] = ctx.positive_int(v, key)
    auth_raw = ctx.mapping(top.get("auth") or {}, "auth")
    ctx.keys(auth_raw, "auth", {"users_file", "allow_anonymous", "router_secret", "plain_without_tls", "http"})
    http_auth = auth_raw.get("http", False)
    if not isinstance(http_auth, bool):
        raise ctx.fail("auth.http", "true or false", http_auth)
    allow_anon = auth_raw.get("allow_anonymous", True)
    if not isinstance(allow_anon, bool):
        raise ctx.fail("auth.allow_anonymous", "true or false", allow_anon)
    plain_anyway = auth_raw.get("plain_without_tls", False)
    if not isinstance(plain_anyway, bool):
        raise ctx.fail("auth.plain_without_tls", "true or false", plain_anyway)
    users: dict[str, User] = {}
    users_file = None
    if "users_file" in auth_raw:
        users = _load_users(ctx, Path(path).parent, auth_raw["users_file"])
        users_file = str(Path(path).parent / auth_raw["users_file"])
    # With TLS, routers prove who they are with their certificates (mutual TLS, SASL
    # EXTERNAL): no secret is shared, and one given is refused rather than left unused.
    if tls is not None and "router_secret" in auth_raw:
        raise ctx.fail("auth.router_secret", "no shared secret with tls (routers authenticate with their "
                       "certificates)", "(a secret)")
    secret = None if tls is not None else os.environ.get("ONCE_ROUTER_SECRET") or auth_raw.get("router_secret")
    if secret is not None and (not isinstance(secret, str) or len(secret) < 8):
        raise ctx.fail("auth.router_secret", "a string of at least 8 characters", secret)
    if http_auth and not users:
        raise ctx.fail("auth.http", "a users file (auth.users_file) whose users may read the HTTP endpoint", True)
    if (links or any(r.join for r in routers.values())) and secret is None and tls is None:
        raise ctx.fail("auth.router_secret", "a shared secret for the inter-router links (or ONCE_ROUTER_SECRET), "
                       "or a tls section (routers then authenticate with certificates)", None)
    for link in links:
        for end in (link.a, link.b):
            if routers[end].inter_router is None:
                raise ctx.fail(f"routers.{end}.inter_router", "HOST:PORT (the router has inter-router links)", None)
    settings = Settings(**s)
    if settings.max_message_size > settings.max_in_flight_bytes:
        raise ctx.fail("settings.max_message_size", f"at most max_in_flight_bytes ({settings.max_in_flight_bytes})",
                       settings.max_message_size)
    if settings.max_connection_bytes and not settings.max_message_size <= settings.max_connection_bytes \
            <= settings.max_in_flight_bytes:
        raise ctx.fail("settings.max_connection_bytes", f"from max_message_size ({settings.max_message_size}) to "
                       f"max_in_flight_bytes ({settings.max_in_flight_bytes})", settings.max_connection_bytes)
    if settings.link_in_flight_bytes > settings.max_in_flight_bytes:
        raise ctx.fail("settings.link_in_flight_bytes", f"at most max_in_flight_bytes ({settings.max_in_flight_bytes})",
                       settings.link_in_flight_bytes)
    groups_raw = ctx.mapping(top.get("groups") or {}, "groups")
    groups = []
    for pattern, mode in groups_raw.items():
        if not isinstance(pattern, str) or not pattern:
            raise ctx.fail("groups", "subscription name patterns (such as orders-*)", pattern)
        try:
            groups.append((pattern, GroupMode(mode)))
        except ValueError:
            raise ctx.fail(f"groups.{pattern}", "shared or exclusive", mode) from None
    return Topology(path, routers, tuple(links), settings, Auth(users, allow_anon, router_secret=secret, plain_without_tls=plain_anyway,
                                                                 users_file=users_file, http=http_auth), tuple(groups),
                    tls, _policy(ctx, top["policy"]) if top.get("policy") is not None else None)


def _policy(ctx: _Ctx, raw: Any) -> Policy:
    p = ctx.mapping(raw, "policy")
    ctx.keys(p, "policy", {"users", "groups", "default", "hosts"})

    def rule(value: Any, key: str) -> Rule:
        r = ctx.mapping(value, key)
        ctx.keys(r, key, {"publish", "subscribe", "groups", *LIMITS})
        limits = tuple((k, ctx.positive_int(r[k], f"{key}.{k}")) for k in LIMITS if k in r)
        lists: dict[str, tuple[str, ...]] = {}
        for k in ("publish", "subscribe", "groups"):
            v = r.get(k, [])
            items = [v] if isinstance(v, str) else v
            if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
                raise ctx.fail(f"{key}.{k}", "a list of patterns", v)
            if k != "groups":
                for item in items:
                    wrong = policy_error(item)
                    if wrong:
                        raise ctx.fail(f"{key}.{k}", "topic patterns ('+' or '*' a level, '#' last)", wrong)
            lists[k] = tuple(items)
        return Rule(key, lists["publish"], lists["subscribe"], lists["groups"], limits)

    users = {str(n): rule(v, f"policy.users.{n}") for n, v in ctx.mapping(p.get("users") or {}, "policy.users").items()}
    groups = {str(n): rule(v, f"policy.groups.{n}")
              for n, v in ctx.mapping(p.get("groups") or {}, "policy.groups").items()}
    default = rule(p["default"], "policy.default") if p.get("default") is not None else None
    hosts: dict[str, tuple[tuple[str, int], ...]] = {}
    for n, v in ctx.mapping(p.get("hosts") or {}, "policy.hosts").items():
        key = f"policy.hosts.{n}"
        r = ctx.mapping(v, key)
        ctx.keys(r, key, set(LIMITS))
        hosts[str(n)] = tuple((k, ctx.positive_int(r[k], f"{key}.{k}")) for k in LIMITS if k in r)
    try:
        host_list = host_rules(hosts)
    except ValueError as e:
        raise ctx.fail("policy.hosts", "IP addresses or networks (10.0.0.0/8, ::1)", str(e)) from None
    return Policy(users, groups, default, host_list)


def _tls(ctx: _Ctx, base: Path, raw: Any) -> TlsSpec:
    """The ``tls`` section: file paths relative to the topology's directory. The files are
    loaded when a router starts (``router/security/tls.py``), where a bad one is named."""
    t = ctx.mapping(raw, "tls")
    ctx.keys(t, "tls", {"certificate", "private_key", "ca", "require_client_certificate", "min_version", "ciphers"})
    paths = {}
    for k in ("certificate", "private_key", "ca"):
        v = t.get(k)
        if not isinstance(v, str) or not v:
            raise ctx.fail(f"tls.{k}", "a PEM file's path", v)
        paths[k] = base / v
    require = t.get("require_client_certificate", False)
    if not isinstance(require, bool):
        raise ctx.fail("tls.require_client_certificate", "true or false", require)
    version = str(t.get("min_version", "1.2"))
    if version not in VERSIONS:
        raise ctx.fail("tls.min_version", " or ".join(repr(v) for v in VERSIONS), t.get("min_version"))
    ciphers = t.get("ciphers")
    if ciphers is not None and (not isinstance(ciphers, str) or not ciphers):
        raise ctx.fail("tls.ciphers", "an OpenSSL cipher list", ciphers)
    return TlsSpec(paths["certificate"], paths["private_key"], paths["ca"], require, version, ciphers)


def _load_users(ctx: _Ctx, base: Path, name: Any) -> dict[str, User]:
    if not isinstance(name, str):
        raise ctx.fail("auth.users_file", "a file name", name)
    try:
        return load_users(base / name)
    except UsersError as e:
        raise TopologyError(f"{ctx.path}: auth.users_file: {e}") from None
