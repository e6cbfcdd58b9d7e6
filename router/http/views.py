"""The management API's views: what a router shows of itself, as JSON-ready dicts.

Each view reads the router's live state once and copies what it shows; none changes
anything (the API is read-only). ``once stat`` and the console render these, and the
field names are documented in ``docs/operating.md``.
"""

from __future__ import annotations

import gc
import hashlib
import os
import time
from typing import TYPE_CHECKING, Any

from once.records.table import IN_DOUBT

from ..core import Publisher, Subscriber
from ..core.measures import TopicCounts
from ..core.messages import PROTOCOL_VERSION
from ..core.stalls import holding

if TYPE_CHECKING:
    from .observed import Observed as Router

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
    """The router process's resident memory (Linux: /proc/self/statm; elsewhere 0)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _ago(t: float | None, now: float) -> float | None:
    return None if t is None else round(now - t, 3)


def _left(t: float | None, now: float) -> float | None:
    return None if t is None else round(max(0.0, t - now), 3)


def ready(router: Router) -> dict[str, Any]:
    """Ready: listening, and the network's subscriptions known (the first sync came in,
    so a publish is not accepted for want of subscribers it does not know of yet)."""
    network = router.network
    up = sorted(network.links)
    waiting = sorted(router.neighbour_ids - set(up))
    synced = not router.core.unsynced
    # (a draining router is not ready: a load balancer sends it nobody new)
    return {"ready": router.ready is not None and synced and router.draining is None,
            "listening": router.ready is not None, "synced": synced, "draining": router.draining is not None,
            "neighbours_up": up, "neighbours_down": waiting}


def general(router: Router) -> dict[str, Any]:
    core = router.core
    now = time.monotonic()
    subs = [s for by_key in core.tables.topics.values() for s in by_key.values()]
    suspended = sum(1 for s in subs if s.suspended_until is not None)
    return {
        "router": router.id, "version": router.version, "protocol": PROTOCOL_VERSION,
        "uptime_s": round(now - router.started, 3), **ready(router),
        "connections": len(router.connections), "inter_router_links": len(router.network.links),
        "neighbours": len(router.neighbour_ids), "publishers": len(core.publishers),
        "publishers_suspended": len(core.suspended_publishers), "subscribers": len(subs) - suspended,
        "subscribers_suspended": suspended, "topics": len(set(core.tables.topics) | {p.topic for p in core.publishers}),
        "records": len(core.records), "records_own": core.local_count, "records_bytes": core.records.bytes,
        "reserved_bytes": core.reserve.bytes, "rss_bytes": rss_bytes(), "totals": dict(core.tables.stats),
    }


def memory(router: Router) -> dict[str, Any]:
    core = router.core
    s = router.settings
    return {
        "router": router.id, "rss_bytes": rss_bytes(), "records": len(core.records), "records_own": core.local_count,
        "records_bytes": core.records.bytes, "reserved_bytes": core.reserve.bytes, "max_in_flight": s.max_in_flight,
        "max_in_flight_bytes": s.max_in_flight_bytes,
        "link_in_flight_bytes": s.link_in_flight_bytes, "publisher_credit_outstanding": core.credit.outstanding,
        "placeholders": len(core.placeholders),
        "held": sum(len(q) for q in core.held.values()),
        "gc_counts": list(gc.get_count()),
    }


def _is_mqtt(conn: Any) -> bool:
    return hasattr(conn, "client_id")


def connections(router: Router) -> list[dict[str, Any]]:
    now = time.monotonic()
    out = []
    for conn in sorted(router.connections, key=lambda c: c.serial):
        links = conn.links_here()
        mqtt = _is_mqtt(conn)
        out.append({
            "id": conn.serial, "protocol": "mqtt" if mqtt else "amqp", "peer": conn.peer,
            "container": shown(router, conn.client_id if mqtt else conn.container(),
                               conn.user if mqtt else conn.engine.user or ""),
            "user": conn.user if mqtt else conn.engine.user or "",
            "mechanism": "MQTT" if mqtt else conn.mechanism, "open_s": None if mqtt else _ago(conn.opened_at, now),
            "sessions": None if mqtt else len(conn.engine.sessions), "links": len(links),
            "publishers": sum(1 for ctx in links if isinstance(ctx, Publisher)),
            "subscribers": sum(1 for ctx in links if isinstance(ctx, Subscriber)),
        })
    return out


def links(router: Router) -> list[dict[str, Any]]:
    """Every client link (publishers and subscribers, suspended ones too) and every inter-router link."""
    now = router.core.clock()
    out: list[dict[str, Any]] = []
    for conn in sorted(router.connections, key=lambda c: c.serial):
        for ctx in conn.links_here():
            if isinstance(ctx, Publisher):
                out.append(_publisher(router, ctx, now, conn.serial))
            elif isinstance(ctx, Subscriber):
                out.append(_subscriber(router, ctx, now, conn.serial))
    core = router.core
    out += [_publisher(router, p, now, None) for p in core.suspended_publishers.values()]
    out += [_subscriber(router, s, now, None) for by_key in core.tables.topics.values() for s in by_key.values()
            if s.suspended_until is not None]
    for peer in sorted(router.network.links):
        hop = core.hops.get(peer)
        up = core.upstreams.get(peer)
        out.append({"role": "inter-router", "peer": peer, "connection": None, "state": "up",
                    "queued": len(hop.queue) if hop is not None else 0,
                    "credit_out": hop.port.credit() if hop is not None else 0,
                    "credit_in": up.credit if up is not None else 0})
    return out


def shown(router: Router, container: str, user: str) -> str:
    """A container id (an MQTT client id) as the endpoint shows it. An anonymous client's
    subscriber or session is resumed by whoever presents its container id and link name
    (the container id is all the proof it has: ``docs/security.md``), so an endpoint that
    asks nobody who they are (``auth.http`` off) shows it as a digest: the same on every
    router, and no use for attaching. An authenticated client's keys belong to its user:
    shown as they are."""
    if router.topology.auth.http or user not in ("", "anonymous"):
        return container
    return "~" + hashlib.sha256(container.encode()).hexdigest()[:12]


def _publisher(router: Router, p: Publisher, now: float, conn: int | None) -> dict[str, Any]:
    return {"role": "publisher", "topic": p.topic, "container": shown(router, p.container_id, p.user), "name": p.link_name,
            "connection": conn, "state": "suspended" if p.suspended_until is not None else "attached",
            "deadline_s": _left(p.suspended_until, now), "credit": p.credit, "in_flight": p.in_flight,
            "window": min(p.window, p.pace.value), "unsettled": len(p.live), "sent": p.sent, "settle": "second" if p.settle_second else "first",
            "resumable": p.resumable}


def _subscriber(router: Router, s: Subscriber, now: float, conn: int | None) -> dict[str, Any]:
    active = router.core.is_active(s) if s.group is not None else None
    return {"role": "subscriber", "topic": s.topic, "container": shown(router, s.container_id, s.owner),
            "name": s.link_name,
            "connection": conn, "state": "suspended" if s.suspended_until is not None else "attached",
            "deadline_s": _left(s.suspended_until, now), "credit": s.port.credit(), "queued": len(s.queue),
            "unsettled": len(s.sent), "group": str(s.group.name) if s.group is not None else None,
            "exclusive": s.exclusive, "active": active, "owner": s.owner, "presettled": s.presettled,
            "quiet_s": _quiet(router, s, now)}


def _quiet(router: Router, s: Subscriber, now: float) -> float | None:
    """How long it has held deliveries and answered none (``core/stalls.py``), None when it
    is not doing so: past ``subscriber_stall`` it is treated as gone."""
    mark = router.stalls.marks.get(s)
    if mark is None or mark[0] != s.answered or not holding(s):
        return None
    return round(now - mark[1], 3)


def policy(router: Router) -> dict[str, Any]:
    """What each user and source host holds here against the policy's limits, and the
    refusals: in all, by limit (or action refused), and per user or host."""
    q = router.quotas
    principals = []
    for who in q.principals_known():
        kind, name = who
        purse = q.purse(who)
        sessions, links = q.holding_now(who)
        principals.append({
            "kind": kind, "name": name, "connections": len(q.held.get(who, ())), "sessions": sessions,
            "links": links, "in_flight_bytes": None if purse is None or not purse.where else purse.bytes,
            "limits": {n: {"limit": v, "rule": rule} for n, (v, rule) in q.limits(who).items()},
            "refused": dict(q.refused_by.get(who, {})),
        })
    return {"router": router.id, "policy": router.topology.policy is not None, "refused": dict(q.refusals),
            "principals": principals}


def in_flight_by_topic(router: Router) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in list(router.core.records.records.values()):
        counts[r.topic] = counts.get(r.topic, 0) + 1
    return counts


def topics(router: Router) -> list[dict[str, Any]]:
    core = router.core
    table = router.network.plane.table
    measures = core.tables.measures
    # (and every topic with counts here: one whose clients left keeps its figures; it went
    # from the view and the console said "no topics yet" after traffic)
    names = (set(core.tables.topics) | {p.topic for p in core.publishers}
             | {t for t, per in table.by_topic.items() if any(per.values())} | set(measures.topics))
    flying = in_flight_by_topic(router)
    out = []
    for name in sorted(names):
        local = list(core.tables.topics.get(name, {}).values())
        counts = measures.topics.get(name)
        if counts is None and len(measures.topics) < measures.topic_limit:
            counts = TopicCounts()  # (nothing published or delivered here: zeros; past the cap: unknown)
        remote = sorted(table.routers_for(name) - {router.id})
        per_router = {r: n for r, n in sorted(table.by_topic.get(name, {}).items()) if n and r != router.id}
        out.append({
            "topic": name, "subscribers": sum(1 for s in local if s.suspended_until is None),
            "subscribers_suspended": sum(1 for s in local if s.suspended_until is not None),
            "publishers": sum(1 for p in core.publishers if p.topic == name), "routers": remote,
            "subscribers_by_router": per_router,
            "in_flight": flying.get(name, 0),
            "received": counts.received if counts else None, "delivered": counts.delivered if counts else None,
            "accepted": counts.accepted if counts else None, "rejected": counts.rejected if counts else None,
        })
    return out


def network(router: Router) -> dict[str, Any]:
    """The network as this router sees it: its neighbours, and the link-state graph."""
    net = router.network
    now = time.monotonic()
    graph = net.plane.lsdb.graph()
    reachable = net.reachable()
    hops = router.core.hops
    neighbours = [{"router": peer, "up": peer in net.links, "cost": net.costs.get(peer, 1),
                   "since_s": _ago(net.link_changed.get(peer), now), "flaps": net.flaps.get(peer, 0),
                   "sent": hops[peer].sent if peer in hops else 0}
                  for peer in sorted(router.neighbour_ids)]
    routers = sorted(set(graph.nodes) | set(router.neighbour_ids) | {router.id} |
                     {r for lk in router.topology.links for r in (lk.a, lk.b)})
    # The link-state graph's edges are the links up; the topology's others are down (as far as we know).
    up = {(min(a, b), max(a, b)): d.get("weight", 1) for a, b, d in graph.edges(data=True)}
    named = {(min(lk.a, lk.b), max(lk.a, lk.b)): lk.cost for lk in router.topology.links}
    edges = [{"a": a, "b": b, "cost": up.get((a, b), named.get((a, b))), "up": (a, b) in up}
             for a, b in sorted(up.keys() | named.keys())]
    ads = net.plane.lsdb.ads

    def addresses(r: str) -> dict[str, str]:
        # (where each listens, as its advertisement says: ``once topology dump``)
        if r == router.id:
            return dict(net.plane.lsdb.addresses)
        ad = ads.get(r)
        return dict(ad.addresses) if ad is not None else {}

    left = net.plane.lsdb.left()  # (stopped cleanly: listed, as left, until a later life is back)
    routers = sorted(set(routers) | left)
    return {"router": router.id, "routers": [{"router": r, "reachable": r == router.id or r in reachable,
                                              "left": r in left, "addresses": addresses(r)} for r in routers],
            "edges": edges, "neighbours": neighbours}


def subscribers(router: Router) -> dict[str, Any]:
    """Local subscribers (suspended ones with their deadlines), every subscription the
    network told us of, and the consumer groups with their members."""
    core = router.core
    now = core.clock()
    # (an attached one's connection: the console's "close connection")
    on = {id(ctx): c.serial for c in router.connections for ctx in c.links_here()}
    local = [_subscriber(router, s, now, on.get(id(s))) for by_key in core.tables.topics.values()
             for s in by_key.values()]
    far = [s for s in router.network.plane.table.all_subscriptions() if s.router != router.id]
    remote = [{"router": s.router, "topic": s.topic, "container": shown(router, s.container_id, s.owner),
               "name": s.link_name, "group": s.group or None, "exclusive": s.exclusive, "suspended": s.suspended}
              for s in far]
    # The active member of each exclusive group, as the rule every router applies picks it
    leaders = {(topic, gid.name): table.leader.key for topic in {s["topic"] for s in local + remote}
               for gid, table in core.groups.group_view(topic).items() if table.leader is not None}
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for s in local:
        if s["group"] is not None:
            g = groups.setdefault((s["topic"], s["group"]), {"topic": s["topic"], "group": s["group"], "members": []})
            g["members"].append({"router": router.id, "container": s["container"], "name": s["name"],
                                 "active": s["active"], "suspended": s["state"] == "suspended"})
    for sub, s in zip(far, remote):
        if sub.group:
            g = groups.setdefault((sub.topic, sub.group), {"topic": sub.topic, "group": sub.group, "members": []})
            leader = leaders.get((sub.topic, sub.group))
            g["members"].append({"router": s["router"], "container": s["container"], "name": s["name"],
                                 "active": None if leader is None else leader == sub.key,
                                 "suspended": s["suspended"]})
    return {"router": router.id, "local": local, "remote": remote, "groups": [groups[k] for k in sorted(groups)]}


def waiting_on_suspended(router: Router) -> dict[tuple[str, str], int]:
    """Deliveries each suspended local subscriber holds back (its publishers wait for it)."""
    suspended = {s for by_key in router.core.tables.topics.values() for s in by_key.values()
                 if s.suspended_until is not None}
    counts: dict[tuple[str, str], int] = {}
    if not suspended:
        return counts
    for r in list(router.core.records.records.values()):
        for w, state in r.states.items():
            if state is IN_DOUBT and w in suspended:
                counts[w.key] = counts.get(w.key, 0) + 1
    return counts
