"""The links of one client connection to ``$management`` (``management.py``): requests
come on a link whose target is ``$management``; responses go on a link the client
attached with a dynamic source, whose address the router gives (``$management/N/M``,
this connection's), named as the requests' ``reply-to``.

A connection may have a few requests outstanding: at most ``WINDOW`` responses per request
link (and ``MOST_REQUEST_LINKS`` of those) wait for their reply link's credit, and a request
link's credit is given back only as they go, so a client that asks and never reads holds a
bounded amount. Responses go pre-settled
(a management answer is read or asked again, never redelivered).
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import TYPE_CHECKING, Any

from ...amqp.endpoints import Delivery, Link
from ...amqp.errors import Condition
from ...amqp.performatives import Accepted, Error, Rejected, SenderSettleMode, Source
from .management import ADDRESS, Response

if TYPE_CHECKING:
    from ...amqp.connection import Connection
    from ...amqp.performatives import Attach

WINDOW = 16  # requests outstanding per request link (its credit)
MOST_REQUEST_LINKS = 4  # per connection: at most 4 x 16 responses wait for a reader
MAX_REQUEST = 64 * 1024  # bytes: a request names an operation and a few properties


class Requests:
    """The request link's context: what the connection's requests wait for."""

    __slots__ = ("link",)

    def __init__(self, link: Link) -> None:
        self.link = link


class Replies:
    """A reply link's context: the responses waiting for its credit."""

    __slots__ = ("link", "address", "waiting")

    def __init__(self, link: Link, address: str) -> None:
        self.link = link
        self.address = address
        self.waiting: deque[bytes] = deque()


class ManagementLinks:
    """One connection's ``$management`` links: made on the first such attach."""

    def __init__(self, engine: Connection, serial: int) -> None:
        self.engine = engine
        self.prefix = f"{ADDRESS}/{serial}/"
        self.numbers = itertools.count(1)
        self.replies: dict[str, Replies] = {}
        self.requests: list[Requests] = []
        self.tags = itertools.count(1)

    @staticmethod
    def wanted(link: Link, attach: Attach) -> bool:
        """Whether ``attach`` is for the management node: a request link, or a reply link
        (a dynamic source: the router has no other use for one)."""
        if link.is_sender:
            return attach.source is not None and attach.source.dynamic
        return attach.target is not None and attach.target.address == ADDRESS

    def attach(self, link: Link, attach: Attach) -> None:
        engine = self.engine
        if link.is_sender:
            address = self.prefix + str(next(self.numbers))
            replies = Replies(link, address)
            self.replies[address] = replies
            link.context = replies
            engine.attach(link.session, link.name, link.role, link=link, source=Source(address=address, dynamic=True),
                          target=attach.target, snd_settle_mode=SenderSettleMode.SETTLED,
                          rcv_settle_mode=attach.rcv_settle_mode)
            return
        if len(self.requests) >= MOST_REQUEST_LINKS:
            engine.attach(link.session, link.name, link.role, link=link)
            engine.detach(link, closed=True, error=Error(
                condition=Condition.RESOURCE_LIMIT_EXCEEDED.value,
                description=f"at most {MOST_REQUEST_LINKS} links to $management per connection"))
            return
        requests = Requests(link)
        self.requests.append(requests)
        link.context = requests
        engine.attach(link.session, link.name, link.role, link=link, source=attach.source, target=attach.target,
                      snd_settle_mode=attach.snd_settle_mode, rcv_settle_mode=attach.rcv_settle_mode,
                      max_message_size=MAX_REQUEST)
        engine.flow(link, WINDOW)

    def request(self, d: Delivery, response: Response) -> None:
        """``d`` was answered with ``response``: accepted and the response sent (or kept
        for its reply link's credit); rejected when it names no reply link of ours."""
        replies = self.replies.get(response.to) if response.to is not None else None
        if replies is None:
            why = ("a management request needs reply-to: the address of a link this connection attached with a "
                   "dynamic source" if response.to is None else
                   f"reply-to {response.to!r} is no reply link of this connection (attach one with a dynamic source)")
            if not d.settled:
                self.engine.disposition(d, Rejected(error=Error(condition=Condition.PRECONDITION_FAILED.value,
                                                                description=why)), settled=True)
            self._credit(d.link)
            return
        if not d.settled:
            self.engine.disposition(d, Accepted(), settled=True)
        replies.waiting.append(response.payload)
        self.pump(replies)
        self._credit(d.link)

    def pump(self, replies: Replies) -> None:
        link = replies.link
        while replies.waiting and link.credit > 0 and link.attached:
            self.engine.send(link, str(next(self.tags)).encode(), replies.waiting.popleft(), settled=True)
        for requests in self.requests:
            self._credit(requests.link)

    def _credit(self, link: Link) -> None:
        """The request link's credit: the window less the responses still waiting."""
        if not link.attached:
            return
        room = max(0, WINDOW - sum(len(r.waiting) for r in self.replies.values()))
        if room > link.credit:
            self.engine.flow(link, room)

    def dropped(self, ctx: Any) -> None:
        if isinstance(ctx, Replies):
            self.replies.pop(ctx.address, None)
            for requests in self.requests:
                self._credit(requests.link)
        elif isinstance(ctx, Requests) and ctx in self.requests:
            self.requests.remove(ctx)
