"""The network-wide subscriber table, converging by flooding (no synchronous replication).

Every router numbers its own attach/detach events (``seq`` per origin) and floods them.
Events may arrive out of order over different paths, so each subscriber key carries the
seq of its last event and an older event never overwrites a newer one. A full sync on
every link (re)connect repairs whatever a broken link lost.

Attach completion uses an echo (PIF) over the flood: a router acknowledges an event to
the neighbour it first got it from once every other neighbour it forwarded to has
acknowledged (a duplicate is acknowledged at once; a lost link counts as acknowledged,
whatever lies behind it is no longer reachable that way). When all the origin's
neighbours have acknowledged, every reachable router has applied the event: 2 messages
per live link per event.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace

from once.records.names import PatternSet, is_pattern

from .messages import OriginState, SubAck, SubEvent, Subscription

Out = list[tuple[str, object]]  # (neighbour, message) to send


@dataclass
class _Echo:
    parent: str | None  # None: we are the origin
    waiting: set[str] = field(default_factory=set)


@dataclass
class _Origin:
    watermark: int = 0  # every seq <= watermark applied
    above: set[int] = field(default_factory=set)  # applied seqs beyond the watermark
    keys: dict[tuple[str, str], tuple[int, Subscription | None]] = field(default_factory=dict)
    # name -> the keys attached under it (``_subs_of``: a topic's subscribers without a walk over all)
    names: dict[str, dict[tuple[str, str], None]] = field(default_factory=dict)
    # keys it gave up as gaps (a detach with ``gap``), until it clears them or they attach there again
    gaps: dict[tuple[str, str], Subscription] = field(default_factory=dict)

    def seen(self, seq: int) -> bool:
        return seq <= self.watermark or seq in self.above

    def mark(self, seq: int) -> None:
        self.above.add(seq)
        while self.watermark + 1 in self.above:
            self.watermark += 1
            self.above.discard(self.watermark)


class SubscriberTable:
    def __init__(self, me: str, base: int = 0) -> None:
        """``base``: where this life's numbering starts. The router passes its wall clock in
        microseconds, so a restarted router's events are numbered past its earlier life's
        (which it does not remember), and a view of it below ``base`` is of that life."""
        self.me = me
        self.base = base
        self.seq = base
        self.origins: dict[str, _Origin] = defaultdict(_Origin)
        self.origins[me].watermark = base
        # name (a topic or a pattern) -> origin -> its subscribers under that name
        self.by_topic: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.patterns = PatternSet()  # the names in ``by_topic`` that are patterns (``records/names.py``)
        self.echoes: dict[tuple[str, int], _Echo] = {}
        self.messages_sent = 0
        self.by_key: dict[tuple[str, str], set[str]] = defaultdict(set)  # subscriber key -> origins holding it
        self.adopted: list[Subscription] = []  # our subscriptions from an earlier life, for the router to take up
        self.renumbered = False  # an earlier life's numbering of ours came back, past ours: say our state again
        self.learned_gaps: list[Subscription] = []  # gaps of other origins heard of first now, for the router

    # ---------------------------------------------------------------- views

    def routers_for(self, topic: str) -> set[str]:
        """Routers with subscribers a message to ``topic`` reaches: of the topic itself, or of
        a pattern matching it."""
        counts = self.by_topic.get(topic)
        out = {r for r, n in counts.items() if n > 0} if counts else set()
        for name in self.patterns.matching(topic):
            if name != topic:
                out.update(r for r, n in self.by_topic[name].items() if n > 0)
        return out

    def home(self, key: tuple[str, str]) -> str | None:
        """The router a subscriber key lives at: its newest attach (ties: the larger id,
        so that every router picks the same one)."""
        best: tuple[int, str] | None = None
        for origin in self.by_key.get(key, ()):
            sub = self.origins[origin].keys[key][1]
            if sub is not None and (best is None or (sub.since, origin) > best):
                best = (sub.since, origin)
        return best[1] if best else None

    def newest_attach(self, key: tuple[str, str]) -> int:
        """The largest attach stamp (``since``) any origin holds for ``key`` (0: none)."""
        stamps = [sub.since for origin in self.by_key.get(key, ())
                  if (sub := self.origins[origin].keys[key][1]) is not None]
        return max(stamps, default=0)

    def effective_routers(self, topic: str, reachable: set[str]) -> set[str]:
        """Routers whose subscribers a message for ``topic`` must reach.

        A router counts for the keys that live there (``home``), reachable or not: while
        it is unreachable deliveries wait for its subscribers. A key that attached again
        elsewhere later has moved; the router it left (dead, or restarted and holding a
        stale record of it) no longer counts for it.
        """
        out = set()
        for origin in self.routers_for(topic):
            for sub in self._subs_of(origin, topic):
                # (a consumer group's member counts only where the root sends it a message)
                if not sub.group and self.home(sub.key) == origin:
                    out.add(origin)
                    break
        return out

    def group_members(self, topic: str, but: str) -> dict[tuple[str, str, str], list[Subscription]]:
        """Consumer group members of ``topic`` where they live (``home``), except at ``but``:
        (group, scope, pattern) -> subscriptions (``pattern``: the one the group's members
        subscribed to, "" for a topic: a group of a pattern is another group)."""
        out: dict[tuple[str, str, str], list[Subscription]] = {}
        for origin in self.routers_for(topic):
            if origin == but:
                continue
            for sub in self._subs_of(origin, topic):
                if sub.group and self.home(sub.key) == origin:
                    pattern = sub.topic if sub.topic in self.patterns else ""
                    out.setdefault((sub.group, sub.scope, pattern), []).append(sub)
        return out

    def moved(self, topic: str, origin: str, reachable: set[str]) -> dict[str, frozenset[tuple[str, str]]]:
        """Keys of ``origin``'s subscribers for ``topic`` that now live at another reachable router: router -> keys."""
        out: dict[str, set[tuple[str, str]]] = {}
        for sub in self._subs_of(origin, topic):
            where = self.home(sub.key)
            if where is not None and where != origin and where in reachable:
                out.setdefault(where, set()).add(sub.key)
        return {r: frozenset(k) for r, k in out.items()}

    def keys_of(self, origin: str, topic: str) -> frozenset[tuple[str, str]]:
        """The keys of ``origin``'s subscribers for ``topic``, as this table has them."""
        return frozenset(s.key for s in self._subs_of(origin, topic))

    def subscribers_of(self, origin: str, topic: str) -> list[Subscription]:
        """``origin``'s subscriptions that a message to ``topic`` reaches."""
        return self._subs_of(origin, topic)

    def _subs_of(self, origin: str, topic: str) -> list[Subscription]:
        """``origin``'s subscribers that a message to ``topic`` reaches (by name or pattern)."""
        o = self.origins.get(origin)
        if o is None or not o.names:
            return []
        names = o.names
        out: list[Subscription] = []
        for name in (topic, *(p for p in self.patterns.matching(topic) if p != topic)):
            for key in names.get(name, ()):
                sub = o.keys[key][1]
                if sub is not None:
                    out.append(sub)
        return out

    def subscriptions(self, origin: str) -> list[Subscription]:
        o = self.origins.get(origin)
        return [s for _, s in o.keys.values() if s is not None] if o else []

    def all_subscriptions(self) -> list[Subscription]:
        return [s for origin in list(self.origins) for s in self.subscriptions(origin)]

    # -------------------------------------------------------------- events

    def local(self, attached: bool, sub: Subscription, neighbours: set[str]) -> tuple[int, Out, bool]:
        """Our own attach/detach: apply, flood; return (seq, messages, complete-already)."""
        self.seq += 1
        ev = SubEvent(self.me, self.seq, attached, sub)
        self._apply(ev)
        echo = _Echo(None, set(neighbours))
        out = self._send(neighbours, ev)
        if not echo.waiting:
            return self.seq, out, True
        self.echoes[(self.me, self.seq)] = echo
        return self.seq, out, False

    def on_event(self, ev: SubEvent, sender: str, neighbours: set[str]) -> Out:
        origin = self.origins[ev.origin]
        if ev.origin == self.me and ev.seq > self.seq:
            self._past(ev.seq)  # (an earlier life's event, numbered past this life: see ``_adopt``)
        if ev.origin == self.me or origin.seen(ev.seq):
            return self._send({sender}, SubAck(ev.origin, ev.seq))
        self._apply(ev)
        targets = set(neighbours) - {sender, ev.origin}
        out = self._send(targets, ev)
        if not targets:
            return out + self._send({sender}, SubAck(ev.origin, ev.seq))
        self.echoes[(ev.origin, ev.seq)] = _Echo(sender, targets)
        return out

    def on_ack(self, ack: SubAck, sender: str) -> tuple[Out, list[int]]:
        """Return messages to send and our own event seqs that completed."""
        return self._acked((ack.origin, ack.seq), sender)

    def neighbour_lost(self, n: str) -> tuple[Out, list[int]]:
        out: Out = []
        done: list[int] = []
        for key in [k for k, e in self.echoes.items() if n in e.waiting]:
            o, d = self._acked(key, n)
            out += o
            done += d
        return out, done

    def _acked(self, key: tuple[str, int], sender: str) -> tuple[Out, list[int]]:
        echo = self.echoes.get(key)
        if echo is None:
            return [], []
        echo.waiting.discard(sender)
        if echo.waiting:
            return [], []
        del self.echoes[key]
        if echo.parent is None:
            return [], [key[1]]
        return self._send({echo.parent}, SubAck(*key)), []

    def _send(self, to: set[str], msg: object) -> Out:
        self.messages_sent += len(to)
        return [(n, msg) for n in sorted(to)]

    def _apply(self, ev: SubEvent) -> None:
        origin = self.origins[ev.origin]
        origin.mark(ev.seq)
        sub = ev.subscription
        if self._set(ev.origin, sub.key, ev.seq, sub if ev.attached else None):
            if not ev.attached and sub.gap:
                self._gap(ev.origin, sub)
            else:
                origin.gaps.pop(sub.key, None)  # (attached there again, or the gap cleared)

    def _gap(self, origin_id: str, sub: Subscription) -> None:
        gaps = self.origins[origin_id].gaps
        if gaps.get(sub.key) != sub:
            gaps[sub.key] = sub
            if origin_id != self.me:
                self.learned_gaps.append(sub)

    def gaps(self, origin_id: str) -> tuple[Subscription, ...]:
        o = self.origins.get(origin_id)
        return tuple(o.gaps.values()) if o else ()

    def _set(self, origin_id: str, key: tuple[str, str], seq: int, sub: Subscription | None) -> bool:
        origin = self.origins[origin_id]
        old_seq, old = origin.keys.get(key, (0, None))
        if seq <= old_seq:
            return False  # an older event arriving late never overrides a newer one
        if old is not None:
            self._uncount(old.topic, origin_id)
            self.by_key[key].discard(origin_id)
            if sub is None or sub.topic != old.topic:
                under = origin.names[old.topic]
                del under[key]
                if not under:
                    del origin.names[old.topic]
        if sub is not None:
            self.by_topic[sub.topic][origin_id] += 1
            self.by_key[key].add(origin_id)
            if is_pattern(sub.topic):
                self.patterns.add(sub.topic)
            origin.names.setdefault(sub.topic, {})[key] = None
        origin.keys[key] = (seq, sub)
        return True

    def _uncount(self, name: str, origin_id: str) -> None:
        counts = self.by_topic[name]
        counts[origin_id] -= 1
        if name in self.patterns and not any(counts.values()):
            self.patterns.discard(name)  # (a message no longer tries it)

    # ----------------------------------------------------------- full sync

    def state(self, origin_id: str) -> tuple[int, tuple[Subscription, ...]]:
        o = self.origins.get(origin_id)
        if o is None:
            return 0, ()
        return o.watermark, tuple(s for _, s in o.keys.values() if s is not None)

    def merge(self, st: OriginState) -> bool:
        """Take a neighbour's full view of one origin if it is newer; True if anything changed."""
        if st.origin == self.me:
            return self._adopt(st)
        o = self.origins[st.origin]
        if st.sub_seq <= o.watermark:
            return False
        present = {s.key for s in st.subscriptions}
        for key, (_, sub) in list(o.keys.items()):
            if sub is not None and key not in present:
                self._set(st.origin, key, st.sub_seq, None)
        for s in st.subscriptions:
            self._set(st.origin, s.key, st.sub_seq, s)
        for key in [k for k in o.gaps if all(g.key != k for g in st.gaps)]:
            del o.gaps[key]  # (cleared)
        for g in st.gaps:
            self._gap(st.origin, g)
        o.watermark = st.sub_seq
        o.above = {x for x in o.above if x > st.sub_seq}
        return True

    def _adopt(self, st: OriginState) -> bool:
        """Our own state from an earlier life of ours (we restarted): the network still
        knows our subscribers, and deliveries are on their way to them.

        Forgetting them would let deliveries for them be accepted here with nobody to take
        them; so they become ours again (suspended, until they come back or their grace
        ends). Keys attached or detached since we restarted are newer and stay as they are.
        This life is numbered from ``base``, past that one, so the state we send wins
        everywhere: also when this life numbered as many events as that one before the
        links came up (counting from the same start, the two were once taken for one).

        A state numbered past anything this life numbered is an earlier life's too, though
        past ``base``: our clock stepped back across the restart (``--hard --groups`` fresh
        seed 396129154652: C restarted 2 s behind, its new attaches were numbered below what
        its neighbours had of its earlier life, and they ignored them; a member that resumed
        at C stayed at its old router until its grace ended). We number past it, and say
        our state again.
        """
        if self.base <= st.sub_seq <= self.seq:
            return False  # this life, as a neighbour saw it
        mine = self.origins[self.me]
        taken = [replace(s, suspended=True) for s in st.subscriptions if s.key not in mine.keys]
        for g in st.gaps:  # (ours to clear: the network may not have told every attach of them yet)
            if g.key not in mine.keys:
                mine.gaps.setdefault(g.key, g)
        if st.sub_seq > self.seq:
            self._past(st.sub_seq)
        elif not taken:
            return False
        self.seq += 1
        for sub in taken:
            self._set(self.me, sub.key, self.seq, sub)
        mine.watermark, mine.above = self.seq, set()
        self.adopted += taken
        return True

    def _past(self, seq: int) -> None:
        """Number our events past ``seq`` (an earlier life's), with what we hold now."""
        mine = self.origins[self.me]
        self.seq = seq + 1
        for key, (_, sub) in list(mine.keys.items()):
            mine.keys[key] = (self.seq, sub)
        mine.watermark, mine.above = self.seq, set()
        self.renumbered = True

    def restore(self, subs: list[Subscription]) -> list[Subscription]:
        """Our subscriptions from the journal of an earlier life (we restarted): ours again,
        as ``_adopt`` takes them from a neighbour's sync, but also when no neighbour
        remembers them (the whole network restarted). They keep the time they attached,
        so a key that attached elsewhere since lives there (the newest attach), and they
        are announced with our state once a neighbour has synced with us. Keys this life
        already has stay as they are. Returns those taken."""
        mine = self.origins[self.me]
        taken = [replace(s, suspended=True) for s in subs if s.key not in mine.keys]
        if not taken:
            return []
        self.seq += 1
        for sub in taken:
            self._set(self.me, sub.key, self.seq, sub)
        mine.watermark, mine.above = self.seq, set()
        return taken

    def forget_origin(self, origin_id: str) -> None:
        """Drop everything an origin announced (its subscriptions end with it)."""
        o = self.origins.pop(origin_id, None)
        if o is None:
            return
        for key, (_, sub) in o.keys.items():
            if sub is not None:
                self._uncount(sub.topic, origin_id)
                self.by_key[key].discard(origin_id)
