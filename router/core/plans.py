"""What the root of protocol version 3 works out once and reuses (``copies.py``): per
topic, the remote keys owed a message and the router each lives at; per set of
destination routers, the next hops towards them; per set of routers a copy visited, that
set with this router in it. Each holds until what it was made from changes: the
subscriber table (``table_changed``) or the graph (``graph_changed``).

A fresh publish is the hot path: with these it costs dictionary lookups, not a walk over
the subscriber table and a route computation per message."""

from __future__ import annotations

from .ports import RoutesPort
from .tables import Key
from .topics import TopicIndex

Plan = tuple[frozenset[str], dict[Key, str], dict[str, frozenset[Key]]]


class Plans:
    __slots__ = ("router_id", "topics", "routes", "owed", "plans", "hops", "hop_of", "onward_of", "only_me")

    def __init__(self, router_id: str, topics: TopicIndex, routes: RoutesPort) -> None:
        self.router_id = router_id
        self.topics = topics  # the local subscribers (never owed remotely)
        self.routes = routes
        self.owed: dict[str, dict[Key, str]] = {}  # topic -> remote key -> its router
        self.plans: dict[str, Plan] = {}  # topic -> (the routers it was made for, key -> router, router -> keys)
        self.hops: dict[frozenset[str], dict[str, set[str]]] = {}  # destinations -> next hop -> destinations
        self.hop_of: dict[str, str | None] = {}  # one destination -> its next hop (None: no way)
        self.onward_of: dict[frozenset[str], frozenset[str]] = {}  # routers visited -> with us too
        self.only_me = frozenset({router_id})

    def remote_keys(self, topic: str) -> dict[Key, str]:
        """Every remote subscriber key of ``topic`` and the router it lives at (its newest
        attach). Group members are not: the root chooses one per group per message."""
        cached = self.owed.get(topic)
        if cached is not None:
            return cached
        here = self.topics.get(topic) or {}
        out: dict[Key, str] = {}
        routes = self.routes
        groups = routes.group_members(topic)
        members = {m.key for ms in groups.values() for m in ms} if groups else ()
        for router in routes.remote_routers(topic):
            keys = [k for k in routes.keys_at(topic, router) if k not in here and k not in members]
            for where, ks in routes.homes(keys).items():
                if where != self.router_id:
                    for k in ks:
                        out[k] = where
        self.owed[topic] = out
        return out

    def plan(self, topic: str, dests: set[str]) -> tuple[dict[Key, str], dict[str, frozenset[Key]]]:
        """A topic's remote keys at ``dests``: key -> router, and router -> keys."""
        cached = self.plans.get(topic)
        if cached is not None and cached[0] == dests:
            return cached[1], cached[2]
        owed_map = {k: r for k, r in self.remote_keys(topic).items() if r in dests}
        by_router: dict[str, set[Key]] = {}
        for k, r in owed_map.items():
            by_router.setdefault(r, set()).add(k)
        plan = (frozenset(dests), owed_map, {r: frozenset(ks) for r, ks in by_router.items()})
        self.plans[topic] = plan
        return plan[1], plan[2]

    def next_hops(self, wanted: frozenset[str]) -> dict[str, set[str]]:
        """Next hop -> the routers of ``wanted`` reached through it."""
        by_hop = self.hops.get(wanted)
        if by_hop is None:
            by_hop = self.hops[wanted] = self.routes.route(set(wanted), None)[0]
        return by_hop

    def next_hop(self, router: str) -> str | None:
        """The next hop towards one router (a copy's usual case), None if there is none."""
        try:
            return self.hop_of[router]
        except KeyError:
            by_hop = self.next_hops(frozenset((router,)))
            hop = self.hop_of[router] = next(iter(by_hop), None)
            return hop

    def onward(self, visited: frozenset[str]) -> frozenset[str]:
        """The routers a copy passed, with us: the same few recur, so one object each (its
        hash computed once)."""
        onward = self.onward_of.get(visited)
        if onward is None:
            if len(self.onward_of) > 4096:
                self.onward_of.clear()
            onward = self.onward_of[visited] = visited | self.only_me
        return onward

    def table_changed(self) -> None:
        self.owed.clear()
        self.plans.clear()
        self.hops.clear()
        self.hop_of.clear()

    def graph_changed(self) -> None:
        self.hops.clear()
        self.hop_of.clear()
