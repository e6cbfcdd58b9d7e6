"""Consumer groups in the core: the root's choice of a member per group, and passing a
message on to another member when the one it went to went away.

The choice itself is the pure rule in ``records/membership.py``. Here: the member table
as this router sees it (its own members, and the network's through the routes port),
what a record carries (``CoreRecord.chosen``: member key -> (group, the router it went to)),
and what each router does with it. The root chooses; a router that was sent a record for
one of its members and no longer has that member (it left before the root heard)
chooses again, as does the router of a member that releases a message or leaves: it
alone holds that member's share of the record, so nobody else passes it on twice.

A part of ``Core`` (``facade.py``) with its own state: our members per topic and group,
the chooser's load per member, cached member tables, which of ours are active. It calls
the other parts through ``parts.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

from once.records.membership import Chooser, GroupId, Key, Member, Table, merged
from once.records.names import PatternSet
from once.records.owed import KeyState
from once.records.table import SubState

from .effects import Effects, Notice
from .parts import EndingsPart, FailoverPart, InquiryPart
from .peers import ASKING, CoreRecord, Subscriber
from .ports import RoutesPort
from .tables import CoreTables

NO_MEMBERS = Table(())


class Groups:
    __slots__ = ("router_id", "settings", "topics", "clock", "routes", "remote_routers", "local_groups",
                 "patterns", "chooser", "message_key", "_group_views", "_local_version", "active_members", "failover",
                 "inquiry", "endings", "effects", "releasers")

    def __init__(self, tables: CoreTables, routes: RoutesPort, message_key: Callable[[bytes], bytes | None],
                 effects: Effects) -> None:
        self.router_id = tables.router_id
        self.settings = tables.settings
        self.topics = tables.topics
        self.clock = tables.clock
        self.routes = routes
        self.remote_routers = routes.remote_routers
        # our members per topic and group; the root's load per member; the key a message
        # is sharded by (the adaptor reads it)
        self.local_groups: dict[str, dict[GroupId, dict[Key, Member]]] = {}
        self.patterns = PatternSet()  # the names in ``local_groups`` that are patterns
        self.chooser = Chooser()
        self.message_key = message_key
        self._group_views: dict[str, tuple[object, int, dict[GroupId, Table]]] = {}
        self._local_version = 0
        self.active_members: set[Key] = set()  # ours that are active in an exclusive group
        self.effects = effects  # (a member that became the active one is told as the batch ends)
        # gid -> (members that released it, until when): a root choosing again after a
        # question leaves them out (``released``)
        self.releasers: dict[bytes, tuple[frozenset[Key], float]] = {}
        self.failover: FailoverPart
        self.inquiry: InquiryPart
        self.endings: EndingsPart

    def connect(self, failover: FailoverPart, inquiry: InquiryPart, endings: EndingsPart) -> None:
        self.failover = failover
        self.inquiry = inquiry
        self.endings = endings

    # ---------------------------------------------------------- membership

    def join(self, sub: Subscriber, since: int) -> None:
        assert sub.group is not None
        self.local_groups.setdefault(sub.topic, {}).setdefault(sub.group, {})[sub.key] = Member(
            sub.key, self.router_id, since, sub.exclusive)
        if sub.group.pattern:
            self.patterns.add(sub.topic)
        self._local_version += 1
        self.endings.member_joined(sub, since)
        self.membership_changed()

    def leave(self, sub: Subscriber) -> None:
        groups = self.local_groups.get(sub.topic)
        if groups is None or sub.group not in groups:
            return
        members = groups[sub.group]
        if members.pop(sub.key, None) is not None:
            self._local_version += 1
        if not members:
            del groups[sub.group]
        if not groups:
            del self.local_groups[sub.topic]
            self.patterns.discard(sub.topic)
        self.membership_changed()

    def membership_changed(self) -> None:
        """Members joined or left (here, or anywhere: the network calls this): each of our
        members that became the active one of an exclusive group is told so."""
        now: set[Key] = set()
        for topic, groups in self.local_groups.items():
            view = self.group_view(topic)
            for group, ours in groups.items():
                leader = view[group].leader if group in view else None
                if leader is not None and leader.key in ours:
                    now.add(leader.key)
        self._stand_ins_give_way()
        for key in now - self.active_members:
            for topic, groups in self.local_groups.items():
                sub = self.topics.get(topic, {}).get(key)
                if sub is not None and sub.group is not None and key in groups.get(sub.group, {}):
                    self.effects.notice(sub.port, Notice.ACTIVATED)
        self.active_members = now

    def last_member(self, sub: Subscriber) -> bool:
        """Whether ``sub`` is the only member its group has in the network."""
        if sub.group is None:
            return False
        return all(m.key == sub.key for m in self.group_view(sub.topic).get(sub.group, ()))

    def _stand_ins_give_way(self) -> None:
        """A group with a stand-in has a member again: the stand-in ends now (its grace is
        over), and what waited with it goes to the group's members as it is removed."""
        now = self.clock()
        for topic, groups in self.local_groups.items():
            subs = self.topics.get(topic, {})
            view = self.group_view(topic)
            for group, ours in groups.items():
                members = view.get(group, ())
                for key in ours:
                    sub = subs.get(key)
                    if sub is not None and sub.suspended_until == math.inf and len(members) > 1:
                        sub.suspended_until = now  # the periodic expiry removes it, passing its messages on

    def is_active(self, sub: Subscriber) -> bool | None:
        """Whether ``sub`` is the active member of its exclusive group (None: it is in none)."""
        if sub.group is None:
            return None
        members = self.group_view(sub.topic).get(sub.group)
        if members is None or members.leader is None:
            return None
        return members.leader.key == sub.key

    def group_view(self, topic: str) -> dict[GroupId, Table]:
        """Every group of ``topic`` in the network, each member table sorted (cached until
        our members or the network's table change)."""
        remote = self.routes.group_members(topic)
        cached = self._group_views.get(topic)
        if cached is not None and cached[0] is remote and cached[1] == self._local_version:
            return cached[2]
        local = self.local_groups.get(topic, {})
        if self.patterns:  # (and the groups of the patterns that match it: each its own GroupId)
            local = dict(local)
            for name in self.patterns.matching(topic):
                if name != topic:
                    local.update(self.local_groups[name])
        view = merged(local, remote)
        if len(self._group_views) > 4096:
            self._group_views.clear()
        self._group_views[topic] = (remote, self._local_version, view)
        return view

    # ------------------------------------------------------------- the root

    def choose_members(self, record: CoreRecord, known: Mapping[GroupId, tuple[Key, str]] | None = None) -> set[str]:
        """At the root: one member per group of the record's topic; the routers to reach them.

        A message its publisher resent to us, of which we knew nothing, is not chosen for
        yet: we ask the other routers whom it went to first (``inquiry.py``), then choose
        with ``known`` (the member each group gave it to before, where one did)."""
        if known is None:
            if record.resent:
                self.inquiry.ask(record)
                return set()
            if self.inquiry.holding(record):
                return set()
        view = self.group_view(record.topic)
        if not view and not known:
            return set()
        key = self.message_key(record.payload)
        shard = self._shard(record, key)
        chosen: dict[Key, tuple[GroupId, str]] = {}
        routers = set()
        for group, (k, router) in (known or {}).items():
            chosen[k] = (group, router)
            self.chooser.given(k, group, key)
            routers.add(router)
        released = self.releasers_of(record.gid) if self.releasers else None
        for group, members in view.items():
            if known and group in known:
                continue
            m = self.chooser.choose(group, members, shard, exclude=released) if released else None
            if m is None:  # (every member released it: it goes round again)
                m = self.chooser.choose(group, members, shard)
            if m is not None:
                chosen[m.key] = (group, m.router)
                self.chooser.given(m.key, group, key)
                routers.add(m.router)
        record.chosen = chosen
        return routers

    def ask(self, record: CoreRecord) -> bool:
        """A record we take over from another root, of a topic with groups: we ask whom its
        members were before choosing (``inquiry.py``), always. The root before may have
        passed the message on since its copy left it, from a member that released it (still
        a member, attached where it was) or that left, and only it and that member's router
        know (fresh groups --releases seed 147: the member's router died, the publisher
        resumed at a router holding the old choice, which gave it back to the member that
        had released it, and both members processed it). The question costs a round only
        where a publisher resumed. True if we ask (the record waits for the answers)."""
        if not self.group_view(record.topic):
            return False
        self.inquiry.ask(record)
        return True

    def reopen(self, record: CoreRecord) -> bool:
        """Our publisher resumed naming ``record``, complete here without members given up to
        another root's question: asked about again (``Inquiry.reopen``)."""
        return self.inquiry.reopen(record)

    def member_resumed(self, sub: Subscriber, gids: Iterable[bytes]) -> None:
        """A member resumed naming what it had: roots asking about those hear it
        (``Inquiry.member_resumed``)."""
        self.inquiry.member_resumed(sub, gids)

    @staticmethod
    def _shard(record: CoreRecord, key: bytes | None) -> bytes | None:
        """What the choice of a member goes by: the message's key; else, from an exactly-once
        publisher, its gid. Such a publisher resends what had no outcome, under the same gid,
        to whichever router it resumes at: that router must choose the member the first one
        chose (which may have processed it), so the choice is the gid's, not the load's (the
        groups soak's random-129)."""
        if key is None and record.publisher is not None and record.publisher.resumable:
            return record.gid
        return key

    def released(self, gid: bytes, key: Key) -> None:
        """Member ``key`` released message ``gid`` (its router said so): a choice made for it
        after a question (``inquiry.py``) leaves it out, as a pass-on does (it is chosen
        already), so the message does not go round between a root and that member."""
        now = self.clock()
        if len(self.releasers) > 65536:
            self.releasers = {g: r for g, r in self.releasers.items() if r[1] > now}
        s = self.settings
        had = self.releasers.get(gid)
        self.releasers[gid] = ((had[0] if had else frozenset()) | {key}, now + s.publisher_grace + s.router_dead_after)

    def released_under_a_fence(self, record: CoreRecord, key: Key) -> None:
        """Member ``key`` of ours released ``record``, ours as root, while another root's
        question fences it (that root chooses): given up to it, noted, as a release the
        root hears from another router is (``Answers._released``, ``Inquiry.give_up``): if
        our publisher is back here, we ask again, the newest root. Dropped, the record
        completed with no member having it (fresh hard churn seed 340118393468: the asker
        died, the publisher came back here, and the member here released the message)."""
        if self.inquiry.fenced_out(record.gid) and record.states.get(ASKING) is not SubState.IN_DOUBT:
            self.inquiry.give_up(record, key)

    def unreleased(self, gid: bytes, key: Key) -> None:
        """``key`` has the message again (every member released it, and it went back)."""
        had = self.releasers.get(gid) if self.releasers else None
        if had is not None and key in had[0]:
            self.releasers[gid] = (had[0] - {key}, had[1])

    def choosing(self, record: CoreRecord) -> bool:
        """Whether this root chooses ``record``'s members now: not while it asks whom they
        were, nor once another root asked (``inquiry.py``)."""
        return not (self.inquiry.fenced_out(record.gid) or record.states.get(ASKING) is SubState.IN_DOUBT)

    def releasers_of(self, gid: bytes) -> frozenset[Key]:
        had = self.releasers.get(gid) if self.releasers else None
        return had[0] if had is not None else frozenset()

    def answered_at_root(self, record: CoreRecord) -> None:
        """The root's record is answered: its members' load goes down (``Chooser``)."""
        chooser = self.chooser
        key = self.message_key(record.payload) if chooser.sticky else None
        for member, (group, _) in (record.chosen or {}).items():
            chooser.answered(member, group, key)

    def wanted(self, record: CoreRecord) -> set[str]:
        """Routers this record must reach: those with plain subscribers of its topic, and
        those of the members chosen for it (a router with members only is not among the
        first: the harness's group-router-dies lost the deliveries parked for one)."""
        wanted = self.remote_routers(record.topic)
        if record.chosen:
            # where they were chosen, and where they live now (a member that moved on from
            # there is owed it where it went, and that router is not dropped as having nobody;
            # ``test_historical_group_seed_is_clean_on_version_3``, seed 320)
            wanted = wanted | {router for _, router in record.chosen.values()} | set(self.routes.homes(record.chosen))
        return wanted

    def members_not_chosen_out(self, record: CoreRecord, owed: Mapping[str, set[Key]]) -> Mapping[str, set[Key]]:
        """What follows subscribers that moved, less the group members that were not chosen
        for this record: a member is owed only what its group gave it (the harness's
        group-router-dies had both members of a dead router's group processing each
        message that followed them)."""
        view = self.group_view(record.topic)
        if not view:
            return owed
        members = {m.key for ms in view.values() for m in ms}
        chosen = record.chosen or {}
        released = self.releasers_of(record.gid) if self.releasers else frozenset()
        out = {}
        for where, keys in owed.items():
            # (nor one that released it: chosen once, it is not owed it any more, unless
            # every member released it and it went back to it, which the root sends itself)
            kept = {k for k in keys if k not in members or k in chosen and k not in released}
            if kept:
                out[where] = kept
        return out

    # ------------------------------------------------------- passing it on

    def chosen_here_missing(self, record: CoreRecord) -> None:
        """Members the record was sent here for that are not here (any more): one that
        attached elsewhere is followed there (it may have had it: our client says so when
        it resumes, and a copy it already has is recognised by its gid); one that is
        nowhere is replaced (the harness's group-router-dies had a restarted router give a
        moved member's share to another member, which processed it a second time)."""
        chosen = record.chosen
        if not chosen:
            return
        subs = self.topics.get(record.topic, {})
        for key, (group, router) in list(chosen.items()):
            if router == self.router_id and key not in subs:
                home = next(iter(self.routes.homes((key,))), None)
                if home is not None and home != self.router_id:
                    self.failover.send_owed(record, {home: {key}})
                else:
                    self.pass_on(record, group, key)

    def pass_on(self, record: CoreRecord, group: GroupId, gone: Key) -> Key | None:
        """Give ``record`` to another member of ``group`` than those that had it; the member
        it goes to, or None when nobody is left (the caller does what it does for a plain
        subscriber). When every member had it or released it, it goes back to one that
        released it (a later copy, which its router delivers: ``Answers.send_back``)."""
        if not self.choosing(record):
            return None  # another root asked whom it went to (the choice is that root's now), or we ask
        chosen = record.chosen if record.chosen is not None else {}
        members = self.group_view(record.topic).get(group, NO_MEMBERS)
        tried = set(chosen) | {gone}
        released = self.releasers_of(record.gid) if self.releasers else frozenset()
        tried |= released
        owed = record.far.owed if record.far is not None else None
        if owed is not None:  # (done with here: chosen before a question chose again, say)
            tried |= {k for k, state in owed.states.items() if state is not KeyState.PENDING}
        key = self.message_key(record.payload)
        # By the same rule as the first choice, less those that had it: a router the
        # publisher resumes at, which no longer sees the member that left, chooses the same
        # one (``test_leaves_seed_what_a_member_accepted_before_it_left_is_not_passed_on``, seed 173)
        shard = self._shard(record, key)
        m = self.chooser.choose(group, members, shard, exclude=tried)
        if m is None:
            back = Table(x for x in members if x.key in released)
            m = self.chooser.choose(group, back, shard) if back else None
            if m is None:
                return None
            chosen[m.key] = (group, m.router)
            record.chosen = chosen
            self.failover.send_back(record, m.key, m.router)
            return m.key
        chosen[m.key] = (group, m.router)
        record.chosen = chosen
        if record.local:
            self.chooser.given(m.key, group, key)
        # to that member alone, marked (it may be a repeat), in publish order if it is here
        self.failover.send_owed(record, {m.router: {m.key}})
        return m.key

    def member_gone(self, sub: Subscriber, record: CoreRecord) -> bool:
        """A member left with ``record`` not answered: passed on if anyone is left; then
        this member no longer counts for it. Returns whether that completed the record."""
        assert sub.group is not None
        if record.states.get(sub) is SubState.IN_DOUBT:
            self.pass_on(record, sub.group, sub.key)
        return record.drop_waiter(sub)

