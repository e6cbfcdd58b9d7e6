"""One byte bound for everything a router holds (issue 49, items 1, 2 and 4): the records
and every connection's bytes on their way to them (AMQP messages still arriving, MQTT
packets whose header announced them, MQTT wills) stay within ``max_in_flight_bytes``
together. Each attack runs beside a monitor (a Proton publisher and subscriber on another
topic) that must go on being answered; the router's RSS stays within the bound plus
64 MiB. Real clients (Proton, raw MQTT sockets) on a real router process; bounds and
progress are asserted, never pace."""

from __future__ import annotations

import json
import select
import socket
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from once.tools.topology_ports import free_port
from proton.utils import BlockingConnection
from support.monitor import Monitor, rss
from support.mqtt_raw import connect, publish, read_packet
from support.proton_flood import ProtonFlood
from support.routers import RouterProcess, wait_for

MB = 1024 * 1024
BOUND = 64 * MB  # the router's max_in_flight_bytes in these tests
SLACK = 64 * MB  # what RSS may grow past it (the bound)


@pytest.fixture
def bounded(tmp_path: Path) -> Iterator[RouterProcess]:
    doc = {"routers": {"A": {"listen": f"127.0.0.1:{free_port()}", "mqtt": f"127.0.0.1:{free_port()}",
                             "http": f"127.0.0.1:{free_port()}"}},
           "links": [], "settings": {"max_in_flight_bytes": BOUND, "max_message_size": 32 * MB,
                                     "subscriber_grace": "30s"}}
    (tmp_path / "topology.yaml").write_text(yaml.safe_dump(doc))
    r = RouterProcess(tmp_path / "topology.yaml")
    yield r
    r.stop()


def _memory(r: RouterProcess) -> dict[str, Any]:
    assert r.http is not None
    with urllib.request.urlopen(f"{r.http}/api/memory", timeout=30) as resp:
        mem: dict[str, Any] = json.loads(resp.read())
    mem.setdefault("reserved_bytes", 0)  # (what a router that held none on the way would say)
    return mem


class Peak:
    """The router's largest RSS seen, sampled in a thread while an attack runs."""

    def __init__(self, pid: int) -> None:
        self.pid, self.before = pid, rss(pid)
        self.peak = self.before
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            try:
                self.peak = max(self.peak, rss(self.pid))
            except (FileNotFoundError, AssertionError):
                return  # (the router stopped)

    def grown(self) -> int:
        self._stop.set()
        self._thread.join(10)
        return self.peak - self.before


def test_six_connections_large_first_messages_stay_within_the_byte_bound(bounded):
    """Six connections each send a 24 MB message (each link's first: its size unknown when
    it got its credit) to a topic whose only subscriber grants no credit. Each connection's
    arrivals used to be weighed against the room the records left as if no other
    connection had any: all six were read (641 MiB under a 256 MiB bound in the report).
    Now one message fits and the other five are refused with
    amqp:resource-limit-exceeded naming max_in_flight_bytes; the monitor goes on."""
    r = bounded
    stingy = BlockingConnection(r.url, timeout=30)
    stingy.create_receiver("hoard", name="stingy", credit=0)
    monitor = Monitor(r.url)
    monitor.progresses()
    peak = Peak(r.proc.pid)
    floods = [ProtonFlood(r.url, "hoard", 1, b"x" * (24 * MB)) for _ in range(6)]
    wait_for(lambda: sum(len(f.refused) for f in floods) >= 5 and all(f.sent == 1 for f in floods), timeout=120,
             interval=0.05, what="five of the six refused")
    monitor.progresses()
    grown = peak.grown()
    refused = [why for f in floods for why in f.refused]
    assert len(refused) == 5, refused
    assert all("amqp:resource-limit-exceeded" in why and "max_in_flight_bytes" in why for why in refused), refused
    assert grown < BOUND + SLACK, grown
    mem = _memory(r)
    assert mem["records_bytes"] + mem["reserved_bytes"] <= BOUND, mem
    monitor.close()
    for f in floods:
        f.close()
    stingy.close()


class RawMqtt:
    """A raw MQTT 5.0 client whose large sends run in a thread (the router may stop reading
    it: back-pressure), so that the test sees what the router does meanwhile."""

    def __init__(self, where: tuple[str, int], client_id: str, will: int = 0) -> None:
        self.sock = socket.create_connection(where, timeout=300)
        self.client_id = client_id
        self.sent = threading.Event()
        self.error: list[BaseException] = []
        self._data = connect(client_id, will)
        self._thread = threading.Thread(target=self._send, daemon=True)
        self._thread.start()

    def _send(self) -> None:
        try:
            self.sock.sendall(self._data)
            self.sent.set()
        except OSError as e:
            self.error.append(e)

    def then(self, data: bytes) -> None:
        self._thread.join()
        self._data = data
        self._thread = threading.Thread(target=self._send, daemon=True)
        self.sent.clear()
        self._thread.start()

    def close(self) -> None:
        self.sock.close()
        self._thread.join(30)


def test_six_mqtt_clients_large_publishes_are_read_only_as_far_as_the_byte_bound(bounded):
    """Six MQTT clients each publish a 24 MB QoS 1 message to a topic whose subscriber
    grants no credit. MQTT framing buffered each packet up to its maximum and the router
    took them all past the bound (547 MiB under 256 MiB, nothing refused, no log line). Now
    a packet is weighed at its header: what does not fit is not read on (TCP holds it at
    the client) until there is room. When the subscriber leaves, every one of them is read
    and answered: nothing is lost."""
    r = bounded
    assert r.mqtt is not None
    stingy = BlockingConnection(r.url, timeout=30)
    stingy.create_receiver("hoard", name="stingy", credit=0)
    monitor = Monitor(r.url)
    monitor.progresses()
    clients = [RawMqtt(r.mqtt, f"big-{i}") for i in range(6)]
    for c in clients:
        c._thread.join(30)
        assert read_packet(c.sock)[0] >> 4 == 2  # CONNACK
    peak = Peak(r.proc.pid)
    for c in clients:
        c.then(publish("hoard", b"x" * (24 * MB), 1, 1))
    # One is read whole (its record waits for the stingy subscriber); the others are held
    # at their headers: the router's bytes stay within the bound and the monitor goes on.
    wait_for(lambda: _memory(r)["records_bytes"] >= 24 * MB, timeout=120, what="one 24 MB publish in the records")
    monitor.progresses()
    mem = _memory(r)
    assert mem["records_bytes"] + mem["reserved_bytes"] <= BOUND, mem
    assert sum(c.sent.is_set() for c in clients) < 6  # (some are still held back by TCP)
    wait_for(lambda: any("not read until there is room" in line for line in r._log), what="the line naming the bound")
    grown = peak.grown()
    assert grown < BOUND + SLACK, grown
    stingy.close()  # the subscriber leaves: the records go, and every client is read and answered
    for c in clients:
        first, body = read_packet(c.sock)
        assert first >> 4 == 4 and body[:2] == (1).to_bytes(2, "big"), (first, body[:4])  # PUBACK of packet 1
    monitor.progresses()
    monitor.close()
    for c in clients:
        c.close()


def test_mqtt_wills_count_against_the_byte_bound_while_connected_and_when_published(bounded):
    """Eight MQTT 5.0 clients connect with 12 MB wills (in their properties) to a topic whose
    subscriber grants no credit, then drop without DISCONNECT. Wills had no byte budget:
    +300 MiB while connected and records past the bound when they were published (298 MiB
    of 256). Now a will is held on the router's account from its CONNECT: the clients that
    would pass the bound are not read until there is room, and the published wills keep the
    records within it."""
    r = bounded
    assert r.mqtt is not None
    stingy = BlockingConnection(r.url, timeout=30)
    stingy.create_receiver("hoard", name="stingy", credit=0)
    monitor = Monitor(r.url)
    monitor.progresses()
    peak = Peak(r.proc.pid)
    clients = [RawMqtt(r.mqtt, f"will-{i}", will=12 * MB) for i in range(8)]
    # Each CONNECT is weighed at twice its length as it arrives, then its will is held: three
    # wills held (36 MB) leave room for a fourth CONNECT (24 MB), four (48 MB) for none.
    connected: list[RawMqtt] = []

    def connacks() -> int:
        ready, _, _ = select.select([c.sock for c in clients if c not in connected], [], [], 0.05)
        for c in clients:
            if c.sock in ready and read_packet(c.sock)[0] >> 4 == 2:
                connected.append(c)
        return len(connected)
    wait_for(lambda: connacks() == 4, timeout=120, what="four of the eight let in")
    monitor.progresses()
    mem = _memory(r)
    assert mem["records_bytes"] + mem["reserved_bytes"] <= BOUND, mem
    assert mem["reserved_bytes"] >= 4 * 12 * MB, mem
    assert connacks() == 4
    for c in clients:
        c.close()  # no DISCONNECT: the wills of those let in are published
    wait_for(lambda: _memory(r)["records_bytes"] >= 12 * MB * len(connected), timeout=120, what="the wills published")
    monitor.progresses()
    mem = _memory(r)
    assert mem["records_bytes"] + mem["reserved_bytes"] <= BOUND, mem
    grown = peak.grown()
    assert grown < BOUND + SLACK, grown
    monitor.close()
    stingy.close()
