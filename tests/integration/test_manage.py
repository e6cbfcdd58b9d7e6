"""Management writes (issue 50, deliverable 1, first step): over the HTTP endpoint, by an
admin of the users file only, each logged with who did it; ``once manage`` as the CLI. A
real router process, real Proton clients."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import yaml
from once.router.security.users import add_user
from once.tools.topology_ports import free_port
from support.proton_clients import ProtonPublisher, ProtonSubscriber
from support.routers import ROOT, RouterProcess, wait_for

ACCEPTED = 36


def _router(tmp: Path) -> RouterProcess:
    add_user(tmp / "users.yaml", "ops", "ops-pw", ("admin",))
    add_user(tmp / "users.yaml", "viewer", "viewer-pw")
    doc = {"routers": {"A": {"listen": f"127.0.0.1:{free_port()}", "http": f"127.0.0.1:{free_port()}"}},
           "links": [], "auth": {"users_file": "users.yaml", "plain_without_tls": True},
           "settings": {"subscriber_grace": "60s"}}
    (tmp / "topology.yaml").write_text(yaml.safe_dump(doc))
    return RouterProcess(tmp / "topology.yaml")


def _manage(r: RouterProcess, who: str, *args: str) -> subprocess.CompletedProcess[str]:
    base = r.http.replace("http://", f"http://{who}@") if who else r.http
    return subprocess.run([sys.executable, "-m", "once.tools.cli", "manage", *args, "--router", base], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def _api(r: RouterProcess, path: str) -> object:
    with urllib.request.urlopen(r.http + path, timeout=10) as resp:
        return json.loads(resp.read())


def test_only_an_admin_writes_and_every_write_is_logged(tmp_path):
    r = _router(tmp_path)
    try:
        # no credentials: asked for them; a user not in group admin: refused, logged
        try:
            urllib.request.urlopen(urllib.request.Request(r.http + "/api/reload", data=b"", method="POST"), timeout=10)
            raise AssertionError("a write without credentials was taken")
        except urllib.error.HTTPError as e:
            assert e.code == 401 and e.headers["www-authenticate"].startswith("Basic")
        refused = _manage(r, "viewer:viewer-pw", "reload")
        assert refused.returncode == 7 and "viewer may not change the router" in refused.stderr, refused.stderr
        wrong = _manage(r, "ops:guess", "reload")
        assert wrong.returncode == 7 and "guess" not in wrong.stderr
        # one link detached by an admin: closed, saying so; suspended for its grace
        other = ProtonSubscriber(r.url, "detached", name="one-link", container_id="ops-other")
        [mine] = _api(r, "/api/connections")  # type: ignore[misc]
        detached = _manage(r, "ops:ops-pw", "detach-link", str(mine["id"]), "one-link")
        assert detached.returncode == 0 and json.loads(detached.stdout)["detached"] == "one-link", detached.stderr
        wait_for(lambda: [s["state"] for s in _api(r, "/api/subscribers")["local"]] == ["suspended"],  # type: ignore[index]
                 what="the detached subscriber suspended")
        assert _manage(r, "ops:ops-pw", "detach-link", str(mine["id"]), "nope").returncode == 2
        other.close()
        assert _manage(r, "ops:ops-pw", "drop-subscriber", "ops-other", "one-link").returncode == 0
        wait_for(lambda: _api(r, "/api/subscribers")["local"] == [], what="the detached subscriber dropped")  # type: ignore[index]
        # the subscriber's connection closed by an admin: it is suspended, as when lost
        sub = ProtonSubscriber(r.url, "managed", name="watcher", container_id="ops-watch")
        [conn] = [c for c in _api(r, "/api/connections") if c["container"] != ""]  # type: ignore[union-attr]
        closed = _manage(r, "ops:ops-pw", "close-connection", str(conn["id"]))
        assert closed.returncode == 0 and json.loads(closed.stdout) == {"closed": conn["id"]}, closed.stderr
        wait_for(lambda: [s["state"] for s in _api(r, "/api/subscribers")["local"]] == ["suspended"],  # type: ignore[index]
                 what="the subscriber suspended")
        sub.close()
        # a message waits for it; dropped by an admin, its publisher hears accepted without it
        pub = ProtonPublisher(r.url, "managed")
        outcome = pub.send("for nobody now")
        container = _api(r, "/api/subscribers")["local"][0]["container"]  # type: ignore[index]
        assert _manage(r, "ops:ops-pw", "drop-subscriber", "nobody", "watcher").returncode == 2
        dropped = _manage(r, "ops:ops-pw", "drop-subscriber", container, "watcher")
        # (given up at once, or once the network's roll call says it is attached nowhere)
        assert dropped.returncode == 0 and set(json.loads(dropped.stdout)) == {"dropped", "waiting"}, dropped.stderr
        assert outcome.get(timeout=30) == ACCEPTED  # (its grace had 60 s left)
        assert _api(r, "/api/subscribers")["local"] == []  # type: ignore[index]
        pub.close()
        assert _manage(r, "ops:ops-pw", "reload").returncode == 0
    finally:
        log = "".join(r.stderr_lines())
    assert "management write /api/reload refused: viewer is not in group admin" in log
    assert f"management: ops closed connection {conn['id']}" in log
    assert f"management: ops detached link 'one-link' of connection {mine['id']}" in log
    assert "management: ops " in log and "drop suspended subscriber" in log or "dropped suspended subscriber" in log
    assert "watcher on 'managed' expired after its grace with 1 deliveries" in log
    assert "management: ops reloaded" in log and "SIGHUP: reloaded the users" in log
    assert "ops-pw" not in log and "viewer-pw" not in log


async def test_an_admin_drains_a_router_under_traffic_and_nothing_is_lost(tmp_path):
    """``once manage drain``: the router takes no new client, closes its clients' connections
    (they resume at the other router, as when it dies), and stops once none is left; the
    publisher's messages all reach the subscriber, once each, in order (issue 50)."""
    import asyncio
    import os

    from once.client import Publisher, Subscriber

    add_user(tmp_path / "users.yaml", "ops", "ops-pw", ("admin",))
    routers = {rid: {"listen": f"127.0.0.1:{free_port()}", "inter_router": f"127.0.0.1:{free_port()}"}
               for rid in ("A", "B")}
    routers["A"]["http"] = f"127.0.0.1:{free_port()}"
    doc = {"routers": routers, "links": [["A", "B"]],
           "auth": {"users_file": "users.yaml", "plain_without_tls": True, "router_secret": "drain-test-secret"},
           "settings": {"router_dead_after": "2s"}}
    topo = tmp_path / "topology.yaml"
    topo.write_text(yaml.safe_dump(doc))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    procs = {rid: (subprocess.Popen([sys.executable, "-m", "once.tools.cli", "router", str(topo), "--id", rid],
                                    cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env), topo)
             for rid in ("A", "B")}
    started = RouterProcess.adopt_all(procs)
    a, b = started["A"], started["B"]
    urls = [a.url, b.url]
    n = 300
    sub = Subscriber(urls, "drained", tmp_path / "sub.db")
    pub = Publisher(urls, "drained", tmp_path / "pub.db")
    got: list[bytes] = []
    try:
        await sub.start()
        await asyncio.wait_for(sub.attached.wait(), 30)
        await pub.start()

        async def receive() -> None:
            while len(got) < n:
                msg = await sub.receive(60)  # (a bound against a hang: the drain moves it to B)
                got.append(msg.body)
                await msg.accept(lambda db: None)

        receiving = asyncio.create_task(receive())
        outcomes = []
        for i in range(n):
            outcomes.append(pub.send_nowait(f"m{i}".encode()))
            if i == n // 3:
                drained = await asyncio.to_thread(_manage, a, "ops:ops-pw", "drain")
                assert drained.returncode == 0 and json.loads(drained.stdout)["draining"] is True, drained.stderr
            await asyncio.sleep(0.002)  # (a publisher's pace, not a synchronisation)
        await asyncio.wait_for(asyncio.gather(*outcomes), 120)
        await asyncio.wait_for(receiving, 120)
        assert await asyncio.to_thread(a.proc.wait, 60) == 0  # (it stopped by itself, once drained)
    finally:
        await pub.close()
        await sub.close()
        for r in (a, b):
            r.stop()
    assert got == [f"m{i}".encode() for i in range(n)]
    log = a.logged
    assert "management: ops drains the router" in log and "drained (asked by ops)" in log, log[-2000:]
