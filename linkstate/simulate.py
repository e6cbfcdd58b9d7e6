"""Run many control planes in-process, in rounds, to judge convergence at scale.

A round delivers every message queued in the previous one. ``python -m once.linkstate.simulate``
prints the figures recorded in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import networkx as nx

from .engine import ControlPlane, Result
from .messages import Subscription, coalesce


@dataclass
class Network:
    planes: dict[str, ControlPlane]
    queue: list[tuple[str, str, object]] = field(default_factory=list)  # (from, to, msg)
    links: set[frozenset[str]] = field(default_factory=set)
    completed: dict[str, list[int]] = field(default_factory=dict)
    adopted: dict[str, list[Subscription]] = field(default_factory=dict)
    delivered = 0  # control messages: what one router sent one neighbour in a round
    items = 0  # what they held (advertisements, events, acknowledgements, syncs)
    per_link: dict[frozenset[str], int] = field(default_factory=dict)  # messages each link carried, both ways

    @classmethod
    def of(cls, names: list[str]) -> Network:
        return cls({n: ControlPlane(n) for n in names})

    def _take(self, src: str, r: Result) -> None:
        for to, msg in r.out:
            self.queue.append((src, to, msg))
        if r.completed:
            self.completed.setdefault(src, []).extend(r.completed)
        if r.adopted:
            self.adopted.setdefault(src, []).extend(r.adopted)

    def restart(self, name: str, behind: int = 0) -> None:
        """The router loses everything (a process restart); its links come back later.
        ``behind``: its clock stepped back that far (the new life's numbers start below the
        old life's last)."""
        for link in [tuple(x) for x in self.links if name in x]:
            self.link_down(*link)
        # A new life numbers its events past the old one (the router uses its clock).
        self.planes[name] = ControlPlane(name, base=self.planes[name].table.seq + 1_000_000 - behind)

    def link_up(self, a: str, b: str, cost: int = 1) -> None:
        self.links.add(frozenset((a, b)))
        self._take(a, self.planes[a].neighbour_up(b, cost))
        self._take(b, self.planes[b].neighbour_up(a, cost))

    def link_down(self, a: str, b: str) -> None:
        self.links.discard(frozenset((a, b)))
        self.queue = [(s, t, m) for s, t, m in self.queue if frozenset((s, t)) != frozenset((a, b))]
        self._take(a, self.planes[a].neighbour_down(b))
        self._take(b, self.planes[b].neighbour_down(a))

    def leave(self, name: str) -> int:
        """The router stops cleanly: its last word goes to its neighbours (``ControlPlane.leave``),
        then its links close. Returns the rounds that took (one)."""
        self._take(name, self.planes[name].leave())
        self.round()
        for link in [tuple(x) for x in self.links if name in x]:
            self.link_down(*link)
        return 1

    def subscribe(self, at: str, sub: Subscription, attached: bool = True) -> int:
        seq, r = self.planes[at].subscribe(sub, attached)
        self._take(at, r)
        return seq

    def round(self) -> int:
        """Every message queued goes: what one router sends one neighbour in a round is one
        control message (the router sends what one turn of its loop produced for a link in
        one transfer: ``InterRouterConnection.send_control``)."""
        batch, self.queue = self.queue, []
        sent: dict[tuple[str, str], list[object]] = {}
        for src, to, msg in batch:
            sent.setdefault((src, to), []).append(msg)
        for (src, to), items in sent.items():
            if frozenset((src, to)) not in self.links:
                continue  # the link went down with the message on it
            self.delivered += 1
            self.items += len(items)
            link = frozenset((src, to))
            self.per_link[link] = self.per_link.get(link, 0) + 1
            for msg in coalesce(items):
                self._take(to, self.planes[to].receive(src, msg))
        return len(sent)

    def run(self, max_rounds: int = 10_000) -> int:
        rounds = 0
        while self.queue:
            self.round()
            rounds += 1
            if rounds > max_rounds:
                raise RuntimeError("control plane did not go quiet")
        return rounds

    def until_complete(self, at: str, seq: int, max_rounds: int = 10_000) -> int:
        rounds = 0
        while seq not in self.completed.get(at, []):
            if not self.queue:
                raise RuntimeError(f"subscription {at}#{seq} never completed")
            self.round()
            rounds += 1
            if rounds > max_rounds:
                raise RuntimeError("no completion")
        return rounds

    def converged(self) -> bool:
        views = [sorted((s.router, s.topic, s.key) for s in p.table.all_subscriptions()) for p in self.planes.values()]
        return all(v == views[0] for v in views)


def random_graph(n: int, degree: float, seed: int) -> nx.Graph:
    """A connected random graph of ``n`` routers, ``degree`` links each on average: random
    regular for a whole degree (connected almost surely), else random edges with the
    components joined. (Drawing random edges until the graph came out connected, as this
    did before, almost never ends past a few hundred routers of degree 4: some router is
    left alone.)"""
    rng = random.Random(seed)
    while True:
        if degree == int(degree) and n * int(degree) % 2 == 0 and int(degree) < n:
            g = nx.random_regular_graph(int(degree), n, seed=rng.randrange(1 << 30))
        else:
            g = nx.gnm_random_graph(n, int(n * degree / 2), seed=rng.randrange(1 << 30))
            parts = [sorted(c) for c in nx.connected_components(g)]
            for a, b in zip(parts, parts[1:]):
                g.add_edge(rng.choice(a), rng.choice(b))
        if nx.is_connected(g):
            return nx.relabel_nodes(g, {i: f"R{i:0{max(3, len(str(n - 1)))}d}" for i in g.nodes})


HOP_S = 0.010  # simulated seconds a round stands for: one hop's latency (processing not modelled)


def _phase(net: Network, name: str, act: Callable[[], object]) -> dict[str, float]:
    """Run ``act`` and the rounds until the network is quiet: what that cost."""
    before, items, net.per_link = net.delivered, net.items, {}
    ran = act()
    rounds = net.run() + (ran if isinstance(ran, int) else 0)
    linked = {r for link in net.links for r in link}  # (a router that left is out of it)
    agreed = len({p.digest() for r, p in net.planes.items() if r in linked}) == 1
    carried = net.per_link.values()
    return {f"{name}_rounds": rounds, f"{name}_time_s": round(rounds * HOP_S, 3),
            f"{name}_messages": net.delivered - before, f"{name}_items": net.items - items,
            f"{name}_messages_per_link_max": max(carried, default=0),
            f"{name}_messages_per_link_mean": round(statistics.mean(carried), 2) if carried else 0,
            f"{name}_digest_agreed": agreed}


def simulate(n: int = 100, degree: float = 4.0, events: int = 20, seed: int = 1,
             churn: bool = True) -> dict[str, float]:
    """Boot ``n`` routers on a random graph, then (``churn``) one more router joins on
    ``degree`` links and one router leaves, then ``events`` subscriptions: counts of
    messages (what one router sends one neighbour in a round) and rounds, each phase run
    until the network is quiet, and whether every router then holds the same digest."""
    g = random_graph(n, degree, seed)
    net = Network.of(sorted(g.nodes))
    rng = random.Random(seed)

    def boot() -> None:
        for a, b in g.edges:
            net.link_up(a, b)

    figures: dict[str, float] = {"routers": n, "links": g.number_of_edges(), "diameter": nx.diameter(g)}
    figures.update(_phase(net, "boot", boot))
    if churn:
        joining = "J" + str(n)
        peers = rng.sample(sorted(g.nodes), int(degree))

        def join() -> None:
            net.planes[joining] = ControlPlane(joining)
            for peer in peers:
                net.link_up(joining, peer)

        figures.update(_phase(net, "join", join))
        g.add_edges_from((joining, p) for p in peers)
        # (one whose leaving leaves the rest connected: a cut router splits the network)
        order = [r for r in sorted(g.nodes) if r != joining]
        rng.shuffle(order)
        leaving = next(r for r in order if nx.is_connected(nx.restricted_view(g, [r], [])))

        def leave() -> int:
            return net.leave(leaving)

        figures.update(_phase(net, "leave", leave))
        g.remove_node(leaving)
        del net.planes[leaving]  # (gone: what it knows no longer counts)
        n = g.number_of_nodes()
    rounds, messages, complete_rounds = [], [], []
    for i in range(events):
        at = rng.choice(sorted(g.nodes))
        before = net.delivered
        seq = net.subscribe(at, Subscription(at, f"t{i % 5}", f"c{i}", "l"))
        complete_rounds.append(net.until_complete(at, seq))
        rounds.append(complete_rounds[-1] + net.run())
        messages.append(net.delivered - before)
    assert net.converged(), "subscriber tables disagree"
    # (every router holds the same digest, so the same graph: a few of them stand for all)
    assert len({p.digest() for p in net.planes.values()}) == 1, "routers disagree on the network"
    for p in rng.sample(sorted(net.planes), min(5, len(net.planes))):
        assert len(net.planes[p].lsdb.reachable()) == n - 1, f"{p} does not reach every other router"
    if events:
        figures.update({
            "attach_complete_rounds_median": statistics.median(complete_rounds),
            "event_rounds_median": statistics.median(rounds),
            "messages_per_event_median": statistics.median(messages),
            "messages_per_event_per_link": statistics.median(messages) / g.number_of_edges(),
        })
    return figures


def growth(sizes: list[int], degree: float, seed: int) -> None:
    """The growth curve: boot, join and leave per size, with the wall time each took."""
    print("| routers | links | diameter | boot messages (per link: mean, max) | boot rounds (simulated s) "
          "| join messages (per link max), rounds | leave messages (per link max), rounds | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for n in sizes:
        t = time.perf_counter()
        f = simulate(n, degree, 0, seed)
        wall = time.perf_counter() - t
        print(f"| {n:,} | {f['links']:,} | {f['diameter']} | {f['boot_messages']:,} ({f['boot_messages_per_link_mean']}, "
              f"{f['boot_messages_per_link_max']}) | {f['boot_rounds']} ({f['boot_time_s']}) | {f['join_messages']:,} "
              f"({f['join_messages_per_link_max']}), {f['join_rounds']} | {f['leave_messages']:,} "
              f"({f['leave_messages_per_link_max']}), {f['leave_rounds']} | {wall:.1f} |", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--routers", type=int, default=100)
    p.add_argument("--degree", type=float, default=4.0)
    p.add_argument("--events", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--growth", metavar="N,N,...", help="the growth curve over these sizes (boot, join, leave) "
                   "as a table, with wall time")
    a = p.parse_args()
    if a.growth:
        growth([int(x) for x in a.growth.split(",")], a.degree, a.seed)
        return
    for k, v in simulate(a.routers, a.degree, a.events, a.seed).items():
        print(f"{k:32} {v}")


if __name__ == "__main__":
    main()
