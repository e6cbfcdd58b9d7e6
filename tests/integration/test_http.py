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


@pytest.fixture
def endpoint(tmp_path):
    from support.routers import write_topology

    port = _free_port()
    r = RouterProcess(write_topology(tmp_path, settings={"handshake_timeout": "1s"}),
                      args=("--http", f"127.0.0.1:{port}"))
    yield r, port
    r.stop()


def test_a_request_head_sent_a_byte_at_a_time_is_cut_off_at_the_handshake_timeout(endpoint):
    """Slowloris: every byte re-armed the idle timer, and 1,500 unfinished heads held 1,500
    connections past 90 s. Now the whole head must come within ``handshake_timeout``."""
    import select

    r, port = endpoint
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        reply = b""
        for i in range(150):  # (30 s of headers at most, one each 0.2 s: the attack, not a wait)
            s.sendall(f"X-{i}: y\r\n".encode())
            if select.select([s], [], [], 0.2)[0]:
                reply = s.recv(4096)
                break
        assert reply.startswith(b"HTTP/1.1 408"), reply[:80]
    assert get(f"http://127.0.0.1:{port}/healthz")[0] == 200


def test_head_of_the_event_stream_is_answered_and_the_connection_serves_on(endpoint):
    r, port = endpoint
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"HEAD /api/events HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while got.count(b"HTTP/1.1 200") < 2:
            chunk = s.recv(4096)
            assert chunk, got  # (before, the HEAD killed the stream's task and the connection hung)
            got += chunk
        assert b"text/event-stream" in got.split(b"\r\n\r\n")[0]


def test_connections_past_the_per_host_limit_are_closed_and_the_endpoint_serves_on(endpoint):
    r, port = endpoint
    held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(40)]
    try:
        closed = 0
        for s in held:  # (a refused one is closed at once: it reads its end, or a reset)
            s.settimeout(0.5)
            try:
                closed += s.recv(1) == b""
            except ConnectionResetError:
                closed += 1
            except TimeoutError:
                pass
        assert closed == 40 - 32
    finally:
        for s in held:
            s.close()
    assert get(f"http://127.0.0.1:{port}/healthz")[0] == 200
    assert "max 32 HTTP connections from one host reached" in "".join(r.stderr_lines())
