"""What an operator can see of a router's core: one typed snapshot, taken at once.

The SIGUSR1 line is rendered from it, and so will be a metrics endpoint or a console:
they read the snapshot, never the core's own structures.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .core import Core


@dataclass(frozen=True, slots=True)
class SubscriberView:
    topic: str
    container_id: str
    link_name: str
    queued: int
    credit: int
    suspended: bool


@dataclass(frozen=True, slots=True)
class HopView:
    peer: str
    queued: int
    credit: int


@dataclass(frozen=True, slots=True)
class UpstreamView:
    peer: str
    credit: int


@dataclass(frozen=True, slots=True)
class CoreSnapshot:
    router_id: str
    records: int  # deliveries held
    own_records: int  # of those, ours as root
    held_bytes: int  # their message bytes
    held: int  # copies waiting here behind a gap in their stream (order by sequence)
    publishers: int
    publisher_credit: int  # granted and not yet used
    subscribers: tuple[SubscriberView, ...] = ()
    hops: tuple[HopView, ...] = ()
    upstreams: tuple[UpstreamView, ...] = ()
    totals: dict[str, int] = field(default_factory=dict)


def snapshot(core: Core) -> CoreSnapshot:
    subs = tuple(SubscriberView(topic, key[0], key[1], len(s.queue), s.port.credit(), s.suspended_until is not None)
                 for topic, by_key in core.topics.items() for key, s in by_key.items())
    hops = tuple(HopView(peer, len(h.queue), h.port.credit()) for peer, h in core.hops.items())
    ups = tuple(UpstreamView(peer, u.credit) for peer, u in core.upstreams.items())
    return CoreSnapshot(core.router_id, len(core.records), core.local_count, core.records.bytes,
                        sum(len(q) for q in core.held.values()), len(core.publishers), core.credit.outstanding,
                        subs, hops, ups, dict(core.stats))


def line(snap: CoreSnapshot, connections: int) -> str:
    """The one-line state an operator gets on SIGUSR1."""
    subs = ", ".join(f"{s.topic}:{s.container_id}/{s.link_name}(queue {s.queued}, credit {s.credit}"
                     f"{', suspended' if s.suspended else ''})" for s in snap.subscribers)
    hops = ", ".join(f"{h.peer}(queue {h.queued}, credit {h.credit})" for h in snap.hops)
    ups = ", ".join(f"{u.peer}(credit {u.credit})" for u in snap.upstreams)
    return (f"router {snap.router_id}: records {snap.records} (own {snap.own_records}, {snap.held_bytes} bytes), "
            f"held {snap.held}, "
            f"subscribers [{subs}], hops [{hops}], upstreams [{ups}], publishers {snap.publishers} "
            f"(credit {snap.publisher_credit}), connections {connections}, totals {snap.totals}")
