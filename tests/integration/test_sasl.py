"""SASL against a real router (issue 29): SCRAM-SHA-256/512 from Proton C with Cyrus SASL and
from our client library over TLS, PLAIN over TLS and EXTERNAL (a client certificate) from Proton, PLAIN refused in the clear,
the users file hashed and reloaded on SIGHUP. Real router processes, real TCP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import signal
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from once.client import Publisher, RouterRefused, Subscriber
from once.client.scram import scram
from once.router.amqp.performatives import Accepted
from once.router.security.users import add_user
from once.tools.topology_ports import free_port
from proton import ConnectionException, Delivery, SSLDomain
from support.certs import CA
from support.proton_clients import ProtonPublisher, ProtonSubscriber
from support.proton_cyrus import CLIENT, cyrus_python
from support.routers import ROOT, RouterProcess, wait_for

ACCEPTED = Delivery.ACCEPTED


def _start(tmp: Path, users: dict[str, str], **auth: Any) -> RouterProcess:
    ca = CA(tmp / "certs")
    ca.issue("A")
    path = tmp / "users.yaml"
    for name, pw in users.items():
        add_user(path, name, pw)
    doc = {"routers": {"A": {"listen": f"127.0.0.1:{free_port()}", "amqps": "127.0.0.1:0"}}, "links": [],
           "tls": {"certificate": "certs/{id}.pem", "private_key": "certs/{id}-key.pem", "ca": "certs/ca.pem"},
           "auth": {"users_file": "users.yaml", "allow_anonymous": False, **auth}}
    topo = tmp / "topology.yaml"
    topo.write_text(yaml.safe_dump(doc))
    proc = subprocess.Popen([sys.executable, "-m", "once.tools.cli", "router", str(topo), "--id", "A"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    r = RouterProcess.adopt(proc, topo, "A")
    r.ca = ca  # type: ignore[attr-defined]  # (to issue client certificates from)
    return r


@pytest.fixture
def router(tmp_path: Path):
    started: list[RouterProcess] = []

    def make(users: dict[str, str], **auth: Any) -> RouterProcess:
        started.append(_start(tmp_path, users, **auth))
        return started[-1]

    yield make
    for r in started:
        r.stop()


def _client_ssl(tmp: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(tmp / "certs" / "ca.pem"))


def _proton_tls(tmp: Path, cert: Any = None) -> SSLDomain:
    d = SSLDomain(SSLDomain.MODE_CLIENT)
    d.set_trusted_ca_db(str(tmp / "certs" / "ca.pem"))
    if cert is not None:
        d.set_credentials(str(cert.cert), str(cert.key), None)
    d.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    return d


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_our_client_library_authenticates_with_scram_over_tls(router, tmp_path, mechanism):
    r = router({"alice": "s3cret"})
    tls = _client_ssl(tmp_path)
    sub = Subscriber([r.amqps], "orders", tmp_path / "sub.db", sasl=scram(mechanism, "alice", "s3cret"), ssl=tls)
    await sub.start()
    await asyncio.wait_for(sub.attached.wait(), 10)
    async with Publisher([r.amqps], "orders", tmp_path / "pub.db", sasl=scram(mechanism, "alice", "s3cret"),
                         ssl=tls) as pub:
        fut = pub.send_nowait(b"hello", "m0")
        msg = await sub.receive(10)
        assert msg.body == b"hello"
        await msg.accept(lambda db: None)
        assert isinstance(await asyncio.wait_for(fut, 10), Accepted)
    await sub.close(unsubscribe=True)
    assert f"user alice from 127.0.0.1 by {mechanism} over TLS" in "".join(r.stderr_lines())


def test_proton_with_cyrus_sasl_authenticates_with_scram_over_tls(router, tmp_path):
    python = cyrus_python()
    r = router({"alice": "s3cret"})

    def client(password: str, mechanism: str) -> str:
        out = subprocess.run([str(python), str(CLIENT), r.amqps, str(tmp_path / "certs" / "ca.pem"), "alice",
                              password, mechanism, "orders"], capture_output=True, text=True, timeout=60)
        return out.stdout + out.stderr

    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        said = client("s3cret", mechanism)
        assert said.splitlines() == ["received by scram", "accepted"], said
        said = client("guess", mechanism)
        assert said.startswith(f"refused amqp:unauthorized-access: Authentication failed [mech={mechanism}]"), said
    log = "".join(r.stderr_lines())
    assert "user alice from 127.0.0.1 by SCRAM-SHA-256 over TLS" in log
    assert "user alice from 127.0.0.1 by SCRAM-SHA-512 over TLS" in log
    # (one line per host a while: the second failure is counted, not logged again)
    assert "SASL SCRAM-SHA-256 authentication failed as 'alice'" in log and "guess" not in log


async def test_a_wrong_scram_password_is_refused_told_to_the_application_and_logged_without_it(router, tmp_path):
    """The application is told (the client library kept trying, and a send waited for ever:
    issue 50, item 7), and neither the router's log nor the error shows the password."""
    r = router({"alice": "s3cret"})
    pub = Publisher([r.amqps], "orders", tmp_path / "pub.db", sasl=scram("SCRAM-SHA-256", "alice", "guess"),
                    ssl=_client_ssl(tmp_path))
    sub = Subscriber([r.amqps], "orders", tmp_path / "sub.db", sasl=scram("SCRAM-SHA-256", "alice", "guess"),
                     ssl=_client_ssl(tmp_path))
    await pub.start()
    await sub.start()
    # (bounds against a hang, not a pace: each is told as its connection is refused)
    with pytest.raises(RouterRefused) as sent:
        await asyncio.wait_for(pub.send(b"x"), 60)
    with pytest.raises(RouterRefused) as received:
        await sub.receive(60)
    for e in (sent.value, received.value):
        assert "amqp:unauthorized-access" in str(e) and "guess" not in str(e)
    with pytest.raises(RouterRefused):
        pub.send_nowait(b"y")  # (and every call after)
    assert not pub.attached.is_set()
    await pub.close()
    await sub.close()
    log = "".join(r.stderr_lines())
    assert "SASL SCRAM-SHA-256 authentication failed as 'alice'" in log and "guess" not in log


def test_proton_plain_over_tls_and_external_with_a_client_certificate(router, tmp_path):
    r = router({"alice": "s3cret"})
    url = r.amqps.replace("amqps://", "amqps://alice:s3cret@")
    sub = ProtonSubscriber(url, "t", name="plain-sub", ssl_domain=_proton_tls(tmp_path), allowed_mechs="PLAIN")
    pub = ProtonPublisher(url, "t", ssl_domain=_proton_tls(tmp_path), allowed_mechs="PLAIN")
    assert pub.send_wait("by password") == ACCEPTED and sub.get().body == "by password"
    pub.close()
    sub.close()
    cert = r.ca.issue("carol", router=False)
    pub = ProtonPublisher(r.amqps, "t2", ssl_domain=_proton_tls(tmp_path, cert), allowed_mechs="EXTERNAL")
    assert pub.send_wait("by certificate") == ACCEPTED  # (no subscriber: accepted at once)
    pub.close()
    log = "".join(r.stderr_lines())
    assert "user alice from 127.0.0.1 by PLAIN over TLS" in log
    assert "user carol from 127.0.0.1 by EXTERNAL over TLS, certificate carol" in log


def test_plain_is_not_offered_in_the_clear(router, tmp_path):
    r = router({"alice": "s3cret"})
    with pytest.raises(ConnectionException):
        ProtonPublisher(r.url.replace("amqp://", "amqp://alice:s3cret@"), "t", allowed_mechs="PLAIN")


def test_a_user_added_while_the_router_runs_is_taken_up_on_sighup(router, tmp_path):
    r = router({"alice": "s3cret"})
    url = r.amqps.replace("amqps://", "amqps://bob:b0b@")
    with pytest.raises(ConnectionException):
        ProtonPublisher(url, "t", ssl_domain=_proton_tls(tmp_path), allowed_mechs="PLAIN")
    added = subprocess.run([sys.executable, "-m", "once.tools.cli", "user", "add", "bob", "--file",
                            str(tmp_path / "users.yaml")], input="b0b\n", capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr
    r.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: any("SIGHUP: reloaded the users (2)" in line for line in r._log), what="the reload")
    pub = ProtonPublisher(url, "t", ssl_domain=_proton_tls(tmp_path), allowed_mechs="PLAIN")
    assert pub.send_wait("bob now") == ACCEPTED
    pub.close()


def test_a_users_file_with_a_plain_password_stops_the_router_with_one_line(tmp_path):
    (tmp_path / "users.yaml").write_text("alice: hunter2\n")
    topo = tmp_path / "topology.yaml"
    topo.write_text(yaml.safe_dump({"routers": {"A": {"listen": "127.0.0.1:0"}}, "links": [],
                                    "auth": {"users_file": "users.yaml"}}))
    out = subprocess.run([sys.executable, "-m", "once.tools.cli", "router", str(topo), "--id", "A"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert f"{tmp_path / 'users.yaml'}:1: user alice: a plain password" in out.stderr
    assert "once user add alice" in out.stderr


def test_a_client_certificates_user_in_group_admin_manages_the_router_over_amqp(router, tmp_path):
    """Issue 50: an admin principal by TLS client certificate (SASL EXTERNAL): its user is
    an admin when the users file lists that name in group ``admin``; another certificate's
    user reads, and its write is refused."""
    from proton import Message
    from proton.utils import BlockingConnection, SyncRequestResponse

    r = router({"alice": "s3cret"})
    add_user(tmp_path / "users.yaml", "carol", "unused-here", ("admin",))
    r.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: any("SIGHUP: reloaded the users (2)" in line for line in r._log), what="the reload")
    said = {}
    for who in ("carol", "dave"):
        conn = BlockingConnection(r.amqps, ssl_domain=_proton_tls(tmp_path, r.ca.issue(who, router=False)),
                                  allowed_mechs="EXTERNAL")
        node = SyncRequestResponse(conn, "$management")
        read = node.call(Message(properties={"operation": "READ", "type": "once.router"}))
        reload = node.call(Message(properties={"operation": "RELOAD", "type": "once.router"}))
        said[who] = (read.properties["statusCode"], reload.properties["statusCode"])
        conn.close()
    assert said == {"carol": (200, 200), "dave": (200, 403)}
    wait_for(lambda: any("management: carol reloaded" in line for line in r._log), what="carol's write logged")
    assert any("RELOAD of once.router ($management) refused: dave" in line for line in r._log)
