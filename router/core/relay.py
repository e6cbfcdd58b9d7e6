"""The data links to neighbours (``copies.py``): a copy is queued on
the next hop towards each router it is for, never back to one it visited, and sent as
that hop's credit allows; neighbours that pass copies to us get transit credit for what
we hold for other roots. A part ``Copies`` holds: it knows routes and credit, not what a
copy is owed or who answers it."""

from __future__ import annotations

from collections.abc import Callable

from ..journal import Event
from .credit import CreditWindow
from .effects import Effects
from .messages import Copy, CopyTarget
from .peers import CoreRecord, Hop, Upstream
from .plans import Plans
from .ports import HopPort, UpstreamPort
from .tables import CoreTables


class Relay:
    __slots__ = ("router_id", "journal", "stats", "credit", "plans", "hops", "upstreams", "dirty", "held", "to_send")

    def __init__(self, tables: CoreTables, credit: CreditWindow, plans: Plans, held: Callable[[], tuple[int, int]],
                 effects: Effects) -> None:
        self.router_id = tables.router_id
        self.journal = tables.journal
        self.stats = tables.stats
        self.credit = credit
        self.plans = plans
        self.hops: dict[str, Hop] = {}
        self.upstreams: dict[str, Upstream] = {}
        self.dirty = False  # a hop went or came: what was queued or on the wire is sent again
        self.held = held  # records we hold, and their bytes for other roots (transit credit counts them)
        self.to_send = effects.hops  # hops with copies queued: sent as the batch ends (``send``)

    def dispatch(self, record: CoreRecord | Copy, stream: bytes, targets: list[CopyTarget],
                  visited: frozenset[str]) -> None:
        """Queue copies of ``record`` for ``targets`` on the next hops towards them."""
        if not targets:
            return
        by_router: dict[str, list[CopyTarget]]  # (only for several routers: none made per usual copy)
        by_hop: dict[str, set[str]]
        one: Hop | None = None
        if len(targets) == 1:  # the usual send: one router, one next hop
            peer = self.plans.next_hop(targets[0].router)
            one = self.hops.get(peer) if peer is not None and peer not in visited else None
            if one is None:
                return  # no way on that does not go back: the root sends it again
        else:
            by_router = {}
            for t in targets:
                ts = by_router.get(t.router)
                if ts is None:
                    by_router[t.router] = [t]
                else:
                    ts.append(t)
            by_hop = self.plans.next_hops(frozenset(by_router))
        if isinstance(record, Copy):
            c = record
            gid, topic, payload, presettled, fmt, root, born = (c.gid, c.topic, c.payload, c.presettled,
                                                                 c.message_format, c.root, c.born)
            chosen, user, resent = c.chosen, c.user, c.resent
        else:
            gid, topic, payload, presettled, fmt, root, born = (record.gid, record.topic, record.payload,
                                                                 record.presettled, record.message_format,
                                                                 self.router_id, record.born)
            chosen = tuple((k, g, r) for k, (g, r) in record.chosen.items()) if record.chosen else ()
            pub = record.publisher
            user = pub.user if pub is not None else ""
            resent = record.resent
        onward = self.plans.onward(visited)
        if one is not None:
            one.queue.append(Copy(gid, topic, payload, presettled, fmt, root, stream, born, tuple(targets),
                                  onward, chosen, user, resent))
            self.to_send[one] = None
            return
        for peer, routers in by_hop.items():
            hop = self.hops.get(peer)
            if hop is None or peer in visited:
                continue  # no way on that does not go back: the root sends it again
            carried = (tuple(targets) if len(by_router) == 1
                       else tuple(t for r in sorted(routers) for t in by_router[r]))
            hop.queue.append(Copy(gid, topic, payload, presettled, fmt, root, stream, born, carried, onward,
                                  chosen, user, resent))
            self.to_send[hop] = None

    def add_hop(self, peer: str, port: HopPort) -> Hop:
        hop = Hop(peer, port)
        self.hops[peer] = hop
        self.dirty = True
        self.plans.graph_changed()
        return hop

    def add_upstream(self, peer: str, port: UpstreamPort) -> Upstream:
        up = Upstream(peer, port)
        self.upstreams[peer] = up
        self.replenish_transit()
        return up

    def hop_lost(self, peer: str) -> None:
        hop = self.hops.pop(peer, None)
        if hop is not None:
            hop.attached = False
            hop.queue.clear()
            self.dirty = True
            self.plans.graph_changed()

    def upstream_lost(self, peer: str) -> None:
        up = self.upstreams.pop(peer, None)
        if up is not None:
            up.attached = False
            self.credit.upstream_gone(up)

    def pump_hop(self, hop: Hop) -> None:
        """The hop's link has credit again: its copies go as the batch ends."""
        self.to_send[hop] = None

    def send(self, hop: Hop) -> None:
        """Send the copies queued on ``hop`` while its link has credit (only as the batch ends)."""
        if not hop.attached:
            return
        queue = hop.queue
        if not queue:
            return
        port = hop.port
        credit = port.credit()
        sent = 0
        while credit > 0 and queue:
            copy = queue.popleft()
            port.copy(copy)
            credit -= 1
            sent += 1
            if self.journal is not None:
                self.journal.add(Event.FORWARDED, copy.gid, copy.topic, hop.peer)
        if sent:
            hop.sent += sent
            self.stats["forwarded"] += sent
            self.credit.want_pass()

    def replenish_transit(self) -> None:
        """Credit for neighbours passing copies to us: what we hold for other roots, held in
        chains and queued onwards counts against the transit window."""
        ups = [u for u in self.upstreams.values() if u.attached]
        queued = sum(len(h.queue) for h in self.hops.values())
        held, size = self.held()
        self.credit.grant_transit(ups, held + queued, size)
