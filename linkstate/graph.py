"""The router graph: a link-state database and the next hops computed from it.

Each router floods a ``LinkStateAd`` listing its live neighbour links. An edge counts
only when both ends advertise it, so a dead router (whose neighbours stopped listing
it) drops out of the graph even though its own last advertisement lingers. Route
computation is a pure function of the database (networkx shortest paths).
"""

from __future__ import annotations

import networkx as nx

from .messages import LinkStateAd


class LinkStateDB:
    def __init__(self, me: str) -> None:
        self.me = me
        self.ads: dict[str, LinkStateAd] = {}
        self.my_seq = 0
        self.reissue = False  # an older life's advertisement of ours came back: advertise anew
        self.addresses: dict[str, str] = {}  # where we listen: in every advertisement of ours
        self._hops: dict[str, str] | None = None
        self.hold = False  # advertisements from elsewhere wait for ``recompute`` (above)
        self.stale = False  # ... and one came since the routes were computed

    # ------------------------------------------------------------ updates

    def set_neighbours(self, neighbours: dict[str, int]) -> LinkStateAd:
        """Our own live links changed: return the new advertisement to flood."""
        self.my_seq += 1
        ad = LinkStateAd(self.me, self.my_seq, dict(neighbours), dict(self.addresses))
        self.ads[self.me] = ad
        self.recompute()
        return ad

    def leave(self) -> LinkStateAd:
        """We stop cleanly: our last advertisement, with no links, saying we left."""
        self.my_seq += 1
        ad = LinkStateAd(self.me, self.my_seq, {}, dict(self.addresses), leaving=True)
        self.ads[self.me] = ad
        self.recompute()
        return ad

    def apply(self, ad: LinkStateAd) -> bool:
        """Take a flooded advertisement; True if it was news (flood it on)."""
        if ad.origin == self.me:
            mine = self.ads.get(self.me)
            if ad.seq > self.my_seq or (ad.seq == self.my_seq and (mine is None or mine.neighbours != ad.neighbours)):
                # An echo of an older life of ours: everybody takes it over what we say now.
                # Jump past it and say it again (``reissue``), or routers keep routing by our
                # old links (a restarted middle router of a line cut it in two for good).
                self.my_seq = ad.seq
                self.reissue = True
            return False
        old = self.ads.get(ad.origin)
        if old is not None and old.seq >= ad.seq:
            return False
        self.ads[ad.origin] = ad
        if self.hold:
            self.stale = True
        else:
            self._hops = None
        return True

    def recompute(self) -> None:
        """The routes are computed again from what we know now (when next asked)."""
        self._hops = None
        self.stale = False

    # ------------------------------------------------------------- queries

    def graph(self) -> nx.Graph[str]:
        g: nx.Graph[str] = nx.Graph()
        g.add_node(self.me)
        for a, ad in self.ads.items():
            for b, cost in ad.neighbours.items():
                other = self.ads.get(b)
                if other is not None and a in other.neighbours:
                    g.add_edge(a, b, weight=max(cost, other.neighbours[a]))
        return g

    def next_hops(self) -> dict[str, str]:
        """Reachable router -> the neighbour to send through (shortest path, ties by id)."""
        if self._hops is None:
            g = self.graph()
            hops: dict[str, str] = {}
            if self.me in g:
                paths = nx.single_source_dijkstra_path(g, self.me, weight="weight")
                for dest, path in sorted(paths.items()):
                    if len(path) >= 2:
                        hops[dest] = path[1]
            self._hops = hops
        return self._hops

    def reachable(self) -> set[str]:
        return set(self.next_hops())

    def left(self) -> set[str]:
        """Routers whose newest advertisement says they left the network."""
        return {o for o, ad in self.ads.items() if ad.leaving and o != self.me}

    def route(self, dests: set[str], exclude: str | None = None) -> tuple[dict[str, set[str]], set[str]]:
        """Split ``dests`` by next hop; return (hop -> dests, unroutable dests).

        ``exclude`` is the neighbour a delivery came from: never send it back there
        (split horizon), or a transient disagreement between routers could bounce it.
        """
        hops = self.next_hops()
        out: dict[str, set[str]] = {}
        stuck: set[str] = set()
        for d in dests:
            h = hops.get(d)
            if h is None or h == exclude:
                stuck.add(d)
            else:
                out.setdefault(h, set()).add(d)
        return out, stuck
