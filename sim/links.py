"""In-memory connections: a FIFO pipe per direction (TCP keeps order on one connection;
different connections overtake each other), and the inter-router link's two ends with
the core's hop and upstream ports on them: copies go settled on the data link, control
items (answers, settlements, the link state) on the control link. Link credit follows AMQP: the receiver grants
credit against the delivery count it has seen, the sender spends it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from once.router.core.messages import Copy

from .clock import Loop


class PortCalledInEntry(AssertionError):
    """The core called a port from inside an entry call (it may only as its batch ends)."""


def draining(router: Any) -> None:
    """Every port here checks this first: the core calls ports only from ``after_batch``
    (``router/core/effects.py``), so an adaptor is never inside the core when the core
    calls it. Every sweep checks it on every port call."""
    if not router.core.draining:
        raise PortCalledInEntry(f"router {router.id}: a port was called inside an entry call")

if TYPE_CHECKING:
    from .net import SimRouter


class Pipe:
    """One direction of a connection. ``latency()`` picks each frame's delay; a frame never
    overtakes an earlier one. A closed pipe drops what is on it."""

    def __init__(self, loop: Loop, receive: Callable[[Any], None], latency: Callable[[], float]) -> None:
        self.loop = loop
        self.receive = receive
        self.latency = latency
        self.last = 0.0
        self.closed = False

    def send(self, frame: Any) -> None:
        if self.closed:
            return
        when = max(self.last, self.loop.now + self.latency())
        self.last = when
        self.loop.at(when, self._arrive, frame)

    def _arrive(self, frame: Any) -> None:
        if not self.closed:
            self.receive(frame)


@dataclass(frozen=True, slots=True)
class Flow:
    delivery_count: int  # the receiver's
    credit: int


@dataclass(frozen=True, slots=True)
class Control:
    msg: object


@dataclass(frozen=True, slots=True)
class Up:
    """The handshake: the first frame; the receiving side's link comes up with it."""


class Down:
    """A clean close (a router that left closes its links after its last word): the
    receiving side sees the connection go once what was sent before it has arrived."""


class Handle:
    """A delivery as the adaptor knows it: its id on the connection and the core's record."""

    __slots__ = ("id", "record")

    def __init__(self, id: int, record: Any = None) -> None:
        self.id = id
        self.record = record


class RouterEnd:
    """One router's end of an inter-router connection (a ``NeighbourLink``)."""

    def __init__(self, router: SimRouter, peer: str) -> None:
        self.router = router
        self.peer = peer
        self.out: Pipe | None = None
        self.hop: Any = None
        self.upstream: Any = None
        self.up = False
        self.closed = False
        self.snd_count = 0
        self.credit = 0  # on our data link
        self.rcv_count = 0

    # --------------------------------------------------- NeighbourLink

    def hop_port(self) -> HopEnd:
        return HopEnd(self)

    def upstream_port(self) -> UpstreamEnd:
        return UpstreamEnd(self)

    def send_control(self, msg: object) -> None:
        self.send(Control(msg))

    def close(self) -> None:
        self.router.net.cut_connection(self)

    # ------------------------------------------------------------ frames

    def send(self, frame: Any) -> None:
        if not self.closed and self.out is not None:
            self.out.send(frame)

    def receive(self, frame: Any) -> None:
        if self.closed or not self.router.alive:
            return
        router = self.router
        t = type(frame)
        if t is Up:
            self.up = True
            router.network.link_up(self.peer, self)
        elif not self.up:
            return
        elif t is Copy:  # consumed at once, no disposition
            self.rcv_count += 1
            router.core.copy_arrived(self.upstream, frame)
        elif t is Flow:
            # AMQP 2.6.7: credit = the receiver's delivery count + its credit - ours
            self.credit = frame.delivery_count + frame.credit - self.snd_count
            if self.hop is not None:
                router.core.pump_hop(self.hop)
        elif t is Control:
            router.network.receive(self.peer, frame.msg)
        elif t is Down:
            router.net.cut_connection(self)
        router.after_batch()


class HopEnd:
    """The core's ``HopPort``: our data link towards the neighbour."""

    __slots__ = ("end",)

    def __init__(self, end: RouterEnd) -> None:
        self.end = end

    def credit(self) -> int:
        end = self.end
        draining(end.router)
        return max(0, end.credit) if end.up and not end.closed else 0

    def copy(self, copy: Copy) -> None:
        """A copy goes settled (the root sends it again if it is lost)."""
        end = self.end
        draining(end.router)
        end.snd_count += 1
        end.credit -= 1
        end.send(copy)


class UpstreamEnd:
    """The core's ``PublisherPort`` for the neighbour's data link towards us."""

    __slots__ = ("end",)

    def __init__(self, end: RouterEnd) -> None:
        self.end = end

    def grant(self, credit: int) -> None:
        end = self.end
        draining(end.router)
        end.send(Flow(end.rcv_count, credit))
