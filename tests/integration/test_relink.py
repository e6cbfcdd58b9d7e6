"""Links added, re-costed and removed by SIGHUP with an edited topology (issue 51,
deliverable 2): no restart, one log line per change per router, what the network looks
like in ``/api/network``. Real router processes, real Proton clients."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from once.tools.topology_ports import free_port
from support.proton_clients import ProtonPublisher, ProtonSubscriber
from support.routers import ROOT, RouterProcess, wait_for

ACCEPTED = 36


def _topology(path: Path, ports: dict[str, dict[str, str]], links: list[list[Any]]) -> None:
    path.write_text(yaml.safe_dump({"routers": ports, "links": links, "auth": {"router_secret": "relink-test-secret"},
                                    "settings": {"subscriber_grace": "30s", "router_dead_after": "2s"}}))


def _network(r: RouterProcess) -> dict[str, Any]:
    with urllib.request.urlopen(r.http + "/api/network", timeout=10) as resp:  # type: ignore[operator]
        return json.loads(resp.read())  # type: ignore[no-any-return]


def _reachable(r: RouterProcess) -> set[str]:
    return {x["router"] for x in _network(r)["routers"] if x["reachable"]}


def _logged(r: RouterProcess, said: str) -> bool:
    return any(said in line for line in r._log)


def test_links_come_change_and_go_with_a_sighup(tmp_path):
    ports = {rid: {"listen": f"127.0.0.1:{free_port()}", "inter_router": f"127.0.0.1:{free_port()}",
                   "http": f"127.0.0.1:{free_port()}"} for rid in "ABC"}
    topo = tmp_path / "topology.yaml"
    _topology(topo, ports, [["A", "B"]])  # (C is in the file, linked to nobody)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    procs = {rid: (subprocess.Popen([sys.executable, "-m", "once.tools.cli", "router", str(topo), "--id", rid],
                                    cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env), topo)
             for rid in "ABC"}
    r = RouterProcess.adopt_all(procs)
    sub = pub = None
    try:
        assert _reachable(r["A"]) == {"A", "B"} and _reachable(r["C"]) == {"C"}
        sub = ProtonSubscriber(r["C"].url, "relinked", name="far", container_id="far-app")
        # a link B-C added: B and C take it up; A learns of C through B, and of its subscriber
        _topology(topo, ports, [["A", "B"], {"between": ["B", "C"], "cost": 3}])
        for rid in "ABC":
            r[rid].proc.send_signal(signal.SIGHUP)
        wait_for(lambda: _reachable(r["A"]) == {"A", "B", "C"}, timeout=30, what="A reaching C through the new link")
        assert _logged(r["B"], "SIGHUP: link to C added (cost 3)") and _logged(r["C"], "SIGHUP: link to B added (cost 3)")
        wait_for(lambda: _logged(r["A"], "SIGHUP: reloaded"), what="A's reload")
        assert not _logged(r["A"], "SIGHUP: link to")  # (its own links did not change)
        pub = ProtonPublisher(r["A"].url, "relinked")
        wait_for(lambda: any(s["router"] == "C" for s in json.loads(urllib.request.urlopen(  # noqa: S310
            r["A"].http + "/api/subscribers", timeout=10).read())["remote"]), what="A knowing C's subscriber")
        outcomes = [pub.send_wait(f"m{i}") for i in range(10)]
        assert outcomes == [ACCEPTED] * 10
        assert [sub.get().body for _ in range(10)] == [f"m{i}" for i in range(10)]
        # a cost changed: advertised, and every router's graph says so
        _topology(topo, ports, [{"between": ["A", "B"], "cost": 7}, {"between": ["B", "C"], "cost": 3}])
        for rid in "AB":
            r[rid].proc.send_signal(signal.SIGHUP)
        wait_for(lambda: [e["cost"] for e in _network(r["C"])["edges"] if (e["a"], e["b"]) == ("A", "B")] == [7],
                 timeout=30, what="C seeing the new cost of A-B")
        wait_for(lambda: _logged(r["A"], "SIGHUP: link to B costs 7 (was 1)") and
                 _logged(r["B"], "SIGHUP: link to A costs 7 (was 1)"), what="both ends' cost lines")
        # the link removed: closed for good, not dialled again; C out of A's reach
        _topology(topo, ports, [{"between": ["A", "B"], "cost": 7}])
        for rid in "BC":
            r[rid].proc.send_signal(signal.SIGHUP)
        wait_for(lambda: _reachable(r["A"]) == {"A", "B"}, timeout=30, what="C out of reach")
        wait_for(lambda: _logged(r["B"], "SIGHUP: link to C removed") and _logged(r["C"], "SIGHUP: link to B removed"),
                 what="both ends' lines")  # (the first end to take it closes the link: the other may come later)
        neighbours = [n["router"] for n in _network(r["B"])["neighbours"]]
        assert neighbours == ["A"]
        assert all(x.alive() for x in r.values())
    except BaseException:
        for rid in "ABC":
            print(rid, "".join(r[rid]._log[-15:]))
        raise
    finally:
        for client in (sub, pub):
            if client is not None:
                client.close()
        for x in r.values():
            x.stop()
