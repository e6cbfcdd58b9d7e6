"""The acceptance protocol (``docs/protocol.md``): copies to destination routers, answers to
the root, order by sequence. A part of ``Core``; consumer groups' members are chosen by
the root (``groups.py``) and travel with each copy.

Three roles, one router may play all of them for one message:

* **Root** (the publisher's router): fixes the owed set (``records/owed.py``: remote keys
  and the router each copy went to), numbers each copy in its stream's sequence to that
  router (``Positions``), sends, and waits for the ``FAR`` stand-in in the record until
  every remote key is final (``answers.py``, a part this one holds, reads the answers).
  It sends again what has no answer when the graph changes and every ``router_dead_after``;
  it re-targets a key only on what its subscriber table shows. Never on a lost
  neighbour: that is no evidence about the routers behind it.
* **Relay** (``relay.py``, the data links, a part this one holds): passes a copy on
  towards its other destinations, never back to a router it visited, and keeps nothing.
  A destination it cannot reach is left out (the root sends it again).
* **Destination** (``destination.py``, a part this one holds): takes copies in their
  sequence (``records/chain.py``), queues them for the keys they are owed to, and once
  those keys are final answers the root, routed by router id over the control links. It
  never waits for another router's answer; it forgets the message on the root's
  ``Settle`` and keeps a tombstone, so a late copy is answered, never delivered twice.

No router waits for another's waiting: the wait-for graph is a star around each root.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from once.records.far import Far, Positions
from once.records.owed import KeyState, Owed, Said
from once.records.table import IN_DOUBT

from .answers import Answers
from .credit import CreditWindow
from .destination import Destination
from .effects import Effects
from .endings import Endings
from .inquiry import Inquiry
from .messages import Answer, Ask, Control, Copy, CopyTarget, Ended, Forgot, Handed, Settle
from .parts import DeliveryPart, FailoverPart, GroupsPart
from .peers import FAR, CoreRecord, CoreRecords, Subscriber, Upstream, keeps_own_tombstone
from .plans import Plans
from .ports import RoutesPort
from .relay import Relay
from .tables import CoreTables, Key

PENDING = KeyState.PENDING

_ACCEPTED_SAID: tuple[Said, Any] = (Said.ACCEPTED, None)


class Copies:
    __slots__ = ("router_id", "settings", "records", "topics", "clock", "credit", "routes", "send_to",
                 "relay", "hops", "upstreams", "positions", "dest", "endings", "answers", "inquiry", "told_at", "outgoing", "plans", "only_me",
                 "streams", "_dispatch", "delivery", "failover", "groups", "stamp", "effects")

    def __init__(self, tables: CoreTables, credit: CreditWindow, routes: RoutesPort,
                 send_to: Callable[[str, tuple[Control, ...]], None], effects: Effects) -> None:
        self.router_id = tables.router_id
        self.stamp = tables.stamp  # (the stamp clock: a stream's name takes one)
        self.effects = tables.effects
        self.settings = tables.settings
        self.records: CoreRecords = tables.records
        self.topics = tables.topics
        self.clock = tables.clock
        self.credit = credit
        self.routes = routes
        self.send_to = send_to  # control items to a router, relayed by the network
        self.positions: dict[tuple[bytes, str], Positions] = {}  # (stream, router) -> its sequence
        self.dest = Destination(tables, self._queue, routes.reachable)  # this router's own part of each copy
        self.endings = Endings(tables, routes, self._queue, self.dest)  # members that ended here
        # (what answers do at the root: ``answers.py``)
        self.answers = answers = Answers(tables, routes, self.positions, self._queue, self._send, self.resend,
                                         self._root_far)
        self.inquiry = Inquiry(tables, routes, self._queue, self.dest, answers.unowe, answers.send_back,
                               answers.holds_at, self.endings)
        self.told_at = 0.0  # when what members that ended here had was last told again  # a resent message's members, asked
        self.outgoing: dict[str, list[Control]] = {}  # batched per router, sent after the batch
        self.plans = plans = Plans(self.router_id, self.topics, routes)  # owed sets and routes, reused
        # the data links (``relay.py``); transit credit counts what we hold for other roots
        self.relay = relay = Relay(tables, credit, plans, lambda: (
            len(self.records) - self.delivery.root_records() + self.dest.held, self.records.bytes + tables.reserve.bytes), effects)
        self.hops, self.upstreams = relay.hops, relay.upstreams
        self._dispatch = relay.dispatch
        self.only_me = frozenset({self.router_id})
        self.streams = 0
        self.delivery: DeliveryPart
        self.failover: FailoverPart
        self.groups: GroupsPart

    def connect(self, delivery: DeliveryPart, failover: FailoverPart, groups: GroupsPart) -> None:
        self.dest.connect(delivery, groups)
        self.answers.connect(self.inquiry, delivery, failover, groups)
        self.delivery = delivery
        self.failover = failover
        self.groups = groups

    # ------------------------------------------------------------- root

    def _root_far(self, record: CoreRecord) -> Far:
        far: Far | None = record.far
        if far is None:
            record.far = far = Far()
        if far.owed is None:
            far.owed = Owed({})
            far.stream = self._stream(record)
        return far

    def forward(self, record: CoreRecord, dests: set[str], exclude: str | None,
                keys: frozenset[Key] | None = None) -> None:
        """The root sends ``record`` to the remote keys at ``dests`` (only ``keys``, if given)
        not owed it yet."""
        if not record.local:
            return
        if keys is None and record.far is None and not record.chosen:
            # A fresh publish (the hot path): the topic's plan, made once per table.
            owed_map, by_router = self.plans.plan(record.topic, dests)
            if by_router:
                far = Far()
                record.far = far
                far.stream = self._stream(record)
                far.owed = Owed(owed_map, shared=True) if not record.presettled else Owed({})
                self._number(record, far, by_router, record.resent)
            return
        if keys is None:
            remote = self.plans.remote_keys(record.topic)
            wanted = {k: r for k, r in remote.items() if r in dests}
            chosen = record.chosen
            if chosen:  # one member per group, as the root chose, where it lives now
                here = self.topics.get(record.topic) or {}
                # (an adopted record names the member's router when it was chosen, not where it lives now:
                # ``test_fresh_group_seed_an_adopted_message_goes_to_its_member_where_it_lives_now``)
                home = {k: r for r, ks in self.routes.homes([k for k in chosen if k not in here]).items() for k in ks}
                released = self.groups.releasers_of(record.gid)
                for k, (group, router) in chosen.items():
                    if k in released:
                        continue  # (chosen once and gave it back: another member has it now)
                    where = home.get(k, router)
                    if where != self.router_id and k not in here:
                        wanted[k] = where
                        if where != router:
                            chosen[k] = (group, where)
        else:
            wanted = {k: where for where, ks in self.routes.homes(keys).items() for k in ks}
        if not wanted:
            return
        far = self._root_far(record)
        owed = far.owed
        assert owed is not None
        new: dict[str, set[Key]] = {}
        for k, r in wanted.items():
            if k in owed.states or r == self.router_id:
                continue
            new.setdefault(r, set()).add(k)
        if new:
            self._send(record, far, new, keys is not None or record.resent)

    def _stream(self, record: CoreRecord) -> bytes:
        pub = record.publisher
        if pub is None:
            return b""
        if not pub.stream:
            self.streams += 1
            pub.stream = f"{self.router_id}/{self.stamp()}/{self.streams}".encode()
        return pub.stream

    def _send(self, record: CoreRecord, far: Far, new: dict[str, set[Key]], redelivery: bool) -> None:
        owed = far.owed
        assert owed is not None
        if not record.presettled:
            for router, ks in new.items():
                for k in ks:
                    owed.add(k, router)
        self._number(record, far, {r: frozenset(ks) for r, ks in new.items()}, redelivery)

    def _number(self, record: CoreRecord, far: Far, new: dict[str, frozenset[Key]], redelivery: bool) -> None:
        """Give each router's copy its next position in the stream, and send."""
        owed = far.owed
        assert owed is not None
        presettled = record.presettled
        targets = []
        positions = self.positions
        for router, fk in new.items():
            box = positions.get((far.stream, router))
            if box is None:
                self.positions[(far.stream, router)] = box = Positions()
            position = box.next
            box.next += 1
            if not presettled:
                box.unanswered[position] = record.gid
            sends = far.sends.get(router)
            if sends is None:
                far.sends[router] = [(position, fk, redelivery)]
            else:
                sends.append((position, fk, redelivery))
            # ``low`` never past the copy itself: a pre-settled copy is never unanswered, and
            # its own position as "answered below" had the destination drop it as a repeat
            # (no pre-settled publish crossed a router before: found with MQTT QoS 0).
            targets.append(CopyTarget(router, fk, position, min(box.low(), position), redelivery))
        if not presettled and owed.pending:
            record.reopen(FAR)
            far.numbered = True
        far.sent_at = self.clock()
        self._dispatch(record, far.stream, targets, self.only_me)

    def resend(self, record: CoreRecord, far: Far) -> None:
        """Send again every copy that still has a key with no answer."""
        owed = far.owed
        if owed is None or not owed.pending:
            return
        pending = owed.pending_at()
        targets = []
        for router, keys in pending.items():
            box = self.positions.get((far.stream, router))
            low = box.low() if box is not None else 1
            for position, ks, _ in far.sends.get(router, ()):
                owed_there = ks & keys
                if owed_there:  # (only those still owed: a member replaced since must not get it)
                    # Marked: the copy sent before may have been delivered there by a life of
                    # that router that is gone now (it restarted), or whose record of it is.
                    targets.append(CopyTarget(router, frozenset(owed_there), position, low, True))
        far.sent_at = self.clock()
        self._dispatch(record, far.stream, targets, frozenset({self.router_id}))

    def sent_elsewhere(self, record: CoreRecord, key: Key, router: str) -> bool:
        return self.answers.sent_elsewhere(record, key, router)

    def send_back(self, record: CoreRecord, key: Key, router: str) -> None:
        self.answers.send_back(record, key, router)

    def adopted(self, record: CoreRecord) -> None:
        """A publisher that resumed here sent ``record`` again. Ours already: what is owed
        goes on in the new attach's stream. Held as a destination: the keys we took it for
        that are not here any more are owed it where they live now (the old root may be
        gone, and with it what it knew)."""
        far = record.far
        if far is None:
            return
        stream = self._stream(record)
        if far.owed is not None and far.stream != stream:
            # Ours already, from an earlier attach: what is still owed goes again in the new
            # attach's stream, which has it first; in the old one it may come after newer ones
            # (``test_hard_seed_904_a_crashed_publisher_resending_at_its_root_keeps_its_order``).
            self.answers.unnumber(far)
            far.stream = stream
            far.sends = {}
            pending = {r: frozenset(ks) for r, ks in far.owed.pending_at().items() if r != self.router_id}
            if pending:  # (sent before: marked, as every re-send is)
                self._number(record, far, pending, True)
        if not far.takes:
            return
        subs = self.topics.get(record.topic) or {}
        # (not a key that closed here: it is owed nothing anywhere; owed where a stale
        # attach of it lived, it was waited for there for ever: ``--hard --groups`` churn
        # seed 505583188490513, a member that left, its old router restarted)
        closed = self.dest.closed
        # (nor a member that released it here: the question this root asks chooses for its
        # group; followed to where it went, it processed what another member had: fresh
        # groups --releases seed 1031)
        released = far.earlier or {}
        # (nor a group member: the question a root that takes a group message over asks
        # chooses, and sends to the member chosen where it lives; owed here too, one that
        # left was waited for for ever: fresh churn seed 610878216742)
        members = record.chosen or {}
        ours = self.endings.member_groups  # (members that were ours, kept after they left)
        gone = frozenset(k for _, _, _, keys in far.takes for k in keys
                         if (k not in subs or subs[k] not in record.states) and k not in closed
                         and k not in members and k not in ours
                         and released.get(k, _ACCEPTED_SAID)[0] is not Said.RELEASED)
        if gone:
            self.forward(record, set(), None, gone)

    def settled(self, record: CoreRecord) -> None:
        """The root's record is settled: every router it went to forgets it."""
        far = record.far
        if far is None or not record.local:
            return
        owed = far.owed
        # A router with keys that have not answered yet (the publisher went, and its grace
        # is over) is settled when the record is freed: until then it answers again, so an
        # answer lost on the way (a cut link) comes again, and a member that accepted is not
        # taken for gone (``test_seed_found_while_building_the_question``, seed 1647).
        if owed is not None and owed.pending:
            far.settle_later = waiting = frozenset(owed.pending_at())
            for router in far.sends:
                if router not in waiting:
                    self._queue(router, Settle(record.gid))
            return
        settle = Settle(record.gid)
        for router in far.sends:
            self._queue(router, settle)

    def table_changed(self, reachable: set[str]) -> None:
        """The graph or the table changed: re-target keys that live elsewhere now, in publish
        order, before anything newer goes to them; send again what a lost link may have had."""
        self.plans.table_changed()
        resend, self.relay.dirty = self.relay.dirty, False
        for record in list(self.records.records.values()):  # publish order
            far = record.far
            if far is None or far.owed is None or not record.local or not far.owed.pending:
                continue
            owed = far.owed
            pending = [k for k, st in owed.states.items() if st is PENDING]
            moved: dict[str, set[Key]] = {}
            for where, keys in self.routes.homes(pending).items():
                for key in keys:
                    if owed.moved(key, where):
                        moved.setdefault(where, set()).add(key)
            if moved:
                self.answers.retarget(record, far, moved)
            if resend:
                self.resend(record, far)

    # ------------------------------------------------------ destination

    def copy_arrived(self, up: Upstream, copy: Copy) -> None:
        """A neighbour passed a copy to us: take our part, pass the rest on."""
        if up.credit > 0:
            self.credit.transit_used(up)
        me = self.router_id
        mine: list[CopyTarget] = []
        rest: list[CopyTarget] = []
        for t in copy.targets:
            (mine if t.router == me else rest).append(t)
        if rest:
            self._dispatch(copy, copy.stream, rest, copy.visited)
        for t in mine:
            self.dest.arrive(copy, t)

    def control(self, frm: str, items: Iterable[Control]) -> None:
        """Control items routed to us."""
        for item in items:
            kind = type(item)
            if kind is Answer:
                self.answers.answered_from(frm, item)  # type: ignore[arg-type]
            elif kind is Settle:
                self.dest.settle_from(item.gid, frm)  # type: ignore[union-attr]
            elif kind is Forgot:
                self.dest.settle_from(item.gid, frm, forgotten=True)  # type: ignore[union-attr]
            elif kind is Ask:
                self.inquiry.asked(frm, item)  # type: ignore[arg-type]
            elif kind is Ended:
                self.endings.ended(frm, item)  # type: ignore[arg-type]
            elif kind is Handed:
                self.endings.handed(item)  # type: ignore[arg-type]
            else:
                self.inquiry.told(frm, item)  # type: ignore[arg-type]

    def _queue(self, router: str, item: Control) -> None:
        if router == self.router_id:
            self.control(router, (item,))
            return
        self.outgoing.setdefault(router, []).append(item)

    def flush(self) -> None:
        """Send the control items gathered in this batch, one message per router."""
        if self.outgoing:
            out, self.outgoing = self.outgoing, {}
            for router, items in out.items():
                self.send_to(router, tuple(items))

    # --------------------------------------------------- moved and closed

    def subscriber_moved(self, sub: Subscriber, where: str, unlink: Callable[[Subscriber], None],
                         until: float | None = None) -> None:
        """A suspended subscriber's key attached at router ``where``. As root we send what it
        had not accepted there; as a destination we answer ``moved`` (its root sends it).
        ``where`` is this router for a key given up as a gap (``Core.expire_suspended``):
        its home is not known yet, and ``moved`` is answered until ``until``."""
        if not sub.attached or sub.suspended_until is None:
            return
        held = [r for r in self.records.records.values() if sub in r.states]
        sub.suspended_until = None
        unlink(sub)
        sub.attached = False
        sub.queue.clear()
        s = self.settings
        self.dest.departed[sub.key] = (where, until if until is not None
                                       else self.clock() + max(s.router_dead_after, s.subscriber_grace))
        delivery = self.delivery
        for record in held:
            in_doubt = record.states.get(sub) is IN_DOUBT
            if in_doubt and record.local and not record.presettled:
                far = self._root_far(record)
                self._send(record, far, {where: {sub.key}}, True)
            self.dest.keep_said(record, sub)
            done = record.drop_waiter(sub)
            if in_doubt:
                delivery.answered(record, done)
            else:
                delivery.maybe_free(record)

    # ------------------------------------------------------------ timers

    def expire(self, now: float) -> int:
        """Every tick: send again what has had no answer for ``router_dead_after``; the
        destination's own timers (``Destination.expire``)."""
        retry = self.settings.router_dead_after
        for record in list(self.records.records.values()):
            far = record.far
            if (far is not None and record.local and far.owed is not None and far.owed.pending
                    and now - far.sent_at >= retry):
                self.resend(record, far)
        if self.inquiry.asking or self.inquiry.early:
            self.inquiry.expire(now)
        if (self.dest.left_had or self.endings.gone) and now - self.told_at >= retry:
            self.told_at = now
            self.endings.tell_again()
        return self.dest.expire(now)

    # ------------------------------------ the destination's, for the other parts

    def held_copies(self) -> dict[str, list[Any]]:
        return self.dest.held_copies()

    def subscriber_closed(self, key: Key) -> None:
        self.dest.subscriber_closed(key)

    def freed(self, record: CoreRecord) -> None:
        """``record`` was freed: a root lets its positions go; a destination keeps a tombstone."""
        if record.local and (self.inquiry.asking or self.inquiry.held or self.inquiry.returned or self.inquiry.deferred):
            self.inquiry.freed(record)
        far = record.far
        if far is None:
            if keeps_own_tombstone(record):
                self.dest.freed(record)
            return
        if far.settle_later and record.local:
            for router in far.settle_later:
                self._queue(router, Settle(record.gid))
        if far.owed is not None and far.numbered:
            self.answers.unnumber(far)
        if far.takes or keeps_own_tombstone(record):
            self.dest.freed(record)
