"""Settle mode second, the bounded in-flight window, and pre-settled fan-out."""

from __future__ import annotations

from typing import Any

from proton import Delivery, Link, Message
from proton.reactor import AtMostOnce, LinkOption
from support.proton_events import ContainerThread, Recorder
from support.routers import wait_for


class SettleSecond(LinkOption):
    def apply(self, link: Any) -> None:
        link.rcv_settle_mode = Link.RCV_SECOND


class SecondModeClients(Recorder):
    """Publisher and subscriber both in receiver-settle-mode second, manual settlement."""

    def __init__(self, url: str) -> None:
        super().__init__(auto_accept=False, auto_settle=False)
        self.url = url

    def on_start(self, event: Any) -> None:
        conn = event.container.connect(self.url)
        self.receiver = event.container.create_receiver(conn, "second", name="sub", options=[SettleSecond()])
        self.sender = event.container.create_sender(conn, "second", name="pub", options=[SettleSecond()])

    def on_sendable(self, event: Any) -> None:
        if not self.seen("sent"):
            self.sent = self.sender.send(Message(body="once"))
            self.note("sent")

    def on_message(self, event: Any) -> None:
        self.sub_delivery = event.delivery
        self.note("message", event.message.body)
        event.delivery.update(Delivery.ACCEPTED)  # accept without settling: mode second
        self.note("sub-accepted")

    def on_accepted(self, event: Any) -> None:
        self.note("pub-accepted", event.delivery.settled)
        event.delivery.settle()
        self.note("pub-settled")

    def on_settled(self, event: Any) -> None:
        if event.delivery is getattr(self, "sub_delivery", None) or event.link.is_receiver:
            self.note("sub-settled-by-router")


def test_receiver_settle_mode_second_relays_settlement_after_publisher_settles(router):
    clients = SecondModeClients(router.url)
    t = ContainerThread(clients)
    clients.wait_seen("sub-settled-by-router")
    order = [w for w, _ in clients.log if w in ("sub-accepted", "pub-accepted", "pub-settled", "sub-settled-by-router")]
    assert order == ["sub-accepted", "pub-accepted", "pub-settled", "sub-settled-by-router"]
    # In mode second the router answers accepted but leaves settling to the publisher.
    assert clients.seen("pub-accepted") == [False]
    t.stop()


class WindowClients(Recorder):
    """A publisher that sends whenever it has credit; a subscriber that never accepts."""

    def __init__(self, url: str, total: int) -> None:
        super().__init__(auto_accept=False, prefetch=0)
        self.url = url
        self.total = total
        self.sent = 0
        self.held: list[Any] = []

    def on_start(self, event: Any) -> None:
        self.conn = event.container.connect(self.url)
        self.receiver = event.container.create_receiver(self.conn, "window", name="slow")
        self.receiver.flow(1000)
        # Attached after the subscriber on the same connection: the router sees them in order.
        self.sender = event.container.create_sender(self.conn, "window", name="fast")

    def on_sendable(self, event: Any) -> None:
        while event.sender.credit and self.sent < self.total:
            event.sender.send(Message(body=self.sent))
            self.sent += 1
        self.note("credit-exhausted", self.sent)

    def on_message(self, event: Any) -> None:
        self.held.append(event.delivery)
        self.note("message", event.message.body)

    def accept_all(self) -> None:
        for d in self.held:
            d.update(d.ACCEPTED)
            d.settle()
        self.held.clear()

    def on_accepted(self, event: Any) -> None:
        self.note("accepted", None)


def test_bounded_window_slow_subscriber_slows_the_publisher(make_router):
    r = make_router(settings={"max_in_flight": 10, "link_credit": 10})
    clients = WindowClients(r.url, total=40)
    t = ContainerThread(clients)
    clients.wait_seen("message", 10)
    # The window is full: the publisher has no credit left and sent no more than 10.
    wait_for(lambda: clients.seen("credit-exhausted"), what="publisher out of credit")
    t.call(lambda: None)  # let any in-flight frames arrive
    assert clients.sent == 10
    assert len(clients.seen("message")) == 10
    t.call(clients.accept_all)
    clients.wait_seen("message", 20)
    assert clients.sent <= 30
    # The rest flows as the subscriber accepts: every accepted batch frees room for more.
    while len(clients.seen("message")) < 40:
        before = len(clients.seen("message"))
        t.call(clients.accept_all)
        wait_for(lambda before=before: len(clients.seen("message")) > before, what="more messages after accepting")
    t.call(clients.accept_all)
    clients.wait_seen("accepted", 40)
    assert clients.seen("message") == list(range(40))
    t.stop()


class PresettledClients(Recorder):
    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url

    def on_start(self, event: Any) -> None:
        conn = event.container.connect(self.url)
        self.receiver = event.container.create_receiver(conn, "ps", name="ps-sub")
        self.sender = event.container.create_sender(conn, "ps", name="ps-pub", options=[AtMostOnce()])

    def on_sendable(self, event: Any) -> None:
        if not self.seen("sent"):
            for i in range(5):
                event.sender.send(Message(body=i))
            self.note("sent")

    def on_message(self, event: Any) -> None:
        self.note("message", (event.message.body, event.delivery.settled))


def test_presettled_publish_fans_out_presettled(router):
    clients = PresettledClients(router.url)
    t = ContainerThread(clients)
    got = clients.wait_seen("message", 5)
    assert got == [(i, True) for i in range(5)]
    t.stop()
