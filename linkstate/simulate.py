"""Run many control planes in-process, in rounds, to judge convergence at scale.

A round delivers every message queued in the previous one. ``python -m once.linkstate.simulate``
prints the figures recorded in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import random
import statistics
from dataclasses import dataclass, field

import networkx as nx

from .engine import ControlPlane, Result
from .messages import Subscription


@dataclass
class Network:
    planes: dict[str, ControlPlane]
    queue: list[tuple[str, str, object]] = field(default_factory=list)  # (from, to, msg)
    links: set[frozenset[str]] = field(default_factory=set)
    completed: dict[str, list[int]] = field(default_factory=dict)
    adopted: dict[str, list[Subscription]] = field(default_factory=dict)
    delivered = 0

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

    def subscribe(self, at: str, sub: Subscription, attached: bool = True) -> int:
        seq, r = self.planes[at].subscribe(sub, attached)
        self._take(at, r)
        return seq

    def round(self) -> int:
        batch, self.queue = self.queue, []
        for src, to, msg in batch:
            if frozenset((src, to)) not in self.links:
                continue  # the link went down with the message on it
            self.delivered += 1
            self._take(to, self.planes[to].receive(src, msg))
        return len(batch)

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
    rng = random.Random(seed)
    while True:
        g = nx.gnm_random_graph(n, int(n * degree / 2), seed=rng.randrange(1 << 30))
        if nx.is_connected(g):
            return nx.relabel_nodes(g, {i: f"R{i:03d}" for i in g.nodes})


def simulate(n: int = 100, degree: float = 4.0, events: int = 20, seed: int = 1) -> dict[str, float]:
    g = random_graph(n, degree, seed)
    net = Network.of(sorted(g.nodes))
    for a, b in g.edges:
        net.link_up(a, b)
    start = net.delivered
    boot_rounds = net.run()
    boot_messages = net.delivered - start
    rng = random.Random(seed)
    rounds, messages, complete_rounds = [], [], []
    for i in range(events):
        at = rng.choice(sorted(g.nodes))
        before = net.delivered
        seq = net.subscribe(at, Subscription(at, f"t{i % 5}", f"c{i}", "l"))
        complete_rounds.append(net.until_complete(at, seq))
        rounds.append(complete_rounds[-1] + net.run())
        messages.append(net.delivered - before)
    assert net.converged(), "subscriber tables disagree"
    hops = {p: len(net.planes[p].lsdb.reachable()) for p in net.planes}
    assert all(h == n - 1 for h in hops.values()), "some router does not reach every other"
    return {
        "routers": n, "links": g.number_of_edges(), "diameter": nx.diameter(g),
        "boot_rounds": boot_rounds, "boot_messages": boot_messages,
        "attach_complete_rounds_median": statistics.median(complete_rounds),
        "event_rounds_median": statistics.median(rounds),
        "messages_per_event_median": statistics.median(messages),
        "messages_per_event_per_link": statistics.median(messages) / g.number_of_edges(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--routers", type=int, default=100)
    p.add_argument("--degree", type=float, default=4.0)
    p.add_argument("--events", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    for k, v in simulate(a.routers, a.degree, a.events, a.seed).items():
        print(f"{k:32} {v}")


if __name__ == "__main__":
    main()
