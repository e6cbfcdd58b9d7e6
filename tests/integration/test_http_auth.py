"""The HTTP endpoint and subscriber keys (issue 49, item 13): an anonymous subscriber's key
(container id and link name) read from ``/api/subscribers`` let another client attach with
it and take its messages. An endpoint that asks nobody who they are shows an anonymous
client's container id as a digest, everywhere; with ``auth.http`` every view, the metrics
and the console need a user of the users file (HTTP Basic; health probes stay open), and
show keys as they are. Real Proton clients, real router processes, ``once stat``."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from once.router.security.users import add_user
from once.tools.topology_ports import free_port
from support.proton_clients import ProtonSubscriber
from support.routers import ROOT, RouterProcess, masked

PATHS = ("/api/subscribers", "/api/links", "/api/connections", "/api/router", "/metrics", "/")


def _router(tmp: Path, http_auth: bool) -> RouterProcess:
    auth: dict[str, object] = {"plain_without_tls": True}
    if http_auth:
        add_user(tmp / "users.yaml", "ops", "ops-pw")
        auth.update(users_file="users.yaml", http=True)
    doc = {"routers": {"A": {"listen": f"127.0.0.1:{free_port()}", "http": f"127.0.0.1:{free_port()}"}},
           "links": [], "auth": auth}
    (tmp / "topology.yaml").write_text(yaml.safe_dump(doc))
    return RouterProcess(tmp / "topology.yaml")


def _get(url: str, user: str | None = None, password: str = "") -> tuple[int, bytes, str]:
    request = urllib.request.Request(url)
    if user is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, r.read(), ""
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get("WWW-Authenticate", "")


def test_an_endpoint_that_asks_nobody_shows_no_anonymous_key(tmp_path):
    r = _router(tmp_path, http_auth=False)
    sub = ProtonSubscriber(r.url, "secret-plans", name="listener", container_id="anon-7f3a9c")
    try:
        assert r.http is not None
        for path in PATHS:
            status, body, _ = _get(r.http + path)
            assert status == 200 and b"anon-7f3a9c" not in body, path
        subs = json.loads(_get(r.http + "/api/subscribers")[1])
        assert [(s["container"], s["name"]) for s in subs["local"]] == [(masked("anon-7f3a9c"), "listener")]
    finally:
        sub.close()
        r.stop()


def test_with_auth_http_every_view_needs_a_user_and_shows_keys_to_it(tmp_path):
    r = _router(tmp_path, http_auth=True)
    sub = ProtonSubscriber(r.url, "secret-plans", name="listener", container_id="anon-7f3a9c")
    try:
        assert r.http is not None
        for path in PATHS:
            status, body, challenge = _get(r.http + path)  # (a browser asks its user: the console's login)
            assert status == 401 and b"anon-7f3a9c" not in body and b"auth.http" in body, path
            assert challenge.startswith("Basic realm=") and "once router A" in challenge
        # (wrong credentials count against the host, as failed logins do: two, within the free ones)
        for who in ("ops", "nobody"):
            assert _get(r.http + "/api/subscribers", who, "wrong")[0] == 401
        for path in PATHS:
            status, body, _ = _get(r.http + path, "ops", "ops-pw")
            assert status == 200, path
        assert _get(r.http + "/healthz")[0] == 200 and _get(r.http + "/readyz")[0] == 200  # (probes stay open)
        subs = json.loads(_get(r.http + "/api/subscribers", "ops", "ops-pw")[1])
        assert [(s["container"], s["name"]) for s in subs["local"]] == [("anon-7f3a9c", "listener")]
        host, port = r.http.removeprefix("http://").split(":")
        stat = subprocess.run([sys.executable, "-m", "once.tools.cli", "stat", "-s", "--router",
                               f"http://ops:ops-pw@{host}:{port}"], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert stat.returncode == 0 and "anon-7f3a9c/listener" in stat.stdout, stat.stderr
        refused = subprocess.run([sys.executable, "-m", "once.tools.cli", "stat", "-s", "--router", r.http], cwd=ROOT,
                                 capture_output=True, text=True, timeout=60)
        assert refused.returncode != 0 and "auth.http" in refused.stderr and "Traceback" not in refused.stderr
    finally:
        sub.close()
        r.stop()
    assert "HTTP authentication failed" in r.logged


@pytest.mark.parametrize("users", [False, True])
def test_auth_http_needs_a_users_file(tmp_path, users):
    doc = {"routers": {"A": {"listen": "127.0.0.1:0"}}, "links": [], "auth": {"http": True}}
    if users:
        add_user(tmp_path / "users.yaml", "ops", "ops-pw")
        doc["auth"]["users_file"] = "users.yaml"  # type: ignore[index]
    (tmp_path / "topology.yaml").write_text(yaml.safe_dump(doc))
    from once.router.config import TopologyError, load_topology
    if users:
        assert load_topology(str(tmp_path / "topology.yaml")).auth.http
    else:
        with pytest.raises(TopologyError, match="auth.http"):
            load_topology(str(tmp_path / "topology.yaml"))
