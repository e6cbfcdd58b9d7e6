"""MQTT under the rules AMQP keeps (issue 49): a persistent session belongs to its user, a
will is published only where its user may publish, password guessing is slowed and its
log rate-limited, and with no users a claimed name is nobody. Real paho clients on a real
router process."""

from __future__ import annotations

import os
import queue
import signal
import socket
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
import yaml
from once.router.security.users import add_user
from once.tools.topology_ports import free_port
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from support.monitor import rss
from support.mqtt_raw import connect, packet, publish
from support.routers import RouterProcess, wait_for

POLICY = {
    "users": {"alice": {"publish": ["orders/#", "status/alice"], "subscribe": ["orders/#"]},
              "admin": {"publish": ["#"], "subscribe": ["#"]}},
    "default": {"publish": ["public/#"], "subscribe": ["public/#"]},
}


def _topology(tmp: Path, users: bool = True, plain: bool = True) -> Path:
    if users:
        add_user(tmp / "users.yaml", "alice", "apw")
        add_user(tmp / "users.yaml", "mallory", "mpw")
        add_user(tmp / "users.yaml", "admin", "root-pw")
    auth: dict[str, Any] = {"plain_without_tls": plain, **({"users_file": "users.yaml"} if users else {})}
    doc = {"routers": {"A": {"listen": f"127.0.0.1:{free_port()}", "mqtt": f"127.0.0.1:{free_port()}"}},
           "links": [], "auth": auth, "policy": POLICY}
    path = tmp / "topology.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def router(tmp_path: Path):
    r = RouterProcess(_topology(tmp_path))
    yield r
    r.stop()


class Client:
    """A paho 5.0 client with a persistent session; what its CONNACK said, what it got."""

    def __init__(self, r: RouterProcess, client_id: str, user: str | None, password: str = "", clean: bool = True,
                 will: tuple[str, bytes] | None = None) -> None:
        self.connacks: queue.Queue[int] = queue.Queue()
        self.present: list[bool] = []
        self.messages: queue.Queue[bytes] = queue.Queue()
        self.subacks: queue.Queue[list[int]] = queue.Queue()
        self.gone: queue.Queue[int] = queue.Queue()
        self.c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
        if user is not None:
            self.c.username_pw_set(user, password)
        if will is not None:
            self.c.will_set(will[0], will[1], qos=1)
        self.c.on_connect = self._connected
        self.c.on_message = lambda c, u, m: self.messages.put(m.payload)
        self.c.on_subscribe = lambda c, u, mid, codes, props: self.subacks.put([int(getattr(x, "value", x))
                                                                                 for x in codes])
        self.c.on_disconnect = lambda c, u, flags, rc, props: self.gone.put(int(getattr(rc, "value", rc)))
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = 300
        assert r.mqtt is not None
        self.c.connect(*r.mqtt, keepalive=30, clean_start=clean, properties=props)
        self.c.loop_start()
        self.code = self.connacks.get(timeout=30)

    def _connected(self, c: Any, u: Any, flags: Any, rc: Any, props: Any) -> None:
        self.present.append(bool(flags.session_present))
        self.connacks.put(int(getattr(rc, "value", rc)))

    def subscribe(self, topic: str) -> list[int]:
        self.c.subscribe(topic, qos=1)
        return self.subacks.get(timeout=30)

    def close(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()


def _publish(r: RouterProcess, topic: str, body: bytes) -> Client:
    """Publish as admin; the client stays open (its PUBACK comes once every subscriber,
    one away too, accepted)."""
    pub = Client(r, f"pub-{time.monotonic_ns()}", "admin", "root-pw")
    assert pub.code == 0
    pub.c.publish(topic, body, qos=1)
    return pub


def test_another_user_may_not_take_over_resume_or_end_a_persistent_session(router):
    alice = Client(router, "alice-app", "alice", "apw")
    assert alice.code == 0 and alice.subscribe("orders/new") == [1]
    # Her connection is up: another user's connect with her client id is refused, and she
    # is not disconnected (before, mallory took the session over and received her orders)
    mallory = Client(router, "alice-app", "mallory", "mpw", clean=False)
    assert mallory.code == 0x87 and mallory.present == [False]
    mallory.close()
    pub = _publish(router, "orders/new", b"first")
    assert alice.messages.get(timeout=30) == b"first" and alice.gone.empty()
    pub.close()
    alice.close()
    # Her session waits for her: another user may neither resume it nor end it (a clean start)
    for clean in (False, True):
        mallory = Client(router, "alice-app", "mallory", "mpw", clean=clean)
        assert mallory.code == 0x87
        mallory.close()
    pub = _publish(router, "orders/new", b"while away")
    back = Client(router, "alice-app", "alice", "apw", clean=False)
    assert back.code == 0 and back.present == [True]
    assert back.messages.get(timeout=30) == b"while away"
    back.close()
    pub.close()
    log = "".join(router.stderr_lines())
    assert "client id 'alice-app' belongs to another user" in log and "mallory" in log


def test_a_will_to_a_topic_its_user_may_not_publish_to_is_refused_at_the_connect(router):
    watcher = Client(router, "watcher", "admin", "root-pw")
    assert watcher.subscribe("#") == [1]
    sneaky = Client(router, "sneaky", "mallory", "mpw", will=("orders/new", b"forged order"))
    assert sneaky.code == 0x87
    sneaky.close()
    # her own will, to a topic she may publish to, is taken and published when she drops
    honest = Client(router, "honest", "mallory", "mpw", will=("public/mallory", b"gone"))
    assert honest.code == 0
    honest.c.loop_stop()
    honest.c.socket().close()  # (no DISCONNECT: the will goes)
    assert watcher.messages.get(timeout=30) == b"gone"
    assert watcher.messages.empty()  # (the forged order never went)
    watcher.close()
    assert "may not publish to 'orders/new'" in "".join(router.stderr_lines())


def _guess(r: RouterProcess, client_id: str, user: str, password: str) -> int:
    """One MQTT 3.1.1 CONNECT with a user name and password over a raw socket: the CONNACK's
    return code (4: bad user name or password)."""
    def s(v: str) -> bytes:
        return len(v.encode()).to_bytes(2, "big") + v.encode()
    body = s("MQTT") + bytes([4, 0xC2]) + (30).to_bytes(2, "big") + s(client_id) + s(user) + s(password)
    assert r.mqtt is not None and len(body) < 128
    with socket.create_connection(r.mqtt, timeout=60) as sock:
        sock.sendall(bytes([0x10, len(body)]) + body)
        connack = b""
        while len(connack) < 4:
            chunk = sock.recv(4 - len(connack))
            assert chunk, "closed before its CONNACK"
            connack += chunk
    assert connack[:2] == b"\x20\x02"
    return connack[3]


def test_mqtt_password_guessing_is_slowed_and_logged_once_a_while(router):
    start = time.monotonic()
    for i in range(10):
        assert _guess(router, f"try-{i}", "alice", f"guess{i}") == 4
    # Past six failures each attempt waits for its host's turn, booked 0.25 s, 0.5 s, 1 s
    # after the one before: a floor, which a busy machine only raises (before, 4,198
    # guesses went in 20 s)
    assert time.monotonic() - start >= 0.25 + 0.5 + 1
    lines = [line for line in router.stderr_lines() if "authentication failed" in line]
    assert len(lines) == 1 and "MQTT" in lines[0] and "'alice'" in lines[0] and "guess" not in lines[0]


def test_a_password_without_tls_is_refused_saying_so(tmp_path):
    """The right password on a plain port heard "bad user name or password", and the log
    never said passwords need TLS or ``auth.plain_without_tls`` (issue 50, item 9)."""
    r = RouterProcess(_topology(tmp_path, plain=False))
    try:
        c = Client(r, "plain-port", "alice", "apw")
        assert c.code == 0x87  # not authorized (not 0x86, bad user name or password)
        c.close()
        log = "".join(r.stderr_lines())
        assert "sent a password without TLS: passwords are taken over TLS only" in log, log[-2000:]
        assert "plain_without_tls" in log and "apw" not in log and "authentication failed" not in log
    finally:
        r.stop()


def test_with_no_users_a_claimed_name_is_anonymous_not_that_user(tmp_path):
    r = RouterProcess(_topology(tmp_path, users=False))
    try:
        # "admin" without a users file is nobody: the policy's default, not admin's "#"
        claimed = Client(r, "claims-admin", "admin")
        assert claimed.code == 0 and claimed.subscribe("orders/new") == [0x87]
        assert claimed.subscribe("public/news") == [1]
        claimed.close()
    finally:
        r.stop()


def test_sighup_keeps_the_users_when_the_file_empties_unless_the_router_was_started_to_allow_it(tmp_path):
    for allow in (False, True):
        d = tmp_path / str(allow)
        d.mkdir()
        r = RouterProcess(_topology(d), args=("--allow-empty-users",) if allow else ())
        try:
            (d / "users.yaml").write_text("")  # (a truncated file, or every user removed)
            r.proc.send_signal(signal.SIGHUP)
            said = "kept the running configuration: the users file" if not allow else "reloaded the users (0)"
            wait_for(lambda r=r, said=said: any(said in line for line in r._log), what="the reload's line")
            alice = Client(r, f"alice-{allow}", "alice", "apw")
            assert alice.code == 0 and alice.subscribe("orders/new") == ([1] if not allow else [0x87])
            alice.close()  # (kept: alice still; taken: nobody has a password, she is anonymous)
        finally:
            r.stop()


def test_a_users_file_others_may_read_is_warned_of(tmp_path):
    path = _topology(tmp_path)
    for mode, warned in ((0o644, True), (0o600, False)):
        os.chmod(tmp_path / "users.yaml", mode)
        r = RouterProcess(path)
        r.stop()
        lines = [line for line in r.stderr_lines() if "may be read by others" in line]
        assert bool(lines) == warned and (not warned or "mode 0644" in lines[0] and "chmod 600" in lines[0])


def test_publishes_held_behind_a_reused_packet_id_are_bounded(tmp_path):
    """A QoS 2 packet id used again while two of the client's QoS 2 messages are unanswered
    holds its publishes in the adaptor until a new epoch can begin; a QoS 0 flood behind it
    took 2 GB in 10 s. Past the connection's share the client is read no more."""
    from support.proton_clients import ProtonSubscriber

    doc = {"routers": {"A": {"listen": f"127.0.0.1:{free_port()}", "mqtt": f"127.0.0.1:{free_port()}"}},
           "links": [], "settings": {"max_in_flight_bytes": 16 * 1024 * 1024, "max_message_size": 1024 * 1024}}
    (tmp_path / "topology.yaml").write_text(yaml.safe_dump(doc))
    r = RouterProcess(tmp_path / "topology.yaml")
    slow = ProtonSubscriber(r.url, "held/t", name="never-accepts", auto_accept=False)
    try:
        assert r.mqtt is not None
        sock = socket.create_connection(r.mqtt, timeout=30)
        sock.sendall(connect("reuser"))
        assert sock.recv(64)[:1] == b"\x20"  # CONNACK
        # 1 to a topic nobody has (answered at once, and released); 2 to the subscriber that
        # never accepts (unanswered); 1 again: a new epoch, which waits for 2's answer
        sock.sendall(publish("nobody/t", b"q2", 2, 1))
        assert sock.recv(64)[:1] == b"\x50"  # PUBREC
        sock.sendall(packet(0x62, (1).to_bytes(2, "big")))  # PUBREL
        assert sock.recv(64)[:1] == b"\x70"  # PUBCOMP
        sock.sendall(publish("held/t", b"q2", 2, 2) + publish("held/t", b"q2 again", 2, 1))
        before = rss(r.proc.pid)
        flood = publish("held/t", b"x" * 65536, 0)
        sock.setblocking(False)
        sent, stuck_since = 0, None
        for _ in range(400_000):  # (the attack: 256 MB, or until the router stops reading for good)
            try:
                sent += sock.send(flood[sent % len(flood):])
                stuck_since = None
            except BlockingIOError:
                stuck_since = stuck_since or time.monotonic()
                if time.monotonic() - stuck_since > 3:  # (not read for 3 s: it paused the client)
                    break
                time.sleep(0.01)
            if sent > 256 * 1024 * 1024:
                break
        grew = rss(r.proc.pid) - before
        assert sent < 256 * 1024 * 1024, "the router read the whole flood"
        assert grew < 16 * 1024 * 1024 + 64 * 1024 * 1024, grew
        sock.close()
    finally:
        slow.close()
        r.stop()
