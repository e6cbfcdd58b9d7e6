"""The network changing while it runs (``schedules.py --elastic``): a router stopped cleanly
(SIGTERM), by the router process's own rule (``router/leaving.py``), which leaves the
network and starts again later; a link added by SIGHUP at both ends and removed again; a
router no file names that joins, linked to some, and later leaves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from once.router.config import LinkSpec
from once.router.leaving import LEAVE_WAIT, Holding, Leaving, Step

from .links import Down

if TYPE_CHECKING:
    from .net import Fault, SimNet, SimRouter


class Changes:
    """What ``SimNet`` does for the faults ``stop``, ``relink`` and ``newrouter``."""

    def __init__(self, net: SimNet) -> None:
        self.net = net

    def apply(self, f: Fault) -> None:
        net = self.net
        if f.kind == "stop":  # a router stops cleanly, and starts again later
            self.stop(f.target[0], f.duration)
        elif f.kind == "relink":  # a link added by SIGHUP at both ends, and removed again
            a, b = f.target
            if not net.linked(a, b):
                net.topology.links = (*net.topology.links, LinkSpec(a, b))
                for me, peer in ((a, b), (b, a)):  # (as ``Router._relink`` does at each end)
                    end = net.routers.get(me)
                    if end is not None and end.alive:
                        end.network.costs[peer] = 1
                        end.neighbour_ids.add(peer)
                net._dial(frozenset((a, b)))
                net.loop.call_later(f.duration, self._unlink, a, b)
        elif f.kind == "newrouter":  # a router no file named joins, linked to those named, and leaves
            name, *to = f.target
            net.topology.links = (*net.topology.links, *(LinkSpec(name, peer) for peer in to))
            net.restart(name)
            net.loop.call_later(f.duration, self.stop, name, None)

    def stop(self, name: str, back_after: float | None) -> None:
        """The router stops cleanly (SIGTERM): it closes its client connections (they resume
        elsewhere), waits for what it holds (``router/leaving.py``, the process's rule), says
        it left and closes its links; a new life of it starts ``back_after`` later."""
        router = self.net.routers.get(name)
        if router is None or not router.alive or router.draining:
            return
        router.draining = True
        for client in self.net.clients_at(router):
            client.conn.cut()  # type: ignore[union-attr]
        router.call_later(0.1, self._leaving, router, Leaving(LEAVE_WAIT), back_after)

    def _leaving(self, router: SimRouter, leaving: Leaving, back_after: float | None) -> None:
        net = self.net
        if router is not net.routers.get(router.id) or not router.alive:
            return
        held = Holding.of(router.core, len(net.clients_at(router)), bool(router.network.links))
        step = leaving.step(net.loop.now, held)
        if step is Step.WAIT:
            router.call_later(0.1, self._leaving, router, leaving, back_after)
            return
        net.log.append(f"{net.loop.now:.3f} {router.id} {'left' if step is Step.LEAVE else 'stopped'}")
        if step is Step.LEAVE:
            router.network.leave()
            for pair, conn in list(net.conns.items()):
                if router.id in pair:
                    end = conn[0] if conn[0].router is router else conn[1]
                    end.send(Down())  # (behind its last word)
            router.die()
        else:
            net.kill(router.id)
        if back_after is not None:
            net.loop.call_later(back_after, self._back, router.id)
        else:  # (gone for good: its neighbours no longer dial it)
            net.topology.links = tuple(lk for lk in net.topology.links if router.id not in (lk.a, lk.b))

    def _back(self, name: str) -> None:
        """A router that stopped starts again (unless a kill's restart came first)."""
        if not self.net.routers[name].alive:
            self.net.restart(name)

    def _unlink(self, a: str, b: str) -> None:
        """The link is removed (SIGHUP): its ends close it and no longer dial it."""
        net = self.net
        net.log.append(f"{net.loop.now:.3f} unlink {a}-{b}")
        net.topology.links = tuple(lk for lk in net.topology.links if {lk.a, lk.b} != {a, b})
        for me, peer in ((a, b), (b, a)):
            router = net.routers.get(me)
            if router is not None and router.alive:
                router.network.drop_neighbour(peer)
                router.after_batch()
