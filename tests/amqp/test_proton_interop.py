"""Proton's own engine against ours, in memory: frames Proton writes decode in our engine
and ours decode in Proton's (no sockets; Proton's Transport is driven by hand)."""

from __future__ import annotations

from typing import Any

import proton
from once.router.amqp.connection import Connection, Mode
from once.router.amqp.events import DeliveriesReceived, DeliveryUpdated, LinkAttached, SaslDone
from once.router.amqp.performatives import Accepted
from once.router.amqp.sasl import SaslServerConfig
from proton import Collector, Delivery, Event, Message, Transport
from support.sasl_users import plain_users


class ProtonClient:
    def __init__(self, ours: Connection, sasl: bool = True) -> None:
        self.ours = ours
        self.conn = proton.Connection()
        self.conn.container = "proton-client"
        self.collector = Collector()
        self.conn.collect(self.collector)
        self.transport = Transport()
        if sasl:
            self.transport.sasl().allowed_mechs("ANONYMOUS")
        self.transport.bind(self.conn)
        self.events: list[Any] = []
        self.proton_events: list[Any] = []
        self.backlog = b""

    def pump(self) -> list[Any]:
        new: list[Any] = []
        for _ in range(200):
            moved = False
            n = self.transport.pending()
            if n > 0:
                data = self.transport.peek(n)
                self.transport.pop(n)
                new += self.ours.receive_data(data)
                moved = True
            self.backlog += self.ours.data_to_send()
            room = self.transport.capacity()
            if self.backlog and room > 0:  # Proton takes at most its capacity per push
                self.transport.push(self.backlog[:room])
                self.backlog = self.backlog[room:]
                moved = True
            while self.collector.peek():
                self.proton_events.append(self.collector.peek().type)
                self.collector.pop()
            if not moved:
                break
        self.events += new
        return new


def _server() -> Connection:
    cfg = SaslServerConfig(("ANONYMOUS", "PLAIN"), plain_users({}, True))
    return Connection(Mode.SERVER, "ours", sasl_server=cfg, max_frame_size=4096)


def test_proton_client_publishes_multi_frame_message_through_our_engine():
    pc = ProtonClient(_server())
    pc.conn.open()
    ssn = pc.conn.session()
    ssn.open()
    snd = ssn.sender("pub")
    snd.target.address = "topic"
    snd.open()
    events = pc.pump()
    assert any(isinstance(e, SaslDone) and e.ok for e in events)
    attach = next(e for e in events if isinstance(e, LinkAttached))
    assert attach.attach.target.address == "topic" and attach.attach.name == "pub"
    link = attach.link
    pc.ours.attach(link.session, link.name, link.role, link=link, target=attach.attach.target)
    pc.ours.flow(link, 10)
    pc.pump()
    assert snd.credit == 10
    body = "x" * 100_000  # 25 frames of Proton's at our 4 KiB max-frame-size
    dlv = snd.delivery(b"tag-1")
    snd.send(Message(body=body, subject="s").encode())
    snd.advance()
    events = pc.pump()
    rx = next(d for e in events if isinstance(e, DeliveriesReceived) for d in e.deliveries)
    assert rx.tag == b"tag-1"
    m = Message()
    m.decode(rx.payload)
    assert m.body == body and m.subject == "s"
    pc.ours.disposition(rx, Accepted(), settled=True)
    pc.pump()
    assert dlv.remote_state == Delivery.ACCEPTED and dlv.settled


def test_our_engine_sends_to_a_proton_receiver():
    pc = ProtonClient(_server())
    pc.conn.open()
    ssn = pc.conn.session()
    ssn.open()
    rcv = ssn.receiver("sub")
    rcv.source.address = "topic"
    rcv.open()
    rcv.flow(5)
    events = pc.pump()
    attach = next(e for e in events if isinstance(e, LinkAttached))
    link = attach.link
    pc.ours.attach(link.session, link.name, link.role, link=link, source=attach.attach.source)
    pc.pump()
    assert link.credit == 5
    payload = bytes(Message(body=b"\x01" * 50_000, properties={"k": "v"}).encode())  # (payloads are bytes)
    pc.ours.send(link, b"gid-0001", payload)
    pc.pump()
    assert Event.DELIVERY in pc.proton_events
    d = rcv.current
    assert d is not None and not d.partial and d.tag == "gid-0001"  # Proton hands tags back as str
    m = Message()
    m.decode(rcv.recv(d.pending))
    assert m.body == b"\x01" * 50_000 and m.properties == {"k": "v"}
    rcv.advance()
    d.update(Delivery.ACCEPTED)
    d.settle()
    events = pc.pump()
    up = next(e for e in events if isinstance(e, DeliveryUpdated))
    assert isinstance(up.state, Accepted) and up.settled


def test_proton_without_sasl():
    pc = ProtonClient(_server(), sasl=False)
    pc.conn.open()
    pc.pump()
    assert pc.ours.remote_open is not None and pc.ours.remote_open.container_id == "proton-client"
    assert pc.conn.remote_container == "ours"
