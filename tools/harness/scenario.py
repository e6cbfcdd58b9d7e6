"""Failover scenarios: what runs, where, and which faults hit it when.

A scenario file (``topologies/scenarios/*.yaml``)::

    topology: line3.yaml          # from topologies/, or a path
    settings: {subscriber_grace: 20s}
    topic: orders
    messages: 3000                # per publisher
    rate: 1500                    # per publisher, messages/s (0: as fast as credit allows)
    publishers:  [{name: p1, router: A}]          # client: once (default), proton or mqtt
    subscribers: [{name: s1, router: C}, {name: s2, router: B, client: proton}]
    # a client may name its own topic (a subscriber: a topic or a pattern, records/names.py):
    #   {name: s3, router: A, topic: "orders/+"}   (the scenario's topic otherwise)
    # subscribers that name a group are its members: each message to one of them
    #   {name: w1, router: A, group: workers}   (exclusive: true for one active member)
    faults:                       # seconds after the publishers start
      - {at: 1.0, kill: A}        # SIGKILL a router
      - {at: 4.0, restart: A}
      - {at: 2.0, cut: [B, C], for: 1.5}   # drop an inter-router link, restore it after 1.5 s
      - {at: 2.0, slow: [A, B], for: 2.0, latency: 0.05}   # every chunk on the link 50 ms late
      - {at: 3.0, quiet: [A, B], for: 1.0}   # the link holds its bytes, connections stay open
      - {at: 3.0, freeze: B, for: 2.0}     # SIGSTOP a router, SIGCONT it 2 s later
      - {at: 1.5, kill_client: s1}
      - {at: 2.5, restart_client: s1}
      - {at: 1.0, stop: B}          # SIGTERM: it stops cleanly and leaves the network
      - {at: 1.0, link: [A, C]}     # a link added: every router's file gains it, then SIGHUP
      - {at: 3.0, unlink: [A, C]}   # and removed again
      - {at: 0.5, join: D, to: [A, C]}   # a router no file names joins through A and C

The transactional outbox (``docs/outbox.md``): a publisher of ``client: outbox`` is an
application writing its messages into an outbox database in transactions (some rolled
back); relays publish them. ``messages`` counts the committed rows::

    outbox:
      db: postgresql              # or sqlite (default); PostgreSQL: a server of the run's own
      partitions: 2               # tables of the one shard written to
      relays: [{name: r1, router: A}, {name: r2, router: B}]
      per_tx: 10                  # rows per transaction
      rollback_every: 5           # every fifth transaction rolls back
    publishers: [{name: app, router: A, client: outbox}]
    faults:
      - {at: 1.0, kill_relay: r1}        # SIGKILL
      - {at: 2.0, restart_relay: r1}
      - {at: 1.5, restart_db: true, for: 1.0}   # PostgreSQL stopped (fast), started 1 s later

Every client gets its own router first in its failover list, then the others.
Errors are one line naming the file and the field.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from once.records.names import publisher_name_error, subscriber_name_error

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGIES = ROOT / "topologies"
CLIENTS = ("once", "proton", "mqtt")  # mqtt: paho, MQTT 5.0, QoS 2, a persistent session
PUBLISHERS = (*CLIENTS, "outbox")  # outbox: an application writing to the outbox; relays publish
FAULTS = ("kill", "restart", "cut", "slow", "quiet", "freeze", "kill_client", "restart_client", "kill_relay",
          "restart_relay", "restart_db", "drain", "stop", "link", "unlink", "join")
# drain: an admin's once manage drain (it stops by itself); stop: SIGTERM (it leaves the
# network); link, unlink: a link added to or removed from the topology, by SIGHUP; join: a
# router in nobody's file joins (``once router --join``)
LINK_FAULTS = ("cut", "slow", "quiet")  # through the proxy on that inter-router link


class ScenarioError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class ClientSpec:
    name: str
    router: str
    client: str = "once"
    group: str = ""  # a subscriber that is a member of this consumer group
    exclusive: bool = False  # of an exclusive group
    topic: str = ""  # its own topic (a subscriber's may be a pattern); "": the scenario's


@dataclass(frozen=True, slots=True)
class OutboxSpec:
    db: str  # "sqlite" or "postgresql"
    partitions: int
    relays: tuple[tuple[str, str], ...]  # (name, its first router)
    per_tx: int = 10
    rollback_every: int = 5  # every n-th transaction rolls back (0: none)


@dataclass(frozen=True, slots=True)
class Fault:
    at: float
    kind: str  # one of FAULTS
    target: str | tuple[str, ...]  # a router, a link (two), a joiner and the routers it joins through
    duration: float = 0.0  # cut, slow, quiet: how long the link is so; freeze: how long the router is stopped
    latency: float = 0.0  # slow: seconds each chunk on the link is held

    def describe(self) -> str:
        if self.kind == "cut":
            a, b = self.target
            return f"cut link {a}-{b} for {self.duration:g}s"
        if self.kind == "slow":
            a, b = self.target
            return f"slow link {a}-{b} by {self.latency * 1000:g} ms for {self.duration:g}s"
        if self.kind == "quiet":
            a, b = self.target
            return f"quiet link {a}-{b} for {self.duration:g}s (bytes held, connections open)"
        if self.kind == "freeze":
            return f"freeze {self.target} for {self.duration:g}s (SIGSTOP, then SIGCONT)"
        if self.kind == "restart_db":
            return f"stop the database for {self.duration:g}s, then start it"
        if self.kind in ("link", "unlink"):
            a, b = self.target
            return f"{'add' if self.kind == 'link' else 'remove'} link {a}-{b} (SIGHUP)"
        if self.kind == "join":
            name, *to = self.target
            return f"router {name} joins through {', '.join(to)}"
        if self.kind == "stop":
            return f"stop {self.target} (SIGTERM: it leaves the network)"
        return f"{self.kind.replace('_', ' ')} {self.target}"


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    topology: Path
    topic: str
    messages: int
    rate: float
    publishers: tuple[ClientSpec, ...]
    subscribers: tuple[ClientSpec, ...]
    faults: tuple[Fault, ...]
    settings: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    outbox: OutboxSpec | None = None

    @property
    def groups(self) -> dict[str, list[str]]:
        """Consumer group -> the names of its members."""
        out: dict[str, list[str]] = {}
        for c in self.subscribers:
            if c.group:
                out.setdefault(c.group, []).append(c.name)
        return out

    def topic_of(self, c: ClientSpec) -> str:
        """The topic (or a subscriber's pattern) ``c`` publishes or subscribes to."""
        return c.topic or self.topic

    @property
    def routers(self) -> list[str]:
        return sorted(yaml.safe_load(self.topology.read_text())["routers"])

    def with_messages(self, n: int) -> Scenario:
        return replace(self, messages=n)


def load(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ScenarioError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None
    return parse(doc, path.stem, str(path), path.parent)


def parse(doc: Any, name: str, where: str, base: Path = TOPOLOGIES) -> Scenario:
    def fail(key: str, msg: str) -> ScenarioError:
        return ScenarioError(f"{where}: {key}: {msg}")

    if not isinstance(doc, dict):
        raise ScenarioError(f"{where}: expected a mapping at the top")
    known = {"description", "topology", "settings", "topic", "messages", "rate", "publishers", "subscribers", "faults",
             "outbox"}
    for k in doc:
        if k not in known:
            raise fail(str(k), f"unknown key (expected one of {', '.join(sorted(known))})")
    topo_name = doc.get("topology")
    if not isinstance(topo_name, str):
        raise fail("topology", "missing (a topology file, e.g. line3.yaml)")
    topology = next((p for p in (base / topo_name, TOPOLOGIES / topo_name, Path(topo_name)) if p.is_file()), None)
    if topology is None:
        raise fail("topology", f"no such file {topo_name!r}")
    routers = set(yaml.safe_load(topology.read_text())["routers"])
    links = {frozenset(map(str, link)) for link in yaml.safe_load(topology.read_text()).get("links") or []}
    messages = doc.get("messages", 1000)
    if not isinstance(messages, int) or messages <= 0:
        raise fail("messages", f"expected a positive integer, got {messages!r}")
    rate = doc.get("rate", 1000)
    if not isinstance(rate, (int, float)) or rate < 0:
        raise fail("rate", f"expected messages per second >= 0, got {rate!r}")

    def clients(key: str, allowed: tuple[str, ...]) -> tuple[ClientSpec, ...]:
        items = doc.get(key) or []
        if not isinstance(items, list) or not items:
            raise fail(key, "expected a non-empty list of {name, router[, client]}")
        out = []
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str) or item.get("router") not in routers:
                raise fail(f"{key}[{i}]", f"expected {{name: ..., router: one of {sorted(routers)}}}, got {item!r}")
            client = item.get("client", "once")
            if client not in allowed:
                raise fail(f"{key}[{i}].client", f"expected one of {', '.join(allowed)}, got {client!r}")
            group = item.get("group", "")
            if not isinstance(group, str) or "|" in group or (group and key != "subscribers"):
                raise fail(f"{key}[{i}].group", f"expected a subscriber's group name without '|', got {group!r}")
            exclusive = item.get("exclusive", False)
            if not isinstance(exclusive, bool) or (exclusive and not group):
                raise fail(f"{key}[{i}].exclusive", "true or false, for a member of a group")
            topic = item.get("topic", "")
            wrong = (publisher_name_error(topic) if key == "publishers" else subscriber_name_error(topic)) \
                if isinstance(topic, str) else "expected a string"
            if wrong:
                raise fail(f"{key}[{i}].topic", wrong)
            out.append(ClientSpec(item["name"], item["router"], client, group, exclusive, topic))
        return tuple(out)

    publishers = clients("publishers", PUBLISHERS)
    subscribers = clients("subscribers", CLIENTS)
    outbox = _outbox(doc.get("outbox"), routers, fail)
    apps = [c.name for c in publishers if c.client == "outbox"]
    if (outbox is None) != (not apps) or len(apps) > 1:
        raise fail("outbox", "an outbox section goes with one publisher of client: outbox")
    relays = [name for name, _ in outbox.relays] if outbox else []
    names = [c.name for c in publishers + subscribers] + relays
    if len(set(names)) != len(names):
        raise fail("subscribers", "client names must be unique")
    faults = []
    joiners: set[str] = set()  # (routers a join fault starts: later faults may name them)
    for i, item in enumerate(doc.get("faults") or []):
        key = f"faults[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("at"), (int, float)):
            raise fail(key, f"expected {{at: SECONDS, <fault>: ...}}, got {item!r}")
        kinds = [k for k in FAULTS if k in item]
        if len(kinds) != 1:
            raise fail(key, f"name exactly one of {', '.join(FAULTS)}")
        kind = kinds[0]
        target = item[kind]
        duration = latency = 0.0
        if kind in ("kill", "restart", "freeze", "drain", "stop"):
            if target not in routers and target not in joiners:
                raise fail(f"{key}.{kind}", f"no router {target!r}")
            if kind == "freeze":
                duration = float(item.get("for", 1.0))
        elif kind in LINK_FAULTS:
            if not isinstance(target, list) or frozenset(map(str, target)) not in links:
                raise fail(f"{key}.{kind}", f"expected a link of the topology [A, B], got {target!r}")
            target = tuple(sorted(map(str, target)))
            duration = float(item.get("for", 1.0))
            if kind == "slow":
                latency = item.get("latency", 0.05)
                if not isinstance(latency, (int, float)) or not 0 < latency <= 5:
                    raise fail(f"{key}.latency", f"expected seconds in (0, 5], got {latency!r}")
        elif kind in ("link", "unlink"):
            if not isinstance(target, list) or len(set(map(str, target))) != 2 or not set(map(str, target)) <= routers:
                raise fail(f"{key}.{kind}", f"expected two routers of the topology [A, B], got {target!r}")
            target = tuple(sorted(map(str, target)))
        elif kind == "join":
            to = item.get("to")
            if not isinstance(target, str) or not target or target in routers or target in joiners:
                raise fail(f"{key}.join", f"expected the name of a router no file names, got {target!r}")
            if not isinstance(to, list) or not to or not set(map(str, to)) <= routers:
                raise fail(f"{key}.to", f"expected routers of the topology to join through, got {to!r}")
            joiners.add(target)
            target = (target, *map(str, to))
        elif kind in ("kill_relay", "restart_relay"):
            if target not in relays:
                raise fail(f"{key}.{kind}", f"no relay {target!r} (the outbox section names them)")
        elif kind == "restart_db":
            if outbox is None or outbox.db != "postgresql":
                raise fail(f"{key}.{kind}", "a database restart needs outbox.db: postgresql")
            target, duration = "db", float(item.get("for", 1.0))
        elif target not in [c.name for c in subscribers]:
            raise fail(f"{key}.{kind}", f"no subscriber {target!r}")
        faults.append(Fault(float(item["at"]), kind, target, duration, float(latency)))
    settings = doc.get("settings") or {}
    if not isinstance(settings, dict):
        raise fail("settings", "expected a mapping")
    return Scenario(name, topology, str(doc.get("topic", "harness")), messages, float(rate), publishers, subscribers,
                    tuple(sorted(faults, key=lambda f: f.at)), settings, str(doc.get("description", "")), outbox)


def _outbox(doc: Any, routers: set[str], fail: Any) -> OutboxSpec | None:
    if doc is None:
        return None
    if not isinstance(doc, dict):
        raise fail("outbox", "expected a mapping {db, partitions, relays, per_tx, rollback_every}")
    unknown = set(doc) - {"db", "partitions", "relays", "per_tx", "rollback_every"}
    if unknown:
        raise fail(f"outbox.{sorted(unknown)[0]}", "unknown key (expected db, partitions, relays, per_tx, rollback_every)")
    db = doc.get("db", "sqlite")
    if db not in ("sqlite", "postgresql"):
        raise fail("outbox.db", f"expected sqlite or postgresql, got {db!r}")
    numbers = {}
    for key, default, least in (("partitions", 2, 1), ("per_tx", 10, 1), ("rollback_every", 5, 0)):
        value = doc.get(key, default)
        if not isinstance(value, int) or value < least:
            raise fail(f"outbox.{key}", f"expected an integer >= {least}, got {value!r}")
        numbers[key] = value
    relays = doc.get("relays")
    if not isinstance(relays, list) or not relays or not all(
            isinstance(r, dict) and isinstance(r.get("name"), str) and r.get("router") in routers for r in relays):
        raise fail("outbox.relays", f"expected a non-empty list of {{name, router: one of {sorted(routers)}}}")
    return OutboxSpec(db, numbers["partitions"], tuple((r["name"], r["router"]) for r in relays), numbers["per_tx"],
                      numbers["rollback_every"])


def randomized(seed: int, messages: int = 10000, topology: str = "ring5.yaml", rate: float = 2000,
               groups: bool = False, freezes: bool = False, link_faults: bool = False,
               clients: tuple[str, ...] = ("once",)) -> Scenario:
    """A random fault schedule: each fault is healed (router restarted, link restored,
    client restarted) a little later, so every run can finish. ``groups``: two more
    subscribers, members of one consumer group, on routers drawn apart from the rest (a
    seed's schedule is the same with or without them, but for faults that hit them).
    ``freezes``: routers stopped (SIGSTOP) for 0.5-6 s and continued, some past
    ``router_dead_after``, drawn apart too (the rest of the schedule stays the seed's).
    ``link_faults``: inter-router links slowed (5-80 ms a chunk, 1-5 s) or gone quiet
    (bytes held, connections open, 0.5-4 s), drawn apart as well. ``clients``: the kinds
    each client is drawn from (``once``, ``proton``, ``mqtt``), drawn apart too: standard
    AMQP clients and MQTT QoS 2 ones judged at the wire beside ours."""
    unknown = sorted(set(clients) - set(CLIENTS))
    if unknown or not clients:
        raise ScenarioError(f"--clients: expected some of {', '.join(CLIENTS)}, got {', '.join(unknown) or 'none'}")
    rng = random.Random(seed)
    path = next((p for p in (TOPOLOGIES / topology, Path(topology)) if p.is_file()), None)
    if path is None:
        raise ScenarioError(f"--topology: no such file {topology!r} (a file in topologies/, or a path)")
    try:
        doc = yaml.safe_load(path.read_text())
        routers = sorted(doc["routers"])
        links = [tuple(sorted(map(str, link))) for link in doc.get("links") or []]
    except (yaml.YAMLError, KeyError, TypeError, AttributeError) as e:
        raise ScenarioError(f"{path}: not a topology ({type(e).__name__}: {e})") from None
    if len(routers) < 2 or not links:
        raise ScenarioError(f"{path}: a random fault schedule needs at least two linked routers")
    publishers = (ClientSpec("p1", rng.choice(routers)),)
    subscribers = (ClientSpec("s1", rng.choice(routers)), ClientSpec("s2", rng.choice(routers)))
    if groups:
        own = random.Random(seed * 7919 + 1)
        subscribers += (ClientSpec("g1", own.choice(routers), group="workers"),
                        ClientSpec("g2", own.choice(routers), group="workers"))
    if clients != ("once",):
        kinds = random.Random(seed * 2750159 + 11)
        publishers = tuple(replace(c, client=kinds.choice(clients)) for c in publishers)
        subscribers = tuple(replace(c, client=kinds.choice(clients)) for c in subscribers)
    duration = messages / rate
    faults: list[Fault] = []
    t = rng.uniform(0.3, 1.0)
    while t < duration * 0.8:
        choice = rng.choice(("kill", "kill", "cut", "client"))
        if choice == "kill":
            victim = rng.choice(routers)
            faults += [Fault(t, "kill", victim), Fault(t + rng.uniform(1.0, 3.0), "restart", victim)]
        elif choice == "cut":
            faults.append(Fault(t, "cut", rng.choice(links), rng.uniform(0.5, 2.0)))
        else:
            victim = rng.choice(subscribers).name
            faults += [Fault(t, "kill_client", victim), Fault(t + rng.uniform(0.2, 1.5), "restart_client", victim)]
        t += rng.uniform(1.5, 4.0)
    if freezes:
        cold = random.Random(seed * 104729 + 3)
        for _ in range(cold.randint(1, 3)):
            faults.append(Fault(cold.uniform(0.3, max(0.5, duration * 0.8)), "freeze", cold.choice(routers),
                                cold.uniform(0.5, 6.0)))
    if link_faults:
        flaky = random.Random(seed * 15485863 + 7)
        for _ in range(flaky.randint(1, 3)):
            at, link = flaky.uniform(0.3, max(0.5, duration * 0.8)), flaky.choice(links)
            if flaky.random() < 0.5:
                faults.append(Fault(at, "slow", link, flaky.uniform(1.0, 5.0), flaky.uniform(0.005, 0.08)))
            else:
                faults.append(Fault(at, "quiet", link, flaky.uniform(0.5, 4.0)))
    return Scenario(f"random-{seed}", path, "harness", messages, rate, publishers, subscribers,
                    tuple(sorted(faults, key=lambda f: f.at)), {"subscriber_grace": "60s", "publisher_grace": "60s"},
                    f"random fault schedule, seed {seed}")
