"""The HTTP endpoint of real routers (issue 25): /metrics parsed by prometheus-client
while traffic flows, /readyz, the management API, bad requests."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from support.proton_clients import ProtonPublisher, ProtonSubscriber
from support.routers import ROOT, Network, RouterProcess, wait_for

ACCEPTED = 36


def get(url: str, timeout: float = 10.0) -> tuple[int, bytes, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read(), r.headers.get("content-type", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get("content-type", "")


def metrics(base: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, body, ctype = get(base + "/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture
def line3(tmp_path):
    net = Network("line3.yaml", tmp_path)
    yield net
    net.stop()


def test_line3_metrics_move_with_traffic_and_every_router_is_ready(line3):
    urls = {r: line3[r].http for r in "ABC"}
    assert all(urls.values()), urls
    for r, base in urls.items():
        status, body, _ = get(base + "/readyz")
        assert status == 200 and json.loads(body)["ready"] is True, r
        assert get(base + "/healthz")[0] == 200
    before = {r: metrics(u) for r, u in urls.items()}
    assert before["A"][("once_deliveries_received_total", ())] == 0
    sub = ProtonSubscriber(line3["C"].url, "metered", name="meter")
    pub = ProtonPublisher(line3["A"].url, "metered")
    n = 500
    outcomes = [pub.send(f"m{i}") for i in range(n)]
    during = metrics(urls["A"])  # (scraped while the messages are on their way)
    assert 0 <= during[("once_deliveries_received_total", ())] <= n
    assert [o.get(timeout=30) for o in outcomes] == [ACCEPTED] * n
    assert [m.body for m in sub.take(n)] == [f"m{i}" for i in range(n)]
    a, b, c = (metrics(urls[r]) for r in "ABC")
    assert a[("once_deliveries_received_total", ())] == n
    assert a[("once_topic_deliveries_received_total", (("topic", "metered"),))] == n
    assert a[("once_deliveries_forwarded_total", ())] >= n  # towards C, through B
    assert b[("once_deliveries_forwarded_total", ())] >= n
    assert c[("once_deliveries_delivered_total", ())] == n
    assert c[("once_deliveries_accepted_total", ())] == n
    assert c[("once_topic_deliveries_accepted_total", (("topic", "metered"),))] == n
    assert a[("once_publish_to_accepted_seconds_count", ())] == n
    assert a[("once_inter_router_link_up", (("neighbour", "B"),))] == 1
    assert b[("once_routers_reachable", ())] == 2
    assert c[("once_subscribers", (("state", "active"),))] == 1
    assert a[("once_publishers", (("state", "active"),))] == 1
    assert a[("process_resident_memory_bytes", ())] > 0
    # the management API sees the same
    topics = json.loads(get(urls["A"] + "/api/topics")[1])
    metered = next(t for t in topics if t["topic"] == "metered")
    assert metered["routers"] == ["C"] and metered["publishers"] == 1 and metered["received"] == n
    net = json.loads(get(urls["B"] + "/api/network")[1])
    assert {x["router"] for x in net["routers"]} == {"A", "B", "C"}
    assert {(e["a"], e["b"]) for e in net["edges"]} == {("A", "B"), ("B", "C")}
    conns = json.loads(get(urls["C"] + "/api/connections")[1])
    assert len(conns) == 1 and conns[0]["subscribers"] == 1
    links = json.loads(get(urls["C"] + "/api/links")[1])
    assert {(lk["role"], lk.get("topic")) for lk in links} >= {("subscriber", "metered"), ("inter-router", None)}
    pubs = [lk for lk in json.loads(get(urls["A"] + "/api/links")[1]) if lk["role"] == "publisher"]
    assert len(pubs) == 1 and pubs[0]["sent"] == n and 1 <= pubs[0]["window"] <= 2000  # (link_credit)
    sub.close()
    pub.close()


def _free_port() -> int:
    from once.tools.topology_ports import free_port

    return free_port()


def test_readyz_turns_ready_after_the_first_sync(tmp_path):
    from once.tools.topology_ports import with_free_ports

    topo = with_free_ports(ROOT / "topologies" / "line3.yaml", tmp_path / "line3.yaml")
    doc = yaml.safe_load(topo.read_text())
    doc["routers"].pop("C")
    doc["links"] = [["A", "B"]]
    topo.write_text(yaml.safe_dump(doc))
    base = "http://" + doc["routers"]["A"]["http"]
    a = subprocess.Popen([sys.executable, "-m", "once.tools.cli", "router", str(topo), "--id", "A"], cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    b = None
    try:
        def answered() -> tuple[int, bytes, str] | None:
            try:
                return get(base + "/readyz", timeout=2)
            except OSError:
                return None  # (not listening yet)

        status, body, _ = wait_for(answered, timeout=30, what="A's /readyz to answer")
        state = json.loads(body)
        assert status == 503 and state["ready"] is False and state["neighbours_down"] == ["B"]
        b = RouterProcess.adopt(subprocess.Popen(
            [sys.executable, "-m", "once.tools.cli", "router", str(topo), "--id", "B"], cwd=ROOT, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True), topo, "B")
        wait_for(lambda: get(base + "/readyz")[0] == 200, timeout=30, what="A ready once B synced")
        assert json.loads(get(base + "/readyz")[1])["neighbours_up"] == ["B"]
    finally:
        a.kill()
        a.wait()
        if b is not None:
            b.stop()


def test_bad_requests_get_a_clear_status_and_the_endpoint_keeps_serving(tmp_path):
    from support.routers import write_topology

    port = _free_port()
    r = RouterProcess(write_topology(tmp_path), args=("--http", f"127.0.0.1:{port}"))
    try:
        base = f"http://127.0.0.1:{port}"
        assert r.http == base
        for raw, status in ((b"NONSENSE\r\n\r\n", b"400"), (b"GET / HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 40000 + b"\r\n\r\n",
                                                            b"431"),
                            (b"DELETE /api/router HTTP/1.1\r\nHost: x\r\n\r\n", b"405")):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(raw)
                reply = s.recv(4096)
                assert reply.split(b" ")[1] == status, reply[:80]
        assert get(base + "/nowhere")[0] == 404
        assert get(base + "/healthz")[0] == 200
        assert get(base + "/")[2].startswith("text/html")
    finally:
        r.stop()
