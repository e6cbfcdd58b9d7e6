"""An edge router (issue 51, deliverable 3): outside the routing protocol, it carries its
clients to its uplink, an interior router, and to the next of its list when that one dies.
Real router processes; a standard Proton subscriber and publisher attached at the edge;
exactly-once is the interior's, unchanged: nothing lost, first arrivals in order, every
repeat marked."""

from __future__ import annotations

import json
import signal
import urllib.request
from typing import Any

from support.proton_events import ContainerThread, StreamPublisher, assert_at_least_once_marked
from support.routers import Network, RouterProcess, wait_for
from test_leave import FailingOverSubscriber

N = 400


def _network(r: RouterProcess) -> dict[str, Any]:
    with urllib.request.urlopen(r.http + "/api/network", timeout=10) as resp:  # type: ignore[operator]
        return json.loads(resp.read())


def test_an_edges_clients_move_to_its_next_uplink_when_the_first_dies(tmp_path):
    net = Network("edge3.yaml", tmp_path)
    try:
        edge = net["E"]
        assert "(edge: uplinks A, B)" in edge.ready_line
        # (outside the routing protocol: the interiors know only each other)
        assert {r["router"] for r in _network(net["A"])["routers"]} == {"A", "B"}
        sub = FailingOverSubscriber([edge.url])  # (its only address is the edge's)
        ts = ContainerThread(sub)
        sub.wait_seen("attached")
        wait_for(lambda: any(s["container"] for s in _subscribers(net["A"])), 30, what="A holding the subscriber")
        pub = StreamPublisher(net["B"].url, "fate", N)  # (the harness's edge scenario publishes through it too)
        pub.limit = N
        tp = ContainerThread(pub)
        wait_for(lambda: len(sub.got) >= N // 3, 30, what="a third received through the edge")
        net["A"].proc.send_signal(signal.SIGKILL)
        wait_for(lambda: pub.accepted() == N, 90, what="every message accepted after the move")
        wait_for(lambda: {b for b, _, _ in sub.got} == set(range(N)), 60, what="every message received")
        with sub.lock:
            got = list(sub.got)
        assert_at_least_once_marked(got, N)
        assert len(sub.seen("attached")) >= 2  # it really moved: through the edge, to B
        assert any("uplink now B (A did not answer)" in line for line in edge._log)
        assert any(s["container"] for s in _subscribers(net["B"]))
        tp.stop()
        ts.stop()
    finally:
        net.stop()


def _subscribers(r: RouterProcess) -> list[dict[str, Any]]:
    with urllib.request.urlopen(r.http + "/api/subscribers", timeout=10) as resp:  # type: ignore[operator]
        return json.loads(resp.read())["local"]
