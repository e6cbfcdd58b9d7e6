"""Asking before choosing again (``docs/protocol.md`` §8): a root that takes over a message
its publisher resent, knowing nothing of it, learns from every other router which
consumer-group members it went to before it chooses them itself.

Only the first root knew its choice of a member per group (and the member's router, and
the routers its copies went to, which carry it). The new root's own choice, by the same
rule, is the same only over the same member table: a member that left or joined in
between makes it another, and both members would process the message
(``test_a_root_that_takes_a_message_over_asks_whom_its_members_were_before_it_chooses``).
So the new root asks every router, and waits:

* A router answers what it knows: the members that had the message here (queued,
  answered, kept after they left, or named in a resuming member's map), and the members a
  copy it holds named as chosen. While a member of the topic's groups is suspended there
  (its client is gone, or the router restarted and has not seen it resume), it cannot
  know: it says so, and is asked again.
* Answering, it **fences** the message: a copy that comes later from another root is not
  delivered to its group members here, and is answered ``taken``: that root chooses no
  member for it any more (not even one of its own), nor does one that was asked. So what
  the new root hears is all there is: a member that gets the message from the old root
  got it before its router answered.
* With every router's answer the root keeps the member that had it, else the one chosen
  before, else chooses by its own rule; and sends the message to that member only.

The root chooses once one round of questions had an answer from every router, none of
them unsure; else it asks everyone again every ``router_dead_after``. A router it cannot
reach holds the choice back, as the root waits for a key at a router it cannot reach
(section 7). Plain subscribers get the message at once; only the groups wait.

A part of ``Copies`` (``copies.py``), which owns it and hands it the ``Ask`` and ``Told``
items that come; it calls the other parts through ``parts.py``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from once.records.membership import GroupId
from once.records.owed import KeyState, Said
from once.records.placeholders import Placeholders
from once.records.table import IN_DOUBT

from .destination import Destination
from .endings import Endings
from .messages import Ask, Control, Told
from .parts import DeliveryPart, FailoverPart, GroupsPart
from .peers import ASKING, CoreRecord, CoreRecords, Publisher, Subscriber
from .ports import RoutesPort
from .questions import HOLDS, RANK, RELEASED, Asking, Early, Member
from .tables import CoreTables, Key

_HAD = (Said.ACCEPTED, Said.REJECTED)  # (``closed``, ``moved``: it never had it here)


class Inquiry:
    __slots__ = ("router_id", "settings", "records", "topics", "clock", "routes", "queue", "dest", "unowe", "asking",
                 "held", "again", "releasing", "decided", "stashed", "taken_over", "placeholders",
                 "early", "delivery", "failover", "groups", "tables",
                 "send_back", "holds_at", "deferred", "returned", "endings")

    def __init__(self, tables: CoreTables, routes: RoutesPort, queue: Callable[[str, Control], None],
                 dest: Destination, unowe: Callable[[CoreRecord, set[Key]], None],
                 send_back: Callable[[CoreRecord, Key, str], None],
                 holds_at: Callable[[CoreRecord, Key], str | None], endings: Endings) -> None:
        self.tables = tables  # (the stamp clock)
        self.router_id = tables.router_id
        self.settings = tables.settings
        self.records: CoreRecords = tables.records
        self.topics = tables.topics
        self.clock = tables.clock
        self.routes = routes
        self.queue = queue
        self.dest = dest
        self.unowe = unowe  # the root stops waiting for these keys (``Answers.unowe``)
        self.send_back = send_back  # a member that released it gets it again (``Answers.send_back``)
        self.holds_at = holds_at  # where our own share for a key stands (``Answers.holds_at``)
        self.endings = endings  # members that ended here: what they had (``endings.py``)
        self.asking: dict[bytes, Asking] = {}  # gid -> the question, at its new root
        # per publisher, its records whose members are not chosen yet, in its order; what
        # the answers said for those asked about (group -> member, router, still a member)
        self.held: dict[tuple[str, str], deque[CoreRecord]] = {}
        self.again: set[tuple[str, str]] = set()  # queues to look at (``_release``)
        self.releasing = False
        self.decided: dict[bytes, dict[GroupId, tuple[Key, str, bool]]] = {}
        self.stashed: dict[bytes, dict[Key, tuple[GroupId, str]]] = {}  # held records' choices
        self.taken_over: dict[bytes, float] = {}  # gids another root chooses for now -> until
        self.early: dict[bytes, Early] = {}  # asked when their publisher resumed, before they came
        # gid -> members our record gave up to another root's question (``defer``)
        self.deferred: dict[bytes, set[Key]] = {}
        self.returned: set[bytes] = set()  # our records whose publisher resumed here naming them, until freed
        self.placeholders = Placeholders()  # (the core's, given in ``connect``)
        self.delivery: DeliveryPart
        self.failover: FailoverPart
        self.groups: GroupsPart

    def connect(self, delivery: DeliveryPart, failover: FailoverPart, groups: GroupsPart,
                placeholders: Placeholders) -> None:
        self.delivery = delivery
        self.failover = failover
        self.groups = groups
        self.placeholders = placeholders

    def fenced_out(self, gid: bytes) -> bool:
        """Whether another root asked us about ``gid``, or a router answered ``taken`` for
        it: we choose no member for it any more, not even one of our own: the other root
        chooses (seed 200 of
        ``test_a_root_that_takes_a_message_over_asks_whom_its_members_were_before_it_chooses``)."""
        if gid in self.taken_over:
            return True
        fence = self.dest.fenced.get(gid) if self.dest.fenced else None
        return fence is not None and fence[0] != self.router_id

    def taken(self, gid: bytes) -> None:
        """A router answered ``taken`` for our copy of ``gid``: another root chooses now."""
        s = self.settings
        if len(self.taken_over) > 65536:
            now = self.clock()
            self.taken_over = {g: u for g, u in self.taken_over.items() if u > now}
        self.taken_over[gid] = self.clock() + s.publisher_grace + s.router_dead_after

    # ------------------------------------------------------------- the root

    def ask(self, record: CoreRecord, hold: bool = True) -> None:
        """``record`` was resent to us and we knew nothing of it: its group members are
        chosen once every router said what it knows (until then the record waits; with
        ``hold``, its publisher's later messages wait behind it)."""
        if hold:
            self._hold(record)
        else:
            record.add_waiter(ASKING)
        self._start(record)
        if hold:
            self._stash(record)

    def ask_early(self, pub: Publisher) -> None:
        """``pub`` resumed here naming messages we hold nothing of: it sends them again, as
        its credit allows, maybe long after (while earlier ones wait for answers, it has
        none). We ask about them now: what routers know now, they may have forgotten by
        then (``test_a_root_asks_about_a_resuming_publishers_messages_when_it_resumes``).
        What they tell is kept for the question asked when it comes; until it comes we ask
        again every ``router_dead_after`` (a member may resume with it in its map after the
        first round, and be forgotten before it comes)."""
        if not self.groups.group_view(pub.topic):
            return
        waiting = self.routes.all_routers() | {self.router_id}
        for tag in pub.resent:
            gid = pub.gids.gid(tag)
            record = self.records.get(gid)
            early = self.early.get(gid) if self.early else None
            if record is not None:
                if record.root == self.router_id and self._fenced_by_another(gid):
                    self._ask_anew(record)
                elif not record.local and early is None:
                    # A copy we hold: its root may settle it with us, and we forget what
                    # we knew, before the resend comes
                    # (``test_a_root_asks_early_about_copies_it_holds_for_its_resuming_publisher``).
                    stamp = self.tables.stamp()
                    self.early[gid] = Early(pub, stamp, set(waiting), self.clock())
                    self._ask_all(gid, pub.topic, stamp, waiting)
            elif early is not None:
                if self._fenced_by_another(gid):
                    self.taken_over.pop(gid, None)
                    early.stamp, early.asked_at = self.tables.stamp(), self.clock()
                    early.waiting = set(waiting)
                    self._ask_all(gid, pub.topic, early.stamp, waiting)
            else:
                stamp = self.tables.stamp()
                self.early[gid] = Early(pub, stamp, set(waiting), self.clock())
                self._ask_all(gid, pub.topic, stamp, waiting)

    def _fenced_by_another(self, gid: bytes) -> bool:
        fence = self.dest.fenced.get(gid) if self.dest.fenced else None
        return gid in self.taken_over or (fence is not None and fence[0] != self.router_id)

    def _ask_anew(self, record: CoreRecord) -> None:
        """Our publisher is back (it resumed at another root, which asked, then here again):
        what that root fenced and we still wait to choose for, we ask about again, now the
        newest asker: the other root may have died, and its fence would keep every root
        from choosing (``test_a_root_the_publisher_came_back_to_asks_again_as_the_newest``)."""
        gid = record.gid
        self.taken_over.pop(gid, None)
        asking = self.asking.get(gid)
        if asking is not None:
            asking.stamp, asking.asked_at, asking.unsure = self.tables.stamp(), self.clock(), False
            asking.waiting = self.routes.all_routers() | {self.router_id}
            self._ask_all(gid, record.topic, asking.stamp, asking.waiting)
        elif record.states.get(ASKING) is IN_DOUBT:
            self._start(record)  # (held behind another: its turn comes with the answers)

    def defer(self, gid: bytes, key: Key) -> None:
        """Our record stops waiting for member ``key``: another root asked about the message
        (its publisher resumed there) and chooses its members now. Noted: that root may die
        before it chooses, its publisher coming back here, and our record, complete without
        the member, would tell it ``accepted`` (fresh ``--groups`` seed 788175831603)."""
        self.deferred.setdefault(gid, set()).add(key)

    def give_up(self, record: CoreRecord, key: Key) -> None:
        """``defer``, from a member that moved or released it while that other root's fence
        stands. If our publisher is already back here, nothing will reopen the record when
        it resumes (it did): we ask again now, the newest root (fresh ``--groups`` seed
        942426583539: the member came here after the publisher had, and the record, complete
        without it, told the publisher ``accepted``; the other root had died)."""
        self.defer(record.gid, key)
        # (evidence that it came back: it resumed here naming this message, ``returned``; one
        # that never left, whose root we still are, has nothing to reopen. Not ``attached``:
        # between its resume and its resend the record still names the old, detached link;
        # fresh hard churn seed 199772166450 lost a message so)
        if record.local and record.gid in self.returned:
            self.reopen(record)

    def reopen(self, record: CoreRecord) -> bool:
        """Our publisher resumed here naming ``record``, which gave members up to another
        root's question (``defer``): we are the newest root, and ask again, every router,
        before we choose (the other root may have chosen and had a member process it, or
        died first). True if the record waits for that (its outcome is in doubt again)."""
        if record.local:
            self.returned.add(record.gid)  # (its publisher came back naming it: ``give_up``)
        if record.gid not in self.deferred or not record.local or record.gid in self.asking:
            return False
        self.taken_over.pop(record.gid, None)
        record.reopen(ASKING)
        record.outcome_sent = False  # (it may have completed without them: it is told once chosen)
        self._start(record)
        return True

    def member_resumed(self, sub: Subscriber, gids: Iterable[bytes]) -> None:
        """Group member ``sub`` resumed here naming ``gids`` as had (its map). A root we
        answered about one of them before it came was told nothing of it: told now, or it
        chooses another member (fresh hard churn seed 421388616848: the member accepted at
        a root that died, and resumed at a router that had already answered the new root)."""
        fenced = self.dest.fenced
        if not fenced or sub.group is None:
            return
        me = self.router_id
        for gid in gids:
            fence = fenced.get(gid)
            if fence is not None:
                self.queue(fence[0], Told(gid, ((sub.key, sub.group, me, True),), False, False, fence[2]))

    def _ask_all(self, gid: bytes, topic: str, stamp: int, routers: set[str]) -> None:
        item = Ask(gid, topic, stamp)
        for router in sorted(routers, key=lambda r: r != self.router_id):  # (ourselves first)
            self.queue(router, item)

    def forget_early(self, pub: Publisher) -> None:
        """``pub`` will not send what it named again (it closed, or its grace ended)."""
        if self.early:
            for tag in pub.resent:
                self.early.pop(pub.gids.gid(tag), None)

    def _start(self, record: CoreRecord) -> None:
        waiting = self.routes.all_routers() | {self.router_id}  # (we answer ourselves too)
        early = self.early.pop(record.gid, None) if self.early else None
        stamp = early.stamp if early is not None else self.tables.stamp()
        asking = self.asking[record.gid] = Asking(record, waiting, self.clock(), stamp)
        if early is not None:
            asking.heard = early.heard  # (what was told then holds now: a member that had it, had it)
        item = Ask(record.gid, record.topic, stamp)
        for router in sorted(waiting, key=lambda r: r != self.router_id):
            self.queue(router, item)

    def holding(self, record: CoreRecord) -> bool:
        """A fresh message of a publisher whose earlier ones wait for answers: its members
        are chosen after theirs, so that each member sees the publisher's order
        (``test_seed_found_while_building_the_question``, seed 213)."""
        pub = record.publisher
        if pub is None or (pub.container_id, pub.link_name) not in self.held:
            return False
        self._hold(record)
        self._stash(record)
        return True

    def _stash(self, record: CoreRecord) -> None:
        """A held record's choice (it came with an adopted copy) is put aside until its
        turn: until then nothing goes to its members (``Copies.forward`` sends a record to
        the members it names)."""
        if record.chosen and record.states.get(ASKING) is IN_DOUBT:
            self.stashed[record.gid] = record.chosen
            record.chosen = {}

    def _hold(self, record: CoreRecord) -> None:
        record.add_waiter(ASKING)
        pub = record.publisher
        assert pub is not None
        self.held.setdefault((pub.container_id, pub.link_name), deque()).append(record)

    def told(self, frm: str, told: Told) -> None:
        asking = self.asking.get(told.gid)
        if asking is None:
            early = self.early.get(told.gid) if self.early else None
            if early is not None and frm not in early.waiting and told.members and not told.taken:
                early.heard.extend(told.members)  # (a member resumed there since it answered)
                return
            if early is not None and frm in early.waiting:
                if told.taken and told.stamp >= early.stamp and early.publisher.attached:
                    self._outbid(told.gid, early, early.topic, told.stamp)
                    return
                early.waiting.discard(frm)
                early.heard.extend(told.members)
                if told.taken:
                    # (its publisher not attached here: not asked past, or two roots ask
                    # past each other's fence and neither chooses;
                    # ``test_a_root_whose_publisher_is_suspended_there_does_not_ask_past_a_fence``)
                    self.taken(told.gid)
            return
        if frm not in asking.waiting:
            if told.members and not told.taken:
                asking.heard.extend(told.members)  # (a member resumed there since it answered: ``member_resumed``)
            return
        if told.taken:
            if told.stamp < asking.stamp:
                return  # (refused an earlier round of ours: we asked again since, past that fence)
            pub = asking.record.publisher
            if pub is not None and pub.attached:
                self._outbid(told.gid, asking, asking.record.topic, told.stamp)
                return
        asking.waiting.discard(frm)
        asking.heard.extend(told.members)
        if told.taken:
            self.taken(told.gid)  # a later asker chooses (``test_seed_found_while_building_the_question``, 4337)
        asking.unsure = asking.unsure or told.unsure
        if not asking.waiting and not asking.unsure:
            self._decide(asking)

    def _outbid(self, gid: bytes, question: Asking | Early, topic: str, fence: int) -> None:
        """A root that asked after us by its stamp fenced the message, but our publisher is
        attached here: we are its root, and ask again past that stamp, keeping what we heard
        (stamps are each root's clock: a fence stamped on a clock ahead must not keep an
        attached publisher's root from choosing;
        ``test_hard_group_seed_a_root_whose_publisher_is_attached_asks_past_a_fence_on_a_clock_ahead``)."""
        self.tables.past(fence)
        question.stamp, question.asked_at = self.tables.stamp(), self.clock()
        if isinstance(question, Asking):
            question.unsure = False
        question.waiting = self.routes.all_routers() | {self.router_id}
        self._ask_all(gid, topic, question.stamp, question.waiting)

    def _decide(self, asking: Asking) -> None:
        record = asking.record
        del self.asking[record.gid]
        # A member that had it (answered it, or said so resuming), even one that left since;
        # else a member that has it queued or that a root chose, if it is still a member
        # (one that left since never had it, and choosing it would leave the message to no
        # member: seed 394 of --leaves in
        # ``test_a_root_that_takes_a_message_over_asks_whom_its_members_were_before_it_chooses``).
        # Else the rule's choice.
        view = self.groups.group_view(record.topic)
        # (a member a router says released it is left out, here and in the choice after:
        # its root may have passed it on, and only it heard; fresh churn seed 610878216604)
        for key, _, _, had in asking.heard:
            if had == RELEASED:
                self.groups.released(record.gid, key)
        released = self.groups.releasers_of(record.gid)
        members = {m.key for ms in view.values() for m in ms} - released
        known: dict[GroupId, tuple[Key, str, bool]] = {}
        heard = [m for m in asking.heard if m[3] != RELEASED and not (not m[3] and m[0] in released)]
        # (one that holds it first, before a choice a copy named: fresh hard churn seed
        # 421388628116, a member released it at a root that restarted since; the member it
        # was passed on to got it there, the old root's copy, and the question took the one
        # that released it, named chosen by another copy: both processed it)
        for key, group, router, had in sorted(heard, key=lambda m: RANK.get(m[3], 2)):
            if had == 1 or key in members:
                known.setdefault(group, (key, router, had == 1))
        self.decided[record.gid] = known
        if record.gid in self.stashed or self._queued(record):
            self._release(record)
        elif record.states.get(ASKING) is IN_DOUBT:
            self._choose(record)  # (asked about on its own: nothing waits behind it)

    def _release(self, record: CoreRecord) -> None:
        """Choose and send, in the publisher's order, what is ready at the head of the queue
        of ``record``'s publisher (by its link: it may have attached again since). Sending
        may complete and free records, which calls back here: that call only notes the
        queue, and this one goes on with it."""
        pub = record.publisher
        if pub is None:
            return
        self.again.add((pub.container_id, pub.link_name))
        if self.releasing:
            return
        self.releasing = True
        try:
            while self.again:
                self._release_queue(self.again.pop())
        finally:
            self.releasing = False

    def _release_queue(self, key: tuple[str, str]) -> None:
        queue = self.held.get(key)
        while queue:
            record = queue[0]
            if record.states.get(ASKING) is not IN_DOUBT:
                queue.popleft()  # (settled meanwhile: nothing to choose for)
                continue
            if record.gid in self.asking:
                return  # the head is still asked about: the rest wait
            if record.gid not in self.decided and record.gid in self.stashed and self._gone(record):
                # Taken over with its old root's choice, and a member it names went since
                # (it may have processed it): asked about now (seed 220 of
                # ``test_a_root_that_takes_a_message_over_asks_whom_its_members_were_before_it_chooses``).
                record.chosen = self.stashed.pop(record.gid)
                self._start(record)
                self._stash(record)
                return
            if self._ask_past_fence(record):
                return
            queue.popleft()
            self._choose(record)
        if queue is not None and self.held.get(key) is queue:
            del self.held[key]

    def _ask_past_fence(self, record: CoreRecord) -> bool:
        """Decided, and fenced by another root that asked meanwhile, but our publisher is
        attached here: we are its root, whatever that fence says. Deferring to it, we chose
        nobody, and so did that root, its own publisher gone, deferring to ours: the group
        never got the message (``--hard --groups`` churn seed 872312900167146). We ask again,
        past that fence (the record keeps its place: what follows it waits)."""
        pub = record.publisher
        if not (record.local and pub is not None and pub.attached and self.fenced_out(record.gid)):
            return False
        fence = self.dest.fenced.get(record.gid) if self.dest.fenced else None
        if fence is not None:
            self.tables.past(fence[2])
        self.taken_over.pop(record.gid, None)
        self.decided.pop(record.gid, None)
        self._start(record)
        return True

    def _choose(self, record: CoreRecord) -> None:
        """Choose ``record``'s members (with what the answers said, if it was asked about) and send."""
        if self.fenced_out(record.gid):
            if self._ask_past_fence(record):
                return
            # Another root asked about it since (its publisher resumed there): that root
            # chooses, we do not, even for a fresh message held here for its turn (seed
            # 4700 of ``test_a_root_that_takes_a_message_over_asks_whom_its_members_were_before_it_chooses``).
            self.decided.pop(record.gid, None)
            self.stashed.pop(record.gid, None)
            self.delivery.answered(record, record.drop_waiter(ASKING))
            return
        known = self.decided.pop(record.gid, None)
        stashed = self.stashed.pop(record.gid, None) or record.chosen or {}
        before = set(stashed)
        if known is not None:
            given = {g: (k, r) for g, (k, r, _) in known.items()}
        else:  # held behind: a fresh one is chosen for now, an adopted one keeps its choice
            given = {g: (k, r) for k, (g, r) in stashed.items()}
        released = self.groups.releasers_of(record.gid)
        for member, (group, _) in stashed.items():
            # A member our own copy went to and has no answer from (it moved away from here
            # while we asked) keeps the choice: its router hands it the message unless told
            # otherwise, and nobody answers for it yet (fresh ``--groups`` churn seed
            # 660318468439: the copy waited behind a gap there, the choice took a member
            # that had joined, and both processed it). One that released it too: what it
            # was owed followed it where it moved while we asked (fresh hard churn seed
            # 483033179646); it gets it back, as when every member released it. So does one
            # whose copy there was accepted before the answers came, or that came here and
            # waits for it at the root (``Answers.holds_at``).
            if group not in given:
                where = self.holds_at(record, member)
                if where is not None:
                    given[group] = (member, where)
        routers = self.groups.choose_members(record, given)
        had: set[Key] = set()
        if known:
            had = {k for k, _, it_had in known.values() if it_had}
        dropped = before - set(record.chosen or ())
        if dropped:  # chosen before (a copy named them) and not now: no longer owed it
            self.unowe(record, dropped)
        if known is None and not stashed:  # a fresh one, held in order: chosen now
            # To the members chosen, and to nobody else: its plain subscribers, here and
            # elsewhere, had it when it came (one that moved since, here or there, would get
            # it again: a pre-settled message leaves no state to stop that, groups seed 657
            # of ``--presettled``). (Marked, as a copy for chosen keys goes.)
            self.delivery.fan_out(record, routers, None, local=True, keys=frozenset(record.chosen or ()))
            self.delivery.answered(record, record.drop_waiter(ASKING))
            return
        # Chosen after asking (or before, by the root we took it over from): it may come
        # after newer messages, so it goes marked (as a passed-on message does), to where
        # each member lives now. A member that is nowhere, or whose router said it
        # closed, is replaced: it may have left while the record waited its turn (seed 262
        # of ``test_a_root_that_takes_a_message_over_asks_whom_its_members_were_before_it_chooses``).
        record.drop_waiter(ASKING)
        deferred = self.deferred.pop(record.gid, None) if self.deferred else None
        here = self.topics.get(record.topic) or {}
        far = record.far
        owed = far.owed if far is not None else None
        for member, (group, _) in list((record.chosen or {}).items()):
            home = {self.router_id: {member}} if member in here else self.routes.homes((member,))
            said = owed.states.get(member) if owed is not None else None
            # (``HERE`` and no state of its own here: it came here and released it, hard
            # churn seed 346: the last member left, the two others had released it, and the
            # one here was taken for waiting: told accepted, no member had it)
            waits = said is KeyState.HERE and member in here and here[member] in record.states
            if (member in released and home and member not in had and not waits
                    and said not in (KeyState.ACCEPTED, KeyState.REJECTED)):
                # Every member released it (the choice leaves releasers out while any other
                # is left): it goes back to this one, as a root that heard it does.
                self.send_back(record, member, next(iter(home)))
            elif member in had and member in here and said in (None, KeyState.PENDING):
                # It answered it, and it is here, at the root: nothing more. (Elsewhere a copy
                # goes, answered from the record or tombstone of its router; here the root's
                # own members are enqueued, no tombstone asked: a soak's MQTT member at the
                # router its publisher resumed at got 218 messages again, new packet ids.)
                continue
            elif (deferred and member in deferred and home and member not in had
                  and said not in (KeyState.ACCEPTED, KeyState.REJECTED)):
                # Given up to another root's question (``defer``), chosen again by ours: owed
                # it again, where it lives now (its old copy was answered for it).
                self.send_back(record, member, next(iter(home)))
            elif home and said in (None, KeyState.PENDING):
                self.failover.send_owed(record, home)  # (one that had it answers from its record)
            elif said is KeyState.HERE and member in here:
                # It came here since: waited for here, as a local subscriber, not passed on
                # (``test_a_member_that_came_to_the_root_is_waited_for_there_not_passed_on``).
                continue
            elif member not in had and said not in (KeyState.ACCEPTED, KeyState.REJECTED):
                by = self.groups.pass_on(record, group, member)
                if by is not None and by != member:
                    # Its share went to ``by``: no longer owed it, as a pass-on from an answer
                    # replaces it (``Answers._replace``). Still owed, its old copy's answer
                    # (``released``) passed the message on again, to a third member (fresh
                    # hard churn seed 199772168448: the member had left; the one chosen here
                    # and the next both processed it).
                    self.unowe(record, {member})
            # (a member that had it and is gone now is sent nothing, nor passed on: it
            # answered, even if it left while the record waited its turn; seed 220 of
            # ``test_a_root_that_takes_a_message_over_asks_whom_its_members_were_before_it_chooses``)
        self.delivery.answered(record, record.pending == 0)

    def _queued(self, record: CoreRecord) -> bool:
        pub = record.publisher
        queue = self.held.get((pub.container_id, pub.link_name)) if pub is not None else None
        return queue is not None and record in queue

    def _gone(self, record: CoreRecord) -> bool:
        """Whether a member of ``record``'s put-aside choice is attached nowhere now."""
        here = self.topics.get(record.topic) or {}
        chosen = self.stashed.get(record.gid) or {}
        away = [k for k in chosen if k not in here]
        found = sum(len(keys) for keys in self.routes.homes(away).values())
        return found < len(away)

    def expire(self, now: float) -> None:
        """A round not answered by every router, or where one was unsure, is asked again,
        of every router: what a router did not know then (a member that resumed there with
        the message in its map since) it may know now (seed 419 of
        ``test_a_root_that_takes_a_message_over_asks_whom_its_members_were_before_it_chooses``)."""
        retry = self.settings.router_dead_after
        for gid, early in self.early.items():
            if now - early.asked_at >= retry:
                early.asked_at = now
                early.waiting = self.routes.all_routers() | {self.router_id}
                item = Ask(gid, early.topic, early.stamp)
                for router in sorted(early.waiting, key=lambda r: r != self.router_id):
                    self.queue(router, item)
        for asking in list(self.asking.values()):
            if now - asking.asked_at >= retry:
                asking.asked_at = now
                asking.unsure = False
                asking.waiting = self.routes.all_routers() | {self.router_id}
                item = Ask(asking.record.gid, asking.record.topic, asking.stamp)
                for router in sorted(asking.waiting, key=lambda r: r != self.router_id):
                    self.queue(router, item)

    def freed(self, record: CoreRecord) -> None:
        self.asking.pop(record.gid, None)
        if self.early:
            self.early.pop(record.gid, None)
        self.decided.pop(record.gid, None)
        self.stashed.pop(record.gid, None)
        if self.deferred:
            self.deferred.pop(record.gid, None)
        if self.returned:
            self.returned.discard(record.gid)
        pub = record.publisher
        if pub is not None and (pub.container_id, pub.link_name) in self.held:
            self._release(record)

    # -------------------------------------------------- every other router

    def asked(self, frm: str, ask: Ask) -> None:
        self.queue(frm, self.told_for(ask.gid, frm, ask.topic, ask.stamp))

    def _withdraw(self, record: CoreRecord, asker: str) -> None:
        """``asker`` chooses ``record``'s members now: a member of ours it waits for, queued
        and not sent yet, by another root's choice (ours too), is not given it; that root
        hears ``taken`` for it, and the asker, told nothing of it, chooses. (Fresh churn
        seed 483033182059: an old root, cut off from the member's router, never heard the
        member release it there and queued it again for the member, moved to it; the new
        root chose another, and both processed it.) One already sent may have been processed:
        it stays, and says so when it answers."""
        far = record.far
        for waiter, state in list(record.states.items()):
            if type(waiter) is not Subscriber or waiter.group is None or state is not IN_DOUBT:
                continue
            if not any(r is record for r, _ in waiter.queue):
                continue  # (sent)
            roots = {take[0] for take in far.takes if waiter.key in take[3]} if far is not None else set()
            if not record.local and (not roots or asker in roots):
                continue  # (the asker's own choice, or not known to be another's)
            waiter.queue = deque((r, n) for r, n in waiter.queue if r is not record)
            if record.local:
                self.defer(record.gid, waiter.key)  # (ours: our publisher may come back to us)
                self._reclaim(record)
            refused = self.dest.refused
            for root in roots:
                refused[(record.gid, root)] = refused.get((record.gid, root), frozenset()) | {waiter.key}
            self.delivery.answered(record, record.drop_waiter(waiter))

    def _reclaim(self, record: CoreRecord) -> None:
        """Our record gave a member up to another root's question, but its publisher is attached
        here (or resumed here naming it): we are its root, whatever the stamps say, and ask
        again past that question before anything completes it. The asker's view of its own
        publisher may be stale (its connection dropped unnoticed), and if it chose, its copy
        to our member's router may be refused by a newer fence; completed, our record told
        the publisher ``accepted`` and no member had it (fresh hard churn seed 390457546856
        lost 20)."""
        pub = record.publisher
        if not (pub is not None and pub.attached or record.gid in self.returned):
            return
        self.tables.past(self.dest.fenced[record.gid][2])  # (``told_for`` fenced it for the asker)
        self.reopen(record)

    def told_for(self, gid: bytes, asker: str, topic: str, stamp: int) -> Told:
        """What we know of ``gid``'s group members; from now on, copies of it from another
        root than ``asker`` are not delivered to our members (``Destination.fenced``).

        Unsure while a member of the topic's groups is suspended here: it may have had the
        message, and says so only when it resumes, maybe after a new root chose another
        (seed 419 of ``test_a_root_that_takes_a_message_over_asks_whom_its_members_were_before_it_chooses``)."""
        me = self.router_id
        if not self.dest.fence(gid, asker, stamp):
            return Told(gid, (), False, True, self.dest.fenced[gid][2])
        subs = self.topics.get(topic) or {}
        # (unsure, what we know is told all the same: the asker keeps it across its rounds,
        # and a member that said it had the message when it resumed here may be forgotten by
        # the time the suspended one's grace ends; fresh hard churn seed 483033181179: a
        # member that accepted at its root, which died, resumed at the root the publisher
        # resumed at, unsure for 30 s, which then gave the message to another member)
        unsure = any(s.group is not None and s.suspended_until is not None for s in subs.values())
        groups = self.endings.member_groups
        members: list[Member] = []
        record = self.records.get(gid)
        if record is not None:
            self._withdraw(record, asker)
            for key, (group, router) in (record.chosen or {}).items():
                members.append((key, group, router, False))
            for waiter, state in record.states.items():
                if type(waiter) is Subscriber and waiter.group is not None:  # (had: it answered)
                    members.append((waiter.key, waiter.group, me, HOLDS if state is IN_DOUBT else 1))
            earlier = record.far.earlier if record.far is not None else None
            for key, (said, _) in (earlier or {}).items():
                if key in groups and said in _HAD:
                    members.append((key, groups[key], me, True))
                elif key in groups and said is Said.RELEASED:
                    members.append((key, groups[key], me, RELEASED))
        tomb = self.dest.tombstones.get(gid)
        for key, (said, _) in (tomb or {}).items():
            if key in groups and said in _HAD:
                members.append((key, groups[key], me, True))
            elif key in groups and said is Said.RELEASED:
                members.append((key, groups[key], me, RELEASED))
        if self.placeholders:
            for key, group in groups.items():
                if self.placeholders.has(key, gid):
                    members.append((key, group, me, True))
        for key, (group, gids, _) in self.dest.left_had.items():
            if gid in gids:
                members.append((key, group, me, True))
        return Told(gid, tuple(members), unsure)
