"""The AMQP management node, ``$management`` (issue 50, deliverables 1 and 3): what the HTTP
endpoint shows and changes, for a standard AMQP client over the client port (Proton's
request-response client, as qdmanage-style scripts use), writes by an admin only, each
logged; ``once stat`` and ``once manage`` over AMQP and AMQPS with SASL. A real router
process, real Proton clients."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from once.router.security.users import add_user
from proton import Delivery, Message
from proton.utils import BlockingConnection, SyncRequestResponse
from support.certs import CA
from support.proton_clients import ProtonSubscriber
from support.routers import ROOT, RouterProcess, wait_for


def _router(tmp: Path, **listen: Any) -> RouterProcess:
    add_user(tmp / "users.yaml", "ops", "ops-pw", ("admin",))
    add_user(tmp / "users.yaml", "viewer", "viewer-pw")
    doc: dict[str, Any] = {"routers": {"A": {"listen": "127.0.0.1:0", **listen}}, "links": [],
                           "auth": {"users_file": "users.yaml", "plain_without_tls": True},
                           "settings": {"subscriber_grace": "60s"}}
    if listen:
        doc["tls"] = {"certificate": "certs/{id}.pem", "private_key": "certs/{id}-key.pem", "ca": "certs/ca.pem"}
    (tmp / "topology.yaml").write_text(yaml.safe_dump(doc))
    return RouterProcess(tmp / "topology.yaml")


class Node:
    """A standard client's view of ``$management``: one connection, one call at a time."""

    def __init__(self, r: RouterProcess, user: str) -> None:
        self.conn = BlockingConnection(r.url, user=user, password=f"{user}-pw", allowed_mechs="PLAIN",
                                       container_id=f"mgmt-{user}")
        self.client = SyncRequestResponse(self.conn, "$management")

    def __call__(self, body: Any = None, **props: Any) -> tuple[int, str, Any]:
        response = self.client.call(Message(properties=props, body=body))
        return response.properties["statusCode"], response.properties["statusDescription"], response.body

    def close(self) -> None:
        self.conn.close()


def _once(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "once.tools.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_a_standard_client_reads_the_router_and_only_an_admin_changes_it(tmp_path):
    r = _router(tmp_path)
    viewer = ops = None
    try:
        viewer = Node(r, "viewer")
        status, _, types = viewer(operation="GET-TYPES")
        assert status == 200 and {"once.router", "once.connection", "once.link", "once.subscribers"} <= set(types)
        status, _, ops_of = viewer(operation="GET-OPERATIONS")
        assert "DELETE" in ops_of["once.connection"] and {"RELOAD", "DRAIN"} <= set(ops_of["once.router"])
        status, _, general = viewer(operation="READ", type="once.router")
        assert status == 200 and general["router"] == "A" and general["connections"] == 1
        # a subscriber of another client, listed as the HTTP endpoint lists it
        sub = ProtonSubscriber(r.url, "managed", name="watcher", container_id="ops-watch")
        status, _, found = viewer({"attributeNames": ["id", "container", "user", "subscribers"]},
                                  operation="QUERY", entityType="once.connection")
        assert status == 200 and found["attributeNames"] == ["id", "container", "user", "subscribers"]
        # (an anonymous client's container id shown as a digest, as the HTTP endpoint shows it)
        rows = {"ops-watch" if row[1].startswith("~") else row[1]: row for row in found["results"]}
        assert rows["mgmt-viewer"][2] == "viewer" and rows["ops-watch"][3] == 1, rows
        status, _, links = viewer(operation="QUERY", entityType="once.link")
        names = links["attributeNames"]
        assert [dict(zip(names, row))["name"] for row in links["results"]] == ["watcher"]
        status, _, one = viewer(operation="READ", type="once.connection", identity=str(rows["ops-watch"][0]))
        assert status == 200 and one["container"] == rows["ops-watch"][1]
        assert viewer(operation="READ", type="once.connection", identity="999")[0] == 404
        # a write from a user not in group admin: refused, and the log says who
        status, said, _ = viewer(operation="DELETE", type="once.connection", identity=str(rows["ops-watch"][0]))
        assert status == 403 and "viewer may not change the router" in said
        wait_for(lambda: any("DELETE of once.connection ($management) refused: viewer" in line for line in r._log),
                 what="the refusal logged")
        assert viewer(operation="READ", type="once.connection", identity=str(rows["ops-watch"][0]))[0] == 200
        # an admin closes that client's connection: it is suspended for its grace, as when lost
        ops = Node(r, "ops")
        assert ops(operation="DELETE", type="once.connection", identity=str(rows["ops-watch"][0]))[0] == 204
        wait_for(lambda: [s["state"] for s in ops(operation="READ", type="once.subscribers")[2]["local"]]
                 == ["suspended"], what="the subscriber suspended")
        assert any("management: ops closed connection" in line for line in r._log)
        # what a router does not do over AMQP management says so
        assert ops(operation="CREATE", type="once.router")[0] == 501
        assert ops(operation="UPDATE", type="once.link")[0] == 501
        assert ops(operation="FLY", type="once.router")[0] == 501
        assert ops(operation="READ", type="once.nothing")[0] == 404
        assert ops(operation="DELETE", type="once.link", identity="no-slash")[0] == 400
        assert ops(operation="RELOAD", type="once.router")[:2] == (200, "OK")
        sub.close()
    finally:
        for node in (viewer, ops):
            if node is not None:
                node.close()
        r.stop()


def test_a_request_without_a_reply_link_is_rejected_and_the_connection_goes_on(tmp_path):
    r = _router(tmp_path)
    try:
        conn = BlockingConnection(r.url, user="viewer", password="viewer-pw", allowed_mechs="PLAIN")
        sender = conn.create_sender("$management", name="raw-requests")
        from proton.utils import SendException

        for reply_to in (None, "$management/elsewhere"):
            with pytest.raises(SendException) as refused:
                sender.send(Message(properties={"operation": "READ", "type": "once.router"}, reply_to=reply_to))
            assert refused.value.state == Delivery.REJECTED
        client = SyncRequestResponse(conn, "$management")  # (the same connection, a reply link now)
        response = client.call(Message(properties={"operation": "READ", "type": "once.router"}))
        assert response.properties["statusCode"] == 200
        conn.close()
    finally:
        r.stop()


def test_once_stat_and_manage_speak_amqp_with_sasl(tmp_path):
    r = _router(tmp_path)
    try:
        viewer = r.url.replace("amqp://", "amqp://viewer:viewer-pw@")
        general = _once("stat", "--router", viewer)
        assert general.returncode == 0 and "acceptance protocol" in general.stdout, general.stderr
        sub = ProtonSubscriber(r.url, "stat-amqp", name="s1", container_id="stat-sub")
        shown = _once("stat", "--router", r.url, "--user", "viewer", "--password", "viewer-pw", "-s", "--json")
        assert shown.returncode == 0, shown.stderr
        local = json.loads(shown.stdout)["local"]
        assert [(s["name"], s["state"]) for s in local] == [("s1", "attached")]
        conns = json.loads(_once("stat", "--router", viewer, "-c", "--json").stdout)
        assert local[0]["container"] in {c["container"] for c in conns} and all("peer" in c for c in conns)
        wrong = _once("stat", "--router", r.url.replace("amqp://", "amqp://viewer:nope@"))
        assert wrong.returncode == 7 and len(wrong.stderr.splitlines()) == 1 and "nope" not in wrong.stderr
        refused = _once("manage", "reload", "--router", viewer)
        assert refused.returncode == 7 and "viewer may not change the router" in refused.stderr
        [mine] = [c for c in conns if c["container"] == local[0]["container"]]
        closed = _once("manage", "close-connection", str(mine["id"]), "--router", r.url, "--user", "ops",
                       "--password", "ops-pw")
        assert closed.returncode == 0, closed.stderr
        wait_for(lambda: json.loads(_once("stat", "--router", viewer, "-s", "--json").stdout)["local"][0]["state"]
                 == "suspended", what="the subscriber suspended")
        sub.close()
        # where the router has users, an anonymous client reads nothing of the others
        anonymous = _once("stat", "--router", r.url)
        assert anonymous.returncode == 7 and "not an anonymous one" in anonymous.stderr, anonymous.stderr
        # a write that closes the asking connection (a drain closes every client's) is answered first
        drained = _once("manage", "drain", "--router", r.url.replace("amqp://", "amqp://ops:ops-pw@"))
        assert drained.returncode == 0 and json.loads(drained.stdout)["draining"] is True, drained.stderr
        assert r.proc.wait(timeout=60) == 0  # (empty, it stops)
    finally:
        r.stop()


def test_once_stat_over_amqps(tmp_path):
    certs = CA(tmp_path / "certs")
    certs.issue("A")
    r = _router(tmp_path, amqps="127.0.0.1:0")
    try:
        assert r.amqps is not None
        url = r.amqps.replace("amqps://", "amqps://viewer:viewer-pw@")
        done = _once("stat", "--router", url, "--ca", str(certs.pem), "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["router"] == "A"
        untrusted = _once("stat", "--router", url, "--timeout", "5")
        assert untrusted.returncode != 0 and len(untrusted.stderr.splitlines()) == 1
    finally:
        r.stop()
