"""One router: listeners, connections, the core; startup and shutdown."""

from __future__ import annotations

import asyncio
import base64
import gc
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from .adaptors.amqp.edge import EdgeConnection
from .adaptors.amqp.interrouter import InterRouterConnection, dial, dial_to_join
from .adaptors.amqp.management import ManagementNode
from .adaptors.amqp.shared_subscriptions import group_id
from .adaptors.mqtt.edge import MqttEdgeConnection, end_suspended
from .adaptors.mqtt.sessions import SessionStore
from .config import Address, Topology, TopologyError, load_topology
from .core import Core, Subscriber
from .core.lifecycle import LinkLifecycle
from .core.stalls import Stalls
from .heap import pin_mmap_threshold, trim
from .http.endpoint import routes
from .http.manage import is_admin, writes
from .http.server import HttpConnection, HttpGuard, Writes
from .http.views import general, memory, waiting_on_suspended
from .journal import router_journal
from .leaving import Holding, Leaving, Step
from .listeners import Kind, bind
from .listeners import listen as listen_on
from .logs import fields
from .network import Network
from .observe import line, snapshot
from .security.authn import password_user, user_groups
from .security.limits import AuthFailures, ConnectionLimits, RateLimitedLog, default_max_connections, raise_fd_limit
from .security.quotas import Quotas
from .security.tls import RouterTls, TlsError
from .security.tls_accept import TlsListener
from .substore import FileStore, MemoryStore

log = logging.getLogger("once.router")
TRIM_AFTER = 32 * 1024 * 1024  # bytes of messages freed since the last trim
SYNC_NOTE_EVERY = 5.0  # seconds between the "waiting for the first sync" lines
CREDIT_PASS = 0.1  # seconds between the credit passes no traffic starts (``core/pace.py``: LONG_EPOCH)


@dataclass(frozen=True, slots=True)
class Ready:
    """Readiness: listeners bound and every neighbour link of the topology up."""

    router_id: str
    amqp: Address
    inter_router: Address | None = None
    neighbours: tuple[str, ...] = ()
    http: Address | None = None
    mqtt: Address | None = None
    amqps: Address | None = None
    mqtts: Address | None = None

    def line(self) -> str:
        web = f" amqps://{self.amqps}" if self.amqps is not None else ""
        web += f" http://{self.http}" if self.http is not None else ""
        web += f" mqtt://{self.mqtt}" if self.mqtt is not None else ""
        web += f" mqtts://{self.mqtts}" if self.mqtts is not None else ""
        extra = f" neighbours {','.join(self.neighbours)}" if self.neighbours else ""
        return f"router {self.router_id} ready amqp://{self.amqp}{web}{extra}"


# After a drain's last client went, how long a router waits for what it holds as root or
# destination to be answered before it stops (its clients' new routers have it all anyway:
# a drained router stops as a dead one would, with nothing left for it to do)
DRAIN_WAIT = 10.0


class Router:
    def __init__(self, topology: Topology, router_id: str, journal_dir: str | None = None,
                 state_dir: str | None = None, allow_empty_users: bool = False) -> None:
        if router_id not in topology.routers:
            raise KeyError(f"{topology.path}: no router {router_id!r} (have {', '.join(sorted(topology.routers))})")
        self.topology = topology
        self.id = router_id
        # SIGHUP takes a users file that has no users any more (it had some) only when the
        # router was started so (``--allow-empty-users``): a truncated file would otherwise
        # turn password logins off at once, and with them the policy's users
        self.allow_empty_users = allow_empty_users
        self.spec = topology.routers[router_id]
        self.settings = topology.settings
        self.container_id = f"once-router-{router_id}"
        try:
            self.tls = RouterTls(topology.tls.for_router(router_id)) if topology.tls is not None else None
        except TlsError as e:
            raise TopologyError(f"{topology.path}: {e}") from None
        fd_limit = raise_fd_limit()
        max_total = self.settings.max_connections or default_max_connections(fd_limit)
        self.limits = ConnectionLimits(max_total, self.settings.max_connections_per_host or max(1, max_total // 2))
        self.auth_failures = AuthFailures()
        self.guard_log = RateLimitedLog(logging.getLogger("once.guard"))
        self.quotas = Quotas(self)
        self.journal_dir = journal_dir
        self.neighbour_ids = {lk.b if lk.a == router_id else lk.a for lk in topology.links if router_id in (lk.a, lk.b)}
        # Our own subscriptions, kept where a restart finds them (``substore.py``).
        self.subscription_store = FileStore(state_dir) if state_dir is not None else MemoryStore()
        self.network = Network(self)
        self.journal = router_journal(journal_dir, router_id) if journal_dir is not None else None
        self.core = Core(router_id, self.settings, routes=self.network, unsynced=self.network.has_neighbours,
                         message_key=group_id, journal=self.journal, admit=self._admit)
        self.lifecycle = LinkLifecycle(self.core, self.network)
        if state_dir is None:
            log.debug("router %s: subscriptions are kept in memory only: a restart forgets the suspended ones "
                     "(once router --state DIR keeps them)", router_id)
        else:
            self.network.restore()
        self.connections: set[EdgeConnection] = set()
        self.inter_connections: set[InterRouterConnection] = set()
        self.dirty: set = set()
        self.waiting_for_room: set = set()
        self.stalls = Stalls()  # subscribers that hold deliveries and answer none (``core/stalls.py``)
        self._servers: list[asyncio.AbstractServer | TlsListener] = []
        self._client_servers: list[asyncio.AbstractServer | TlsListener] = []  # (what a drain closes)
        self.draining: str | None = None  # who asked this router to drain (``drain``)
        self.management = ManagementNode(self, self._write_refused)  # ``$management`` on the client ports
        self.on_drained: Callable[[], None] | None = None  # (main's: the process stops)
        self._tasks: list[asyncio.Task] = []
        self._dials: dict[str, asyncio.Task] = {}  # neighbour -> the task dialling it (``_dial``)
        self._started = False  # (listening: a SIGHUP's link changes act on a running router)
        self.stopping = False
        self.ready: Ready | None = None
        self.version = _version()
        self.started = time.monotonic()
        self.serials = 0  # client connections numbered from 1, for the management API and the logs
        self.http_connections: set[HttpConnection] = set()  # (event streams: closed at stop)
        self._waits_noted: dict[tuple[str, str], float] = {}  # suspended subscriber -> the suspension logged
        self._sync_note = time.monotonic() + SYNC_NOTE_EVERY

    async def start(self, neighbour_timeout: float | None = None) -> Ready:
        """Bind the listeners, dial the higher-id neighbours, wait until every neighbour is up."""
        loop = asyncio.get_running_loop()
        pin_mmap_threshold()
        self.check_users_file()
        if self.journal is not None:
            self.journal.start()
        spec, tls = self.spec, self.tls
        client_tls = tls.listening(for_routers=False) if tls is not None else None
        amqp = await self._open(Kind.AMQP, lambda: EdgeConnection(self), spec.listen)
        assert amqp is not None
        amqps = await self._open(Kind.AMQPS, lambda: EdgeConnection(self), spec.amqps, client_tls)
        inter = None
        if spec.inter_router is not None:  # (with no neighbour yet too: a link may come with a SIGHUP)
            inter = await self._open(Kind.INTER_ROUTER, self._accept_router, spec.inter_router,
                                     tls.listening(for_routers=True) if tls is not None else None)
        web = None
        if spec.http is not None:
            table = routes(self)
            limits, head = HttpGuard(), self.settings.handshake_timeout
            who = self._http_user if self.topology.auth.http else None
            realm = f"once router {self.id}"
            hold = self.core.reserve.hold  # (an event stream's unread bytes count in the byte bound)
            manage = Writes(writes(self), self._http_user, lambda user: is_admin(self, user), self._write_refused)
            web = await self._open(Kind.HTTP, lambda: HttpConnection(table, self.http_connections, limits, head, who,
                                                                     realm, hold, manage), spec.http)
        # Every router keeps its replicas of the network's MQTT sessions, listener or not:
        # a session's changes wait for every router in reach (``adaptors/mqtt/sessions.py``).
        self.mqtt_sessions = SessionStore(self)
        self.mqtt_sessions.on_end = lambda client_id: end_suspended(self, client_id)
        mqtt = await self._open(Kind.MQTT, lambda: MqttEdgeConnection(self), spec.mqtt)
        mqtts = await self._open(Kind.MQTTS, lambda: MqttEdgeConnection(self), spec.mqtts, client_tls)
        # Where we listen, in our advertisements (``once topology dump`` writes them back)
        listening = {"listen": amqp, "inter_router": inter, "http": web, "mqtt": mqtt, "amqps": amqps, "mqtts": mqtts}
        self.network.listening({kind: str(at) for kind, at in listening.items() if at is not None})
        for peer in sorted(self.neighbour_ids):
            self._dial(peer)
        for addr in spec.join:  # (``once router --join``: whoever listens there, our neighbour)
            self._tasks.append(loop.create_task(dial_to_join(self, addr)))
        self._tasks.append(loop.create_task(self._housekeeping()))
        self._tasks.append(loop.create_task(self._credit_passes()))
        if neighbour_timeout is None:
            await self.network.all_up.wait()
        else:
            try:
                await asyncio.wait_for(self.network.all_up.wait(), neighbour_timeout)
            except TimeoutError:
                pass
        self.ready = Ready(self.id, amqp, inter, tuple(sorted(self.network.links)), web, mqtt, amqps, mqtts)
        self._started = True
        return self.ready

    def _dial(self, peer: str) -> None:
        """The lower id dials (``interrouter.dial``), until the link is removed."""
        if self.id < peer and peer not in self._dials:
            task = asyncio.get_running_loop().create_task(dial(self, peer))
            self._dials[peer] = task
            self._tasks.append(task)

    def _relink(self, fresh: Topology) -> None:
        """SIGHUP: this router's links as the edited topology has them. A link added is
        dialled (or waited for), one removed is closed and no longer taken, a cost changed
        is advertised; each change one line. (A router the file adds must name its
        ``inter_router`` address; routers listening on it already.)"""
        network = self.network
        mine = {lk.b if lk.a == self.id else lk.a: lk.cost for lk in fresh.links if self.id in (lk.a, lk.b)}
        mine.update({rid: 1 for rid in fresh.joins_to(self.id) if rid not in mine})  # (its join names us)
        # (a router that joined at runtime: its link is not the file's to remove)
        had = {peer: cost for peer, cost in network.costs.items() if peer not in network.joined}
        for peer in sorted(set(had) - set(mine)):
            self.neighbour_ids.discard(peer)
            task = self._dials.pop(peer, None)
            if task is not None:
                task.cancel()
            network.drop_neighbour(peer)
            for conn in list(self.inter_connections):  # (one still being made, too)
                if conn.peer == peer:
                    conn.close()
            log.info("router %s: SIGHUP: link to %s removed", self.id, peer,
                     extra=fields("neighbour.removed", neighbour=peer))
        for peer in sorted(set(mine) - set(had)):
            spec = fresh.routers.get(peer)
            if spec is None or spec.inter_router is None or self.spec.inter_router is None:
                log.warning("router %s: SIGHUP: link to %s not added: %s has no inter_router address in %s", self.id,
                            peer, peer if spec is None or spec.inter_router is None else self.id, fresh.path)
                continue
            self.neighbour_ids.add(peer)
            network.costs[peer] = mine[peer]
            self._dial(peer)
            log.info("router %s: SIGHUP: link to %s added (cost %d)", self.id, peer, mine[peer],
                     extra=fields("neighbour.added", neighbour=peer, cost=mine[peer]))
        for peer in sorted(set(mine) & set(had)):
            if mine[peer] != had[peer]:
                network.cost_changed(peer, mine[peer])
                log.info("router %s: SIGHUP: link to %s costs %d (was %d)", self.id, peer, mine[peer], had[peer],
                         extra=fields("neighbour.cost", neighbour=peer, cost=mine[peer], was=had[peer]))

    def _accept_router(self) -> InterRouterConnection:
        conn = InterRouterConnection(self, None)
        self.inter_connections.add(conn)
        return conn

    async def _credit_passes(self) -> None:
        """A credit pass every ``CREDIT_PASS`` seconds besides those traffic starts: a
        publisher its window stopped (records a subscriber holds) starts none itself, and
        its window is probed again at a pass (``core/pace.py``)."""
        while not self.stopping:
            await asyncio.sleep(CREDIT_PASS)
            self.core.replenish()
            self.flush()

    async def _housekeeping(self) -> None:
        """The core's timers: what a root sends again, a destination's tombstones and
        questions that ran out, links idle with credit, and subscribers suspended past
        their grace (nothing waits for them any more)."""
        while not self.stopping:
            s = self.settings
            await asyncio.sleep(min(1.0, s.subscriber_grace / 4 or 1.0, s.credit_idle / 2 or 1.0))
            now = self.core.clock()
            self.core.expire(now)
            self.core.reclaim_idle(now)
            self._stalls(now)
            for sub in self.core.ended_elsewhere():
                self.network.end(sub)
                log.info("router %s: consumer group %s: member %s/%s from before the restart closed at another "
                         "router", self.id, sub.group, sub.container_id, sub.link_name)
            self.expire_subscribers(now)
            self.network.roll_calls.clear_gaps()
            self._note_waits(now)
            if self.core.unsynced and now >= self._sync_note:
                self._sync_note = now + SYNC_NOTE_EVERY
                up = sorted(self.network.links)
                down = sorted(self.neighbour_ids - set(up))
                log.warning("router %s: no publisher credit yet: waiting for the first sync from a neighbour "
                            "(links up: %s; down: %s)", self.id, ", ".join(up) or "none", ", ".join(down) or "none",
                            extra=fields("sync.waiting", neighbours_up=up, neighbours_down=down))
            self.flush()  # (reclaiming credit or expiring may have left effects even when nothing changed)
            self._give_back_memory()

    def expire_subscribers(self, now: float) -> list[Subscriber]:
        """Suspended subscribers past their grace (or dropped by an admin: ``http/manage.py``)
        go, each logged; returns them."""
        gone = self.core.expire_suspended(now)
        for sub in gone:
            self.network.end(sub, expired=True)
            expired = fields("subscriber.expired", container=sub.container_id, link=sub.link_name,
                             topic=sub.topic, group=sub.group.name if sub.group is not None else None, owed=sub.owed)
            if sub.group is not None:
                log.info("router %s: consumer group %s: member %s/%s gave way%s", self.id, sub.group,
                         sub.container_id, sub.link_name,
                         f", its {sub.owed} deliveries go to the others" if sub.owed else "", extra=expired)
            elif sub.owed:
                log.warning("router %s: subscription %s/%s on %r expired after its grace with %d deliveries "
                            "it had not accepted: their publishers heard accepted without it", self.id,
                            sub.container_id, sub.link_name, sub.topic, sub.owed, extra=expired)
            else:
                log.info("router %s: subscription %s/%s on %r expired after its grace", self.id,
                         sub.container_id, sub.link_name, sub.topic, extra=expired)
        if gone:
            self.flush()  # (what their publishers now hear goes out)
        return gone

    def _write_refused(self, user: str, path: str, host: str) -> None:
        log.warning("router %s: management write %s refused: %s is not in group admin (from %s)", self.id, path,
                    user, host, extra=fields("manage.refused", user=user, path=path, host=host))

    def _http_user(self, header: str | None, host: str) -> str | None:
        """An HTTP request's Basic credentials (``auth.http``): its user, or None. Failures
        count against the host as a client's logins do: past a few a minute its next
        requests are refused unread until its turn, and they are logged at most once a while."""
        if header is None:
            return None
        now = asyncio.get_running_loop().time()
        if self.auth_failures.turn(host, now) > now:
            return None  # (its turn has not come: not even checked)
        user, password = "", ""
        if header[:6].lower() == "basic ":
            try:
                user, _, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                user = ""
        found = password_user(self.topology.auth, True, user, password.encode()) if user else None
        if found is None:
            failures = self.auth_failures.failed(host, now)
            self.guard_log.warning(("auth", host), now, "router %s: HTTP authentication failed%s from %s (%d failures "
                                   "from that host in %gs)", self.id, f" as {user!r}" if user else "", host, failures,
                                   self.auth_failures.window,
                                   extra=fields("auth.failed", host=host, mechanism="HTTP Basic", user=user,
                                                failures=failures))
        return found

    def _stalls(self, now: float) -> None:
        """Subscribers that answered nothing for their ``subscriber_stall`` while they held
        deliveries are treated as gone (``core/stalls.py``): their links are detached, and
        suspended for their grace."""
        attached = [s for subs in self.core.tables.topics.values() for s in subs.values() if s.attached]
        for sub, limit, held in self.stalls.check(attached, now, self._stall_limit):
            self.core.tables.stats["stalled_subscribers"] += 1
            why = (f"subscriber_stall: it answered nothing for {limit:g} s while it held {held} deliveries "
                   "(treated as gone: suspended for its grace)")
            log.warning("router %s: subscriber %s/%s on %r: %s", self.id, sub.container_id, sub.link_name, sub.topic,
                        why, extra=fields("subscriber.stalled", container=sub.container_id, link=sub.link_name,
                                          topic=sub.topic, held=held, limit=limit))
            sub.port.stalled(why)
        if self.stalls.marks:
            self.flush()

    def _stall_limit(self, sub: Subscriber) -> float:
        conn = getattr(sub.port, "conn", None)  # (its client's connection: its host's policy)
        return self.quotas.subscriber_stall(sub.owner or "anonymous", getattr(conn, "host", ""))

    def _note_waits(self, now: float) -> None:
        """Say once per suspension that publishes wait for a suspended subscriber, and until when:
        a publisher otherwise only sees its outcomes slow down (by the grace, 30 s)."""
        noted = self._waits_noted
        suspended = {s.key: s for subs in self.core.tables.topics.values() for s in subs.values()
                     if s.suspended_until is not None}
        for key in [k for k in noted if k not in suspended]:
            del noted[key]
        if not suspended or all(noted.get(k) == s.suspended_until for k, s in suspended.items()):
            return
        for key, n in waiting_on_suspended(self).items():
            sub = suspended[key]
            if noted.get(key) != sub.suspended_until and sub.suspended_until is not None:
                noted[key] = sub.suspended_until
                left = max(0.0, sub.suspended_until - now)
                log.warning("router %s: %d deliveries on %r wait for suspended subscriber %s/%s: it has %.1f s of "
                            "its grace left to resume (or detach), then its publishers hear accepted without it",
                            self.id, n, sub.topic, key[0], key[1], left,
                            extra=fields("subscriber.waited_for", container=key[0], link=key[1], topic=sub.topic,
                                         deliveries=n, grace_left=round(left, 3)))

    def _give_back_memory(self) -> None:
        """After a burst of large messages has gone, return their memory (see ``heap``)."""
        records = self.core.records
        if records.freed > TRIM_AFTER:
            # Deliveries leave no cycles (``tests/router/test_garbage.py``), but connections
            # that closed in the burst may have; collect them before trimming the heap.
            gc.collect()
            trim()
            records.freed = 0

    async def _open(self, kind: Kind, factory: Callable[[], Any], where: Address | None,
                    ssl: Any = None) -> Address | None:
        """Listen for ``kind`` at ``where`` (none: not at all; a TLS one needs ``ssl``, the
        topology's ``tls`` checked that): where it listens."""
        if where is None or (kind in (Kind.AMQPS, Kind.MQTTS) and ssl is None):
            return None
        clients = kind in (Kind.AMQP, Kind.AMQPS, Kind.MQTT, Kind.MQTTS)
        if ssl is not None:  # (admitted, then the handshake, then the connection: ``tls_accept.py``)
            sock = bind(kind, where.host, where.port)
            listener = TlsListener(self, sock, factory, ssl, self.settings.handshake_timeout)
            self._servers.append(listener)
            if clients:
                self._client_servers.append(listener)
            host, port = sock.getsockname()[:2]
            return Address(host, port)
        server, host, port = await listen_on(kind, factory, where.host, where.port)
        self._servers.append(server)
        if clients:
            self._client_servers.append(server)
        return Address(host, port)

    def drain(self, user: str, wait: float = DRAIN_WAIT) -> int:
        """An admin drains this router (``http/manage.py``): it takes no new client, closes
        every client connection (their links suspended, as when a router dies: the clients
        resume at another router of the network, which has what they are owed), and the
        process stops once no client connection is left and what it holds is answered, or
        ``wait`` after the last one went; then it leaves the network (``_drained``). Returns the
        connections it closed."""
        if self.draining is not None:
            return 0
        self.draining = user
        for server in self._client_servers:
            server.close()
        closing = list(self.connections)
        for conn in closing:
            conn.closed_by_admin(f"router {self.id} is draining (asked by {user}): connect to another router")
        self._tasks.append(asyncio.get_running_loop().create_task(self._drained(wait)))
        return len(closing)

    async def _drained(self, wait: float) -> None:
        """The stop under way, step by step (``router/leaving.py``, the simulator's rule too):
        every tenth of a second until it leaves the network or stops without a word."""
        loop = asyncio.get_running_loop()
        leaving = Leaving(wait)
        while True:
            held = Holding.of(self.core, len(self.connections), bool(self.network.links))
            step = leaving.step(loop.time(), held)
            if step is not Step.WAIT:
                break
            await asyncio.sleep(0.1)
        log.info("router %s: drained (asked by %s): no client left; stopping", self.id, self.draining,
                 extra=fields("router.drained", user=self.draining, records=held.records))
        if step is Step.LEAVE:
            self.network.leave()
        elif held.suspended:
            log.warning("router %s: stopping with %d subscribers suspended here: the network waits for them "
                        "as for a router out of reach", self.id, held.suspended,
                        extra=fields("router.stopping_suspended", subscribers=held.suspended))
        if self.on_drained is not None:
            self.on_drained()

    def reload(self) -> None:
        """SIGHUP: take up the users file (and the policy, consumer groups and links of the
        topology: ``_relink``) again; a byte budget new to a user or host bounds its links
        already attached too; listeners and settings need a restart. A file that does not
        load keeps the running configuration, and says why in one line."""
        try:
            fresh = load_topology(self.topology.path)
        except TopologyError as e:
            log.warning("router %s: SIGHUP: kept the running configuration: %s", self.id, e)
            return
        had, has = len(self.topology.auth.users), len(fresh.auth.users)
        if had and not has and not self.allow_empty_users:
            log.warning("router %s: SIGHUP: kept the running configuration: the users file %s has no users now "
                        "(%d before); a router started with --allow-empty-users takes that", self.id,
                        fresh.auth.users_file or "(none)", had)
            return
        if self.tls is not None:
            try:
                self.tls.reload()
            except TlsError as e:
                log.warning("router %s: SIGHUP: kept the running configuration: %s", self.id, e)
                return
        self.topology = replace(self.topology, auth=fresh.auth, groups=fresh.groups, policy=fresh.policy,
                                routers={**fresh.routers, self.id: self.topology.routers[self.id]}, links=fresh.links)
        if self._started:
            self._relink(fresh)
        self.check_users_file()
        self.network.policy_changed()
        self.quotas.reloaded()
        # (a byte budget new to a user or host bounds its links already attached too)
        self.core.rebudget(b for conn in list(self.connections) for b in conn.budgets())
        self.flush()
        auth = fresh.auth
        certs = " and the TLS certificates (new connections use them)" if self.tls is not None else ""
        log.info("router %s: SIGHUP: reloaded the users (%d)%s, the policy, consumer groups (%d) and links of %s; "
                 "settings and listeners change with a restart (attaches already made are not checked again; a new "
                 "byte budget bounds the links attached)", self.id,
                 len(auth.users), certs, len(fresh.groups), self.topology.path)

    def check_users_file(self) -> None:
        """One warning when the users file may be read by others than its owner: its salted
        hashes are what a guesser works from offline (as ssh refuses a readable key, a
        users file wants mode 0600)."""
        name = self.topology.auth.users_file
        try:
            mode = os.stat(name).st_mode if name else 0
        except OSError:
            return
        if mode & 0o077:
            log.warning("router %s: the users file %s may be read by others (mode %04o): chmod 600 %s", self.id,
                        name, mode & 0o777, name, extra=fields("auth.users_file_readable", path=name))

    def _admit(self, user: str, topic: str) -> str | None:
        """A copy from another router: whether its publisher's user may publish to its topic
        by our policy (the root checked by its own; they may differ): why not, or None."""
        policy = self.topology.policy
        if policy is None:
            return None
        refusal = policy.may_publish(user, user_groups(self.topology.auth, user), topic)
        return None if refusal is None else f"router {self.id}: {refusal}"

    def describe(self) -> str:
        """One line of live state, for an operator (SIGUSR1 logs it)."""
        return line(snapshot(self.core), len(self.connections))

    def log_snapshot(self) -> None:
        """SIGUSR1: the line for people; in ``--log-format json`` also the management API's
        general and memory views as fields (one object, not a repr inside the message)."""
        log.info(self.describe(), extra=fields("snapshot", **{**general(self), "memory": memory(self)}))

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(delay, self._batch, callback, args)

    def call_soon(self, callback: Callable[..., object], *args: Any) -> asyncio.Handle:
        return asyncio.get_running_loop().call_soon(self._batch, callback, args)

    def _batch(self, callback: Callable[..., object], args: tuple[Any, ...]) -> None:
        """A callback is a batch of its own: what it asked of the core goes out after it."""
        callback(*args)
        self.flush()

    def flush(self) -> None:
        """The end of a batch: the core's effects reach their ports (``core/effects.py``),
        then every touched connection writes what it has to send."""
        self.core.after_batch()
        if self.waiting_for_room:  # (records let go, or arrivals ended: some may read on)
            for conn in list(self.waiting_for_room):
                conn.room_changed()
        while self.dirty:
            conns = self.dirty
            self.dirty = set()
            for conn in conns:
                conn.write_out()

    async def stop(self, grace: float = 2.0) -> None:
        self.stopping = True
        for task in self._tasks:
            task.cancel()
        for server in self._servers:
            server.close()
        for conn in list(self.connections) + list(self.inter_connections):
            conn.close()
        for web in list(self.http_connections):
            web.close()
        self.flush()
        deadline = asyncio.get_running_loop().time() + grace
        while (self.connections or self.inter_connections) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        for conn in list(self.connections) + list(self.inter_connections):
            if conn.transport is not None:
                conn.transport.abort()
        for server in self._servers:
            await server.wait_closed()
        if self.journal is not None:
            self.journal.close()


def _version() -> str:
    try:
        return version("once")
    except PackageNotFoundError:  # (run from a checkout that was never installed)
        return "unknown"


