"""Group members whose subscription ended here (``docs/protocol.md`` §8): what each had,
kept and told to every router as its answer while a root may still ask; that it ended, told
so a router holding an older attach of it from its journal stops waiting for it; members of
ours that another router says ended there; and, when we leave the network, all of it handed
to the routers that stay (``Handed``).

A part of ``Copies`` (``copies.py``), beside ``Inquiry`` (``inquiry.py``), which answers a
root's question with what is kept here (``member_groups``, ``Destination.left_had``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from once.records.membership import GroupId
from once.records.owed import Said
from once.records.placeholders import Placeholders
from once.records.table import IN_DOUBT

from .destination import Destination
from .messages import Answer, Control, Ended, Handed
from .peers import CoreRecords, Subscriber
from .ports import RoutesPort
from .tables import CoreTables, Key

_HAD = (Said.ACCEPTED, Said.REJECTED)  # (``closed``, ``moved``: it never had it here)


class Endings:
    __slots__ = ("router_id", "settings", "records", "clock", "routes", "queue", "dest", "placeholders",
                 "member_groups", "member_since", "restored", "gone", "moved_on")

    def __init__(self, tables: CoreTables, routes: RoutesPort, queue: Callable[[str, Control], None],
                 dest: Destination) -> None:
        self.router_id = tables.router_id
        self.settings = tables.settings
        self.records: CoreRecords = tables.records
        self.clock = tables.clock
        self.routes = routes
        self.queue = queue
        self.dest = dest
        self.member_groups: dict[Key, GroupId] = {}  # our members' groups, kept after they leave
        self.member_since: dict[Key, int] = {}  # and when they attached here
        self.restored: dict[Key, int] = {}  # members from our journal, suspended -> when they attached
        self.gone: dict[Key, tuple[int, float]] = {}  # members that closed here -> (since, told until)
        self.moved_on: dict[Key, str] = {}  # restored members that closed elsewhere since -> there
        self.placeholders = Placeholders()  # (the core's, given in ``connect``)

    def connect(self, placeholders: Placeholders) -> None:
        self.placeholders = placeholders

    def member_joined(self, sub: Subscriber, since: int) -> None:
        """A member of ours: what it had is answered with its group, even once it left."""
        key, groups = sub.key, self.member_groups
        assert sub.group is not None
        if len(groups) > 65536 and key not in groups:
            groups.clear()  # (a bound: members that left long ago, whose messages are settled)
            self.member_since.clear()
        groups[key] = sub.group
        self.member_since[key] = since
        if sub.suspended_until is not None:
            self.restored[key] = since  # (taken back from our journal: ``Core.adopt_subscriber``)
        else:
            self.restored.pop(key, None)

    def ended(self, frm: str, ended: Ended) -> None:
        """Router ``frm`` says member ``ended.key`` closed there. If it is suspended here (taken
        back from our journal, or its client went while we could not hear where it resumed)
        and it attached there after it attached here, it resumed there and will not resume
        here: it moved there (``Core.ended_elsewhere``), now rather than when its grace ends
        (until then every question about the group's messages is unsure here, and routers
        forget meanwhile what other members had). Moved, not closed: a copy for it here is
        answered ``moved``, and ``frm`` answers what it had (answered ``closed`` here, what it
        had accepted there would go to another member). A member that attached here later
        than there stays (``test_a_restored_member_that_closed_elsewhere_keeps_no_question_unsure``,
        ``test_a_member_that_closed_elsewhere_while_we_were_cut_off_is_moved_not_expired``)."""
        since = self.restored.get(ended.key)
        if since is None:
            since = self.member_since.get(ended.key)
        if since is None or since >= ended.since:
            return
        self.restored.pop(ended.key, None)
        self.moved_on[ended.key] = frm

    def take_moved_on(self) -> dict[Key, str]:
        moved, self.moved_on = self.moved_on, {}
        return moved

    def left(self, key: Key, group: GroupId, gids: tuple[bytes, ...], until: float) -> None:
        """Member ``key`` ended here before we restarted, having answered ``gids`` (our
        journal): answered as had here, or a new root would give them to another member
        (``test_leaves_seed_217_a_router_restarted_after_a_member_closed_remembers_what_it_had``)."""
        self.dest.left_had[key] = (group, frozenset(gids), until)
        self.member_groups[key] = group

    def member_had(self, key: Key) -> tuple[GroupId, tuple[bytes, ...]] | None:
        """``key`` ends here: if it is a member of ours, its group and the messages it had
        answered that we still know of (for our journal); kept here, and told to every router."""
        group = self.member_groups.get(key)
        if group is None:
            return None
        self.restored.pop(key, None)
        since = self.member_since.get(key)
        if since is not None:
            s = self.settings
            self.gone[key] = (since, self.clock() + max(s.router_dead_after, s.publisher_grace, s.subscriber_grace))
            self._tell_gone(key, since)
        gids = []
        for record in self.records.records.values():
            earlier = record.far.earlier if record.far is not None else None
            said = earlier.get(key) if earlier else None
            if said is not None:
                if said[0] in _HAD:
                    gids.append(record.gid)
                continue
            for waiter, state in record.states.items():
                if type(waiter) is Subscriber and waiter.key == key and state is not IN_DOUBT:
                    gids.append(record.gid)
        for gid, said in self.dest.tombstones.items():
            if key in said and said[key][0] in _HAD:
                gids.append(gid)
        gids += self.placeholders.gids_of(key)  # (what it said it had when it resumed here)
        if gids:  # kept here too, as long as its end is (``Destination.closed``)
            s = self.settings
            self.dest.left_had[key] = (group, frozenset(gids),
                                       self.clock() + max(s.router_dead_after, s.publisher_grace))
            self._tell(key, gids)
        return group, tuple(gids)

    def _tell(self, key: Key, gids: Iterable[bytes]) -> None:
        """What a member that ended here had, told to every router as its answer: we may
        not know the roots (it had some where it was before it resumed here), and a root
        may ask us only after we forgot. Told again every ``router_dead_after`` while we keep
        it (a router we could not reach then may be its root). Routers that are not its root
        answer Settle (``test_fresh_leaves_seed_what_a_member_that_ended_had_reaches_every_root``)."""
        said = ((key, Said.ACCEPTED, None),)
        # (ourselves too: we may be the root now, the publisher having resumed here, with
        # the member owed at the router it had the message at before: ``--groups --leaves``
        # seed 308, where that router forgot it and said ``unknown``, and the message went
        # to a second member)
        for router in self.routes.all_routers() | {self.router_id}:
            for gid in gids:
                self.queue(router, Answer(gid, b"", 0, said))

    def _tell_gone(self, key: Key, since: int) -> None:
        item = Ended(key, since)
        for router in self.routes.all_routers() - {self.router_id}:
            self.queue(router, item)

    def tell_again(self) -> None:
        for key, (_, gids, _) in list(self.dest.left_had.items()):
            self._tell(key, gids)
        if self.gone:
            now = self.clock()
            for key, (since, until) in list(self.gone.items()):
                if until <= now:
                    del self.gone[key]
                else:
                    self._tell_gone(key, since)

    def hand_over(self) -> None:
        """We leave the network (``Network.leave``): what members that ended here had, and
        that they ended, go to every router we reach, each to keep and tell as its own
        (``Handed``). Leaving with it, a root that asks after we left hears nobody had it."""
        left, gone = self.dest.left_had, self.gone
        if not left and not gone:
            return
        now = self.clock()
        to = self.routes.all_routers() - {self.router_id}
        for key in sorted(set(left) | set(gone)):
            had = left.get(key)
            ended = gone.get(key)
            group = had[0] if had is not None else self.member_groups.get(key)
            if group is None:
                continue
            until = max(had[2] if had is not None else now, ended[1] if ended is not None else now)
            item = Handed(key, group, tuple(had[1]) if had is not None else (), until - now,
                          ended[0] if ended is not None else 0)
            for router in to:
                self.queue(router, item)

    def handed(self, h: Handed) -> None:
        """A router leaving the network handed this over (``hand_over``): kept and told as
        ours (with what we keep of that member already), for as long as it would have."""
        until = self.clock() + h.ttl
        self.member_groups.setdefault(h.key, h.group)
        if h.since:
            gone = self.gone.get(h.key)
            self.gone[h.key] = (h.since, until if gone is None else max(gone[1], until))
            self._tell_gone(h.key, h.since)
        if h.gids:
            left = self.dest.left_had
            had = left.get(h.key)
            if had is None:
                left[h.key] = (h.group, frozenset(h.gids), until)
            else:
                left[h.key] = (had[0], had[1] | frozenset(h.gids), max(had[2], until))
            self._tell(h.key, h.gids)
