"""Answers at the root (``docs/protocol.md`` sections 4 to 8): what a destination's answer
for a copy does to the root's owed set (``records/owed.py``): a key final, moved (sent again
where it lives now), released or gone (a group member chosen again, or the message sent
back to it), taken (another root chooses); and the copies' positions that no longer hold
``low`` back once nothing is owed for them. A record with nothing owed is answered to its
publisher's part (``DeliveryPart.answered``).

A part of ``Copies`` (``copies.py``), which sends (``send``, ``resend``) and hands it the
answers that come; ``Inquiry`` calls ``unowe``, ``send_back`` and ``holds_at``.
"""

from __future__ import annotations

from collections.abc import Callable

from once.records.far import Far, Positions
from once.records.owed import KeyState, Owed, Said
from once.records.table import IN_DOUBT, SUB_ACCEPTED, SUB_REJECTED

from .inquiry import Inquiry
from .messages import Answer, Control, Forgot
from .parts import DeliveryPart, FailoverPart, GroupsPart
from .peers import ASKING, FAR, CoreRecord, CoreRecords
from .ports import RoutesPort
from .tables import CoreTables, Key

PENDING = KeyState.PENDING
_MEMBER_GONE = (Said.CLOSED, Said.EXPIRED)


class Answers:
    __slots__ = ("router_id", "records", "topics", "effects", "routes", "positions", "queue", "send", "resend",
                 "root_far", "inquiry", "delivery", "failover", "groups")

    def __init__(self, tables: CoreTables, routes: RoutesPort, positions: dict[tuple[bytes, str], Positions],
                 queue: Callable[[str, Control], None],
                 send: Callable[[CoreRecord, Far, dict[str, set[Key]], bool], None],
                 resend: Callable[[CoreRecord, Far], None], root_far: Callable[[CoreRecord], Far]) -> None:
        self.router_id = tables.router_id
        self.records: CoreRecords = tables.records
        self.topics = tables.topics
        self.effects = tables.effects
        self.routes = routes
        self.positions = positions  # (the root's, shared with ``Copies``: (stream, router) -> its sequence)
        self.queue = queue
        self.send = send  # a copy to each router, of the keys owed there (``Copies._send``)
        self.resend = resend  # what has no answer, again (``Copies.resend``)
        self.root_far = root_far  # the record's root state, made if it has none (``Copies._root_far``)
        self.inquiry: Inquiry
        self.delivery: DeliveryPart
        self.failover: FailoverPart
        self.groups: GroupsPart

    def connect(self, inquiry: Inquiry, delivery: DeliveryPart, failover: FailoverPart, groups: GroupsPart) -> None:
        self.inquiry = inquiry
        self.delivery = delivery
        self.failover = failover
        self.groups = groups

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
                self.queue(frm, Forgot(answer.gid))
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
            self.retarget(record, far, retarget)
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
        far = self.root_far(record)
        owed = far.owed
        assert owed is not None
        owed.again(key, router)
        self.send(record, far, {router: {key}}, True)

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
        self.unnumber(record.far)
        record.far.numbered = False
        if owed.rejection is not None:
            done = record.resolve(FAR, SUB_REJECTED, owed.rejection)
        else:
            done = record.resolve(FAR, SUB_ACCEPTED)
        self.delivery.answered(record, done)

    def retarget(self, record: CoreRecord, far: Far, moved: dict[str, set[Key]]) -> None:
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
            self.send(record, far, moved, True)

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

    def unnumber(self, far: Far) -> None:
        """Nothing more is owed for this record: its positions no longer hold ``low`` back
        (a moved key's copy stays unanswered where it was: nobody must wait for it)."""
        for router, sends in far.sends.items():
            box = self.positions.get((far.stream, router))
            if box is not None:
                for position, _, _ in sends:
                    box.unanswered.pop(position, None)
