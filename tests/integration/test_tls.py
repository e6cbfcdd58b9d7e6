"""TLS (issue 29): Proton clients on a router's ``amqps`` listener, verified both ways, and
routers linked over mutual TLS; certificates made by the test (``support/certs.py``).
Real router processes, real Proton clients, real TCP on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from once.tools.topology_ports import free_port
from proton import ConnectionException, Delivery, SSLDomain
from support.certs import CA
from support.proton_clients import ProtonPublisher, ProtonSubscriber
from support.routers import ROOT, RouterProcess, wait_for

ACCEPTED = Delivery.ACCEPTED


def _topology(tmp: Path, ids: tuple[str, ...] = ("A",), **tls: Any) -> Path:
    """Routers on free ports with ``amqps`` listeners; each router's files are
    ``certs/{id}.pem`` and ``certs/{id}-key.pem``, trusting ``certs/ca.pem``."""
    routers = {}
    for rid in ids:
        routers[rid] = {"listen": f"127.0.0.1:{free_port()}", "amqps": "127.0.0.1:0"}
        if len(ids) > 1:
            routers[rid]["inter_router"] = f"127.0.0.1:{free_port()}"
    doc = {"routers": routers, "links": [[a, b] for a, b in zip(ids, ids[1:])],
           "tls": {"certificate": "certs/{id}.pem", "private_key": "certs/{id}-key.pem", "ca": "certs/ca.pem", **tls}}
    path = tmp / "topology.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _start(topology: Path, *ids: str) -> Any:
    """The routers as OS processes, all started before any is waited for (each says ready
    once its neighbours are up); one router, or a list of them."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    procs = [(rid, subprocess.Popen([sys.executable, "-m", "once.tools.cli", "router", str(topology), "--id", rid],
                                    cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
             for rid in ids or ("A",)]
    routers = list(RouterProcess.adopt_all({rid: (proc, topology) for rid, proc in procs}).values())
    return routers if len(ids) > 1 else routers[0]


def _domain(ca: Path | None, cert: Any = None) -> SSLDomain:
    d = SSLDomain(SSLDomain.MODE_CLIENT)
    if ca is not None:
        d.set_trusted_ca_db(str(ca))
    if cert is not None:
        d.set_credentials(str(cert.cert), str(cert.key), None)
    d.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    return d


def _pubsub(url: str, topic: str, **kw: Any) -> None:
    sub = ProtonSubscriber(url, topic, name=f"{topic}-sub", **kw)
    pub = ProtonPublisher(url, topic, **kw)
    try:
        assert pub.send_wait("over TLS") == ACCEPTED
        assert sub.get().body == "over TLS"
    finally:
        pub.close()
        sub.close()


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _peer_serial(url: str, ca: Path) -> int:
    """The serial number of the certificate a new TLS connection to ``url`` is shown."""
    host, port = url.removeprefix("amqps://").rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection((host, int(port)), timeout=10) as raw, ctx.wrap_socket(raw, server_hostname=host) as s:
        der = s.getpeercert(binary_form=True)
    from cryptography import x509

    return x509.load_der_x509_certificate(der).serial_number


@pytest.fixture
def certs(tmp_path: Path) -> CA:
    return CA(tmp_path / "certs")


@pytest.fixture
def started() -> Any:
    routers: list[RouterProcess] = []
    yield routers
    for r in routers:
        r.stop()


def test_a_proton_client_verifies_the_router_and_publishes_over_tls(tmp_path, certs, started):
    certs.issue("A")
    started.append(r := _start(_topology(tmp_path)))
    assert r.amqps is not None and r.amqps.startswith("amqps://127.0.0.1:")
    _pubsub(r.amqps, "secure", ssl_domain=_domain(certs.pem))
    # The plain listener still serves, beside it.
    _pubsub(r.url, "plain")
    log = "".join(r.stderr_lines())
    assert "by ANONYMOUS over TLS" in log and "by ANONYMOUS over plain" in log


def test_a_client_that_does_not_trust_the_routers_ca_does_not_connect_and_others_go_on(tmp_path, certs, started):
    certs.issue("A")
    other = CA(tmp_path / "other", name="someone else's CA")
    started.append(r := _start(_topology(tmp_path)))
    with pytest.raises(ConnectionException):
        ProtonPublisher(r.amqps, "t", ssl_domain=_domain(other.pem), timeout=5).send_wait("never")
    _pubsub(r.amqps, "still-served", ssl_domain=_domain(certs.pem))
    # The operator is told, with the peer and what to do (asyncio would say nothing).
    assert "TLS handshake from 127.0.0.1:" in (log := "".join(r.stderr_lines()))
    assert "failed: TLSV1_ALERT_UNKNOWN_CA: the client does not trust the router's certificate" in log


def test_sockets_in_their_tls_handshake_count_against_the_hosts_connections(tmp_path, certs, started):
    certs.issue("A")
    topo = _topology(tmp_path)
    doc = yaml.safe_load(topo.read_text())
    doc["settings"] = {"max_connections_per_host": 4}
    topo.write_text(yaml.safe_dump(doc))
    started.append(r := _start(topo))
    host, port = r.amqps.removeprefix("amqps://").rsplit(":", 1)
    silent = [socket.create_connection((host, int(port)), timeout=10) for _ in range(4)]  # no ClientHello
    ctx = ssl.create_default_context(cafile=str(certs.pem))
    with pytest.raises(OSError):  # the fifth is closed before its handshake
        ctx.wrap_socket(socket.create_connection((host, int(port)), timeout=10), server_hostname=host)
    for s in silent:
        s.close()
    # Their places come back as they go: a client is served again.
    wait_for(lambda: _served(r.amqps, certs.pem), timeout=10, what="a TLS client served once the silent ones went")
    assert "refused TLS connection from 127.0.0.1:" in "".join(r.stderr_lines())


def _served(url: str, ca: Path) -> bool:
    try:
        _pubsub(url, "after", ssl_domain=_domain(ca))
        return True
    except (ConnectionException, AssertionError):
        return False


def test_a_required_client_certificate_must_come_from_the_ca_and_be_valid(tmp_path, certs, started):
    certs.issue("A")
    good = certs.issue("alice", router=False)
    expired = certs.issue("old-bob", expired=True, router=False)
    stranger = CA(tmp_path / "other", name="someone else's CA").issue("mallory", router=False)
    started.append(r := _start(_topology(tmp_path, require_client_certificate=True)))
    for who in (None, expired, stranger):
        with pytest.raises(ConnectionException):
            ProtonPublisher(r.amqps, "t", ssl_domain=_domain(certs.pem, who), timeout=5).send_wait("refused")
    _pubsub(r.amqps, "with-cert", ssl_domain=_domain(certs.pem, good))
    log = "".join(r.stderr_lines())
    assert "over TLS, certificate alice" in log


def test_routers_link_over_mutual_tls_and_carry_a_message_across(tmp_path, certs, started):
    for rid in ("A", "B"):
        certs.issue(rid)
    topo = _topology(tmp_path, ("A", "B"))
    a, b = _start(topo, "A", "B")
    started += [a, b]
    assert "neighbours B" in a.ready_line and "neighbours A" in b.ready_line
    sub = ProtonSubscriber(b.amqps, "across", name="far", ssl_domain=_domain(certs.pem))
    pub = ProtonPublisher(a.amqps, "across", ssl_domain=_domain(certs.pem))
    try:
        # (the subscription reaches A over the link: a publish waits for it there)
        wait_for(lambda: pub.send_wait("hop") == ACCEPTED and sub.get().body == "hop", timeout=15,
                 what="a message from A's publisher accepted by B's subscriber")
    finally:
        pub.close()
        sub.close()


@pytest.mark.parametrize(("made_out", "said"), [
    (("C", True), "names router C, not B: closed"),  # the CA signed it, for another router
    # A client's certificate from the same CA made out to B (its common and DNS name) is no
    # router's: it was taken for router B (issue 49, item 14)
    (("B", False), "names no router (a router's certificate carries the alternative name URI:urn:once:router:ID"),
])
def test_a_router_whose_certificate_names_another_router_or_none_is_refused(tmp_path, certs, made_out, said):
    certs.issue("A")
    certs.issue(made_out[0], file="B", router=made_out[1])  # B's files
    topo = _topology(tmp_path, ("A", "B"))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # (read as they run: neither says ready before its neighbour wait of 10 s is out, and the
    # refusal comes at the first dial)
    procs = {rid: subprocess.Popen([sys.executable, "-m", "once.tools.cli", "router", str(topo), "--id", rid],
                                   cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
             for rid in "AB"}
    try:
        a_log = procs["A"].stderr
        assert a_log is not None
        for line in a_log:
            if "the inter-router link to B reached a peer whose certificate" in line:
                assert said in line, line
                break
            assert "link to B up" not in line
        else:
            raise AssertionError("router A ended without refusing B's certificate")
    finally:
        for p in procs.values():
            p.kill()
            p.wait(10)
            if p.stderr is not None:
                p.stderr.close()


def test_sighup_takes_up_new_certificates_without_dropping_connections(tmp_path, certs, started):
    first = certs.issue("A")
    started.append(r := _start(_topology(tmp_path)))
    before = _peer_serial(r.amqps, certs.pem)
    sub = ProtonSubscriber(r.amqps, "kept", name="kept-sub", ssl_domain=_domain(certs.pem))
    pub = ProtonPublisher(r.amqps, "kept", ssl_domain=_domain(certs.pem))
    try:
        assert pub.send_wait("before") == ACCEPTED and sub.get().body == "before"
        renewed = certs.issue("A")  # (the same files, a new certificate)
        assert renewed.cert == first.cert
        r.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: any("TLS certificates" in line for line in r._log), what="the reload's log line")
        assert _peer_serial(r.amqps, certs.pem) != before
        assert pub.send_wait("after") == ACCEPTED and sub.get().body == "after"  # the same connections
    finally:
        pub.close()
        sub.close()


def test_a_bad_certificate_on_sighup_keeps_the_running_ones(tmp_path, certs, started):
    certs.issue("A")
    started.append(r := _start(_topology(tmp_path)))
    before = _peer_serial(r.amqps, certs.pem)
    (tmp_path / "certs" / "A.pem").write_text("not a certificate\n")
    r.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: any("kept the running configuration" in line for line in r._log), what="the refusal")
    assert _peer_serial(r.amqps, certs.pem) == before
    _pubsub(r.amqps, "unchanged", ssl_domain=_domain(certs.pem))


def test_once_send_and_recv_speak_amqps(tmp_path, certs, started):
    certs.issue("A")
    started.append(r := _start(_topology(tmp_path)))
    cli = [sys.executable, "-m", "once.tools.cli"]
    recv = subprocess.Popen([*cli, "recv", "cli-tls", "--url", r.amqps, "--ca", str(certs.pem), "--count", "1"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert recv.stderr is not None
        assert "subscribed to cli-tls" in recv.stderr.readline()
        sent = subprocess.run([*cli, "send", "cli-tls", "hello", "--url", r.amqps, "--ca", str(certs.pem)], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert sent.returncode == 0, sent.stderr
        out, _ = recv.communicate(timeout=30)
        assert out.strip() == "hello"
    finally:
        recv.kill()
    untrusted = subprocess.run([*cli, "send", "cli-tls", "x", "--url", r.amqps, "--timeout", "5"], cwd=ROOT,
                               capture_output=True, text=True, timeout=60)
    assert untrusted.returncode != 0 and "Traceback" not in untrusted.stderr
    assert len(untrusted.stderr.strip().splitlines()) == 1


def test_tls_configuration_errors_are_one_line(tmp_path, certs):
    cli = [sys.executable, "-m", "once.tools.cli", "router"]
    topo = _topology(tmp_path)  # (no certificate issued for A: its file is missing)
    out = subprocess.run([*cli, str(topo), "--id", "A"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "A.pem" in out.stderr and "no such file" in out.stderr
    doc = yaml.safe_load(topo.read_text())
    del doc["tls"]
    topo.write_text(yaml.safe_dump(doc))
    out = subprocess.run([*cli, str(topo), "--id", "A"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "routers.A.amqps" in out.stderr and "tls" in out.stderr


def test_mqtt_clients_over_tls_with_a_password_which_plain_mqtt_may_not_send(tmp_path, certs, started):
    import paho.mqtt.client as mqtt
    from once.router.security.users import add_user

    certs.issue("A")
    add_user(tmp_path / "users.yaml", "alice", "apw")
    topo = _topology(tmp_path)
    doc = yaml.safe_load(topo.read_text())
    doc["routers"]["A"].update({"mqtt": f"127.0.0.1:{free_port()}", "mqtts": "127.0.0.1:0"})
    doc["auth"] = {"users_file": "users.yaml", "allow_anonymous": False}
    topo.write_text(yaml.safe_dump(doc))
    started.append(r := _start(topo))
    assert r.mqtts is not None

    def client(where: tuple[str, int], tls: bool) -> tuple[Any, Any]:
        got: Any = __import__("queue").Queue()
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"alice-{tls}", protocol=mqtt.MQTTv5)
        c.username_pw_set("alice", "apw")
        if tls:
            c.tls_set(ca_certs=str(certs.pem))
        c.on_connect = lambda cl, u, flags, rc, props: got.put(("connack", int(getattr(rc, "value", rc))))
        c.on_message = lambda cl, u, m: got.put(("message", m.payload))
        c.on_subscribe = lambda cl, u, mid, codes, props: got.put(("suback", [int(getattr(x, "value", x)) for x in codes]))
        c.connect(*where, keepalive=30)
        c.loop_start()
        return c, got

    secure, got = client(r.mqtts, tls=True)
    assert got.get(timeout=15) == ("connack", 0)
    secure.subscribe("tls/t", qos=1)
    assert got.get(timeout=15) == ("suback", [1])  # (live network-wide once acknowledged)
    sender = ProtonPublisher(r.amqps.replace("amqps://", "amqps://alice:apw@"), "tls/t", ssl_domain=_domain(certs.pem),
                             allowed_mechs="PLAIN")
    assert sender.send_wait("to mqtts") == ACCEPTED
    assert got.get(timeout=15) == ("message", b"to mqtts")
    clear, refused = client(r.mqtt, tls=False)
    # (not authorized, not "bad user name or password": the right one, refused unread in the clear)
    assert refused.get(timeout=15) == ("connack", 0x87)
    for c in (secure, clear):
        c.disconnect()
        c.loop_stop()
    sender.close()


def test_hundreds_of_silent_tls_handshakes_are_closed_in_time_and_others_are_served(tmp_path, certs, started):
    """Sockets that never send a ClientHello, and one that finishes TLS but never says AMQP:
    each is closed within handshake_timeout, memory stays bounded, and a client that does
    speak is served meanwhile."""
    certs.issue("A")
    topo = _topology(tmp_path)
    doc = yaml.safe_load(topo.read_text())
    doc["settings"] = {"handshake_timeout": "1s"}
    topo.write_text(yaml.safe_dump(doc))
    started.append(r := _start(topo))
    host, port = r.amqps.removeprefix("amqps://").rsplit(":", 1)
    before = _rss_mb(r.proc.pid)
    silent = [socket.create_connection((host, int(port)), timeout=10) for _ in range(300)]
    ctx = ssl.create_default_context(cafile=str(certs.pem))
    quiet = ctx.wrap_socket(socket.create_connection((host, int(port)), timeout=10), server_hostname=host)
    _pubsub(r.amqps, "served", ssl_domain=_domain(certs.pem))
    assert _rss_mb(r.proc.pid) - before < 64
    for s in silent[:20]:  # (the router closes them: a read ends, with nothing read)
        assert s.recv(1) == b""
    assert quiet.recv(1) == b""  # a TLS connection that never sent the AMQP header: closed too
    for s in (*silent, quiet):
        s.close()
