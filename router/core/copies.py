"""The acceptance protocol (``docs/protocol.md``): copies to destination routers, answers to
the root, order by sequence. A part of ``Core``; consumer groups' members are chosen by
the root (``groups.py``) and travel with each copy.

Three roles, one router may play all of them for one message:

* **Root** (the publisher's router): fixes the owed set (``records/owed.py``: remote keys
  and the router each copy went to), numbers each copy in its stream's sequence to that
  router (``Positions``), sends, and waits for the ``FAR`` stand-in in the record until
  every remote key is final. It sends again what has no answer when the graph changes
  and every ``router_dead_after``; it re-targets a key only on what its subscriber table
  shows. Never on a lost neighbour: that is no evidence about the routers behind it.
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
from once.records.table import IN_DOUBT, SUB_ACCEPTED, SUB_REJECTED

from .credit import CreditWindow
from .destination import Destination
from .effects import Effects
from .endings import Endings
from .inquiry import Inquiry
from .messages import Answer, Ask, Control, Copy, CopyTarget, Ended, Forgot, Handed, Settle
from .parts import DeliveryPart, FailoverPart, GroupsPart
from .peers import ASKING, FAR, CoreRecord, CoreRecords, Subscriber, Upstream, keeps_own_tombstone
from .plans import Plans
from .ports import RoutesPort
from .relay import Relay
from .tables import CoreTables, Key

PENDING = KeyState.PENDING
_MEMBER_GONE = (Said.CLOSED, Said.EXPIRED)

_SAID_OF = {SUB_ACCEPTED: Said.ACCEPTED, SUB_REJECTED: Said.REJECTED}
_ACCEPTED_SAID: tuple[Said, Any] = (Said.ACCEPTED, None)


class Copies:
    __slots__ = ("router_id", "settings", "records", "topics", "clock", "credit", "routes", "send_to",
                 "relay", "hops", "upstreams", "positions", "dest", "endings", "inquiry", "told_at", "outgoing", "plans", "only_me",
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
        self.inquiry = Inquiry(tables, routes, self._queue, self.dest, self.unowe, self.send_back, self.holds_at,
                               self.endings)
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

    def answered_from(self, frm: str, answer: Answer) -> None:
        """A destination's answer for a copy we sent it."""
        box = self.positions.get((answer.stream, frm))
        if box is None:
            self._answered(frm, answer)
            return
        unanswered = box.unanswered
        low = box.low() if unanswered else 0
        unanswered.pop(answer.position, None)
        self._answered(frm, answer)
        if unanswered:
            new = box.low()
            if new > low + 1 and low:
                # ``low`` jumped a gap (positions no longer needed there): the copy now
                # lowest may be held behind it at ``frm``, until our next re-send tells it
                # the new ``low``. Sent now: one gap per round trip, not per ``router_dead_after``,
                # which over a few gaps outlasts what a router remembers of a close
                # (``test_seed_found_while_building_the_question``, seed 4226).
                gid = unanswered[new]
                record = self.records.get(gid) if gid is not None else None
                if record is not None and record.far is not None and record.local:
                    self.resend(record, record.far)

    def _answered(self, frm: str, answer: Answer) -> None:
        record = self.records.get(answer.gid)
        far = record.far if record is not None else None
        if record is None or far is None or far.owed is None or not record.local:
            if record is None and (answer.stream or answer.position):
                # (not for what a member that ended there had, told to every router: a
                # router that restarted since, settling the teller's copy of its old life,
                # had it drop a subscriber waiting there, whose message then came from the
                # publisher's new root after newer ones: ``--hard`` churn seed 505583188490427)
                self._queue(frm, Forgot(answer.gid))
            return
        owed = far.owed
        done = False
        retarget: dict[str, set[Key]] = {}
        chosen = record.chosen
        if chosen is not None and answer.stream == far.stream:
            if far.heard is None:
                far.heard = set()
            far.heard.add((frm, answer.position))
        said_all = answer.said
        if not said_all:
            if answer.stream == far.stream:
                # Every key of the copy accepted: the copy we sent at that position, those of
                # its keys we still owe there (one that moved on since is owed where it went;
                # a re-sent copy names only the keys still owed there, so the copy it answers
                # may be smaller).
                position = answer.position
                sends = far.sends.get(frm, ())
                for i, (sent, keys, _) in enumerate(sends):
                    if sent != position:
                        continue
                    # Not for a key we sent there again in a later copy (it moved away and
                    # back, or was given it back): that copy answers for it. This one may
                    # have been re-sent without it while it was owed elsewhere, and its
                    # router's "every key accepted" then meant the others only (fresh hard
                    # churn seed 199772157079: the member came back, by a stale view, to the
                    # router it had left, which answered the copy re-sent without it
                    # "accepted", and the publisher heard `accepted`; no member had it).
                    for later, ks, _ in sends[i + 1:]:
                        if later > position:
                            keys = keys - ks
                    if owed.accepted_at(keys, frm):
                        done = True
        for key, said, error in said_all:
            if said is Said.TAKEN:
                # Another root chooses now (inquiry.py), unless we ask (the newest question
                # decides: an older fence that refuses our copy does not make us give way;
                # ``test_seed_found_while_building_the_question``, seed 55) or our publisher is
                # back here (the other root asked while it was there: we ask again, the newest).
                # Then the key stays owed, sent again under our fence, marked: it may come after
                # newer ones (``test_a_root_the_publisher_came_back_to_asks_again_as_the_newest``).
                pub = record.publisher
                if record.states.get(ASKING) is IN_DOUBT or pub is not None and pub.attached:
                    if record.states.get(ASKING) is not IN_DOUBT:
                        self.inquiry.ask(record, hold=False)
                    far.sends[frm] = [(p, ks, r or key in ks) for p, ks, r in far.sends.get(frm, ())]
                    continue
                self.inquiry.taken(answer.gid)
                if chosen and key in chosen:
                    self.inquiry.defer(record.gid, key)
            if said is Said.RELEASED:
                # (only for our latest copy to it there: one it released before we sent it
                # back, answered again late, must not pass on what it has now; ``--hard``
                # churn seed 403)
                if (owed.where.get(key) == frm and owed.states.get(key) is PENDING
                        and answer.stream == far.stream
                        and answer.position == max((p for p, ks, _ in far.sends.get(frm, ()) if key in ks), default=-1)):
                    if chosen and key in chosen:
                        done = self._released(record, far, owed, key, frm) or done
                    else:  # (no longer our choice: a question chose another since)
                        done = owed.answer(key, frm, Said.CLOSED) or done
                continue
            if (chosen and key in chosen and owed.where.get(key) == frm and owed.states.get(key) is PENDING
                    and (said in _MEMBER_GONE or said is Said.UNKNOWN and self._gone_member(record, key))):
                # A group member left before it answered: the root chooses again (only the
                # root does); nobody left, its answer stands. ``unknown`` for a member in no
                # table is its leaving too: its router may forget the close before this copy
                # comes (``test_leaves_seed_449_a_copy_that_comes_after_the_router_forgot_the_member_closed``).
                # (Had it processed it, its router would have the record.)
                pub = record.publisher
                gone = pub is None or not pub.attached
                if gone and record.publisher_settled:
                    # Settled without its publisher (it did not resume within its grace):
                    # what a member that left had is forgotten everywhere by now, and
                    # another root may have had it processed: no new member is chosen, at
                    # most once (``test_seed_found_while_building_the_question``, seed 1647).
                    said = Said.CLOSED
                elif ((gone or said is Said.UNKNOWN or record.resent) and record.states.get(ASKING) is not IN_DOUBT
                        and not self.inquiry.fenced_out(record.gid)):
                    # Our publisher went: it may have resumed at a router that took the
                    # message over and chose there, and a second member would process it
                    # (``test_seed_found_while_building_the_question``, seed 1647). Or ``unknown``,
                    # which is no evidence: the member may have had it at a router it resumed
                    # at since (``test_fresh_leaves_seed_what_a_member_that_ended_had_reaches_every_root``).
                    # Or we took it over (``resent``): the root before may have chosen again
                    # since (fresh churn seed 115630914409: it passed the message on once its
                    # own question was answered, and we, passing on from its copy's choice,
                    # gave it to a third member). We ask before choosing again.
                    self.inquiry.ask(record, hold=False)
                    said = Said.CLOSED
                elif record.states.get(ASKING) is not IN_DOUBT and self.inquiry.fenced_out(record.gid):
                    # Another root's question fenced it (our publisher resumed there): that
                    # root chooses, and we give the member up to it, noted, as a release heard
                    # then is (``Inquiry.give_up``): if our publisher is back here, or comes
                    # back, we ask again, the newest root. Taking ``closed`` alone, the record
                    # completed with no member (``--groups --releases --leaves --joins
                    # --elastic`` seed 453: the asker died before it chose, the publisher came
                    # back to us, and six messages were accepted that no member had).
                    self.inquiry.give_up(record, key)
                elif (by := self.groups.pass_on(record, chosen[key][0], key)) is not None:
                    if self._replace(record, owed, key, by):
                        done = True
                    continue
                if said is Said.UNKNOWN:
                    said = Said.CLOSED
            if owed.answer(key, frm, said, error):
                done = True
            elif said in (Said.MOVED, Said.UNKNOWN) and owed.where.get(key) == frm:
                home = self.routes.homes((key,))
                for where in home:
                    if where != frm and owed.moved(key, where):
                        retarget.setdefault(where, set()).add(key)
        if retarget:
            self._retarget(record, far, retarget)
        if done or (owed.pending == 0 and record.states.get(FAR) is IN_DOUBT):
            self._far_done(record, owed)
        else:
            self._answered_positions(far)

    def _released(self, record: CoreRecord, far: Far, owed: Owed, key: Key, frm: str) -> bool:
        """Group member ``key`` released ``record`` at ``frm`` (``docs/protocol.md`` section
        8): a member that has not had it gets it, chosen by the rule of the first choice
        less those chosen before (a root that takes the message over, hearing the same,
        chooses the same), as when a member leaves; with nobody left, it goes back to
        ``key``, in a later copy of ours, which its router delivers. Returns whether that
        completed the record."""
        chosen = record.chosen
        assert chosen is not None
        self.groups.released(record.gid, key)  # (a question's choice leaves it out)
        if self.inquiry.fenced_out(record.gid):
            self.inquiry.give_up(record, key)
            return owed.answer(key, frm, Said.CLOSED)  # (another root chooses now)
        if record.states.get(ASKING) is IN_DOUBT:
            return False  # (we ask: the answers choose, and leave it out)
        pub = record.publisher
        gone = pub is None or not pub.attached
        if gone and record.publisher_settled:
            # Settled without its publisher: nobody new is chosen, at most once, as for a
            # member that left (another root may have had it processed).
            return owed.answer(key, frm, Said.CLOSED)
        if gone or record.resent:
            # Its publisher may have resumed at a router that took it over and chose there,
            # or we took it over and the root before may have chosen again: we ask first.
            # It stays owed until the answers choose: it is chosen again only if every
            # member released it (else it is no longer owed it: ``unowe``).
            self.inquiry.ask(record, hold=False)
            return False
        if self.sent_elsewhere(record, key, frm):
            self.send_back(record, key, frm)  # (not passed on while another copy to it may reach it)
            return False
        by = self.groups.pass_on(record, chosen[key][0], key)
        if by is not None:
            return self._replace(record, owed, key, by)
        self.send_back(record, key, frm)  # (it left the group meanwhile: back to it all the same)
        return False

    def sent_elsewhere(self, record: CoreRecord, key: Key, router: str) -> bool:
        """Whether a copy of ours for ``key`` to another router than ``router`` has no
        answer yet: that router may still hand it the message (it may not know the key
        moved: fresh churn seed 969800362002), so a release is not passed on. Judged by the
        answers heard (``Far.heard``), not by ``Positions.unanswered``, which stops waiting
        for a copy once its key moved: a router cut off since still has that copy queued for
        the member, and hands it over if the member comes back there (fresh hard churn seed
        199772161761: two members processed one message)."""
        far = record.far
        if far is None or not far.sends:
            return False
        heard = far.heard or ()
        for there, sends in far.sends.items():
            if there == router:
                continue
            for position, keys, _ in sends:
                if key in keys and (there, position) not in heard:
                    return True
        return False

    def unanswered_at(self, record: CoreRecord, key: Key, but: str | None = None) -> str | None:
        """A router (not ``but``) a copy of ours for ``key`` went to with no answer yet."""
        far = record.far
        if far is None or not far.sends:
            return None
        for there, sends in far.sends.items():
            if there == but:
                continue
            box = self.positions.get((far.stream, there))
            if box is None or not box.unanswered:
                continue
            for position, keys, _ in sends:
                if key in keys and position in box.unanswered:
                    return str(there)
        return None

    def holds_at(self, record: CoreRecord, key: Key) -> str | None:
        """Where our own share of ``record`` for group member ``key`` stands: a copy of ours
        with no answer yet (``unanswered_at``), one it accepted or rejected (our owed set:
        it had it), or here, at the root, where it waits as a local subscriber (``HERE``:
        what it was owed followed it here). A question's choice keeps it: its share went on
        while we asked, and choosing another, two members process the message (fresh hard
        churn seeds 199772154420: its copy where it moved was accepted before the answers
        came; 199772162102: it came to the root and was queued there)."""
        where = self.unanswered_at(record, key)
        if where is not None:
            return where
        far = record.far
        owed = far.owed if far is not None else None
        state = owed.states.get(key) if owed is not None else None
        if owed is not None and (state is KeyState.ACCEPTED or state is KeyState.REJECTED):
            there: str | None = owed.where.get(key)
            return there
        if state is KeyState.HERE:
            sub = (self.topics.get(record.topic) or {}).get(key)
            if sub is not None and sub in record.states:
                return self.router_id
        return None

    def _replace(self, record: CoreRecord, owed: Owed, key: Key, by: Key) -> bool:
        """``key``'s share of ``record`` went to ``by`` (``Groups.pass_on``: a new member, or
        one that released it before and gets it back): ``key`` is owed nothing more, unless
        it is ``by``. Returns whether that completed the record."""
        if by == key:
            return False
        router = (record.chosen or {})[by][1]
        owed.replace(key, by, router)
        if router == self.router_id:
            owed.here(by)  # a member here: waited for as a local subscriber
        return owed.pending == 0

    def send_back(self, record: CoreRecord, key: Key, router: str) -> None:
        """Group member ``key``, which released ``record``, gets it again at ``router``:
        every member released it. A later copy of ours, marked, which its router delivers
        (``Destination.released_at``); at the root, queued for it again."""
        self.groups.unreleased(record.gid, key)
        if router == self.router_id:
            far = record.far
            if far is not None and far.owed is not None:
                # (waited for here, and owed where it moves to: fresh hard churn seed
                # 421388614793, a member given it back here moved on, its copy not waited for)
                far.owed.back_here(key)
            self.failover.enqueue_owed(record, frozenset({key}))
            return
        far = self._root_far(record)
        owed = far.owed
        assert owed is not None
        owed.again(key, router)
        self._send(record, far, {router: {key}}, True)

    def unowe(self, record: CoreRecord, keys: set[Key]) -> None:
        """Members the root no longer chose for ``record`` (it asked, and chose others)."""
        far = record.far
        owed = far.owed if far is not None else None
        if owed is None:
            return
        done = False
        for key in keys:
            if owed.states.get(key) is PENDING:
                done = owed.answer(key, owed.where[key], Said.CLOSED) or done
        if done:
            self._far_done(record, owed)

    def _gone_member(self, record: CoreRecord, key: Key) -> bool:
        """Whether group member ``key`` is in no router's table any more (it left)."""
        chosen = record.chosen or {}
        members = self.groups.group_view(record.topic).get(chosen[key][0], ())
        return not any(m.key == key for m in members) and not self.routes.homes((key,))

    def _far_done(self, record: CoreRecord, owed: Owed) -> None:
        self._unnumber(record.far)
        record.far.numbered = False
        if owed.rejection is not None:
            done = record.resolve(FAR, SUB_REJECTED, owed.rejection)
        else:
            done = record.resolve(FAR, SUB_ACCEPTED)
        self.delivery.answered(record, done)

    def _retarget(self, record: CoreRecord, far: Far, moved: dict[str, set[Key]]) -> None:
        """Keys owed this message live elsewhere now (``Owed.moved`` has noted where)."""
        here = moved.pop(self.router_id, None)
        if here:
            owed = far.owed
            assert owed is not None
            subs = self.topics.get(record.topic) or {}
            delivery, effects = self.delivery, self.effects
            chosen = record.chosen
            fenced = chosen is not None and self.inquiry.fenced_out(record.gid)
            for key in here:
                sub = subs.get(key)
                if fenced and key in chosen:  # type: ignore[operator]
                    # A group member that came here, while another root chooses for this
                    # message (its publisher resumed there, and it asked us): that root's to
                    # give it to, not ours (fresh churn seed 483033179889: an old root, cut
                    # off, gave its member here a message the member had released elsewhere,
                    # which the new root had passed on: two members processed it)
                    self.unowe(record, {key})
                    self.inquiry.give_up(record, key)
                    continue
                if sub is not None and sub not in record.states:
                    if delivery.enqueue(record, sub, 1):  # (in our records' order: as they came to us)
                        effects.pump(sub)
                if owed.here(key):
                    self._far_done(record, owed)
            if owed.pending:
                self._answered_positions(far)
        if moved:
            # Their old positions stop holding ``low`` back where they were first: those
            # copies will never be sent again, and no chain may wait for them
            # (``test_fresh_seed_two_keys_that_swapped_routers_across_a_partition_leave_no_chain_waiting``).
            self._answered_positions(far)
            self._send(record, far, moved, True)

    def _answered_positions(self, far: Far) -> None:
        """Copies none of whose keys is still owed at their router no longer hold ``low``
        back there: each key is final (answered elsewhere, or came here) or owed at
        another router now (it moved). Their copies need never arrive."""
        owed = far.owed
        assert owed is not None
        pending, where = owed.states, owed.where
        for router, sends in far.sends.items():
            box = self.positions.get((far.stream, router))
            if box is None or not box.unanswered:
                continue
            for position, keys, _ in sends:
                if position in box.unanswered and all(pending.get(k) is not PENDING or where.get(k) != router
                                                      for k in keys):
                    del box.unanswered[position]

    def _unnumber(self, far: Far) -> None:
        """Nothing more is owed for this record: its positions no longer hold ``low`` back
        (a moved key's copy stays unanswered where it was: nobody must wait for it)."""
        for router, sends in far.sends.items():
            box = self.positions.get((far.stream, router))
            if box is not None:
                for position, _, _ in sends:
                    box.unanswered.pop(position, None)

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
            self._unnumber(far)
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
                self._retarget(record, far, moved)
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
                self.answered_from(frm, item)  # type: ignore[arg-type]
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
            self._unnumber(far)
        if far.takes or keeps_own_tombstone(record):
            self.dest.freed(record)
