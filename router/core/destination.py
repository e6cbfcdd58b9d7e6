"""Protocol version 3 at a destination (``docs/protocol.md``, sections 4 and 5): the
copies a router takes for its own subscribers, in each stream's order; their answers to
the root; settlement and tombstones; which keys moved away or closed here.

A part of ``Copies`` (``copies.py``: the root and the relay), which owns it and hands it
what arrives for this router. It never waits for another router: it answers the root
once its own subscribers are final, and forgets on the root's ``Settle``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from once.records.chain import Arrival, Chain
from once.records.far import Far, Take
from once.records.membership import GroupId
from once.records.owed import Said
from once.records.table import IN_DOUBT, SUB_ACCEPTED, SUB_REJECTED, Record

from ..journal import Event
from .messages import Answer, Control, Copy, CopyTarget
from .parts import DeliveryPart, GroupsPart
from .peers import CoreRecord, CoreRecords, Subscriber, keeps_own_tombstone
from .ports import Conditions, Outcome, rejected
from .tables import CoreTables, Key

_SAID_OF = {SUB_ACCEPTED: Said.ACCEPTED, SUB_REJECTED: Said.REJECTED}
_ACCEPTED: tuple[Said, Outcome | None] = (Said.ACCEPTED, None)


class Destination:
    __slots__ = ("router_id", "settings", "records", "topics", "journal", "clock", "queue", "reachable", "chains",
                 "chain_seen", "held", "tombstones", "tomb_order", "tomb_stale", "said_cache", "accepted_cache", "departed", "closed",
                 "fenced", "refused", "left_had", "delivery", "admit", "effects", "awaiting", "released_at", "groups", "left_roots",
                 "stats")

    def __init__(self, tables: CoreTables, queue: Callable[[str, Control], None],
                 reachable: Callable[[], set[str]]) -> None:
        self.router_id = tables.router_id
        self.effects = tables.effects  # (a subscriber with a copy queued sends as the batch ends)
        self.settings = tables.settings
        self.records: CoreRecords = tables.records
        self.topics = tables.topics
        self.journal = tables.journal
        self.clock = tables.clock
        self.queue = queue  # a control item for a router (batched by ``Copies``)
        self.admit = tables.admit
        self.reachable = reachable
        self.chains: dict[bytes, Chain[tuple[Copy, CopyTarget]]] = {}  # per stream
        self.chain_seen: dict[bytes, float] = {}  # per stream: when a copy of it last came
        self.held = 0  # copies held in chains behind a gap
        self.stats = tables.stats  # (``presettled_late``: pre-settled copies dropped, come after newer ones)
        # gid -> what its keys said. Many: one per message for ``publisher_grace`` (30 s or
        # more), so each is a dict entry and a shared mapping, no object of its own.
        self.tombstones: dict[bytes, dict[Key, tuple[Said, Outcome | None]]] = {}
        # When to forget them: buckets of a quarter second, oldest first (all live as long),
        # so a tick forgets the old ones without a scan of all. A gid whose tombstone went
        # (the message came back, ``_take``) and was kept again has a stale entry in an
        # older bucket: ``tomb_stale`` counts those, skipped when their bucket goes.
        self.tomb_order: deque[list[Any]] = deque()  # [first until, last until, gids]
        self.tomb_stale: dict[bytes, int] = {}
        # A record settled without its root (no root reachable long after our answer) keeps
        # its tombstone until each root it came from settles it: such a root holds the
        # message, and sends it again when it can reach us, however long that takes (its
        # publisher may be attached to it throughout). gid -> (the copies we took, when we
        # last answered them); answered again while a root is reachable, as a record is.
        self.awaiting: dict[bytes, tuple[list[Take], float]] = {}
        self.left_roots: set[str] = set()  # routers that left the network: they settle nothing more
        # What keys said, one shared (read-only) mapping per distinct answer: the usual one,
        # "this key accepted", recurs for every message, and a tombstone lives 30 s or more
        self.said_cache: dict[tuple[tuple[Key, tuple[Said, Outcome | None]], ...],
                              dict[Key, tuple[Said, Outcome | None]]] = {}
        self.accepted_cache: dict[frozenset[Key], dict[Key, tuple[Said, Outcome | None]]] = {}  # (keys all accepted)
        self.departed: dict[Key, tuple[str, float]] = {}  # keys that moved away from here -> (where, until)
        self.closed: dict[Key, float] = {}  # keys whose subscription here ended -> until
        # gid -> (the root that asked us whom its group members were, until when, when it
        # asked): copies from any other root are not delivered to our members (``inquiry.py``)
        self.fenced: dict[bytes, tuple[str, float, int]] = {}
        self.refused: dict[tuple[bytes, str], frozenset[Key]] = {}  # (gid, other root) -> its members here
        # group members that ended here -> (group, the gids they had answered, until): what
        # they had is answered ``accepted`` for them (``inquiry.py``; our journal keeps it)
        self.left_had: dict[Key, tuple[GroupId, frozenset[bytes], float]] = {}
        # (gid, member) -> the copy it released (root, stream, position): the root hears
        # ``released``, and a later copy of that stream for it is the root sending it back
        # (nobody else left), delivered; that copy again or an earlier one (re-sends) is
        # answered ``released`` again. A copy of another stream (another root, or its
        # publisher attached again) is answered so too, and becomes the one it released:
        # that root hears it, and its next copy for it, if it sends one, follows in that
        # stream. Kept as long as the record or its tombstone is.
        self.released_at: dict[tuple[bytes, Key], tuple[str, bytes, int]] = {}
        self.delivery: DeliveryPart
        self.groups: GroupsPart

    def connect(self, delivery: DeliveryPart, groups: GroupsPart) -> None:
        self.delivery = delivery
        self.groups = groups

    def held_copies(self) -> dict[str, list[Any]]:
        """What waits in chains behind a gap, per stream (state a finished run must not leave)."""
        return {s.decode(): list(c.held.values()) for s, c in self.chains.items() if c.held}

    def arrive(self, copy: Copy, t: CopyTarget) -> None:
        chain = self.chains.get(copy.stream)
        if chain is None:
            self.chains[copy.stream] = chain = Chain()
        self.chain_seen[copy.stream] = self.clock()
        position = t.position
        if position == chain.next and t.low <= position and not chain.held and chain.epoch == 0:
            chain.next = position + 1  # the usual one, next in order: what ``Chain.arrive`` does
            self._take(copy, t)
            return
        before = len(chain.held)
        taken_before = chain.next
        # What a gap held back comes out of order when what frees it was taken here from
        # another stream (its publisher resumed: that stream may have delivered newer
        # messages since) or ``low`` passes positions this chain never took: a pre-settled
        # copy among them is dropped (at most once; never re-sent, so no other copy of it
        # can come in its place), an unsettled one is answered from its record as before
        # (in both streams: the new one delivered it first). Plain seed 921 of
        # ``--presettled``: a pre-settled message held behind a gap, handed after the newer
        # ones its publisher's new stream delivered (``docs/protocol.md``, section 5).
        overtaken = before and (t.low > taken_before or copy.gid in self.records or copy.gid in self.tombstones)
        outcome = chain.arrive(0, t.position, t.low, (copy, t))
        self.held += len(chain.held) - before
        for c, target in outcome.ready:
            if overtaken and c.presettled and c is not copy:
                self.stats["presettled_late"] += 1
                continue
            self._take(c, target)
        if outcome.arrival is Arrival.REPEAT and t.position < taken_before:
            if copy.presettled:
                # Never sent again: it came after newer copies of its stream (by another
                # path, or ``low`` passed it): dropped, not handed out of order (plain
                # seed 794 of ``--presettled``)
                self.stats["presettled_late"] += 1
                return
            # Sent again, and taken before this arrival: answered again (the first answer
            # may be lost). After what this arrival released: a copy still held when it came
            # goes in its place in the order, not ahead of the copies held before it
            # (``test_group_seed_a_resent_copy_still_held_goes_in_its_place``).
            self._take(copy, t)

    def _which_is_behind(self, copy: Copy, t: CopyTarget, record: CoreRecord | None) -> None:
        """A copy of a message taken here before. If it came in another stream first, one of
        the two is its publisher's newer stream (it resumed at another root and sent the
        message again there, ``Copy.resent``), and the other is behind it for good: what
        that one still brings is older than what the newer one may have delivered here
        (its pre-settled copies are dropped). Hard seed 279 of ``--presettled``: a
        pre-settled message of the old root's, late by another path, was handed after the
        new root's newer ones; fresh plain seed 812531465385: after the new root's copies
        of messages the old root's had brought first."""
        far = record.far if record is not None else None
        if far is not None:
            streams: set[bytes] | None = {take[1] for take in far.takes}
        else:
            waited = self.awaiting.get(copy.gid)
            streams = {take[1] for take in waited[0]} if waited is not None else None
        chains = self.chains
        if streams is None:
            # (a tombstone: only a copy neither resent nor marked is surely its first stream's)
            if not copy.resent and not t.redelivery:
                chains[copy.stream].behind = True
        elif copy.stream in streams:
            return  # (this stream's again: sent again, or for a key that moved here)
        elif copy.resent:
            for stream in streams:
                chain = chains.get(stream)
                if chain is not None:
                    chain.behind = True
        else:
            chains[copy.stream].behind = True

    def behind(self, record: CoreRecord) -> None:
        """The publisher of ``record``, which came here in copies, resumed here and sent it
        again: the streams it came in are older than what its publisher sends from now on
        (what they still bring pre-settled is dropped, ``arrive``: fresh plain seed
        812531466332 of ``--presettled``, a pre-settled copy of the old root's came after
        the message its publisher had sent again here)."""
        far = record.far
        if far is not None:
            chains = self.chains
            for take in far.takes:
                chain = chains.get(take[1])
                if chain is not None:
                    chain.behind = True

    def fence(self, gid: bytes, root: str, stamp: int) -> bool:
        """``root`` asked us about ``gid``'s group members at ``stamp``: theirs is the choice
        now, unless a root asked later (ties by router id). Returns whether it is theirs."""
        s = self.settings
        held = self.fenced.get(gid)
        if held is not None and (held[2], held[0]) > (stamp, root):
            return False
        self.fenced[gid] = (root, self.clock() + s.publisher_grace + s.router_dead_after, stamp)
        if self.refused:
            self.refused.pop((gid, root), None)  # (its copies are delivered now: no more ``taken``)
        return True

    def _take(self, copy: Copy, t: CopyTarget) -> None:
        admit = self.admit
        if admit is not None and copy.user:
            refusal = admit(copy.user, copy.topic)
            if refusal is not None:
                # Our policy does not let its publisher's user publish here (the root's may
                # have): nobody here gets it, and the root hears why (in order: a chain's next).
                if not copy.presettled:
                    no = rejected(Conditions.UNAUTHORIZED, refusal)
                    self.queue(copy.root, Answer(copy.gid, copy.stream, t.position,
                                                 tuple((k, Said.REJECTED, no) for k in t.keys)))
                return
        record = self.records.get(copy.gid)
        if record is not None or copy.gid in self.tombstones:
            self._which_is_behind(copy, t, record)
        elif copy.presettled and self.chains[copy.stream].behind:
            self.stats["presettled_late"] += 1  # (at most once: it may come after newer messages)
            return
        take: Take = (copy.root, copy.stream, t.position, t.keys)
        earlier: dict[Key, tuple[Said, Outcome | None]] | None = None
        earlier_takes: list[Take] | None = None
        chosen = copy.chosen
        refused: frozenset[Key] = frozenset()
        if chosen and self.fenced:
            fence = self.fenced.get(copy.gid)
            if fence is not None and fence[0] != copy.root:
                # Another root chooses its members now: this one's choice is not delivered
                # here (answered ``taken``), and not kept (``inquiry.py``).
                refused = t.keys & {k for k, _, _ in chosen}
                chosen = ()
        if record is None:
            states = self.tombstones.get(copy.gid)
            if states is not None:
                here = self.topics.get(copy.topic) or {}
                if any(states[k][0] is Said.MOVED for k in t.keys if k in states and k in here):
                    # a key that moved away from here without it and came back is not answered
                    # ``moved`` from the tombstone: it gets the message
                    # (``test_seed_found_while_building_the_question``, seed 1353)
                    states = {k: v for k, v in states.items() if v[0] is not Said.MOVED or k not in here}
                if self.released_at:
                    states = self._sent_back(copy, t, states)
                if not any(k not in states and k in here for k in t.keys):
                    left = self.left_had
                    self.queue(copy.root, Answer(copy.gid, copy.stream, t.position, tuple(
                        (k, *states.get(k, (Said.ACCEPTED, None) if k in left and copy.gid in left[k][1]
                                        else (Said.UNKNOWN, None))) for k in t.keys)))
                    return
                # For a key that came here since we forgot the message (it moved here, or
                # resumed here): it is delivered to that key, never again to those that had
                # it; the tombstone does not answer for it
                # (``test_fresh_seed_a_key_that_came_to_a_router_which_had_forgotten_the_message_gets_it``).
                earlier = states
                del self.tombstones[copy.gid]
                waited = self.awaiting.pop(copy.gid, None)
                if waited is not None:  # (the new record answers those roots too, and waits for them)
                    earlier_takes = waited[0]
                else:
                    self.tomb_stale[copy.gid] = self.tomb_stale.get(copy.gid, 0) + 1
            record = Record(copy.gid, copy.topic, copy.payload, None, copy.gid, 0, copy.presettled,
                            copy.message_format)
            record.local = False
            record.born = copy.born
            record.root = copy.root
            if chosen:
                record.chosen = {k: (g, r) for k, g, r in chosen}
            self.records.add(record)
            if self.journal is not None:
                self.journal.add(Event.RECEIVED, copy.gid, copy.topic, copy.root)
        elif chosen and record.chosen is not None:
            # A group's choice this record did not have yet (its root asked before choosing),
            # or a member chosen since and sent it here (a release passed on to it): a root
            # this record becomes, its publisher resuming here, must know it chose that one,
            # or its own choice leaves it owed for ever (fresh churn seed 610878216742: the
            # member moved on and left; its new router answered ``moved`` every retry)
            have = {g for g, _ in record.chosen.values()}
            new = {k: (g, r) for k, g, r in chosen
                   if k not in record.chosen and (g not in have or k in t.keys)}
            if new:
                record.chosen = {**record.chosen, **new}
        elif chosen and record.chosen is None:
            record.chosen = {k: (g, r) for k, g, r in chosen}
        far = record.far
        if far is None:
            record.far = far = Far()
        if earlier:
            far.earlier = earlier
        if earlier_takes:
            far.takes[:0] = [t for t in earlier_takes if t not in far.takes]  # (older, first: ``settle_from``)
        if refused:
            self.refused[(copy.gid, copy.root)] = refused | self.refused.get((copy.gid, copy.root), frozenset())
        if take not in far.takes:
            far.takes.append(take)
        subs = self.topics.get(copy.topic) or {}
        delivery = self.delivery
        fresh = []
        if far.earlier and self.released_at:
            far.earlier = self._sent_back(copy, t, far.earlier)
        had = far.earlier
        for key in t.keys:
            sub = subs.get(key)
            if (sub is not None and sub not in record.states and (had is None or key not in had) and key not in refused
                    and delivery.enqueue(record, sub, 1 if t.redelivery else 0)):
                fresh.append(sub)
        if fresh and not record.local:
            record.outcome_sent = False
        pumps = self.effects.pumps
        for sub in fresh:
            pumps[sub] = None
        if record.pending == 0 and not record.outcome_sent:
            delivery.complete(record)  # (calls ``answer_ready``)
        elif not copy.presettled:
            # Answered now if every key of the copy is final here. (A key whose delivery
            # just went out is in doubt: no need to ask ``_answer``, the usual case.)
            answers = record.states
            for sub in fresh:
                if answers.get(sub) is IN_DOUBT:
                    return
            self._answer(record, far, take)

    def released(self, record: CoreRecord, sub: Subscriber) -> None:
        """Group member ``sub`` released ``record`` here: the root hears ``released`` (with
        our answer, once every key of the copy is final here) and decides who has it now;
        at the root, a copy from another root (the publisher resumed there) is answered so."""
        far = record.far
        if far is None:  # (the root's own record: a copy from a root the publisher resumed at is answered so)
            record.far = far = Far()
        far.earlier = {**(far.earlier or {}), sub.key: (Said.RELEASED, None)}  # (a copy: it may be shared)
        at = (self.router_id, b"", 0)  # (at the root: no copy; another root's is answered first)
        for take in reversed(far.takes):
            if sub.key in take[3]:
                at = take[:3]
                # Answered now if every key of that copy is final here, as a copy taken is:
                # not once the whole record is (fresh churn seed 969800362670: the root,
                # paused, never heard the release and sent the member, moved to it, the
                # message again, while the root the publisher resumed at chose another)
                self._answer(record, far, take)
                break
        self.released_at[(record.gid, sub.key)] = at

    def _sent_back(self, copy: Copy, t: CopyTarget,
                   said: dict[Key, tuple[Said, Outcome | None]]) -> dict[Key, tuple[Said, Outcome | None]]:
        """``said`` less the members a copy sends back what they released: the root found
        nobody else for it (a later copy of the stream they released it from, to them)."""
        back = []
        for key in t.keys:
            at = self.released_at.get((copy.gid, key))
            if at is None or said.get(key, _ACCEPTED)[0] is not Said.RELEASED:
                continue
            if at[:2] != (copy.root, copy.stream):
                self.released_at[(copy.gid, key)] = (copy.root, copy.stream, t.position)
            elif t.position > at[2]:
                back.append(key)
        if not back:
            return said
        for key in back:
            del self.released_at[(copy.gid, key)]
            self.groups.unreleased(copy.gid, key)  # (it has it again: a question here keeps it)
        return {k: v for k, v in said.items() if k not in back}

    def _said(self, record: CoreRecord, key: Key, subs: dict[Key, Subscriber]) -> tuple[Said, Outcome | None] | None:
        """What ``key`` did with ``record`` here; None while it is in doubt."""
        sub = subs.get(key)
        if sub is not None:
            state = record.states.get(sub)
            if state is IN_DOUBT:
                return None
            if state is not None:
                return _SAID_OF[state], record.rejection if state is SUB_REJECTED else None
        far: Far | None = record.far
        had = far.earlier if far is not None else None
        if had and key in had:
            return had[key]  # what it said in this message's earlier stay here (a tombstone's)
        left = self.left_had.get(key) if self.left_had else None
        if left is not None and record.gid in left[1]:
            return Said.ACCEPTED, None  # it had it, here or where it was before, and then ended here
        departed = self.departed.get(key)
        if departed is not None:
            return Said.MOVED, None
        if key in self.closed:
            return Said.CLOSED, None
        return Said.UNKNOWN, None

    def _answer(self, record: CoreRecord, far: Far, take: Take) -> bool:
        """Answer one copy we took, if its keys are all final here; True if it was."""
        root, stream, position, keys = take
        subs = self.topics.get(record.topic) or {}
        refused = self.refused.get((record.gid, root)) if self.refused else None
        rs = record.states
        said: list[tuple[Key, Said, Outcome | None]] = []
        every: bool | None = True
        usual = not refused
        if usual:
            for k in keys:  # (a loop, not ``all``: this runs per copy)
                if rs.get(subs.get(k)) is not SUB_ACCEPTED:
                    usual = False
                    break
        if not usual:
            said, every = self._said_all(record, keys, subs, refused)  # (else the usual: every key accepted)
            if every is None:
                return False
        # (the usual answer, every key of the copy accepted, names no key: the root knows them,
        # and takes it for none it sent here again in a later copy: ``Answers._answered``)
        self.queue(root, Answer(record.gid, stream, position, () if every else tuple(said)))
        now = self.clock()
        far.answered_at = now
        if far.first_answer is None:
            far.first_answer = now
        return True

    def _said_all(self, record: CoreRecord, keys: frozenset[Key], subs: dict[Key, Subscriber],
                  refused: frozenset[Key] | None) -> tuple[list[tuple[Key, Said, Outcome | None]], bool | None]:
        """What every key of a copy did here, and whether each accepted (None: one is in doubt)."""
        said: list[tuple[Key, Said, Outcome | None]] = []
        every = True
        for key in keys:
            s = (Said.TAKEN, None) if refused and key in refused else self._said(record, key, subs)
            if s is None:
                return said, None
            said.append((key, s[0], s[1]))
            every = every and s[0] is Said.ACCEPTED
        return said, every

    def answer_ready(self, record: CoreRecord) -> None:
        """Every local waiter of ``record`` is final: answer the copies we took of it."""
        far = record.far
        if far is None or record.presettled:
            return
        for take in far.takes:
            self._answer(record, far, take)

    def settle_from(self, gid: bytes, root: str | None = None, forgotten: bool = False) -> None:
        """The root settled: settle our deliveries and forget the message (a tombstone stays).

        A message taken from two roots (its publisher resumed at the second) is settled by
        the newer; the older's ``Settle`` only lets its own copies go (a root that restarted
        answers ours with ``Settle``, while the newer may still wait for its copy:
        ``test_fresh_seed_a_key_that_came_to_a_router_which_had_forgotten_the_message_gets_it``,
        seed 495600962664)."""
        record = self.records.get(gid)
        if record is None:
            if root is not None and gid in self.awaiting:
                self._root_settled(gid, root)
            return
        if record.local or record.publisher_settled:
            return
        if forgotten and any(st is IN_DOUBT for w, st in record.states.items() if type(w) is Subscriber):
            # (its root's life that sent the copy is gone, not done: a delivery of it queued
            # or out to a subscriber here goes on, in its place in the stream; asked again
            # when our answer goes, once they are answered)
            return
        far = record.far
        if root is not None and far is not None and far.takes and far.takes[-1][0] != root:
            far.takes = [t for t in far.takes if t[0] != root]
            return
        record.publisher_settled = True
        if self.journal is not None:
            self.journal.add(Event.SETTLED, gid, record.topic)
        self.delivery.settle_subscribers(record)
        # The root has its answer (a key that moved accepted it where it was before), or
        # its publisher is gone: a local delivery still in doubt is not waited for. Its
        # answer could not come anyway: the delivery is settled now.
        if record.pending:
            for waiter in [w for w, st in record.states.items() if st is IN_DOUBT]:
                record.drop_waiter(waiter)
        self.delivery.maybe_free(record)

    def freed(self, record: CoreRecord) -> None:
        """``record`` was freed: a destination keeps what its keys said, for late copies; a
        root, what its own group members said, for a root the publisher resumed at: it asks
        us, and may send us a copy (``test_seed_found_while_building_the_question``, seed 1152)."""
        far = record.far
        subs = self.topics.get(record.topic) or {}
        states: dict[Key, tuple[Said, Outcome | None]] = {}
        shared = None
        if far is not None and len(far.takes) == 1 and not record.local and not far.earlier:
            # The usual one: one copy taken, every key accepted here. One mapping per key set
            # (the set is the copy's, shared: its hash is kept), without a word per key.
            keys = far.takes[0][3]
            rs = record.states
            every = True
            for k in keys:
                if rs.get(subs.get(k)) is not SUB_ACCEPTED:
                    every = False
                    break
            if every:
                shared = self.accepted_cache.get(keys)
                if shared is None:
                    if len(self.accepted_cache) > 1024:
                        self.accepted_cache.clear()
                    shared = self.accepted_cache[keys] = {k: _ACCEPTED for k in keys}
        if shared is None and far is not None:
            for _, _, _, keys in far.takes:
                for key in keys:
                    s = self._said(record, key, subs)
                    if s is not None and s[0] is not Said.UNKNOWN:
                        states[key] = s
        if keeps_own_tombstone(record):
            # A root keeps what its own group members said (a root the publisher resumes at
            # asks it), and, where another root may send us a copy of the message (it was
            # resent to us or taken over, or its publisher left), what every local key said:
            # the copy is answered from it, not delivered again.
            pub = record.publisher
            every = record.resent or pub is None or not pub.attached
            for waiter, state in record.states.items():
                if type(waiter) is Subscriber and (every or waiter.group is not None) and state is not IN_DOUBT:
                    states[waiter.key] = (_SAID_OF[state], record.rejection if state is SUB_REJECTED else None)
            if far is not None and far.earlier:
                chosen = record.chosen or {}
                # (a member that released it here, chosen or not now, is answered ``released``:
                # a copy an older root sends again must not reach it as new)
                states.update((k, said) for k, said in far.earlier.items()
                              if every or k in chosen or said[0] is Said.RELEASED)
        if shared is None:
            if not states and (far is None or not far.takes):
                return
            items = tuple(states.items())
            shared = self.said_cache.get(items)
            if shared is None:
                if len(self.said_cache) > 1024:
                    self.said_cache.clear()
                shared = self.said_cache[items] = states
        gid = record.gid
        if gid in self.tombstones and gid not in self.awaiting:  # kept again: its older bucket's entry is stale
            self.tomb_stale[gid] = self.tomb_stale.get(gid, 0) + 1
        self.awaiting.pop(gid, None)
        self.tombstones[gid] = shared
        self._forget_later(gid)

    def _forget_later(self, gid: bytes) -> None:
        """The tombstone of ``gid`` goes ``publisher_grace`` from now."""
        until = self.clock() + self.settings.publisher_grace
        order = self.tomb_order
        last = order[-1] if order else None
        if last is not None and until - last[0] < 0.25:  # one bucket per quarter second from its first,
            last[1] = until  # forgotten when its last one may go (never early)
            last[2].append(gid)
        else:
            order.append([until, until, [gid]])

    def _await_root(self, gid: bytes, takes: list[Take], now: float) -> None:
        """Keep ``gid``'s tombstone until each root of ``takes`` settles it: out of its
        timed bucket (that entry is stale now), answered again while a root is reachable.
        Not for a root that left the network (``root_left``): a copy it sent before it left,
        settled after, waited for it for ever (``--elastic`` churn seed 1874)."""
        if self.left_roots:
            takes = [t for t in takes if t[0] not in self.left_roots]
            if not takes:
                return  # (its timed bucket stands)
        self.tomb_stale[gid] = self.tomb_stale.get(gid, 0) + 1
        self.awaiting[gid] = (takes, now)

    def _answer_awaiting(self, now: float, retry: float) -> None:
        """Answer again, from its tombstone, each copy of a message settled without its root,
        when one of its roots is reachable: the root settles it (it holds it no longer, or
        this answer completes it) and we may forget it."""
        reachable = self.reachable()
        for gid, (takes, at) in list(self.awaiting.items()):
            if now - at < retry or not any(root in reachable for root, _, _, _ in takes):
                continue
            states = self.tombstones.get(gid)
            if states is None:  # (gone with a record made of it again: ``_take``)
                del self.awaiting[gid]
                continue
            self.awaiting[gid] = (takes, now)
            for root, stream, position, keys in takes:
                if root not in reachable:
                    continue
                said = tuple((k, *states.get(k, (Said.UNKNOWN, None))) for k in keys)
                every = all(s is Said.ACCEPTED for _, s, _ in said)
                self.queue(root, Answer(gid, stream, position, () if every else said))

    def root_left(self, root: str) -> None:
        """``root`` left the network (it stopped cleanly, after its wait): it settles none of
        the messages we settled without it, so each tombstone waiting for it is taken as
        settled by it, and goes ``publisher_grace`` from now, unless another root waits too.
        (Kept for it, they stayed for ever: ``--groups --releases --leaves --joins
        --elastic`` seeds 1328, 1874, 3567.) A publisher of its that resumes elsewhere does so
        within its grace, and the tombstone answers the copies its new root sends."""
        self.left_roots.add(root)
        for gid, (takes, _) in list(self.awaiting.items()):
            if any(t[0] == root for t in takes):
                self._root_settled(gid, root)

    def _root_settled(self, gid: bytes, root: str) -> None:
        """``root`` settled a message we settled without it: the tombstone waits for its
        other roots, or goes ``publisher_grace`` from now (a publisher that resumes within
        its grace may still send it again through another root)."""
        takes, at = self.awaiting[gid]
        left = [t for t in takes if t[0] != root]
        if left:
            self.awaiting[gid] = (left, at)
            return
        del self.awaiting[gid]
        self._forget_later(gid)

    def keep_said(self, record: CoreRecord, sub: Subscriber) -> None:
        """``sub`` leaves (it closed, or moved on) after it answered ``record`` here: what it
        said stays for our answers, which would say ``closed`` or ``moved`` without it, and a
        root would pass what it had accepted on to another member
        (``test_leaves_seed_what_a_member_accepted_before_it_left_is_not_passed_on``)."""
        state = record.states.get(sub)
        if state is None or state is IN_DOUBT:
            return
        far = record.far
        if far is None:  # (a root's own record, asked about by a root the publisher resumed at)
            record.far = far = Far()
        said = (_SAID_OF[state], record.rejection if state is SUB_REJECTED else None)
        far.earlier = {**(far.earlier or {}), sub.key: said}  # (a copy: the old one may be shared)

    def subscriber_closed(self, key: Key) -> None:
        s = self.settings
        self.closed[key] = self.clock() + max(s.router_dead_after, s.publisher_grace)
        self.departed.pop(key, None)

    def expire(self, now: float) -> int:
        """Every tick: answer again what has had no settlement, forget old tombstones and
        departures, let held copies and quiet chains go; how many records were settled
        without their root."""
        retry = self.settings.router_dead_after
        reachable = None
        freed = 0
        for record in list(self.records.records.values()):
            far = record.far
            if (far is None or record.local or record.pending or record.publisher_settled
                    or far.answered_at is None or now - far.answered_at < retry):
                continue
            if reachable is None:
                reachable = self.reachable()
            roots = {root for root, _, _, _ in far.takes}
            if (far.first_answer is not None and now - far.first_answer > self.settings.publisher_grace + retry
                    and not roots & reachable):
                # Its root is gone and nobody took the publisher over: settled without it.
                # Its tombstone stays until that root settles it (``awaiting``).
                gid, takes = record.gid, list(far.takes)
                self.settle_from(gid)
                if gid in self.tombstones and gid not in self.records:
                    self._await_root(gid, takes, now)
                freed += 1
            else:
                self.answer_ready(record)
        if self.awaiting:
            self._answer_awaiting(now, retry)
        tombs, order, stale = self.tombstones, self.tomb_order, self.tomb_stale
        while order and order[0][1] <= now:
            for gid in order.popleft()[2]:
                if stale and gid in stale:  # its tombstone went and was kept again since
                    if stale[gid] == 1:
                        del stale[gid]
                    else:
                        stale[gid] -= 1
                else:
                    tombs.pop(gid, None)
        for key in [k for k, (_, until) in self.departed.items() if until <= now]:
            del self.departed[key]
        for key in [k for k, until in self.closed.items() if until <= now]:
            del self.closed[key]
        for key in [k for k, (_, _, until) in self.left_had.items() if until <= now]:
            del self.left_had[key]
        for gid in [g for g, (_, until, _) in self.fenced.items() if until <= now]:
            del self.fenced[gid]
        for gr in [gr for gr in self.refused if gr[0] not in self.fenced]:
            del self.refused[gr]
        if self.released_at:  # (as long as the record or its tombstone: few, releases only)
            records, tombs = self.records, self.tombstones
            for gk in [gk for gk in self.released_at if gk[0] not in tombs and records.get(gk[0]) is None]:
                del self.released_at[gk]
        # Copies held behind a gap that nothing filled for a while give their room back:
        # they were never answered, so their root (if it lives) sends them again.
        stuck = now - 2 * retry
        for stream, chain in self.chains.items():
            if chain.held and self.chain_seen.get(stream, 0.0) < stuck:
                self.held -= len(chain.held)
                chain.held.clear()
        # A chain with nothing held may go once quiet: the root's ``low`` on its next copy
        # says where it stands, so nothing is taken twice or skipped.
        quiet = now - self.settings.publisher_grace
        for stream in [s for s, c in self.chains.items() if not c.held and self.chain_seen.get(s, 0.0) < quiet]:
            del self.chains[stream]
            self.chain_seen.pop(stream, None)
        return freed
