"""Drain and idle timeouts against a live router."""

from __future__ import annotations

import time
from typing import Any

from once.router.amqp.frames import AMQP_HEADER
from once.router.amqp.performatives import Close, Open
from support.proton_events import ContainerThread, Recorder
from support.raw import RawPeer
from support.routers import wait_for


class Drainer(Recorder):
    def __init__(self, url: str) -> None:
        super().__init__(prefetch=0)
        self.url = url

    def on_start(self, event: Any) -> None:
        conn = event.container.connect(self.url)
        self.receiver = event.container.create_receiver(conn, "quiet", name="drainer")
        self.receiver.drain(5)  # nothing is queued: the router must use up the credit at once

    def on_link_flow(self, event: Any) -> None:
        self.note("flow", (event.link.credit, event.link.draining()))


def test_drain_with_nothing_queued_returns_the_credit(router):
    d = Drainer(router.url)
    t = ContainerThread(d)
    wait_for(lambda: (0, False) in d.seen("flow"), what="drained flow from the router")
    t.stop()


def test_router_sends_heartbeats_within_half_our_idle_timeout(router):
    peer = RawPeer(router.host, router.port)
    peer.send(AMQP_HEADER)
    peer.send_frame(Open(container_id="sleepy", idle_time_out=400))
    assert peer.read_header() == AMQP_HEADER
    peer.read_frames(until=Open)
    arrivals = [time.monotonic()]
    while arrivals[-1] - arrivals[0] < 1.5:
        frames = peer.read_frames(until=type(None))
        assert frames and frames[-1].body is None, "the connection ended instead of heartbeating"
        arrivals.append(time.monotonic())
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    assert max(gaps) < 0.4  # never silent for our whole idle timeout (AMQP: send within it)
    peer.close()


def test_router_closes_a_silent_connection_after_its_idle_timeout(make_router):
    r = make_router(settings={"idle_timeout": "1s"})
    peer = RawPeer(r.host, r.port)
    peer.send(AMQP_HEADER)
    peer.send_frame(Open(container_id="silent"))
    assert peer.read_header() == AMQP_HEADER
    opened = peer.read_frames(until=Open)
    assert opened[-1].body.idle_time_out == 1000
    frames = peer.read_frames(until=Close)  # we never send anything again
    assert frames[-1].body.error.condition == "amqp:resource-limit-exceeded"
    peer.close()
