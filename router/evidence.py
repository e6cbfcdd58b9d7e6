"""Evidence before the network gives anything up on this router's clock (``docs/protocol.md``
section 7): the network's parts that wait for it (``network.py`` holds them).

- ``RollCalls``: a suspended key of ours is given up only once every router is reachable
  and a flood of its attach since the network last changed has been acknowledged by each
  (a router holding the key attached announces that first); a gap of ours is cleared only
  once every router has heard of it.
- ``ColdStart``: a restarted router takes publishes only when it knows every subscription
  there is, or past ``partition_grace``, and then tells the subscribers of the routers out
  of reach the gap when their state comes in.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from once.linkstate.engine import ControlPlane, Result
from once.linkstate.messages import Subscription
from once.records.membership import Key

from .logs import fields

if TYPE_CHECKING:
    from .context import NeighbourLink, RouterContext
    from .core.ports import NetworkEvents

log = logging.getLogger("once.network")


class NetworkView(Protocol):
    """What these parts read of the network that holds them (``network.Network``; a
    protocol, so that this module imports nothing of it)."""

    me: str
    plane: ControlPlane
    router: RouterContext
    epoch: int
    changed_at: float
    on_complete: dict[int, Callable[[], None]]
    links: dict[str, NeighbourLink]

    @property
    def core(self) -> NetworkEvents: ...

    def apply(self, result: Result) -> None: ...

    def everyone_reachable(self) -> bool: ...

    def all_routers(self) -> set[str]: ...

    def reachable(self) -> set[str]: ...


class RollCalls:
    """Roll calls under way: key -> (the network's epoch when it began, whether every
    reachable router has answered). The epoch counts topology changes: a router that came
    in since was not asked, and the call begins again."""

    def __init__(self, network: NetworkView) -> None:
        self.network = network
        self.suspended: dict[Key, tuple[int, bool]] = {}  # before a suspended key of ours is given up
        self.gaps: dict[Key, tuple[int, bool]] = {}  # before one of our gaps is cleared

    def forget(self, key: Key) -> None:
        """Our subscription ``key`` is over: no call for it goes on."""
        self.suspended.pop(key, None)

    def gone_everywhere(self, key: Key) -> bool:
        """Evidence that subscriber ``key``, suspended here, is attached nowhere else: every
        router is reachable, none holds it attached, and a roll call since the network last
        changed says so. The roll call floods our suspended attach again; a router holding
        the key attached announces its attach before it acknowledges
        (``Network._answer_roll_call``), so when every reachable router has acknowledged, we
        know of any attach there is. Without it, a heal's reachability (one advertisement)
        comes before the views it brings (syncs passed on hop by hop), and we would expire a
        key that is live across the healed link (``--long-cuts --groups`` seed 360)."""
        net = self.network
        if not net.everyone_reachable():
            return False
        table = net.plane.table
        me = net.me
        if any(sub is not None and not sub.suspended
               for origin in table.by_key.get(key, ()) if origin != me
               for sub in (table.origins[origin].keys[key][1],)):
            return False
        held = table.origins[me].keys.get(key)
        if held is None or held[1] is None:
            return True  # (not ours in the network's view: nobody waits for it)
        return self._call(self.suspended, key, replace(held[1], suspended=True), True)

    def clear_gaps(self) -> None:
        """Our gaps (keys we gave up past ``partition_grace``) stay in the network's view
        until every router has heard of them: a router that hears of one first ends the
        key's attach there (``Network._told``). Once every router is reachable, we flood
        each again and wait for the echo; when it completes with nothing changed meanwhile,
        every router has it, and a plain detach clears it everywhere (a router that restarts
        or joins later must not hear of it, and end an attach that never missed anything).
        Called on the router's housekeeping tick."""
        net = self.network
        mine = net.plane.table.origins[net.me].gaps
        if not mine:
            self.gaps.clear()
            return
        if not net.everyone_reachable():
            return
        for key, gap in list(mine.items()):
            if self._call(self.gaps, key, gap, False):
                del self.gaps[key]
                _, result = net.plane.subscribe(replace(gap, gap=0), False)
                net.apply(result)

    def _call(self, calls: dict[Key, tuple[int, bool]], key: Key, sub: Subscription, attached: bool) -> bool:
        """Whether a flood of ours of ``sub`` begun since the graph last changed has been
        applied by every reachable router (its echo completed); if none is under way,
        one begins. Routers answer the echo in order after what they send for it, so
        whatever a router floods before acknowledging has reached us by then."""
        net = self.network
        call = calls.get(key)
        if call is not None and call[0] == net.epoch:
            return call[1]
        calls[key] = (net.epoch, False)
        seq, result = net.plane.subscribe(sub, attached)
        net.on_complete[seq] = functools.partial(self._echoed, calls, key, net.epoch)
        net.apply(result)
        return False

    @staticmethod
    def _echoed(calls: dict[Key, tuple[int, bool]], key: Key, epoch: int) -> None:
        if calls.get(key, (None,))[0] == epoch:
            calls[key] = (epoch, True)


class ColdStart:
    """The cold-start rule for a router that restarted (or came up beside one that did)
    with no neighbour's complete view yet."""

    def __init__(self, network: NetworkView) -> None:
        self.network = network
        self.waited = 0.0  # past subscriber_grace, waiting for every router to be reachable
        # Taken past partition_grace: the routers out of reach then (-> our view's watermark
        # of them), when (wall microseconds; the core's clock), until they come in
        self.forced: dict[str, int] = {}
        self.forced_at = 0
        self.forced_clock = 0.0

    def wait(self) -> None:
        """From now, ``subscriber_grace``, then the rule (``check``)."""
        net = self.network
        self.waited = 0.0
        net.router.call_later(net.router.settings.subscriber_grace, self.check)

    def check(self) -> None:
        """``subscriber_grace`` after a restart with no complete neighbour's sync: take
        publishes, on evidence that we know every subscription there is (every router
        reachable, for ``router_dead_after`` since the network last changed: each one's own
        state has come in by then, passed on hop by hop). A router out of reach may hold
        subscribers we never heard of (attached, only cut off: ``--hard --gaps`` seed 915),
        so we wait while one is, up to ``partition_grace`` more; then we take publishes
        anyway, and what was out of reach is told the gap (``tell_forced``)."""
        net = self.network
        plane = net.plane
        if plane.complete:
            return
        s = net.router.settings
        core = net.core
        now = core.clock()
        everyone = net.everyone_reachable()
        if not everyone or now - net.changed_at < s.router_dead_after:
            if self.waited < s.partition_grace or everyone:
                step = min(1.0, s.router_dead_after)
                self.waited += step
                net.router.call_later(step, self.check)
                return
        if everyone:
            log.info("router %s: no neighbour with a complete view after %.0fs, every router reachable: taking "
                     "publishes (cold start)", net.me, s.subscriber_grace + self.waited)
        else:
            out = sorted(net.all_routers() - net.reachable())
            origins = plane.table.origins
            self.forced = {o: origins[o].watermark if o in origins else 0 for o in out}
            self.forced_at = core.wall()
            self.forced_clock = now
            log.warning("router %s: no complete view after %.0fs, routers %s out of reach: taking publishes "
                        "(cold start past partition_grace); their subscribers are told the gap when they come in",
                        net.me, s.subscriber_grace + self.waited, ", ".join(out),
                        extra=fields("sync.forced", unreachable=out))
        plane.complete = True
        for conn in net.links.values():
            conn.send_control(plane.sync_message())
        core.synced()

    def tell_forced(self) -> None:
        """We took publishes past ``partition_grace`` without routers that were out of
        reach (``check``): the subscribers they hold may have missed what we accepted
        meanwhile. The first state of theirs that comes in names them; each is given up
        by us as a gap, as of then (``docs/protocol.md`` section 7), so its attach is told
        and goes on."""
        net = self.network
        me = net.me
        table = net.plane.table
        reachable = net.reachable()
        told = []
        for origin, seen in list(self.forced.items()):
            o = table.origins.get(origin)
            if origin not in reachable or o is None or o.watermark <= seen:
                continue
            del self.forced[origin]
            told += [sub for sub in table.subscriptions(origin)
                     if table.home(sub.key) == origin and not table.origins[me].keys.get(sub.key, (0, None))[1]]
        for sub in told:  # (after the loop: each flood applies its result, which may call us again)
            _, result = net.plane.subscribe(replace(sub, router=me, gap=self.forced_at), False)
            net.apply(result)
