"""The in-process network: real ``Core`` and ``Network`` objects per router (the same
classes the router process runs), in-memory connections (``links.py``), clients modelled
on the exactly-once library (``clients.py``), one virtual clock and one seeded scheduler
(``clock.py``), and faults: kill a router (its state is gone) and restart it, cut a link,
slow a link down, drop a client's connection, crash a subscriber process; and the network
changing while it runs: a router stopped cleanly (it leaves, and comes back), a link added
and removed again (SIGHUP), a router that joins and later leaves.

``check()`` judges a finished run by the invariants of DESIGN.md: nothing lost, nothing
processed twice, per-publisher order at every subscriber, one outcome per message, and
no state left behind once everything is settled.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

from once.records.names import matches
from once.router.config import LinkSpec, Settings
from once.router.core import Core
from once.router.core.lifecycle import LinkLifecycle
from once.router.network import Network
from once.router.substore import MemoryStore

from .changes import Changes
from .clients import Publisher, Subscriber
from .clock import Loop, Timer
from .links import Pipe, RouterEnd, Up

SETTINGS = Settings(max_in_flight=400, link_credit=40, subscriber_grace=10.0, publisher_grace=10.0,
                    router_dead_after=3.0, initial_credit=8, credit_idle=2.0)


class _Topology:
    def __init__(self, links: tuple[LinkSpec, ...]) -> None:
        self.links = links
        self.policy = None  # (the simulated network authorizes everyone: ``router/security/policy.py``)
        self.routers: dict[str, Any] = {}  # (no router joins by an address: every link is in ``links``)

    def joins_to(self, me: str) -> set[str]:
        return set()


class SimRouter:
    """One router's life (a restart is a new ``SimRouter``): what ``Network`` needs of it."""

    def __init__(self, net: SimNet, name: str) -> None:
        self.net = net
        self.id = name
        self.alive = True
        self.draining = False  # stopping cleanly: it takes no new client (``SimNet.stop``)
        self.neighbour_ids: set[str] = set()  # (as the router's: those a link was made to at runtime join it)
        self.settings = net.settings
        self.topology = net.topology
        loop = net.loop
        # its subscription journal: the simulated disk, which outlives a restart
        self.subscription_store = net.disks.setdefault(name, MemoryStore())
        self.network = Network(self, base=self.wall())  # type: ignore[arg-type]
        self.core = Core(name, self.settings, clock=loop.time, wall=self.wall, routes=self.network,
                         unsynced=self.network.has_neighbours)
        self.lifecycle = LinkLifecycle(self.core, self.network)
        self.network.restore()
        self.ends: dict[str, RouterEnd] = {}
        self._housekeeping = loop.call_later(0.25, self.housekeeping)

    def wall(self) -> int:
        """This router's wall clock, microseconds: the network's, plus its skew (a fault)."""
        return self.net.loop.wall() + int(self.net.skew.get(self.id, 0.0) * 1e6)

    def call_later(self, delay: float, fn: Any, *args: Any) -> Timer:
        return self.net.loop.call_later(delay, self._run, fn, args)

    def call_soon(self, fn: Any, *args: Any) -> Timer:
        return self.net.loop.call_soon(self._run, fn, args)

    def _run(self, fn: Any, args: tuple[Any, ...]) -> None:
        if not self.alive:
            return
        paused = self.net.paused.get(self.id, 0.0)
        if paused > self.net.loop.now:  # a paused process runs nothing: its timers fire late
            self.net.loop.at(paused, self._run, fn, args)
            return
        fn(*args)
        self.after_batch()

    def flush(self) -> None:
        """(As the router's: the end of a batch.)"""
        self.after_batch()

    def after_batch(self) -> None:
        self.core.after_batch()

    def housekeeping(self) -> None:
        if not self.alive:
            return
        paused = self.net.paused.get(self.id, 0.0)
        if paused > self.net.loop.now:
            self._housekeeping = self.net.loop.at(paused, self.housekeeping)
            return
        core = self.core
        now = core.clock()
        core.expire(now)
        core.reclaim_idle(now)
        for sub in core.ended_elsewhere():
            self.network.end(sub)
        for sub in core.expire_suspended(now):
            if sub.gap:
                self.net.gaps.append((self.id, sub.container_id))
                self.net.gap_at.setdefault(sub.container_id, self.net.loop.now)
            else:
                self.net.expired.append((self.id, sub.container_id))
            self.network.end(sub, expired=True)
        self.network.roll_calls.clear_gaps()
        forced = self.network.cold_start.forced_clock
        if forced and forced not in self.net.forced_at:
            self.net.forced_at.append(forced)
        self.after_batch()
        self._housekeeping = self.net.loop.call_later(0.25, self.housekeeping)

    def die(self) -> None:
        self.alive = False
        self._housekeeping.cancel()


@dataclass
class Fault:
    at: float
    kind: str  # kill | cut | slow | drop | crash
    target: tuple[str, ...]
    duration: float = 0.0
    extra: float = 0.0  # slow: added latency

    def __str__(self) -> str:
        return f"{self.kind} {'-'.join(self.target)} at {self.at:.3f} for {self.duration:.3f}"


@dataclass
class Verdict:
    violations: list[str] = field(default_factory=list)
    published: int = 0
    events: int = 0
    end: float = 0.0
    told_expired: int = 0  # owed messages a subscriber missed and was told of (a subscription gap)

    @property
    def ok(self) -> bool:
        return not self.violations


class SimNet:
    def __init__(self, seed: int, links: list[tuple[str, str]], settings: Settings = SETTINGS) -> None:
        logging.getLogger("once").setLevel(logging.ERROR)
        self.seed = seed
        self.releases = 0.0  # how often a group member releases a message (``schedules.py --releases``)
        self.presettled = 0.0  # how often a publisher sends a message pre-settled (``--presettled``)
        self.loop = Loop(seed)
        self.settings = settings
        self.topology = _Topology(tuple(LinkSpec(a, b) for a, b in links))
        self.names = sorted({n for pair in links for n in pair})
        self.routers: dict[str, SimRouter] = {}
        self.disks: dict[str, MemoryStore] = {}  # each router's subscription journal
        self.conns: dict[frozenset[str], tuple[RouterEnd, RouterEnd]] = {}
        self.cut: dict[frozenset[str], int] = {}  # links held down by a fault
        self.slow: dict[frozenset[str], float] = {}
        # The harder faults (``schedules.py --hard``): frames held up on one direction of a
        # link until then (a silent partition: TCP holds them, nothing is lost until the
        # connection is declared dead); routers paused until then; routers' clock skews
        self.stalled: dict[tuple[str, str], float] = {}
        self.paused: dict[str, float] = {}
        self.skew: dict[str, float] = {}
        self.backoff: dict[frozenset[str], float] = {}
        self.dialling: set[frozenset[str]] = set()
        self.publishers: list[Publisher] = []
        self.subscribers: list[Subscriber] = []
        self.expired: list[tuple[str, str]] = []
        self.gaps: list[tuple[str, str]] = []  # (router, container) given up as a gap: told where it lives
        self.gap_at: dict[str, float] = {}  # container -> when a router first gave it up as a gap
        self.forced_at: list[float] = []  # when a restarted router took publishes past partition_grace
        self.log: list[str] = []
        self.tombstones_checked = False  # set once the run has waited them out
        self.group_topic = "t"  # consumer group "g"'s topic
        self.changes = Changes(self)

    # ----------------------------------------------------------- timing

    def latency(self, pair: frozenset[str], src: str = "", dst: str = "") -> Any:
        rng = self.loop.rng
        return lambda: rng.uniform(0.0002, 0.002) + self.slow.get(pair, 0.0) + self.stall(src, dst)

    def stall(self, src: str, dst: str) -> float:
        """How long a frame from ``src`` to ``dst`` is held up now (a silent partition of the
        link, or either end paused), beyond its latency."""
        now = self.loop.now
        until = max(self.stalled.get((src, dst), 0.0), self.paused.get(src, 0.0), self.paused.get(dst, 0.0))
        return until - now if until > now else 0.0

    def client_latency(self, router: str = "") -> float:
        return self.loop.rng.uniform(0.0001, 0.001) + (self.stall(router, router) if router else 0.0)

    def detect_delay(self) -> float:
        return self.loop.rng.uniform(0.001, 0.08)

    def edge_detect_delay(self) -> float:
        """How long a router takes to notice a client's connection is gone."""
        return self.detect_delay()

    def reconnect_delay(self) -> float:
        return self.loop.rng.uniform(0.02, 0.3)

    def process_delay(self) -> float:
        return self.loop.rng.uniform(0.0, 0.003)

    # ----------------------------------------------------------- routers

    def start(self) -> None:
        for name in self.names:
            self.routers[name] = SimRouter(self, name)
        for link in self.topology.links:
            self._dial(frozenset((link.a, link.b)))

    def _dial(self, pair: frozenset[str]) -> None:
        """The lower id dials, and keeps redialling with backoff while the link is down."""
        if pair in self.conns or pair in self.dialling:
            return
        self.dialling.add(pair)
        self.loop.call_later(self.backoff.get(pair, 0.0) + self.loop.rng.uniform(0.001, 0.005), self._connect, pair)

    def _connect(self, pair: frozenset[str]) -> None:
        self.dialling.discard(pair)
        a, b = sorted(pair)
        ra, rb = self.routers.get(a), self.routers.get(b)
        if ra is None or rb is None or not ra.alive:
            return  # a restart dials again
        if not rb.alive or pair in self.cut:
            self.backoff[pair] = min(max(self.backoff.get(pair, 0.0) * 2, 0.05), 2.0)
            self._dial(pair)
            return
        self.backoff[pair] = 0.05
        ea, eb = RouterEnd(ra, b), RouterEnd(rb, a)
        ea.out = Pipe(self.loop, eb.receive, self.latency(pair, a, b))
        eb.out = Pipe(self.loop, ea.receive, self.latency(pair, b, a))
        self.conns[pair] = (ea, eb)
        ea.send(Up())
        eb.send(Up())

    def cut_connection(self, end: RouterEnd) -> None:
        """The connection ``end`` is on breaks: what is on the wire is lost; each side
        notices after its own delay (a closed socket, or a dead-link timeout)."""
        pair = frozenset((end.router.id, end.peer))
        conn = self.conns.get(pair)
        if conn is None or end not in conn:
            return
        del self.conns[pair]
        for e in conn:
            e.closed = True
            if e.out is not None:
                e.out.closed = True
            self.loop.call_later(self.detect_delay(), self._noticed, e)

    def _noticed(self, end: RouterEnd) -> None:
        router = end.router
        if router.alive and end.up:
            router.network.link_down(end.peer, end)
            router.after_batch()
        if router.alive and router is self.routers.get(router.id) and self.linked(router.id, end.peer):
            self._dial(frozenset((router.id, end.peer)))

    def linked(self, a: str, b: str) -> bool:
        """Whether the topology (as it is now: links come and go) links ``a`` and ``b``."""
        return any({a, b} == {link.a, link.b} for link in self.topology.links)

    def clients_at(self, router: SimRouter) -> list[Publisher | Subscriber]:
        return [c for c in self.publishers + self.subscribers if c.conn is not None and c.conn.router is router]

    def kill(self, name: str) -> None:
        router = self.routers[name]
        router.die()
        for pair, conn in list(self.conns.items()):
            if name in pair:
                self.cut_connection(conn[0])
        for client in self.publishers + self.subscribers:
            if client.conn is not None and client.conn.router is router:
                client.conn.cut()

    def restart(self, name: str) -> None:
        self.routers[name] = SimRouter(self, name)
        for link in self.topology.links:
            if name in (link.a, link.b):
                pair = frozenset((link.a, link.b))
                self.backoff[pair] = 0.0
                self._dial(pair)

    # ------------------------------------------------------------ faults

    def schedule(self, fault: Fault) -> None:
        self.loop.at(fault.at, self._fault, fault)

    def _fault(self, f: Fault) -> None:
        self.log.append(f"{self.loop.now:.3f} {f}")
        loop = self.loop
        if f.kind == "kill":
            if not self.routers[f.target[0]].alive:
                return  # dead already: the earlier kill restarts it
            self.kill(f.target[0])
            loop.call_later(f.duration, self.restart, f.target[0])
        elif f.kind == "cut":
            pair = frozenset(f.target)
            self.cut[pair] = self.cut.get(pair, 0) + 1
            conn = self.conns.get(pair)
            if conn is not None:
                self.cut_connection(conn[0])
            loop.call_later(f.duration, self._uncut, pair)
        elif f.kind == "slow":
            pair = frozenset(f.target)
            self.slow[pair] = self.slow.get(pair, 0.0) + f.extra
            loop.call_later(f.duration, self._unslow, pair, f.extra)
        elif f.kind == "drop":
            client = self.client(f.target[0])
            if client.conn is not None:
                client.conn.cut()
        elif f.kind == "join":  # a new member joins the group: (name, its routers in order...)
            self.add_subscriber(f.target[0], self.group_topic, list(f.target[1:]), group="g")
        elif f.kind == "leave":  # a group member closes its link for good
            client = self.client(f.target[0])
            if isinstance(client, Subscriber):
                client.leave()
        elif f.kind == "crash":  # a subscriber's or a publisher's process dies, and comes back
            client = self.client(f.target[0])
            if not client.alive:
                return
            client.crash()
            loop.call_later(f.duration, client.restart)
        elif f.kind in ("silent", "oneway"):
            a, b = f.target
            until = loop.now + f.duration
            ways = [(a, b), (b, a)] if f.kind == "silent" else [(a, b)]
            for way in ways:
                self.stalled[way] = max(self.stalled.get(way, 0.0), until)
            self._declare_dead_if_long(frozenset((a, b)), f.duration, until)
        elif f.kind == "pause":
            name = f.target[0]
            until = loop.now + f.duration
            self.paused[name] = max(self.paused.get(name, 0.0), until)
            for link in self.topology.links:
                if name in (link.a, link.b):
                    self._declare_dead_if_long(frozenset((link.a, link.b)), f.duration, until)
            if f.duration >= self.settings.router_dead_after:  # its clients give up on it too
                router = self.routers[name]
                for client in self.publishers + self.subscribers:
                    if client.conn is not None and client.conn.router is router:
                        loop.call_later(self.settings.router_dead_after, self._client_gives_up, client, client.conn)
        elif f.kind in ("stop", "relink", "newrouter"):  # the network changing while it runs
            self.changes.apply(f)
        elif f.kind == "skew":  # the router's wall clock steps by ``extra`` seconds, and back
            name = f.target[0]
            self.skew[name] = self.skew.get(name, 0.0) + f.extra
            loop.call_later(f.duration, self._unskew, name, f.extra)

    def _declare_dead_if_long(self, pair: frozenset[str], duration: float, until: float) -> None:
        """A link that hears nothing for ``router_dead_after`` is declared dead by its ends
        (their idle timeout): what is on it is lost, and it stays down until the partition
        heals. A shorter silence only delays (TCP keeps the frames)."""
        dead_after = self.settings.router_dead_after
        if duration < dead_after:
            return
        loop = self.loop

        def dead() -> None:
            self.cut[pair] = self.cut.get(pair, 0) + 1
            conn = self.conns.get(pair)
            if conn is not None:
                self.cut_connection(conn[0])
            loop.at(max(until, loop.now), self._uncut, pair)

        loop.call_later(dead_after + loop.rng.uniform(0.0, 0.05), dead)

    def _client_gives_up(self, client: Publisher | Subscriber, conn: Any) -> None:
        if client.conn is conn and conn is not None:
            conn.cut()

    def _unskew(self, name: str, extra: float) -> None:
        self.skew[name] -= extra

    def _uncut(self, pair: frozenset[str]) -> None:
        self.cut[pair] -= 1
        if not self.cut[pair]:
            del self.cut[pair]

    def _unslow(self, pair: frozenset[str], extra: float) -> None:
        self.slow[pair] -= extra

    # ----------------------------------------------------------- clients

    def client(self, name: str) -> Publisher | Subscriber:
        return next(c for c in self.publishers + self.subscribers if c.name == name)

    def add_publisher(self, name: str, topic: str, routers: list[str]) -> Publisher:
        pub = Publisher(self, name, topic, routers)
        self.publishers.append(pub)
        pub.connect()
        return pub

    def add_subscriber(self, name: str, topic: str, routers: list[str], group: str = "") -> Subscriber:
        sub = Subscriber(self, name, topic, routers, group=group)
        self.subscribers.append(sub)
        sub.connect()
        return sub

    def publish_at(self, pub: Publisher, times: list[float]) -> None:
        for t in times:
            self.loop.at(t, pub.publish)

    # ------------------------------------------------------------- runs

    def run_until(self, t: float) -> None:
        self.loop.run_until(t)

    def settled(self) -> bool:
        """Every message answered, processed by every subscriber, and no state left."""
        if any(p.unsettled or p.to_send for p in self.publishers):
            return False
        if any(not self.owed(s) <= s.accepted for s in self.subscribers if not s.group):
            return False
        groups: dict[str, tuple[str, set[bytes], list[Subscriber]]] = {}
        for s in self.subscribers:
            if s.group:
                unit = groups.setdefault(s.group, (s.topic, set(), []))
                unit[1].update(s.accepted)
                unit[2].append(s)
        if any(not self.owed(*members) <= done for topic, done, members in groups.values()):
            return False
        return all(not r.alive or not len(r.core.records) for r in self.routers.values())

    def wanted(self, name: str) -> set[bytes]:
        """The messages a subscriber under ``name`` (a topic or a pattern) is owed (not the
        pre-settled ones: at most once)."""
        return {p.gid(t) for p in self.publishers if matches(name, p.topic) for t in range(p.next)
                if t not in p.presettled}

    def owed(self, *unit: Subscriber) -> set[bytes]:
        """What a subscriber (or a consumer group: its members) is owed: what its name
        reaches, but, once told of a subscription gap, not what its publishers sent a router
        from the gap (when a router first gave it up) until its link was attached again:
        its roots may have planned those without it (a group: without the members they
        knew, all given up)."""
        s = unit[0]
        told = [m for m in unit if m.gaps]
        if not told:
            return self.wanted(s.topic)
        if not all(m.fresh_at for m in told):
            return {b""}  # (not attached again yet: nothing is settled for it)
        # (a router that took publishes without a complete view tells those it did not know)
        since = min(*(self.gap_at.get(m.container_id, m.gaps[0]) for m in told), *self.forced_at,
                    *(m.gaps[0] for m in told))
        fresh = max(m.fresh_at for m in told)
        return {p.gid(t) for p in self.publishers if matches(s.topic, p.topic) for t in range(p.next)
                if t not in p.presettled and not any(since <= at < fresh for at in p.sent_at.get(t, ()))}

    def run_to_end(self, limit: float, step: float = 0.25) -> bool:
        """Run until ``settled()`` (checked every ``step`` of virtual time) or ``limit``."""
        while self.loop.now < limit:
            self.loop.run_until(self.loop.now + step)
            if self.settled():
                return True
        return False

    def awaiting_roots(self) -> bool:
        """Whether a live router keeps a tombstone until a root settles it."""
        return any(r.alive and r.core.copies.dest.awaiting for r in self.routers.values())

    def check(self) -> Verdict:
        v = Verdict(published=sum(p.next for p in self.publishers), events=self.loop.events, end=self.loop.now)
        out = v.violations
        for p in self.publishers:
            out += p.conflicts
            if p.unsettled:
                out.append(f"publisher {p.name}: {len(p.unsettled)} messages never answered "
                           f"(first {min(p.unsettled)})")
            bad = [t for t, o in p.outcomes.items() if o.kind.value != "accepted"]
            if bad:
                out.append(f"publisher {p.name}: {len(bad)} not accepted (first {min(bad)}: {p.outcomes[min(bad)]})")
        tags = {p.gid(t): (p.name, t) for p in self.publishers for t in range(p.next) if t not in p.presettled}
        # (a pre-settled message's gid is its root's: known by its payload where it arrived;
        # at most once, it is owed to nobody, and never twice)
        presettled = {(p.name, t) for p in self.publishers for t in p.presettled}
        for s in self.subscribers:
            for gid, payload in s.payloads.items():
                if gid not in tags:
                    pub_name, _, number = payload.decode().partition(":")
                    if (pub_name, int(number or -1)) in presettled:
                        tags[gid] = (pub_name, int(number))
        topic_of = {p.name: p.topic for p in self.publishers}
        # A consumer group is one subscriber: its members' effects together, each gid once;
        # order per member (a message passed on from another member comes late).
        units: dict[str, list[Subscriber]] = {}
        for s in self.subscribers:
            units.setdefault(f"group {s.group}" if s.group else s.name, []).append(s)
        for unit, members in units.items():
            seen: set[bytes] = set()
            dup = reordered = phantom = 0
            first: dict[str, Any] = {}
            grouped = bool(members[0].group)
            # a group's message may come late to a member when it came marked (passed on
            # from a member that left or never had it, or sent again), when it was handed
            # to another member first, or when this member released it
            wire = judge_wire(members)
            passed = wire.passed if grouped else {}
            # what its name reaches (every message, on the one topic a schedule without patterns has)
            owed = {g for g, (name, t) in tags.items()
                    if matches(members[0].topic, topic_of[name]) and (name, t) not in presettled}
            got: set[Any] = set()  # (each message once, by what it is: a pre-settled one has a gid per root)
            for m in members:
                last: dict[str, int] = {}
                firsts: set[bytes] = set()
                for gid in m.effects:
                    # (in a group, a message passed on from another member comes late, marked)
                    late = grouped and (gid in m.redelivered or m.name in passed.get(gid, ()) or gid in m.released)
                    if gid in tags and gid not in firsts and not late:
                        firsts.add(gid)
                        name, tag = tags[gid]
                        if tag < last.get(name, -1):
                            reordered += 1
                            first.setdefault("reordered", (m.name, name, tag, last[name]))
                        last[name] = max(tag, last.get(name, -1))
            effects = [g for m in members for g in m.effects] if len(members) > 1 else members[0].effects
            for gid in effects:
                what = tags.get(gid, gid)
                if gid in seen or what in got:
                    dup += 1
                    first.setdefault("duplicated", tags.get(gid))
                    continue
                seen.add(gid)
                got.add(what)
                if gid not in owed and not (gid in tags and tags[gid] in presettled
                                            and matches(members[0].topic, topic_of[tags[gid][0]])):
                    phantom += 1
            unmarked = wire.unmarked
            if unmarked:
                out.append(f"subscriber {unit}: handed again unmarked {len(unmarked)} "
                           f"(first {tags.get(unmarked[0], unmarked[0])})")
            again = wire.presettled_again
            if again:
                out.append(f"subscriber {unit}: pre-settled handed again {len(again)} "
                           f"(first {tags.get(again[0], again[0])})")
            missing = owed - seen
            # Told a subscription gap (its link ended with ``once:subscription-gap``): what
            # was sent while it was given up may be missing, told (``owed``)
            told = missing - self.owed(*members) if any(m.gaps for m in members) else set()
            missing -= told
            v.told_expired += len(told)
            lost = sorted(tags[g] for g in missing)
            if lost:
                out.append(f"subscriber {unit}: lost {len(lost)} (first {lost[0]})")
            for kind, n in (("duplicated", dup), ("reordered", reordered), ("phantom", phantom)):
                if n:
                    out.append(f"subscriber {unit}: {kind} {n} (first {first.get(kind)})")
        for r in self.routers.values():
            if not r.alive:
                continue
            c = r.core
            left = {"records": len(c.records), "held": len(c.held), "placeholders": len(c.placeholders)}
            inq = c.copies.inquiry  # (questions about group members: asked, asked early, held behind)
            left["questions"] = len(inq.asking) + len(inq.early) + len(inq.held)
            if self.tombstones_checked:  # (kept for ``publisher_grace``, then gone)
                left["tombstones"] = len(c.copies.dest.tombstones)
                # (a gap is cleared once every router heard of it: ``RollCalls.clear_gaps``)
                left["gaps"] = sum(len(o.gaps) for o in r.network.plane.table.origins.values())
            held = {k: n for k, n in left.items() if n}
            if held:
                out.append(f"router {r.id}: state left behind {held}")
        # (a member that left may have lost its detach with its connection: its router then
        # keeps it for its grace, as it must, and expires it)
        gone = {s.container_id for s in self.subscribers if s.left}
        expired = [e for e in self.expired if e[1] not in gone]
        if expired:
            out.append(f"subscriptions expired: {expired}")
        # a gap is a give-up its subscription must hear of: where it is attached, or when it
        # attaches again as the same subscription (a subscriber that left needs no telling)
        heard = {s.container_id for s in self.subscribers if s.gaps}
        untold = [e for e in self.gaps if e[1] not in gone and e[1] not in heard]
        if untold:
            out.append(f"subscription gaps never told: {untold}")
        return v


@dataclass
class Wire:
    """What the wire handed one unit (a subscriber, or a group's members together), judged
    as the least capable client takes it, frame by frame in the order they were handed."""

    unmarked: list[bytes] = field(default_factory=list)  # handed again without the mark of a possible repeat
    presettled_again: list[bytes] = field(default_factory=list)  # handed again pre-settled, marked or not
    passed: dict[bytes, set[str]] = field(default_factory=dict)  # gid -> members handed it after another


def judge_wire(members: list[Subscriber]) -> Wire:
    """A standard client processes every frame not marked as a possible repeat
    (delivery-count 0: first-acquirer true): each gid handed again unmarked is a message
    processed twice, whatever our client library filters. A pre-settled repeat breaks at
    most once whatever its mark (a client cannot settle what came settled)."""
    frames = sorted(((f[0], f[1], f[2], f[3], m.name) for m in members for f in m.handed), key=lambda f: f[0])
    wire = Wire()
    first: dict[bytes, str] = {}
    for _, gid, redelivery, settled, name in frames:
        was = first.get(gid)
        if was is None:
            first[gid] = name
            continue
        if not redelivery:
            wire.unmarked.append(gid)
        if settled:
            wire.presettled_again.append(gid)
        if was != name:
            wire.passed.setdefault(gid, set()).add(name)
    return wire


def with_settings(**kw: Any) -> Settings:
    return replace(SETTINGS, **kw)
