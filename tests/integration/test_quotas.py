"""The policy's limits per user and per source host (issue 29), against real clients on a
real router: a user's in-flight bytes (its publishers get no credit past them, another
user's do), a host's connections counted across AMQP and MQTT, and a user's limits on
MQTT clients (connections, subscriptions, message size). Each refusal names its rule."""

from __future__ import annotations

import asyncio
import json
import queue
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
import yaml
from once.client.shell import connect
from once.router.amqp.events import LinkAttached, LinkDetached
from once.router.amqp.performatives import Role, Source, Target
from once.router.security.users import add_user
from once.tools.topology_ports import free_port
from proton import ConnectionException, LinkException
from proton.utils import BlockingConnection
from support.proton_flood import ProtonFlood
from support.routers import ROOT, RouterProcess, wait_for

MB = 1 << 20
OPEN = {"publish": ["#"], "subscribe": ["#"], "groups": ["*"]}


def _start(tmp: Path, policy: dict[str, Any]) -> RouterProcess:
    for name in ("dave", "erin"):
        add_user(tmp / "users.yaml", name, "pw")
    doc: dict[str, Any] = {
        "routers": {"A": {"listen": f"127.0.0.1:{free_port()}", "mqtt": f"127.0.0.1:{free_port()}",
                          "http": f"127.0.0.1:{free_port()}"}}, "links": [],
        "auth": {"users_file": "users.yaml", "plain_without_tls": True},
        "settings": {"subscriber_grace": "30s"},
        "policy": policy,
    }
    path = tmp / "topology.yaml"
    path.write_text(yaml.safe_dump(doc))
    return RouterProcess(path)


@pytest.fixture
def router(tmp_path: Path):
    started: list[RouterProcess] = []

    def make(policy: dict[str, Any]) -> RouterProcess:
        started.append(_start(tmp_path, policy))
        return started[-1]

    yield make
    for r in started:
        r.stop()


def _mqtt(r: RouterProcess, client_id: str, user: str | None = None) -> tuple[mqtt.Client, queue.Queue[Any]]:
    """A connected paho 5.0 client, and a queue of what it hears (connack, suback, disconnect)."""
    heard: queue.Queue[Any] = queue.Queue()
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
    if user is not None:
        c.username_pw_set(user, "pw")
    c.on_connect = lambda cl, u, flags, rc, props: heard.put(("connack", int(getattr(rc, "value", rc))))
    c.on_subscribe = lambda cl, u, mid, codes, props: heard.put(("suback", [int(getattr(x, "value", x))
                                                                              for x in codes]))
    c.on_disconnect = lambda cl, u, flags, rc, props: heard.put(("disconnect", int(getattr(rc, "value", rc))))
    c.connect(*r.mqtt, keepalive=30)
    c.loop_start()
    return c, heard


def _close(c: mqtt.Client) -> None:
    c.disconnect()
    c.loop_stop()


def test_a_users_publishers_get_no_credit_past_its_in_flight_bytes_and_another_users_do(router):
    r = router({"users": {"dave": {**OPEN, "max_in_flight_bytes": 4 * MB}}, "default": OPEN})
    stingy = BlockingConnection(r.url, timeout=30)
    hoard = stingy.create_receiver("hoard", name="stingy", credit=0)  # takes nothing: all stays held
    # dave's two links share his 4 MiB: one 1 MiB message of each went before its size was known
    dave = ProtonFlood(r.url, "hoard", 40, b"d" * MB, links=2, user="dave", password="pw")
    other = ProtonFlood(r.url, "hoard", 40, b"o" * MB)  # anonymous: bounded by the link's 16 MiB only
    wait_for(lambda: other.sent >= 12 and dave.sent >= 4, timeout=30, what="both to send what they may")
    wait_for(lambda: dave.credit == 0, timeout=10, what="dave's credit gone")
    assert dave.sent <= 4 + 2  # his budget, and the two first messages
    assert dave.accepted == 0
    # The subscriber takes all: dave's records go, his credit comes back, and all 40 arrive.
    hoard.flow(80)
    got = {"d": 0, "o": 0}
    for _ in range(80):
        msg = hoard.receive(timeout=30)  # (held: its body is a view of Proton's memory while it lives)
        got[bytes(msg.body[:1]).decode()] += 1
        hoard.accept()
    assert got == {"d": 40, "o": 40}
    hoard.close()  # (and the accepts still unsent go with its detach)
    wait_for(lambda: dave.accepted == 40 and other.accepted == 40, timeout=30, what="all accepted")
    for c in (dave, other):
        c.close()
    stingy.close()
    log = "".join(r.stderr_lines())
    assert "publishers held back: their records hold" in log and "policy.users.dave.max_in_flight_bytes" in log


def test_a_hosts_connections_count_amqp_and_mqtt_together(router):
    r = router({"default": OPEN, "hosts": {"10.0.0.0/8": {"max_connections": 100},
                                           "127.0.0.0/8": {"max_connections": 3}}})
    first, second = BlockingConnection(r.url, timeout=10), BlockingConnection(r.url, timeout=10)
    m, heard = _mqtt(r, "third")
    assert heard.get(timeout=15) == ("connack", 0)
    with pytest.raises((ConnectionException, LinkException)) as e:
        BlockingConnection(r.url, timeout=10).create_sender("t")
    assert "amqp:resource-limit-exceeded" in str(e.value)
    assert "host 127.0.0.1 may hold 3 connections on this router (policy.hosts.127.0.0.0/8.max_connections)" \
        in str(e.value)
    m2, heard2 = _mqtt(r, "fourth")
    assert heard2.get(timeout=15) == ("connack", 0x97)  # quota exceeded
    _close(m2)
    # One goes: there is room for one again.
    second.close()
    wait_for(lambda: _opens(r), timeout=10, what="a connection after one closed")
    first.close()
    _close(m)


def _opens(r: RouterProcess) -> bool:
    try:
        c = BlockingConnection(r.url, timeout=10)
        c.create_sender("t")
        c.close()
        return True
    except (ConnectionException, LinkException):
        return False


def test_a_users_limits_hold_for_its_mqtt_clients(router):
    r = router({"users": {"erin": {**OPEN, "max_connections": 1, "max_links": 2, "max_message_size": 1000}},
                "default": OPEN})
    c, heard = _mqtt(r, "erin-1", "erin")
    assert heard.get(timeout=15) == ("connack", 0)
    c2, heard2 = _mqtt(r, "erin-2", "erin")
    assert heard2.get(timeout=15) == ("connack", 0x97)
    _close(c2)
    c.subscribe([("a/1", 1), ("a/2", 1), ("a/3", 1)])
    assert heard.get(timeout=15) == ("suback", [1, 1, 0x97])  # the third passes max_links 2
    # The same client again while its old connection is still up: it takes that one over,
    # within her one connection (not locked out by its own ghost).
    c3, heard3 = _mqtt(r, "erin-1", "erin")
    assert heard3.get(timeout=15) == ("connack", 0)
    assert heard.get(timeout=15) == ("disconnect", 0x8E)  # session taken over
    _close(c)
    c3.publish("a/1", b"x" * 1500, qos=1)  # larger than her 1000 bytes: the router ends the connection
    assert heard3.get(timeout=15) == ("disconnect", 0x95)  # packet too large
    _close(c3)
    log = "".join(r.stderr_lines())
    assert "user erin may hold 1 connections on this router (policy.users.erin.max_connections)" in log
    assert "user erin may hold 2 links on this router (policy.users.erin.max_links)" in log


def _stat(r: RouterProcess, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "once.tools.cli", "stat", "-p", "--router", str(r.http), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done


def test_stat_shows_what_each_user_and_host_holds_and_what_the_policy_refused(router):
    r = router({"users": {"dave": {"publish": ["dave/#"], "subscribe": ["#"], "max_connections": 2,
                                   "max_in_flight_bytes": 4 * MB},
                          "erin": {**OPEN, "max_links": 1, "max_message_size": 1000}},
                "hosts": {"127.0.0.0/8": {"max_connections": 10}}, "default": OPEN})
    dave = [BlockingConnection(r.url, timeout=10, user="dave", password="pw", allowed_mechs="PLAIN")
            for _ in range(2)]
    dave[0].create_sender("dave/x")
    with pytest.raises((ConnectionException, LinkException)):  # a third connection: over max_connections
        BlockingConnection(r.url, timeout=10, user="dave", password="pw", allowed_mechs="PLAIN").create_sender("t")
    with pytest.raises(LinkException, match="amqp:unauthorized-access"):  # not his topic
        dave[1].create_sender("other/x")
    m, heard = _mqtt(r, "erin-1", "erin")
    assert heard.get(timeout=15) == ("connack", 0)
    m.subscribe([("a/1", 1), ("a/2", 1)])
    assert heard.get(timeout=15) == ("suback", [1, 0x97])  # the second passes max_links 1
    m.publish("a/1", b"x" * 5000, qos=1)  # (past the packet size CONNACK gave: the engine refuses it)
    assert heard.get(timeout=15) == ("disconnect", 0x95)  # larger than max_message_size
    _close(m)

    def rows() -> dict[tuple[str, str], dict[str, Any]]:
        return {(p["kind"], p["name"]): p for p in json.loads(_stat(r, "--json").stdout)["principals"]}

    wait_for(lambda: rows()[("user", "erin")]["connections"] == 0, timeout=10, what="erin's connection gone")
    seen = rows()
    d = seen[("user", "dave")]
    assert (d["connections"], d["links"], d["in_flight_bytes"]) == (2, 1, 0)
    assert d["limits"]["max_connections"] == {"limit": 2, "rule": "policy.users.dave.max_connections"}
    assert d["limits"]["max_in_flight_bytes"]["limit"] == 4 * MB
    assert d["refused"] == {"max_connections": 1, "publish": 1}
    assert seen[("user", "erin")]["refused"] == {"max_links": 1, "max_message_size": 1}
    host = seen[("host", "127.0.0.1")]
    assert host["connections"] == 2 and host["limits"]["max_connections"]["limit"] == 10
    assert host["refused"] == {}  # (every limit that refused was a user's)
    body = json.loads(_stat(r, "--json").stdout)
    assert {k: v for k, v in body["refused"].items() if v} == {"max_connections": 1, "max_links": 1,
                                                                "max_message_size": 1, "publish": 1}
    # for people: a row per user and host, and the refusals in all
    table = _stat(r).stdout
    dave_row = next(line for line in table.splitlines() if line.split()[:2] == ["user", "dave"])
    assert "connections 2, in_flight_bytes 4.0 MiB" in dave_row and "max_connections 1, publish 1" in dave_row
    assert "max_links" in table.split("refusals since the router started:")[1]
    with urllib.request.urlopen(f"{r.http}/metrics", timeout=10) as got:
        metrics = got.read().decode()
    assert 'once_policy_refusals_total{limit="max_connections"} 1.0' in metrics
    assert 'once_policy_refusals_total{limit="publish"} 1.0' in metrics
    for c in dave:
        c.close()


def test_a_byte_budget_given_on_sighup_bounds_the_links_already_attached(router):
    r = router({"users": {"dave": OPEN}, "default": OPEN})
    stingy = BlockingConnection(r.url, timeout=30)
    hoard = stingy.create_receiver("hoard", name="stingy", credit=0)
    dave = ProtonFlood(r.url, "hoard", 3, b"d" * MB, user="dave", password="pw")
    wait_for(lambda: dave.sent == 3 and dave.credit >= 3, timeout=30, what="dave's three messages, credit left")

    def daves() -> dict[str, Any]:
        rows = json.loads(_stat(r, "--json").stdout)["principals"]
        return next(p for p in rows if (p["kind"], p["name"]) == ("user", "dave"))

    assert daves()["in_flight_bytes"] is None  # (no budget yet)
    doc = yaml.safe_load(r.topology.read_text())
    doc["policy"]["users"]["dave"]["max_in_flight_bytes"] = 2 * MB
    r.topology.write_text(yaml.safe_dump(doc))
    r.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: any("SIGHUP: reloaded the users" in line for line in r._log), what="the reload")
    # His link, attached before, is in the budget now: its records' 3 MiB count, and its credit went.
    assert daves()["in_flight_bytes"] >= 3 * MB
    wait_for(lambda: dave.credit == 0, timeout=10, what="dave's credit taken back")
    hoard.flow(3)
    for _ in range(3):
        hoard.receive(timeout=30)
        hoard.accept()
    hoard.close()  # (the accepts still unsent go with its detach)
    wait_for(lambda: dave.accepted == 3, timeout=30, what="his three accepted")
    wait_for(lambda: daves()["in_flight_bytes"] == 0 and dave.credit > 0, timeout=10, what="credit again")
    assert dave.credit <= 2  # (within his 2 MiB, at 1 MiB a message)
    dave.close()
    stingy.close()


async def _until(cond: Any, what: str, timeout: float = 15) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def test_a_stolen_subscriber_link_no_longer_counts_against_its_users_links(router):
    """Found in review: a link ended because the same subscriber attached again elsewhere
    kept counting (no event came for it), and the user's next link was refused."""
    r = router({"default": {**OPEN, "max_links": 2}})
    attached: list[tuple[Any, str]] = []
    detached: list[tuple[Any, str, Any]] = []

    def handler(proto: Any, events: list[Any]) -> None:
        attached.extend((proto, e.link.name) for e in events if type(e) is LinkAttached)
        detached.extend((proto, e.link.name, e.error) for e in events if type(e) is LinkDetached)
        engine = proto.engine
        if engine.remote_open is not None and not engine.sessions:
            engine.attach(engine.begin(), "sub", Role.RECEIVER, source=Source(address="t"), target=Target())
        proto.flush()

    async def run() -> None:
        first = await connect(r.host, r.port, "same", handler)
        await _until(lambda: len(attached) == 1, "the first attach")
        second = await connect(r.host, r.port, "same", handler)
        await _until(lambda: len(attached) == 2 and [n for p, n, _ in detached if p is first] == ["sub"],
                     "the first link stolen")
        engine = second.engine
        engine.attach(next(iter(engine.sessions.values())), "more", Role.RECEIVER, source=Source(address="u"),
                      target=Target())
        second.flush()
        await _until(lambda: len(attached) == 3, "the answer to the second link")
        # (a refusal is an attach and a detach in one frame batch: it would be here by now)
        assert [(n, e) for p, n, e in detached if p is second] == []  # "sub" and "more": 2 links, within 2
        for c in (first, second):
            c.transport.close()

    asyncio.run(run())
    rows = json.loads(_stat(r, "--json").stdout)["principals"]
    assert all(p["refused"] == {} for p in rows)
