"""One MQTT client with many topics (issue 49, items 8 and 9): 10,000 subscriptions, 10,000
patterns and 10,000 topics published to stay cheap beside a monitor that must keep being
answered (they took 46 s, more than 120 s and 64 s, and stalled the monitor for as long),
and a connection's subscriptions and topics published are links under
``max_links_per_connection`` and the policy's ``max_links``. A raw MQTT 5.0 socket and
Proton clients on a real router process; progress and answers are asserted, never pace."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from once.tools.topology_ports import free_port
from support.monitor import Monitor
from support.mqtt_raw import connect, packet, publish, read_packet, string
from support.routers import RouterProcess

N = 10_000
BATCH = 200  # filters per SUBSCRIBE


def _router(tmp: Path, links: int) -> RouterProcess:
    doc = {"routers": {"A": {"listen": f"127.0.0.1:{free_port()}", "mqtt": f"127.0.0.1:{free_port()}"}},
           "links": [], "settings": {"max_links_per_connection": links}}
    (tmp / "topology.yaml").write_text(yaml.safe_dump(doc))
    return RouterProcess(tmp / "topology.yaml")


@pytest.fixture
def many(tmp_path: Path) -> Iterator[RouterProcess]:
    r = _router(tmp_path, 3 * N)
    yield r
    r.stop()


def _client(r: RouterProcess, client_id: str) -> socket.socket:
    assert r.mqtt is not None
    sock = socket.create_connection(r.mqtt, timeout=120)
    sock.sendall(connect(client_id))
    assert read_packet(sock)[0] >> 4 == 2  # CONNACK
    return sock


def _subscribe(sock: socket.socket, filters: list[str], packet_id: int) -> list[int]:
    """SUBSCRIBE ``filters`` (QoS 1) in one packet: the SUBACK's reason codes."""
    body = packet_id.to_bytes(2, "big") + b"\x00" + b"".join(string(f) + b"\x01" for f in filters)
    sock.sendall(packet(0x82, body))
    first, ack = read_packet(sock)
    assert first >> 4 == 9 and ack[:2] == packet_id.to_bytes(2, "big"), (first, ack[:4])
    return list(ack[3:])  # (packet id, properties length 0, one reason code per filter)


def _publish(sock: socket.socket, topic: str, payload: bytes, packet_id: int) -> int:
    """A QoS 1 PUBLISH: its PUBACK's reason code (PUBLISH packets to the client are skipped)."""
    sock.sendall(publish(topic, payload, 1, packet_id))
    while True:
        first, body = read_packet(sock)
        if first >> 4 == 4 and body[:2] == packet_id.to_bytes(2, "big"):
            return body[2] if len(body) > 2 else 0


def test_ten_thousand_subscriptions_patterns_and_topics_from_one_client_beside_a_monitor(many):
    r = many
    monitor = Monitor(r.url)
    monitor.progresses()
    sock = _client(r, "many")
    for i in range(0, N, BATCH):
        assert _subscribe(sock, [f"t/{j}/x" for j in range(i, i + BATCH)], 1 + i // BATCH) == [1] * BATCH
    monitor.progresses()
    for i in range(0, N, BATCH):
        assert _subscribe(sock, [f"p/{j}/+" for j in range(i, i + BATCH)], 1 + i // BATCH) == [1] * BATCH
    monitor.progresses()
    pub = _client(r, "publisher")
    pub.sendall(b"".join(publish(f"q/{i}", b"x", 0) for i in range(N)))  # QoS 0, a topic each
    for n, (topic, text) in enumerate([("p/17/z", b"to a pattern"), ("t/9999/x", b"to a topic")], 1):
        pub.sendall(publish(topic, text, 1, n))
        first, body = read_packet(sock)  # the subscriber has it (QoS 1): it answers
        assert first >> 4 == 3 and body[2:2 + len(topic)] == topic.encode() and body.endswith(text), body[:40]
        sock.sendall(packet(0x40, body[2 + len(topic):4 + len(topic)]))  # PUBACK of its packet id
        first, ack = read_packet(pub)
        assert first >> 4 == 4 and ack[:2] == n.to_bytes(2, "big") and (len(ack) < 3 or ack[2] == 0), ack
    monitor.progresses()
    monitor.close()
    sock.close()
    pub.close()


def test_subscriptions_and_topics_published_are_links_under_the_connections_cap(tmp_path):
    """Past ``max_links_per_connection`` (50 here) the topic published to longest ago whose
    messages are all answered gives its place up: a client publishing to 100 topics one
    after another is answered for each. A subscription past the cap, or a topic when none
    is idle, is refused with 0x97 (quota exceeded)."""
    r = _router(tmp_path, 50)
    try:
        sock = _client(r, "capped")
        assert _subscribe(sock, [f"s/{i}" for i in range(30)], 1) == [1] * 30
        assert [_publish(sock, f"t/{i}", b"x", 1 + i) for i in range(100)] == [0] * 100
        assert _subscribe(sock, [f"s/{i}" for i in range(30, 51)], 2) == [1] * 20 + [0x97]
        assert _publish(sock, "t/new", b"x", 200) == 0x97
        assert _publish(sock, "s/3", b"to my own subscription", 201) == 0x97  # (a topic is a link too)
        sock.close()
    finally:
        r.stop()
