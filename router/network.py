"""The router's place in the network: the control plane wired to links and the core.

Pure decisions live in ``linkstate.engine.ControlPlane``; this module only carries its
messages over the inter-router connections, tells the core about hops and routes, and
completes subscriber attaches once the whole reachable network has acknowledged them.

A subscriber that moved here (its router died, or it reconnected elsewhere) is owed
deliveries other routers' roots hold: each root sends what it still owes the key here,
in its own sequence, before anything newer (``docs/protocol.md``), so no hand-over has
to be waited for.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from once.linkstate.engine import ControlPlane, Result
from once.linkstate.messages import SubEvent, Subscription, Sync
from once.records.membership import GroupId, Key, Member, Table

from .core.messages import Note, Routed
from .core.ports import NO_GROUPS, NetworkEvents
from .evidence import ColdStart, RollCalls
from .logs import fields
from .security.authn import user_groups
from .substore import Had, Kept, MemoryStore, remaining

if TYPE_CHECKING:
    from .context import NeighbourLink, RouterContext
    from .core import Subscriber

log = logging.getLogger("once.network")


class Network:
    """Also the core's ``RoutesPort``. No I/O of its own: timers come from the router's
    ``call_later``/``call_soon``, so the in-process network (``sim/``) runs it as is."""

    def __init__(self, router: RouterContext, base: int | None = None) -> None:
        self.router = router
        self.me = router.id
        # Subscription events are numbered from the router's start (microseconds), so a
        # restarted router's events are never taken for its earlier life's.
        self.plane = ControlPlane(router.id, base=time.time_ns() // 1000 if base is None else base)
        # Our own subscriptions where a restart finds them (``substore.py``)
        self.store: MemoryStore = getattr(router, "subscription_store", None) or MemoryStore()
        self.links: dict[str, NeighbourLink] = {}
        # For an operator (``/metrics``, ``once stat -n``): per neighbour, when its link last
        # came up or went down (monotonic seconds) and how often it went down.
        self.link_changed: dict[str, float] = {}
        self.flaps: dict[str, int] = {}
        self.costs = {}
        self.joined: set[str] = set()  # neighbours no file names a link to (``once router --join``)
        for link in router.topology.links:
            if router.id in (link.a, link.b):
                self.costs[link.b if link.a == router.id else link.a] = link.cost
        # our attaches waiting for their subscription event's flood to be acknowledged, by its seq
        self.on_complete: dict[int, Callable[[], None]] = {}
        self.all_up = asyncio.Event()
        if not self.costs:
            self.all_up.set()
        self._routers: dict[str, set[str]] = {}  # per topic, until the graph or the table changes
        self._refused_noted: set[tuple[str, Any]] = set()  # remote subscribers our policy refuses, logged once
        self._groups: dict[str, Mapping[GroupId, tuple[Member, ...]]] = {}  # likewise
        self.ended: list[Subscriber] = []  # subscribers that moved away, their detach not yet flooded
        # The network's epoch counts topology changes: a roll call begun before one did not
        # ask a router that came in since (``evidence.RollCalls``)
        self.epoch = 0
        self.roll_calls = RollCalls(self)
        # Readers of ``Note`` items (an adaptor's own traffic between routers), by channel
        self.readers: dict[str, Callable[[str, bytes], None]] = {}
        # Our own subscriptions where a restart finds them (``substore.py``)
        # The routes port (``core/ports.py``), bound for the core's constructor:
        self.route = self.plane.lsdb.route
        self.moved = self.plane.moved
        # A restarted router knows only its own subscriptions (its journal): the others'
        # it learns from a neighbour whose view is complete. Taking publishes before that
        # would accept them without subscribers it does not know of yet (when every
        # router that knew them restarted too). It waits for a complete sync, or for
        # ``subscriber_grace`` (by then a subscriber nobody could tell us of has been out
        # of reach past its grace): the cold-start rule, docs/protocol.md.
        self.store_restarted = self.store.begin()
        self.cold = self.store_restarted
        self.changed_at = 0.0  # when the graph last changed (core clock)
        # The hold-down before routes are computed again (``_hold_over``): when they last
        # were for a change from elsewhere, and whether a computation is due
        self.plane.lsdb.hold = router.settings.route_hold > 0
        self._routes_at = -math.inf
        self._routes_due_set = False
        self.cold_start = ColdStart(self)
        if self.cold:
            self.plane.complete = False
            self.cold_start.wait()

    @property
    def core(self) -> NetworkEvents:
        """The core, as the network may see it (``core/ports.py``: one interface)."""
        return self.router.core

    @property
    def has_neighbours(self) -> bool:
        """Whether the topology gives us neighbours, or routers to join through (then
        publishes wait for their first sync)."""
        spec = self.router.topology.routers.get(self.me)
        return bool(self.costs) or (spec is not None and bool(spec.join))

    def keys_at(self, topic: str, router: str) -> frozenset[Key]:
        if self.router.topology.policy is None:
            return self.plane.table.keys_of(router, topic)
        return frozenset(s.key for s in self.plane.table.subscribers_of(router, topic) if self._may_receive(s))

    def _may_receive(self, sub: Subscription) -> bool:
        """Our policy lets the user that made ``sub`` (at another router, whose policy let it)
        subscribe to what it subscribed to: the user travels with each subscription
        (``owner``), and a root sends no copy to a subscriber its policy refuses. A
        subscription made where authentication is off (no owner) is not checked again."""
        policy = self.router.topology.policy
        if policy is None or not sub.owner:
            return True
        refusal = policy.may_subscribe(sub.owner, user_groups(self.router.topology.auth, sub.owner), sub.topic)
        if refusal is None:
            return True
        if (sub.router, sub.key) not in self._refused_noted:
            self._refused_noted.add((sub.router, sub.key))
            log.warning("router %s: sends nothing to subscriber %s/%s at router %s: %s", self.me, sub.container_id,
                        sub.link_name, sub.router, refusal, extra=fields("subscriber.unauthorized", router=sub.router,
                                                                         container=sub.container_id,
                                                                         link=sub.link_name, user=sub.owner))
        return False

    def policy_changed(self) -> None:
        """SIGHUP brought another policy: who may receive what is worked out again."""
        self._refused_noted.clear()
        self._routers.clear()
        self._groups.clear()
        core = self.core
        core.membership_changed()
        core.follow_moved(self.plane.lsdb.reachable() | {self.me})  # (the plans cached per topic go)

    def homes(self, keys: Iterable[Key]) -> dict[str, set[Key]]:
        """Reachable or not: what is owed to a key at a router we cannot reach waits for it."""
        table = self.plane.table
        out: dict[str, set[Key]] = {}
        for key in keys:
            where = table.home(key)
            if where is not None:
                out.setdefault(where, set()).add(key)
        return out

    def group_members(self, topic: str) -> Mapping[GroupId, tuple[Member, ...]]:
        """Consumer group members elsewhere (the routes port): one object per topic until
        the table changes, so the core can cache on it."""
        view = self._groups.get(topic)
        if view is None:
            found = self.plane.table.group_members(topic, self.me)
            if found and self.router.topology.policy is not None:
                found = {g: kept for g, subs in found.items() if (kept := [s for s in subs if self._may_receive(s)])}
            view = {GroupId(name, scope, pattern): Table(Member(s.key, s.router, s.since, s.exclusive) for s in subs)
                    for (name, scope, pattern), subs in found.items()} if found else NO_GROUPS
            self._groups[topic] = view
        return view

    def reachable(self) -> set[str]:
        return self.plane.lsdb.reachable()

    def all_routers(self) -> set[str]:
        """Every other router: the topology's, and any we reach that it does not name."""
        named = {r for link in self.router.topology.links for r in (link.a, link.b)}
        # (one that left cleanly is not out of reach: nobody waits for it, until it is back)
        return (named | self.plane.lsdb.reachable()) - self.plane.lsdb.left() - {self.me}

    def everyone_reachable(self) -> bool:
        return self.reachable() >= self.all_routers()

    def calm(self) -> int:
        return self.epoch if self.everyone_reachable() else -1

    def gone_everywhere(self, key: Key) -> bool:
        """The routes port's evidence that ``key`` is attached nowhere else (``RollCalls``)."""
        return self.roll_calls.gone_everywhere(key)

    def send_to(self, router: str, items: tuple[Any, ...], frm: str | None = None, ttl: int = 32,
                blob: bytes = b"") -> None:
        """Control items for ``router`` (protocol version 3), to the neighbour on the way
        there; none: dropped (what they answer is asked again)."""
        by_hop, _ = self.plane.lsdb.route({router}, None)
        for peer in by_hop:
            conn = self.links.get(peer)
            if conn is not None:
                conn.send_control(Routed(router, frm or self.me, items, ttl, blob))

    def listen(self, channel: str, reader: Callable[[str, bytes], None]) -> None:
        """``reader(frm, body)`` gets the notes routed to us on ``channel``."""
        self.readers[channel] = reader

    def send_note(self, router: str, channel: str, body: bytes) -> bool:
        """A note for ``router``'s reader of ``channel``; False when there is no way there now
        (the sender asks again: notes, like the core's control items, can be lost with a link)."""
        if router not in self.plane.lsdb.reachable():
            return False
        self.send_to(router, (Note(channel, body),))
        return True

    def remote_routers(self, topic: str) -> set[str]:
        routers = self._routers.get(topic)
        if routers is None:
            routers = self.plane.routers_for(topic)
            routers.discard(self.me)
            self._routers[topic] = routers
        return routers

    # ------------------------------------------------------------ links

    def listening(self, addresses: dict[str, str]) -> None:
        """Where this router listens (HOST:PORT by kind): in its advertisements from now on."""
        self.apply(self.plane.set_addresses(addresses))

    def drop_neighbour(self, peer: str) -> None:
        """The topology no longer links us to ``peer`` (a SIGHUP): its link closes, for good."""
        self.costs.pop(peer, None)
        conn = self.links.get(peer)
        if conn is not None:
            conn.close()
            self.link_down(peer, conn)

    def cost_changed(self, peer: str, cost: int) -> None:
        """The topology gives our link to ``peer`` another cost (a SIGHUP): advertised now."""
        self.costs[peer] = cost
        if peer in self.links:
            self.apply(self.plane.neighbour_cost(peer, cost))
            self.router.flush()

    def link_up(self, peer: str, conn: NeighbourLink) -> None:
        old = self.links.get(peer)
        if old is not None and old is not conn:
            old.close()  # a newer connection replaces a stale one
            self.link_down(peer, old)
        if peer not in self.costs:
            # A router no file links us to: it joined through us, or we through it
            # (``once router --join``); our neighbour from now on, its link cost 1. One the
            # file names with no link to us (a link removed while it was being made) is not.
            topology = self.router.topology
            if peer in topology.routers and peer not in topology.joins_to(self.me) and \
                    self.me not in topology.joins_to(peer):
                conn.close()
                return
            self.costs[peer] = 1
            self.router.neighbour_ids.add(peer)
            self.joined.add(peer)
            log.info("router %s: linked to %s, which our topology does not name (it joined the network through us, "
                     "or we through it)", self.me, peer, extra=fields("neighbour.joined", neighbour=peer))
        self.links[peer] = conn
        self.link_changed[peer] = time.monotonic()
        core = self.core
        conn.hop = core.add_hop(peer, conn.hop_port())
        conn.upstream = core.add_upstream(peer, conn.upstream_port())
        log.info("router %s: link to %s up", self.me, peer, extra=fields("neighbour.up", neighbour=peer))
        self.apply(self.plane.neighbour_up(peer, self.costs.get(peer, 1)))
        if set(self.links) >= set(self.costs):
            self.all_up.set()

    def leave(self) -> None:
        """We stop cleanly (``Router.drain``): every router hears that we left, at once."""
        log.info("router %s: leaving the network", self.me, extra=fields("router.leaving"))
        # (sent ahead of the last advertisement: once we flood it we route nothing more)
        self.core.hand_over()
        self.router.flush()
        self.apply(self.plane.leave())
        self.router.flush()

    def link_down(self, peer: str, conn: NeighbourLink) -> None:
        if self.links.get(peer) is not conn:
            return
        del self.links[peer]
        self.link_changed[peer] = time.monotonic()
        self.flaps[peer] = self.flaps.get(peer, 0) + 1
        log.info("router %s: link to %s down", self.me, peer,
                 extra=fields("neighbour.down", neighbour=peer, flaps=self.flaps[peer]))
        result = self.plane.neighbour_down(peer)  # routes change before the core re-routes
        core = self.core
        core.hop_lost(peer)
        core.upstream_lost(peer)
        self.apply(result)
        self.router.flush()

    def receive(self, peer: str, msg: object) -> None:
        if type(msg) is Routed:
            if msg.to == self.me:
                items = msg.items
                if items and type(items[0]) is Note:  # (notes travel alone: ``send_note``)
                    for item in items:
                        if type(item) is Note:
                            reader = self.readers.get(item.channel)
                            if reader is not None:
                                reader(msg.frm, item.body)
                    items = tuple(i for i in items if type(i) is not Note)
                if items:
                    self.router.core.control(msg.frm, items)
            elif msg.ttl > 1:
                self.send_to(msg.to, msg.items, msg.frm, msg.ttl - 1, msg.blob)
            return
        if type(msg) is SubEvent and msg.subscription.suspended and not self.plane.table.origins[msg.origin].seen(msg.seq):
            # (before we acknowledge it: a roll call learns of our attach first)
            self._answer_roll_call(msg.subscription)
        self.apply(self.plane.receive(peer, msg))
        if type(msg) is Sync:
            self._outrank([s for st in msg.states for s in st.subscriptions if s.suspended])
        if type(msg) is Sync and self.plane.complete:
            # A neighbour's full view: from now on we know the subscribers (a restarted
            # router, or one that came up alone, took no publishes before this).
            self.core.synced()

    # ---------------------------------------------------- subscriptions

    def subscribe(self, sub: Subscription, attached: bool, on_complete: Callable[[], None] | None = None) -> None:
        if attached:
            self.store.put(Kept(sub))
        else:
            self.store.drop(sub.key)
        seq, result = self.plane.subscribe(sub, attached)
        if on_complete is not None:
            self.on_complete[seq] = on_complete
        self.apply(result)

    def finished(self, sub: Subscription) -> None:
        """A subscription of ours closed, or its grace expired: the network learns it is over,
        and our journal keeps that it ended here for as long as a copy may still come for
        it (so that we answer ``closed`` for it after a restart too)."""
        s = self.router.settings
        now_us = self.core.wall()
        had = self.core.member_had(sub.key)
        self.store.end(sub.key, now_us + max(s.router_dead_after, s.publisher_grace) * 1e6, now_us,
                       None if had is None else Had(had[0].name, had[0].scope, had[1], had[0].pattern))
        self.subscribe(sub, False)

    def suspended(self, key: tuple[str, str], until_us: float) -> None:
        """A subscription of ours is suspended until then (wall clock, microseconds).

        The network learns it too: where the client attached again meanwhile, its live
        attach there is the key's home even when the clocks stamped it older than ours
        (``--hard --groups`` fresh seeds 396129155360, 840217628598, 840217628795: a member
        resumed behind a partition on a clock seconds behind, every router took our
        suspended attach for its home, and we expired it while it was attached there)."""
        self.store.suspend(key, until_us)
        held = self.plane.table.origins[self.me].keys.get(key)
        if held is not None and held[1] is not None and not held[1].suspended:
            _, result = self.plane.subscribe(replace(held[1], suspended=True), True)
            self.apply(result)

    def _outrank(self, suspended: Iterable[Subscription]) -> None:
        """Attaches suspended elsewhere, as a neighbour told us: where ours of the same key
        is live and stamped older, the client came back here after it left there, on a
        clock behind that router's, or behind a partition that hid its attach there from
        us. Ours is stamped again past it, so that the key lives here everywhere (and that
        router hands over what it holds for it) rather than there until its grace ends
        (``--hard --groups`` fresh seeds 396129155360, 840217628598, 840217628795).

        Only for a live attach of ours, and past a suspended one only: two live attaches
        never outbid each other, and a key's stamps at each router only grow, so two
        routers can never each take the other for the key's home."""
        table = self.plane.table
        mine = table.origins[self.me].keys
        for other in suspended:
            held = mine.get(other.key)
            ours = held[1] if held is not None else None
            if (ours is None or ours.suspended or other.router == self.me
                    or (other.since, other.router) < (ours.since, self.me) or not self.core.live_here(other.key)):
                continue
            stamped = replace(ours, since=max(self.core.wall(), table.newest_attach(other.key) + 1, other.since + 1))
            self.store.put(Kept(stamped))
            _, result = self.plane.subscribe(stamped, True)
            self.apply(result)

    def _answer_roll_call(self, other: Subscription) -> None:
        """Another router says ``other`` is suspended there (new, or a roll call before it
        gives the key up): where we hold the key attached, the network hears of it again
        before we acknowledge, stamped past theirs if it was stamped older (``_outrank``)."""
        held = self.plane.table.origins[self.me].keys.get(other.key)
        ours = held[1] if held is not None else None
        if ours is None or ours.suspended or other.router == self.me or not self.core.live_here(other.key):
            return
        if (other.since, other.router) > (ours.since, self.me):
            self._outrank((other,))
        else:
            _, result = self.plane.subscribe(ours, True)  # (the same attach, numbered anew)
            self.apply(result)

    def restore(self) -> int:
        """We start: our subscriptions from the journal become ours again, suspended for
        what is left of their grace (``substore.py``); returns how many."""
        core = self.core
        now_us, now = core.wall(), core.clock()
        grace = self.router.settings.subscriber_grace
        live = []
        for kept in self.store.load():
            left = remaining(kept, now_us, max(kept.sub.timeout, grace))
            if left is None:
                self.store.drop(kept.sub.key)  # its grace ended while we were down
            else:
                live.append((kept.sub, left))
        taken = {s.key for s in self.plane.table.restore([replace(s, router=self.me) for s, _ in live])}
        for s, left in live:
            if s.key in taken:
                core.adopt_subscriber(s.topic, s.container_id, s.link_name, now + left, s.owner,
                                      GroupId.of(s.group, s.scope, s.topic) if s.group else None, s.since, s.exclusive)
        if taken:
            log.info("router %s: %d subscription(s) of ours from before the restart, suspended until they "
                     "resume or their grace ends", self.me, len(taken))
        for key, until_us in self.store.ended.items():
            if key not in taken and until_us > now_us:
                had = self.store.had.get(key)
                core.ended_here(key, now + (until_us - now_us) / 1e6,
                                None if had is None else (GroupId(had.group, had.scope, had.pattern), had.gids))
        return len(taken)

    def key_owners(self, key: tuple[str, str]) -> set[str]:
        """The owners the network knows for subscriber ``key`` (wherever it is attached)."""
        table = self.plane.table
        return {s.owner for origin in table.by_key.get(key, ()) for s in table.subscriptions(origin) if s.key == key}

    def newest_attach(self, key: tuple[str, str]) -> int:
        """The newest attach stamp the network knows for subscriber ``key`` (0: none)."""
        return self.plane.table.newest_attach(key)

    def end(self, sub: Subscriber, expired: bool = False) -> None:
        """A subscription of ours is over (``expired``, or moved away): tell the network.
        One given up as a gap (``Subscriber.gap``) is flooded as one, with the stamp of the
        attach it ended: its live attach elsewhere ends when it hears of it (``_told``)."""
        self.roll_calls.forget(sub.key)
        subscription = Subscription(self.me, sub.topic, sub.container_id, sub.link_name)
        if expired and sub.gap:
            held = self.plane.table.origins[self.me].keys.get(sub.key)
            since = held[1].since if held is not None and held[1] is not None else 0
            log.warning("router %s: subscription %s/%s on %r given up with routers out of reach past "
                        "partition_grace: where it is attached, it ends with a subscription gap", self.me,
                        sub.container_id, sub.link_name, sub.topic,
                        extra=fields("subscriber.gap", container=sub.container_id, link=sub.link_name, topic=sub.topic,
                                     unreachable=sorted(self.all_routers() - self.reachable())))
            self.finished(replace(subscription, since=since, gap=self.core.wall()))
        elif expired:
            self.finished(subscription)
        else:
            self.subscribe(subscription, False)

    def apply(self, result: Result) -> None:
        for peer, msg in result.out:
            conn = self.links.get(peer)
            if conn is not None:
                conn.send_control(msg)
        core = self.core
        if result.adopted:
            until = core.clock() + self.router.settings.subscriber_grace
            for sub in result.adopted:
                core.adopt_subscriber(sub.topic, sub.container_id, sub.link_name,
                                      core.clock() + sub.timeout if sub.timeout else until, sub.owner,
                                      GroupId.of(sub.group, sub.scope, sub.topic) if sub.group else None, sub.since,
                                      sub.exclusive)
        held = False
        if result.topology_changed:
            self.epoch += 1
            self.changed_at = core.clock()
            held = self.plane.lsdb.stale and not self._hold_over()
        if (result.topology_changed and not held) or result.table_changed:
            self._routes_changed()
        for gap in result.gaps:
            self._told(gap)
        if result.cold:
            # (fresh, we heard a neighbour's view is not complete: as a restarted router)
            log.info("router %s: a neighbour's view is not complete (it restarted): taking no publishes until one "
                     "is, or the cold-start rule", self.me, extra=fields("sync.cold"))
            self.cold_start.wait()
        for gone in result.left:
            log.info("router %s: router %s left the network", self.me, gone, extra=fields("router.left", router=gone))
            core.router_left(gone)
        for again in result.back:
            log.info("router %s: router %s is back", self.me, again, extra=fields("router.back", router=again))
            core.router_back(again)
        if self.cold_start.forced and result.table_changed:
            self.cold_start.tell_forced()
        # Attaches complete last: a subscriber that moved here has what it was owed queued
        # (older first) before its first delivery goes out.
        for seq in result.completed:
            done = self.on_complete.pop(seq, None)
            if done is not None:
                done()

    def _routes_changed(self) -> None:
        """The graph or the subscriber table changed: the core acts on it."""
        self._routers.clear()
        self._groups.clear()
        core = self.core
        core.membership_changed()
        self.follow_moved_subscribers()
        core.follow_moved(self.plane.lsdb.reachable() | {self.me})

    def _hold_over(self) -> bool:
        """Advertisements from elsewhere changed the graph (``LinkStateDB.hold``): the routes
        are computed again now if the last computation for such a change is ``route_hold``
        old, else once at its end, for every change that came meanwhile (a hold-down:
        routers booting or a partition healing send bursts of them). Returns whether the
        routes are new now."""
        now = self.core.clock()
        wait = self._routes_at + self.router.settings.route_hold - now
        if wait <= 0 and not self._routes_due_set:
            self.plane.lsdb.recompute()
            self._routes_at = now
            return True
        if not self._routes_due_set:
            self._routes_due_set = True
            self.router.call_later(max(wait, 0.0), self._routes_due)
        return False

    def routes_now(self) -> None:
        """The hold-down ends now: routes held for changes from elsewhere are computed (an
        in-process network, where no time passes, settles so: ``tools/inprocess.py``)."""
        if self.plane.lsdb.stale:
            self._routes_due()

    def _routes_due(self) -> None:
        self._routes_due_set = False
        lsdb = self.plane.lsdb
        if not lsdb.stale:
            return  # (our own links changed meanwhile: computed then)
        lsdb.recompute()
        core = self.core
        self._routes_at = core.clock()
        self.epoch += 1  # (the routes the network's evidence is judged by changed now)
        self.changed_at = self._routes_at
        self._routes_changed()
        self.router.flush()

    def _told(self, gap: Subscription) -> None:
        """Router ``gap.router`` gave subscriber ``gap.key`` up as a gap, and we hear of it
        first now: its roots told publishers ``accepted`` without it. An attach of the key
        here is the subscription that missed them: its link ends with
        ``once:subscription-gap`` and it waits suspended for the client to attach again
        (``Core.gap_heard``; ``docs/protocol.md`` section 7)."""
        for sub in self.core.gap_heard(gap.key, gap.router):
            self.router.lifecycle.tell_gap(sub, gap.router)

    def follow_moved_subscribers(self) -> None:
        """Our suspended subscribers whose key now lives at another reachable router moved
        there: hand their deliveries over and end them here (network-wide, once the
        changes in hand are applied)."""
        core = self.core
        suspended = core.suspended()
        if suspended:
            reachable = self.plane.lsdb.reachable()
            table = self.plane.table
            for sub in suspended:
                where = table.home(sub.key)
                if where is not None and where != self.me and where in reachable:
                    core.subscriber_moved(sub, where)
                    self.ended.append(sub)
            if self.ended:
                self.router.call_soon(self._end_moved)

    def _end_moved(self) -> None:
        ended, self.ended = self.ended, []
        core = self.core
        for sub in ended:
            if not core.subscribed(sub.topic, sub.key):  # not back here meanwhile
                self.end(sub)
        self.router.flush()
