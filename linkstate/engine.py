"""One router's control plane, pure: link-state flooding, the subscriber table, sync.

The router's glue feeds it neighbour up/down and received control messages and sends
the ``(neighbour, message)`` pairs it returns. Everything takes effect immediately and
deterministically, so ``tests/linkstate`` and the 100-router simulation drive it with
no sockets and no clock.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from .graph import LinkStateDB
from .messages import LinkStateAd, OriginState, SubAck, SubEvent, Subscription, Sync
from .subscriptions import Out, SubscriberTable


@dataclass
class Result:
    out: Out = field(default_factory=list)
    completed: list[int] = field(default_factory=list)  # our own subscription events now acknowledged everywhere
    topology_changed: bool = False
    table_changed: bool = False
    adopted: list[Subscription] = field(default_factory=list)  # ours from an earlier life (see SubscriberTable._adopt)
    gaps: list[Subscription] = field(default_factory=list)  # other routers' gaps heard of first now
    left: list[str] = field(default_factory=list)  # routers heard now to have left the network
    cold: bool = False  # we no longer take our view for complete: the cold-start rule applies
    back: list[str] = field(default_factory=list)  # routers that had left, heard of again (a later life)

    def extend(self, other: Result) -> Result:
        self.out += other.out
        self.completed += other.completed
        self.topology_changed |= other.topology_changed
        self.table_changed |= other.table_changed
        self.adopted += other.adopted
        self.gaps += other.gaps
        self.left += other.left
        self.cold |= other.cold
        self.back += other.back
        return self


class ControlPlane:
    def __init__(self, me: str, base: int = 0) -> None:
        self.me = me
        self.lsdb = LinkStateDB(me)
        self.table = SubscriberTable(me, base)
        self.neighbours: dict[str, int] = {}  # live neighbour -> cost
        self.lsdb.set_neighbours({})
        self.control_messages = 0
        # Until a neighbour's sync has come in, our own subscriber state is not worth
        # announcing: after a restart it is empty, and a neighbour taking it would drop
        # the subscribers of our earlier life before we adopted them (deliveries for them
        # were accepted without them: the in-process network's seed 14).
        self.synced = False
        # Whether our subscriber view holds every subscription there is (``Sync.complete``):
        # false after a restart until a complete neighbour's sync (or the cold-start rule).
        self.complete = True
        self.gone = False  # we left (``leave``): links that go now are not advertised

    # ----------------------------------------------------------- neighbours

    def neighbour_up(self, n: str, cost: int = 1) -> Result:
        self.neighbours[n] = cost
        ad = self.lsdb.set_neighbours(self.neighbours)
        r = Result(topology_changed=True)
        r.out += self._flood(ad, exclude=None)
        r.out.append((n, self.sync_message()))
        self.control_messages += 1
        return r

    def set_addresses(self, addresses: dict[str, str]) -> Result:
        """Where we listen: advertised with our links (now, if a link is up already)."""
        if addresses == self.lsdb.addresses:
            return Result()
        self.lsdb.addresses = dict(addresses)
        if not self.neighbours:
            return Result()
        return Result(out=self._flood(self.lsdb.set_neighbours(self.neighbours), exclude=None), topology_changed=True)

    def neighbour_cost(self, n: str, cost: int) -> Result:
        """Our live link to ``n`` costs ``cost`` now: advertised."""
        if self.neighbours.get(n, cost) == cost:
            return Result()
        self.neighbours[n] = cost
        return Result(out=self._flood(self.lsdb.set_neighbours(self.neighbours), exclude=None), topology_changed=True)

    def leave(self) -> Result:
        """We stop cleanly (``Router.drain``): every router hears at once that we left, and
        stops counting us among the routers it may be cut off from."""
        self.gone = True
        return Result(out=self._flood(self.lsdb.leave(), exclude=None), topology_changed=True)

    def neighbour_down(self, n: str) -> Result:
        if n not in self.neighbours:
            return Result()
        del self.neighbours[n]
        if self.gone:
            return Result()  # (our last word was that we left: links closing after it say nothing)
        ad = self.lsdb.set_neighbours(self.neighbours)
        r = Result(topology_changed=True)
        r.out += self._flood(ad, exclude=None)
        out, done = self.table.neighbour_lost(n)
        r.out += out
        r.completed += done
        return r

    # ------------------------------------------------------- subscriptions

    def subscribe(self, sub: Subscription, attached: bool = True) -> tuple[int, Result]:
        seq, out, done = self.table.local(attached, sub, set(self.neighbours))
        return seq, Result(out=out, completed=[seq] if done else [], table_changed=True)

    def routers_for(self, topic: str) -> set[str]:
        """Routers a message for ``topic`` must reach now (see ``SubscriberTable.effective_routers``)."""
        return self.table.effective_routers(topic, self.lsdb.reachable() | {self.me})

    def moved(self, topic: str, origin: str) -> dict[str, frozenset[tuple[str, str]]]:
        return self.table.moved(topic, origin, self.lsdb.reachable() | {self.me})

    # ------------------------------------------------------------ receiving

    def receive(self, sender: str, msg: object) -> Result:
        r = self._receive(sender, msg)
        if self.table.learned_gaps:
            r.gaps, self.table.learned_gaps = self.table.learned_gaps, []
        return r

    def _receive(self, sender: str, msg: object) -> Result:
        if isinstance(msg, LinkStateAd):
            was_left = self._left(msg.origin)
            if self.lsdb.apply(msg):
                return Result(out=self._flood(msg, exclude=sender), topology_changed=True,
                              left=[msg.origin] if msg.leaving else [],
                              back=[msg.origin] if was_left and not msg.leaving else [])
            return self._reissue(Result())
        if isinstance(msg, SubEvent):
            out = self.table.on_event(msg, sender, set(self.neighbours))
            if self.table.renumbered and self.synced:  # (an earlier life's event of ours came back)
                self.table.renumbered = False
                out += [(n, self.sync_message()) for n in sorted(self.neighbours)]
            return Result(out=out, table_changed=True)
        if isinstance(msg, SubAck):
            out, done = self.table.on_ack(msg, sender)
            return Result(out=out, completed=done)
        if isinstance(msg, Sync):
            return self._on_sync(sender, msg)
        raise TypeError(f"unknown control message {type(msg).__name__}")

    def _left(self, origin: str) -> bool:
        ad = self.lsdb.ads.get(origin)
        return ad is not None and ad.leaving

    def _reissue(self, r: Result) -> Result:
        """Our advertisement again, numbered past an older life's that came back."""
        if self.lsdb.reissue:
            self.lsdb.reissue = False
            r.out += self._flood(self.lsdb.set_neighbours(self.neighbours), exclude=None)
            r.topology_changed = True
        return r

    def _on_sync(self, sender: str, sync: Sync) -> Result:
        r = Result()
        news: list[str] = []  # origins whose state changed here: passed on, and only they
        for st in sync.states:
            fresh = False
            ad = LinkStateAd(st.origin, st.ls_seq, st.neighbours, st.addresses, st.leaving)
            was_left = self._left(st.origin)
            if st.ls_seq and self.lsdb.apply(ad):
                r.topology_changed = fresh = True
                r.out += self._flood(ad, exclude=sender)
                if ad.leaving:
                    r.left.append(ad.origin)
                elif was_left:
                    r.back.append(ad.origin)
            if self.table.merge(st):
                r.table_changed = fresh = True
            if fresh:
                news.append(st.origin)
        self._reissue(r)
        if sync.partial and not (self.table.adopted or self.table.renumbered):
            # (news passed on: it makes us neither synced nor complete, which a neighbour's
            # whole view does; a restarted router announces its own state only after one)
            if news:
                r.out += self._flood(self.delta(news), exclude=sender)
            return r
        if sync.partial:
            # Our earlier life's state came back in news: taken up, and every neighbour
            # (the sender too) hears our numbering moved past it, as after a whole view.
            r.adopted, self.table.adopted = self.table.adopted, []
            self.table.renumbered = False
            r.out += [(n, self.sync_message()) for n in sorted(self.neighbours)]
            return r
        first = not self.synced
        if first and self.complete and not sync.complete:
            # We never had a neighbour's view, and took ours for complete only because we
            # know of no earlier life (fresh); a neighbour whose view is not complete (it
            # restarted) shows the network has one: subscribers we never heard of may be
            # attached beyond it. We wait for a complete view, as it does (the cold-start
            # rule: ``evidence.ColdStart``). (A router that joined beside a restarted one
            # took publishes on its word without them: ``--elastic`` churn seeds 1151,
            # 2482, 3431, 3955.)
            self.complete = False
            r.cold = True
        self.synced = True
        if sync.complete and sync.synced and not self.complete:
            # (not from a router that never had a neighbour's view: fresh, it says complete
            # only because it knows of no earlier life; a router that joined beside us while
            # we restarted made us take publishes without subscribers it never heard of:
            # ``--elastic`` churn seeds 1057, 1151, 2482, 3431, 3955)
            self.complete = first = True  # (our neighbours hear that we are complete now)
        if self.table.adopted or self.table.renumbered:
            # The sender, too, must learn that our numbering moved past our earlier life.
            r.adopted, self.table.adopted = self.table.adopted, []
            self.table.renumbered = False
            r.out += [(n, self.sync_message()) for n in sorted(self.neighbours)]
        elif first:
            r.out += [(n, self.sync_message()) for n in sorted(self.neighbours)]  # now with our own state
        elif news:
            # Pass news on, and only news: a neighbour that was behind us in time learns it
            # too (the whole view, passed on by every router that learned anything, made
            # booting N routers cost N squared messages of N states each).
            r.out += self._flood(self.delta(news), exclude=sender)
        return r

    def digest(self) -> str:
        """What this router knows of the network, as one hash: every origin's advertisement
        (number and links) and subscriber-table number. Routers that agree on it route
        alike and wait for the same subscribers."""
        ads, origins = self.lsdb.ads, self.table.origins
        view = []
        for o in sorted(set(ads) | set(origins)):
            ad = ads.get(o)
            origin = origins.get(o)
            seq = self.table.seq if o == self.me else origin.watermark if origin is not None else 0
            view.append((o, ad.seq, sorted(ad.neighbours.items()), seq) if ad else (o, 0, (), seq))
        return hashlib.sha256(repr(view).encode()).hexdigest()[:16]

    def sync_message(self) -> Sync:
        """Our whole view: for a neighbour whose link just came up."""
        return Sync(self._states(sorted(set(self.lsdb.ads) | set(self.table.origins) | {self.me})), self.complete,
                    synced=self.synced)

    def delta(self, origins: list[str]) -> Sync:
        """Our view of ``origins`` alone: news passed on."""
        return Sync(self._states(origins), self.complete, partial=True, synced=self.synced)

    def _states(self, origins: list[str]) -> tuple[OriginState, ...]:
        states = []
        for o in origins:
            ad = self.lsdb.ads.get(o)
            if o != self.me:
                seq, subs = self.table.state(o)
            elif self.synced:
                seq, subs = self.table.seq, tuple(self.table.subscriptions(o))
            else:
                seq, subs = 0, ()  # (see ``synced``: taken by nobody)
            states.append(OriginState(o, ad.seq if ad else 0, dict(ad.neighbours) if ad else {}, seq, subs,
                                      self.table.gaps(o) if o != self.me or self.synced else (),
                                      dict(ad.addresses) if ad else {}, bool(ad and ad.leaving)))
        return tuple(states)

    def _flood(self, msg: object, exclude: str | None) -> Out:
        targets = [n for n in sorted(self.neighbours) if n != exclude]
        self.control_messages += len(targets)
        return [(n, msg) for n in targets]
