"""``/metrics``: the router in the Prometheus text format, through ``prometheus-client``.

The data path keeps plain integers (``core/tables.py`` ``stats``, ``core/measures.py``);
this collector reads them when Prometheus scrapes, so a scrape costs the data path
nothing between scrapes. prometheus-client's own metric classes take a lock on every
increment; we only use its families and its text writer. Names follow Prometheus'
conventions (``once_`` prefix, ``_total`` counters, ``_seconds``/``_bytes`` units) and
are listed in ``docs/operating.md``.

Cardinality is bounded: per-topic series for at most ``Measures.topic_limit`` topics (the
rest under ``topic="(other)"``), per-neighbour series for the topology's neighbours only
(at most ``NEIGHBOUR_LIMIT``), nothing per connection or per link.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from ..core.measures import OTHER, Buckets, Measures
from ..core.messages import PROTOCOL_VERSION
from . import views

if TYPE_CHECKING:
    from .observed import Observed as Router

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
NEIGHBOUR_LIMIT = 64

# (stats key, metric name without once_ and _total, help)
COUNTERS = (
    ("published", "deliveries_received", "Deliveries received from publishers attached here."),
    ("told_accepted", "publisher_outcomes_accepted", "Outcomes publishers attached here were told: accepted (every "
     "subscriber in the network accepted)."),
    ("told_rejected", "publisher_outcomes_rejected", "Outcomes publishers attached here were told: rejected."),
    ("forwarded", "deliveries_forwarded", "Copies of deliveries sent to neighbour routers."),
    ("delivered", "deliveries_delivered", "Deliveries sent to subscribers attached here (redeliveries included)."),
    ("accepted", "deliveries_accepted", "Deliveries subscribers attached here accepted."),
    ("rejected", "deliveries_rejected", "Deliveries subscribers attached here rejected."),
    ("released", "deliveries_released", "Deliveries subscribers attached here released or modified."),
    ("redelivered", "deliveries_redelivered", "Deliveries queued again for a subscriber that released them."),
    ("passed_on", "deliveries_passed_on", "Messages a consumer group member released, for another member of its group."),
    ("presettled_late", "presettled_dropped_late", "Pre-settled copies dropped here: they came after newer messages "
     "of their publisher (at most once; never delivered out of its order)."),
    ("marked", "redeliveries_marked", "Deliveries sent marked as possibly seen before (delivery-count raised)."),
    ("duplicates", "duplicates_suppressed", "Resent deliveries whose identity (gid) this router already held: merged "
     "with the record, never delivered twice."),
    ("placeholder_hits", "placeholder_hits", "Deliveries a resuming subscriber had already accepted elsewhere: never "
     "sent to it again."),
    ("expired_subscribers", "subscriber_grace_expiries", "Suspended subscribers whose grace ran out."),
    ("expired_with_owed", "subscriber_grace_expiries_with_owed", "Grace expiries of subscribers still owed "
     "deliveries: their publishers heard accepted without them (a loss made visible)."),
    ("expired_owed", "deliveries_owed_at_expiry", "Deliveries owed to subscribers when their grace ran out."),
    ("gaps", "subscription_gaps", "Suspended subscribers given up past partition_grace with a router out of reach: "
     "where they are attached, their links end with once:subscription-gap."),
    ("gaps_told", "subscription_gaps_told", "Subscriptions here ended because another router gave them up while out "
     "of reach (once:subscription-gap)."),
    ("stalled_subscribers", "subscribers_stalled", "Subscribers that answered nothing for subscriber_stall while they "
     "held deliveries: treated as gone (once:subscriber-stalled; suspended for their grace)."),
)


class RouterCollector(Collector):
    def __init__(self, router: Router) -> None:
        self.router = router

    def collect(self) -> Iterator[Metric]:
        router = self.router
        core = router.core
        stats = core.tables.stats
        measures = core.tables.measures
        info = InfoMetricFamily("once_router", "This router: its id, version and acceptance protocol.")
        info.add_metric([], {"router": router.id, "version": router.version, "protocol": str(PROTOCOL_VERSION)})
        yield info
        state = views.ready(router)
        yield GaugeMetricFamily("once_ready", "1 when the router is listening and synced with the network.",
                                value=int(state["ready"]))
        for key, name, text in COUNTERS:
            yield CounterMetricFamily(f"once_{name}", text, value=stats[key])
        resumed = CounterMetricFamily("once_links_resumed", "Links that resumed here (carried their state back).",
                                      labels=["role"])
        resumed.add_metric(["publisher"], stats["resumed_publishers"])
        resumed.add_metric(["subscriber"], stats["resumed_subscribers"])
        yield resumed
        yield from self._topics(measures)
        yield from self._records()
        yield from self._clients()
        yield from self._neighbours()
        yield _histogram("once_publish_to_accepted_seconds", "From a publisher's message arriving here to its "
                         "answer (accepted or rejected), for messages published here.", measures.accept_latency)
        yield _histogram("once_record_held_seconds", "How long a record of a message published here was held: "
                         "arrival to freed (every answer and settlement done).", measures.held_time)

    def _topics(self, measures: Measures) -> Iterator[Metric]:
        fams = {field: CounterMetricFamily(f"once_topic_deliveries_{field}", text, labels=["topic"])
                for field, text in (("received", "Deliveries received from publishers here, per topic."),
                                    ("delivered", "Deliveries sent to subscribers here, per topic."),
                                    ("accepted", "Deliveries subscribers here accepted, per topic."),
                                    ("rejected", "Deliveries subscribers here rejected, per topic."))}
        rows = [*measures.topics.items(), (OTHER, measures.other)]
        for name, counts in rows:
            for field, fam in fams.items():
                fam.add_metric([name], getattr(counts, field))
        yield from fams.values()
        flying = GaugeMetricFamily("once_topic_records_in_flight", "Records held here, per topic.", labels=["topic"])
        by_topic = views.in_flight_by_topic(self.router)
        other = 0
        for name, n in by_topic.items():
            if name in measures.topics:
                flying.add_metric([name], n)
            else:
                other += n
        flying.add_metric([OTHER], other)
        yield flying

    def _records(self) -> Iterator[Metric]:
        router = self.router
        core = router.core
        s = router.settings
        now = core.clock()
        oldest = 0.0
        for r in list(core.records.records.values()):
            if r.local and r.arrived:
                oldest = max(oldest, now - r.arrived)
        yield GaugeMetricFamily("once_records_in_flight", "Delivery records held here (for own and other routers' "
                                "publishers).", value=len(core.records))
        yield GaugeMetricFamily("once_records_own", "Records of messages published here (this router answers them).",
                                value=core.local_count)
        yield GaugeMetricFamily("once_records_oldest_age_seconds", "Age of the oldest record of a message published "
                                "here.", value=oldest)
        yield GaugeMetricFamily("once_records_bytes", "Message bytes held.", value=core.records.bytes)
        yield GaugeMetricFamily("once_reserved_bytes", "Message bytes held on their way to the records (arriving, "
                                "MQTT publishes and wills waiting), bounded with them by max_in_flight_bytes.",
                                value=core.reserve.bytes)
        yield GaugeMetricFamily("once_window_records_limit", "max_in_flight.", value=s.max_in_flight)
        yield GaugeMetricFamily("once_window_bytes_limit", "max_in_flight_bytes.", value=s.max_in_flight_bytes)
        yield GaugeMetricFamily("once_publisher_credit_outstanding", "Credit granted to publishers and not used yet.",
                                value=core.credit.outstanding)
        yield GaugeMetricFamily("once_placeholders_open", "Deliveries resuming subscribers said they accepted that "
                                "have not reached this router (never delivered to them when they do).",
                                value=len(core.placeholders))
        yield GaugeMetricFamily("once_settlements_in_doubt", "Unsettled deliveries of publishers that went away "
                                "without detaching (kept until they resume or their grace ends).",
                                value=sum(len(p.live) for p in core.suspended_publishers.values()))
        waits = views.waiting_on_suspended(router)
        yield GaugeMetricFamily("once_deliveries_waiting_on_suspended", "Deliveries whose answer waits for a "
                                "suspended subscriber here.", value=sum(waits.values()))

    def _clients(self) -> Iterator[Metric]:
        router = self.router
        core = router.core
        yield GaugeMetricFamily("once_connections", "Client connections open.", value=len(router.connections))
        subs = [s for by_key in core.tables.topics.values() for s in by_key.values()]
        suspended = sum(1 for s in subs if s.suspended_until is not None)
        fam = GaugeMetricFamily("once_subscribers", "Subscribers here.", labels=["state"])
        fam.add_metric(["active"], len(subs) - suspended)
        fam.add_metric(["suspended"], suspended)
        yield fam
        links = GaugeMetricFamily("once_links", "Links attached here.", labels=["role"])
        links.add_metric(["publisher"], len(core.publishers))
        links.add_metric(["subscriber"], len(subs) - suspended)
        links.add_metric(["inter-router"], len(router.network.links))
        yield links
        fam = GaugeMetricFamily("once_publishers", "Publishers here.", labels=["state"])
        fam.add_metric(["active"], len(core.publishers))
        fam.add_metric(["suspended"], len(core.suspended_publishers))
        yield fam
        groups = {(s.topic, s.group) for s in subs if s.group is not None}
        yield GaugeMetricFamily("once_groups", "Consumer groups with a member here.", value=len(groups))
        yield GaugeMetricFamily("once_group_members", "Consumer group members here.",
                                value=sum(1 for s in subs if s.group is not None))
        yield GaugeMetricFamily("once_topics", "Topics with a publisher or a subscriber here.",
                                value=len(set(core.tables.topics) | {p.topic for p in core.publishers}))
        refused = CounterMetricFamily("once_policy_refusals", "What the policy refused here: by the limit "
                                      "passed, or the action (publish, subscribe, join) a user may not do.",
                                      labels=["limit"])
        for name, n in router.quotas.refusals.items():  # (a fixed set of names: bounded)
            refused.add_metric([name], n)
        yield refused

    def _neighbours(self) -> Iterator[Metric]:
        router = self.router
        net = router.network
        up = GaugeMetricFamily("once_inter_router_link_up", "1 while the link to the neighbour is up.",
                               labels=["neighbour"])
        cost = GaugeMetricFamily("once_inter_router_link_cost", "The link's cost in the topology.", labels=["neighbour"])
        flaps = CounterMetricFamily("once_inter_router_link_flaps", "Times the link to the neighbour went down.",
                                    labels=["neighbour"])
        peers = sorted(router.neighbour_ids)
        for peer in peers[:NEIGHBOUR_LIMIT]:
            up.add_metric([peer], int(peer in net.links))
            cost.add_metric([peer], net.costs.get(peer, 1))
            flaps.add_metric([peer], net.flaps.get(peer, 0))
        rest = peers[NEIGHBOUR_LIMIT:]
        if rest:  # (the links up, and their flaps, of every neighbour past the cap)
            up.add_metric([OTHER], sum(1 for p in rest if p in net.links))
            flaps.add_metric([OTHER], sum(net.flaps.get(p, 0) for p in rest))
        yield from (up, cost, flaps)
        yield GaugeMetricFamily("once_routers_reachable", "Other routers this router reaches.",
                                value=len(net.reachable() - {router.id}))


def _histogram(name: str, text: str, b: Buckets) -> HistogramMetricFamily:
    buckets = [("+Inf" if bound == float("inf") else repr(bound), n) for bound, n in b.cumulative()]
    return HistogramMetricFamily(name, text, buckets=buckets, sum_value=b.sum)


class Metrics:
    """The router's registry: its own collector, and the process' (RSS, CPU, descriptors)."""

    def __init__(self, router: Router) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(RouterCollector(router))
        self.registry.register(ProcessCollector(registry=None))

    def render(self) -> bytes:
        return generate_latest(self.registry)
