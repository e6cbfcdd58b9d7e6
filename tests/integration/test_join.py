"""A router joins a running network at runtime (issue 51, deliverable 1): in nobody's file,
it links to a running router with the network's credentials (``once router --join``),
learns the network, and every other router learns of it through link state, without a
restart; ``once topology dump`` writes the running network back as a topology file. Real
router processes, real Proton clients."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from once.router.config import load_topology
from once.tools.topology_ports import free_port
from support.proton_clients import ProtonPublisher, ProtonSubscriber
from support.routers import ROOT, RouterProcess, wait_for

ACCEPTED = 36
SECRET = "join-test-secret"


def _get(r: RouterProcess, path: str) -> Any:
    with urllib.request.urlopen(r.http + path, timeout=10) as resp:  # type: ignore[operator]
        return json.loads(resp.read())


def _reachable(r: RouterProcess) -> set[str]:
    return {x["router"] for x in _get(r, "/api/network")["routers"] if x["reachable"]}


@pytest.fixture
def network(tmp_path: Path):
    """A and B linked by their file; C in the file too, linked to nobody."""
    ports = {rid: {"listen": f"127.0.0.1:{free_port()}", "inter_router": f"127.0.0.1:{free_port()}",
                   "http": f"127.0.0.1:{free_port()}"} for rid in "ABC"}
    topo = tmp_path / "network.yaml"
    topo.write_text(yaml.safe_dump({"routers": ports, "links": [["A", "B"]], "auth": {"router_secret": SECRET}}))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    procs = {rid: (subprocess.Popen([sys.executable, "-m", "once.tools.cli", "router", str(topo), "--id", rid],
                                    cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env), topo)
             for rid in "ABC"}
    routers = RouterProcess.adopt_all(procs)
    started = list(routers.values())
    yield routers, ports, started
    for r in started:
        r.stop()


def _joiner(tmp: Path, name: str, secret: str) -> Path:
    """A router's own file: its listeners and the network's credentials, no links."""
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"routers": {name: {"listen": "127.0.0.1:0", "http": f"127.0.0.1:{free_port()}"}},
                                    "links": [], "auth": {"router_secret": secret}}))
    return path


def test_a_router_in_nobodys_file_joins_and_carries_messages(network, tmp_path):
    routers, ports, started = network
    d = RouterProcess(_joiner(tmp_path, "D", SECRET), "D", args=("--join", ports["B"]["inter_router"]))
    started.append(d)
    wait_for(lambda: _reachable(routers["A"]) == {"A", "B", "D"}, timeout=30, what="A learning of D")
    assert _reachable(d) == {"A", "B", "D"}
    # (B logged it before A could learn of D; the test's reader of B's log may lag behind)
    wait_for(lambda: any("linked to D, which our topology does not name" in line for line in routers["B"]._log),
             timeout=30, what="B's log line for D")
    sub = ProtonSubscriber(d.url, "joined", name="far", container_id="far-app")
    pub = None
    try:
        wait_for(lambda: any(s["router"] == "D" for s in _get(routers["A"], "/api/subscribers")["remote"]),
                 what="A knowing D's subscriber")
        pub = ProtonPublisher(routers["A"].url, "joined")
        assert [pub.send_wait(f"m{i}") for i in range(20)] == [ACCEPTED] * 20
        assert [sub.get().body for _ in range(20)] == [f"m{i}" for i in range(20)]
    finally:
        sub.close()
        if pub is not None:
            pub.close()
    # the running network written back: D with where it listens, its link to B
    out = tmp_path / "dumped.yaml"
    done = subprocess.run([sys.executable, "-m", "once.tools.cli", "topology", "dump", "--router",
                           routers["A"].http, "-o", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    doc = yaml.safe_load(text)
    assert sorted(doc["routers"]) == ["A", "B", "D"], text  # (C, linked to nobody, is not in the running network)
    assert doc["routers"]["D"]["listen"] == d.url.removeprefix("amqp://")
    assert doc["routers"]["B"]["inter_router"] == ports["B"]["inter_router"]
    # (D listens for no router: its link to B is written as its join, as it was made)
    assert [lk["between"] for lk in doc["links"]] == [["A", "B"]]
    assert doc["routers"]["D"]["join"] == [ports["B"]["inter_router"]]
    doc["auth"] = {"router_secret": SECRET}  # (in no advertisement: the file's header says to copy it)
    out.write_text(yaml.safe_dump(doc))
    loaded = load_topology(out)
    assert {(lk.a, lk.b) for lk in loaded.links} == {("A", "B")}
    assert [str(a) for a in loaded.routers["D"].join] == [ports["B"]["inter_router"]]


def test_a_router_without_the_networks_credentials_or_named_unlinked_does_not_join(network, tmp_path):
    routers, ports, started = network
    wrong = RouterProcess(_joiner(tmp_path, "E", "not-the-secret"), "E", args=("--join", ports["B"]["inter_router"]))
    started.append(wrong)
    # C is in the network's file, linked to nobody: the file says it has no link to B
    c_self = tmp_path / "c.yaml"
    c_self.write_text(yaml.safe_dump({"routers": {"C": {"listen": "127.0.0.1:0"}}, "links": [],
                                      "auth": {"router_secret": SECRET}}))
    posing = RouterProcess(c_self, "C", args=("--join", ports["B"]["inter_router"]))
    started.append(posing)
    for joiner in (wrong, posing):
        wait_for(lambda j=joiner: any("amqp:unauthorized-access: SASL authentication failed" in line for line in j._log),
                 timeout=30, what=f"{joiner.router_id} refused")
    assert any("authentication failed as 'router:E'" in line for line in routers["B"]._log)
    assert _reachable(routers["A"]) == {"A", "B"} and _reachable(routers["B"]) == {"A", "B"}
    assert _reachable(routers["A"]) == {"A", "B"} and _reachable(routers["B"]) == {"A", "B"}
