"""In-memory connection pairs: two engines joined without sockets."""

from __future__ import annotations

from typing import Any

from once.router.amqp.connection import Connection, Mode
from once.router.amqp.events import LinkAttached, SessionBegun
from once.router.amqp.frames import AMQP_HEADER, SASL_HEADER, FrameReader
from once.router.amqp.performatives import Role, Source, Target


class Pair:
    def __init__(self, client: Connection | None = None, server: Connection | None = None) -> None:
        self.client = client or Connection(Mode.CLIENT, "client")
        self.server = server or Connection(Mode.SERVER, "server")
        self.client_events: list[Any] = []
        self.server_events: list[Any] = []
        self.wire_to_server: list[bytes] = []
        self.wire_to_client: list[bytes] = []

    def pump(self) -> tuple[list[Any], list[Any]]:
        """Move bytes both ways until quiet; return the new (client, server) events."""
        ce: list[Any] = []
        se: list[Any] = []
        for _ in range(100):
            a = self.client.data_to_send()
            if a:
                self.wire_to_server.append(a)
                se += self.server.receive_data(a)
            b = self.server.data_to_send()
            if b:
                self.wire_to_client.append(b)
                ce += self.client.receive_data(b)
            if not a and not b:
                break
        self.client_events += ce
        self.server_events += se
        return ce, se

    def open(self) -> None:
        self.client.open()
        self.pump()
        self.csession = self.client.begin()
        _, se = self.pump()
        self.ssession = next(e.session for e in se if isinstance(e, SessionBegun))

    def link(self, name: str = "l", client_role: Role = Role.SENDER, **kw: Any):
        """Attach a link from the client and answer it on the server; return (client, server) links."""
        clink = self.client.attach(self.csession, name, client_role, source=Source(address="s"), target=Target(address="t"), **kw)
        _, se = self.pump()
        ev = next(e for e in se if isinstance(e, LinkAttached))
        slink = ev.link
        self.server.attach(self.ssession, name, slink.role, link=slink, source=ev.attach.source, target=ev.attach.target,
                           snd_settle_mode=ev.attach.snd_settle_mode, rcv_settle_mode=ev.attach.rcv_settle_mode)
        self.pump()
        return clink, slink


def frames_of(chunks: list[bytes]) -> list[Any]:
    """Decode the frames in captured wire bytes (protocol headers skipped)."""
    data = b"".join(chunks)
    for h in (AMQP_HEADER, SASL_HEADER):
        data = data.replace(h, b"")
    r = FrameReader(1 << 30)
    r.feed(data)
    return [f.body for f in r.frames()]
