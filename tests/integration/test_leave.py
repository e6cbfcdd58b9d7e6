"""A router stopped cleanly (SIGTERM) leaves the network (issue 51, deliverable 2): it
drains (its clients resume at other routers, what it holds is answered), then announces
that it left; every other router drops it at once, lists it as left (``/api/network``,
``once stat -n``) and counts it no more among the routers it may be cut off from. Real
router processes, a standard Proton subscriber that resumes elsewhere."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from typing import Any

from support.proton_events import ContainerThread, StreamPublisher, assert_at_least_once_marked
from support.routers import ROOT, Network, RouterProcess, wait_for
from test_router_death import MovingSubscriber

N = 400


class FailingOverSubscriber(MovingSubscriber):
    """A Proton receiver that takes ``amqp:connection:forced`` (its router stops or drains)
    as a reason to fail over, as Proton means to (``EndpointStateHandler`` leaves the
    connection open for its reconnect): its reactor (0.39) then waits for the transport's
    head to close, which it does only at its next heartbeat, half the router's idle timeout
    later. Closed here, the reconnect goes at once (``docs/operating.md``, stopping)."""

    def on_disconnected(self, event: Any) -> None:
        event.transport.close_head()


def _routers(r: RouterProcess) -> dict[str, dict[str, Any]]:
    with urllib.request.urlopen(r.http + "/api/network", timeout=10) as resp:  # type: ignore[operator]
        return {x["router"]: x for x in json.loads(resp.read())["routers"]}


def test_a_router_stopped_by_sigterm_leaves_and_its_subscriber_resumes_elsewhere(tmp_path):
    net = Network("mesh3.yaml", tmp_path)
    try:
        sub = FailingOverSubscriber([net["B"].url, net["C"].url])
        ts = ContainerThread(sub)
        sub.wait_seen("attached")
        pub = StreamPublisher(net["A"].url, "fate", N)
        pub.limit = N
        tp = ContainerThread(pub)
        wait_for(lambda: len(sub.got) >= N // 3, 30, what="a third received through B")
        net["B"].proc.send_signal(signal.SIGTERM)
        wait_for(lambda: pub.accepted() == N, 90, what="every message accepted after the move")
        assert net["B"].proc.wait(60) == 0  # it stopped by itself, drained and gone
        for rid in "AC":
            wait_for(lambda r=net[rid]: any("router B left the network" in line for line in r._log), 30,
                     what=f"{rid} hearing B left")
            seen = _routers(net[rid])["B"]
            assert seen["left"] is True and seen["reachable"] is False
        assert any("leaving the network" in line for line in net["B"]._log)
        with sub.lock:
            got = list(sub.got)
        assert_at_least_once_marked(got, N)
        assert len(sub.seen("attached")) >= 2  # it really moved
        # ``once stat -n`` says so too
        stat = subprocess.run([sys.executable, "-m", "once.tools.cli", "stat", "-n", "--router", net["A"].http],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert stat.returncode == 0, stat.stderr
        assert any(line.split()[:2] == ["B", "left"] for line in stat.stdout.splitlines()), stat.stdout
        tp.stop()
        ts.stop()
    finally:
        net.stop()


def test_a_router_alone_stops_at_once_on_sigterm(tmp_path):
    net = Network("mesh3.yaml", tmp_path)
    try:
        for rid in "AC":
            net[rid].proc.send_signal(signal.SIGKILL)
            net[rid].proc.wait()
        wait_for(lambda: all(not v["reachable"] for k, v in _routers(net["B"]).items() if k != "B"), 30,
                 what="B alone")
        net["B"].proc.send_signal(signal.SIGTERM)
        assert net["B"].proc.wait(30) == 0
        assert not any("leaving the network" in line for line in net["B"]._log)  # (nobody to tell)
    finally:
        net.stop()
