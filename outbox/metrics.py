"""The relay's HTTP endpoint (``once outbox run --http HOST:PORT``): ``/metrics`` in the
Prometheus text format (prometheus-client's families and writer, read at scrape time as
the router's are: ``router/http/metrics.py``) and ``/healthz`` (JSON). Served by the
router's own HTTP glue (``router/http/server.py``) on the relay's event loop.

Series per table are bounded by the layout (shards x partitions, fixed at ``init``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from once.router.http.server import HttpConnection, Reply
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from .relay import OutboxRelay

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# (relay attribute, metric name without once_outbox_ and _total, help)
COUNTERS = (
    ("sent", "rows_sent", "Rows handed to a link (again after a restart of its table's links)."),
    ("deleted", "rows_delivered", "Rows every subscriber accepted, deleted from their table."),
    ("dead", "rows_dead_lettered", "Rows the network rejected, moved to outbox_dead_letter."),
    ("restarts", "link_restarts", "Times a table's links started again because a row waited past --stuck."),
    ("db_losses", "database_losses", "Times the relay lost its database connection."),
)


class RelayCollector(Collector):
    def __init__(self, relay: OutboxRelay) -> None:
        self.relay = relay

    def collect(self) -> Iterator[Metric]:
        r = self.relay
        for attr, name, text in COUNTERS:
            c = CounterMetricFamily(f"once_outbox_{name}", text)
            c.add_metric([], getattr(r, attr))
            yield c
        held = set(r.claims.held) if r.claims is not None else set()
        serving = GaugeMetricFamily("once_outbox_table_served", "1 for each table this relay serves now.",
                                    labels=["table"])
        flight = GaugeMetricFamily("once_outbox_rows_in_flight", "Rows sent and waiting for their outcome.",
                                   labels=["table"])
        stranded = GaugeMetricFamily("once_outbox_rows_stranded", "Rows older than the stranded threshold in the "
                                     "tables this relay serves, at the last count.", labels=["table"])
        oldest = GaugeMetricFamily("once_outbox_oldest_stranded_seconds", "Age of the oldest stranded row.",
                                   labels=["table"])
        for part in r.parts:
            served = (part.shard, part.partition) in held
            serving.add_metric([part.table], 1 if served else 0)
            flight.add_metric([part.table], len(part.in_flight))
            count = r.watch.counts.get(part.table)
            stranded.add_metric([part.table], count.rows if served and count else 0)
            oldest.add_metric([part.table], count.oldest_s if served and count else 0)
        yield from (serving, flight, stranded, oldest)
        listening = GaugeMetricFamily("once_outbox_listening", "1 while PostgreSQL's LISTEN wakes the relay.")
        listening.add_metric([], 1 if r.listener is not None and r.listener.listening else 0)
        yield listening


def routes(relay: OutboxRelay) -> dict[str, Any]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RelayCollector(relay))

    def metrics(_: dict[str, list[str]]) -> Reply:
        return Reply(200, generate_latest(registry), CONTENT_TYPE)

    def health(_: dict[str, list[str]]) -> Reply:
        held = sorted(relay.claims.held) if relay.claims is not None else []
        return Reply.json({"relay": relay.owner, "database": relay.conn is not None,
                           "serving": [f"outgoing_message_{s}_{p}" for s, p in held],
                           "in_flight": sum(len(p.in_flight) for p in relay.parts),
                           "stranded": relay.watch.total()})

    return {"/metrics": metrics, "/healthz": health}


async def serve(relay: OutboxRelay, host: str, port: int) -> tuple[asyncio.Server, int]:
    """Listen on ``host:port`` (0: a free one); the server and its port."""
    table = routes(relay)
    streams: set[HttpConnection] = set()
    server = await asyncio.get_running_loop().create_server(lambda: HttpConnection(table, streams), host, port)
    return server, server.sockets[0].getsockname()[1]
