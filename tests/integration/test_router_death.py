"""A subscriber's router dies (SIGKILL); the standard client reconnects to another router
and resumes its link there: at-least-once, every duplicate marked, in publish order,
and every message accepted once the subscriber has it (issue 4, second part)."""

from __future__ import annotations

import signal
from typing import Any

from support.proton_events import ContainerThread, Recorder, StreamPublisher, assert_at_least_once_marked
from support.routers import Network, wait_for

N = 400


class MovingSubscriber(Recorder):
    """A Proton receiver that reconnects through a list of routers and keeps its link name."""

    container_id = "mover"

    def __init__(self, urls: list[str]) -> None:
        super().__init__()
        self.urls = urls
        self.got: list[tuple[int, int, Any]] = []

    def on_start(self, event: Any) -> None:
        conn = event.container.connect(urls=self.urls)
        event.container.create_receiver(conn, "fate", name="k")

    def on_link_opened(self, event: Any) -> None:
        self.note("attached", event.connection.connected_address)

    def on_message(self, event: Any) -> None:
        m = event.message
        with self.lock:
            self.got.append((m.body, m.delivery_count, m.first_acquirer))


def test_subscribers_router_dies_and_it_resumes_on_another(tmp_path):
    net = Network("mesh3.yaml", tmp_path)
    try:
        sub = MovingSubscriber([net["C"].url, net["B"].url])
        ts = ContainerThread(sub)
        sub.wait_seen("attached")
        pub = StreamPublisher(net["A"].url, "fate", N)
        pub.limit = N
        tp = ContainerThread(pub)
        wait_for(lambda: len(sub.got) >= N // 3, 30, what="a third received through C")
        net["C"].proc.send_signal(signal.SIGKILL)
        wait_for(lambda: pub.accepted() == N, 60, what="every message accepted after the move")
        with sub.lock:
            got = list(sub.got)
        assert_at_least_once_marked(got, N)
        assert len(sub.seen("attached")) >= 2  # it really moved
        tp.stop()
        ts.stop()
    finally:
        net.stop()
