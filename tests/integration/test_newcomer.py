"""What a new user meets first (issue 50): the commands as the README gives them, against a
real router, each edge that surprised one."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

from support.routers import ROOT, RouterProcess, write_topology


def _once(*args: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "once.tools.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, **kw)


def _reader(proc: subprocess.Popen[str], into: list[str]) -> threading.Thread:
    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            into.append(line.strip())
    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


def test_two_named_members_of_a_group_share_its_messages(router: RouterProcess):
    """``--name`` names the member, not the group: each message goes to one of the two."""
    members, readers, got = [], [], {"m1": [], "m2": []}
    for name in ("m1", "m2"):
        p = subprocess.Popen([sys.executable, "-m", "once.tools.cli", "recv", "jobs", "--group", "workers", "--name",
                              name, "--url", router.url], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        assert p.stderr is not None
        assert "in group workers" in p.stderr.readline()
        members.append(p)
        readers.append(_reader(p, got[name]))
    try:
        sent = _once("send", "jobs", "--count", "10", "--url", router.url)
        assert sent.returncode == 0 and "accepted 10" in sent.stdout, sent.stdout + sent.stderr
        deadline = time.monotonic() + 60  # (a guard against a hang, not a pace)
        while len(got["m1"]) + len(got["m2"]) < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        for p in members:
            p.send_signal(signal.SIGTERM)
        for p, t in zip(members, readers):
            p.wait(timeout=30)
            t.join(timeout=30)
            for f in (p.stdout, p.stderr):
                if f is not None:
                    f.close()
    assert not set(got["m1"]) & set(got["m2"]), got
    assert len(got["m1"]) + len(got["m2"]) == 10 and len(set(got["m1"]) | set(got["m2"])) == 10, got


def _one_line(r: subprocess.CompletedProcess[str], code: int, *parts: str) -> None:
    """Exit ``code`` and one line on stderr, no traceback, naming each of ``parts``."""
    assert r.returncode == code, (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    for part in parts:
        assert part in r.stderr, (part, r.stderr)


def test_a_topic_the_router_refuses_is_named_with_its_reason(router: RouterProcess):
    """The router refused the address: not "the router went away", exit 6, nor a traceback
    (issue 50, items 5 and 6)."""
    _one_line(_once("recv", "a/#/b", "--url", router.url), 2, "refused a subscription to 'a/#/b'",
              "'#' may only be the last level")
    _one_line(_once("send", "a/+", "x", "--url", router.url), 2, "refused publishing to 'a/+'", "is a pattern")
    _one_line(_once("send", "", "x", "--url", router.url), 2, "refused publishing to ''", "topic")


def test_stat_into_a_reader_that_stops_early_is_quiet(tmp_path):
    """``once stat --json | head``: the reader closed the pipe; that is not a bug of ours."""
    router = RouterProcess(write_topology(tmp_path), args=("--http", "127.0.0.1:0"))
    try:
        _stat_closed_early(router)
    finally:
        router.stop()


def _stat_closed_early(router: RouterProcess) -> None:
    p = subprocess.Popen([sys.executable, "-m", "once.tools.cli", "stat", "--json", "--router", router.http],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None
    p.stdout.close()  # (before it writes: it has not even started)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 0 and err == "", err


def test_audit_without_pyspark_says_how_to_get_it(tmp_path):
    shadow = tmp_path / "shadow" / "pyspark"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no PySpark in this environment')\n")
    (tmp_path / "run" / "journal").mkdir(parents=True)
    import os

    env = dict(os.environ, PYTHONPATH=str(tmp_path / "shadow"))
    _one_line(_once("audit", str(tmp_path / "run"), env=env), 2, "pip install 'once[audit]'")


def test_a_password_in_a_url_is_never_echoed(tmp_path):
    """``once send --url amqp://alice:nope@...`` printed the password in its error (issue 50,
    item 7): no router there, and one that refuses the credentials."""
    from once.tools.topology_ports import free_port

    r = _once("send", "t", "x", "--url", f"amqp://alice:nope@127.0.0.1:{free_port()}", "--timeout", "5")
    _one_line(r, 4, "amqp://alice:***@127.0.0.1:")
    assert "nope" not in r.stderr + r.stdout
    router = RouterProcess(write_topology(tmp_path, users={"alice": "s3cret"}, auth={"allow_anonymous": False}))
    try:
        r = _once("send", "t", "x", "--url", router.url.replace("amqp://", "amqp://alice:nope@"), "--timeout", "10")
        _one_line(r, 7, "refused the credentials")
        assert "nope" not in r.stderr + r.stdout and "alice:***@" in r.stderr, r.stderr
    finally:
        router.stop()


def test_a_certificate_naming_an_ip_address_only_is_explained_at_both_ends(tmp_path):
    """An operator's certificate with ``IP:127.0.0.1`` (the recipe's shape) and ``amqps://
    127.0.0.1``: Proton matches DNS names only. The command said "is a router running
    there?", the router logged a bare SSLV3_ALERT_HANDSHAKE_FAILURE (issue 50, item 8)."""
    import yaml
    from once.tools.topology_ports import free_port
    from support.certs import CA

    ca = CA(tmp_path / "certs")
    ca.issue("A", dns=("localhost",), ips=("127.0.0.1",), ips_as_dns=False)
    topo = tmp_path / "topology.yaml"
    topo.write_text(yaml.safe_dump({
        "routers": {"A": {"listen": f"127.0.0.1:{free_port()}", "amqps": "127.0.0.1:0"}}, "links": [],
        "tls": {"certificate": "certs/{id}.pem", "private_key": "certs/{id}-key.pem", "ca": "certs/ca.pem"}}))
    router = RouterProcess(topo)
    try:
        assert router.amqps is not None
        ca_file = str(tmp_path / "certs" / "ca.pem")
        _one_line(_once("send", "t", "x", "--url", router.amqps, "--ca", ca_file, "--timeout", "10"), 2,
                  "certificate does not verify", "DNS name")
        port = router.amqps.rsplit(":", 1)[1]
        ok = _once("send", "t", "x", "--url", f"amqps://localhost:{port}", "--ca", ca_file, "--timeout", "10")
        assert ok.returncode == 0 and "accepted 1" in ok.stdout, ok.stderr
        log = "".join(router.stderr_lines())
        assert "SSLV3_ALERT_HANDSHAKE_FAILURE: the client gave the handshake up" in log, log[-2000:]
    finally:
        router.stop()


def test_a_password_change_keeps_the_users_groups(tmp_path):
    """``echo pw | once user add zed --file u.yaml`` after ``--group ops``: zed stays in ops
    (the policy's groups were dropped on a password change: issue 50, item 9)."""
    import yaml

    users = tmp_path / "u.yaml"
    assert _once("user", "add", "zed", "--file", str(users), "--group", "ops", input="first\n").returncode == 0
    assert _once("user", "add", "zed", "--file", str(users), input="second\n").returncode == 0
    assert yaml.safe_load(users.read_text())["zed"]["groups"] == ["ops"]
    assert _once("user", "add", "zed", "--file", str(users), "--group", "dev", input="third\n").returncode == 0
    assert yaml.safe_load(users.read_text())["zed"]["groups"] == ["dev"]


def test_send_and_recv_take_a_user_and_its_password(tmp_path):
    """``--user`` with ``ONCE_PASSWORD`` (or ``--password``): no credentials in the URL
    (issue 50, item 9); a wrong one is refused without echoing it."""
    import os

    router = RouterProcess(write_topology(tmp_path, users={"alice": "s3cret"},
                                          auth={"allow_anonymous": False, "plain_without_tls": True}))
    try:
        env = dict(os.environ, ONCE_PASSWORD="s3cret")
        recv = subprocess.Popen([sys.executable, "-m", "once.tools.cli", "recv", "creds", "--url", router.url,
                                 "--user", "alice", "--count", "1", "--timeout", "60"], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert recv.stderr is not None and recv.stderr.readline().startswith("subscribed to creds")
        sent = _once("send", "creds", "hello", "--url", router.url, "--user", "alice", "--password", "s3cret")
        assert sent.returncode == 0 and "accepted 1" in sent.stdout, sent.stderr
        out, _ = recv.communicate(timeout=60)
        assert out.split() == ["hello"]
        bad = _once("send", "creds", "x", "--url", router.url, "--user", "alice", "--timeout", "10",
                    env=dict(os.environ, ONCE_PASSWORD="wrong-one"))
        assert bad.returncode != 0 and "wrong-one" not in bad.stderr + bad.stdout, bad.stderr
        _one_line(_once("send", "creds", "x", "--url", router.url, "--password", "p"), 2, "--password needs --user")
    finally:
        router.stop()


def test_recv_counts_and_usage_are_checked(router: RouterProcess):
    """``--count 1 --timeout 2`` with nothing sent exited 0; ``--count -1`` was taken;
    ``--exclusive`` without ``--group`` printed ``once``'s usage, not a line; a scenario
    name the harness does not ship did not list the ones it does (issue 50, item 14)."""
    idle = _once("recv", "quiet", "--url", router.url, "--count", "1", "--timeout", "1")
    assert idle.returncode == 5 and idle.stderr.splitlines()[-1] == ("once recv: 0 of 1 message(s), then none for 1 s "
                                                                    "(--timeout)"), idle.stderr
    _one_line(_once("recv", "quiet", "--url", router.url, "--count", "-1"), 2, "--count -1")
    _one_line(_once("send", "quiet", "--url", router.url, "--count", "-1"), 2, "--count -1")
    _one_line(_once("recv", "quiet", "--url", router.url, "--exclusive"), 2, "--exclusive needs --group")
    _one_line(_once("harness", "no-such-scenario"), 2, "no scenario 'no-such-scenario'", "publisher-router-dies")


async def test_a_client_library_failover_is_logged_and_a_clean_close_says_nothing_odd(tmp_path, caplog):
    """The outbox relay (our client library) logged nothing when it failed over, and
    "ended: None" when it stopped (issue 50, item 14)."""
    import asyncio
    import logging

    from once.client import Publisher

    caplog.set_level(logging.INFO, logger="once.client")
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    first = RouterProcess(write_topology(tmp_path / "a"))
    second = RouterProcess(write_topology(tmp_path / "b"))
    pub = None
    try:
        pub = Publisher([first.url, second.url], "logged", tmp_path / "pub.db")
        await pub.start()
        await asyncio.wait_for(pub.send(b"one"), 30)
        first.proc.kill()
        first.proc.wait()
        await asyncio.wait_for(pub.send(b"two"), 60)  # (a bound against a hang: it fails over)
    finally:
        if pub is not None:
            await pub.close()
        first.stop()
        second.stop()
    said = [r.getMessage() for r in caplog.records if r.name == "once.client"]
    port = second.url.rsplit(":", 1)[1]
    assert any("lost the connection to" in m for m in said), said
    assert any(f"connected to 127.0.0.1:{port}" in m for m in said), said
    assert not any("None" in m for m in said), said


def test_a_topic_whose_clients_left_keeps_its_figures_in_stat(tmp_path):
    """``once stat -a`` dropped a topic once its clients left, its counters still kept
    (and the console said "no topics yet" after traffic: issue 50, item 14)."""
    import json

    router = RouterProcess(write_topology(tmp_path), args=("--http", "127.0.0.1:0"))
    try:
        sent = _once("send", "left-behind", "a", "b", "c", "--url", router.url)
        assert sent.returncode == 0 and "accepted 3" in sent.stdout
        stat = _once("stat", "-a", "--json", "--router", router.http)
        assert stat.returncode == 0, stat.stderr
        doc = json.loads(stat.stdout)
        topics = doc["topics"] if isinstance(doc, dict) and "topics" in doc else doc
        [row] = [t for t in topics if t["topic"] == "left-behind"]
        assert row["received"] == 3 and row["publishers"] == 0
        general = json.loads(_once("stat", "--json", "--router", router.http).stdout)
        totals = general["general"]["totals"] if "general" in general else general["totals"]
        assert totals["told_accepted"] == 3 and totals["accepted"] == 0
    finally:
        router.stop()
