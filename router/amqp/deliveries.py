"""Deliveries: transfers out (split to the frame size, blocked by the session window) and
in (multi-frame, aborted, resumed), dispositions both ways (batched as ranges).

One layer of ``Connection`` (``connection.py``), an object it holds. It is given the
connection as ``ConnectionState`` (``shared.py``): the state it reads and writes, and the
frames every layer writes."""

from __future__ import annotations

from collections.abc import Iterable
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from .connection_state import MAX_UINT
from .endpoints import Delivery, EndpointState, Link, Session
from .errors import Condition, LocalProtocolError, SessionError
from .events import (
    DeliveriesReceived,
    DeliveryAborted,
    DeliveryUpdated,
)
from .performatives import (
    Disposition,
    Role,
    Transfer,
)
from .transfer import transfer_head, transfer_overhead

if TYPE_CHECKING:
    from .shared import ConnectionState

# (module constants: an enum member lookup is slow on Python 3.11, see records/table.py)
_MAPPED, _CLOSED = EndpointState.MAPPED, EndpointState.CLOSED
_RECEIVER = Role.RECEIVER
_ROLE_AND_ID = itemgetter(0, 1)


class Deliveries:
    def __init__(self, conn: ConnectionState) -> None:
        self.conn = conn

    def send(
        self,
        link: Link,
        tag: bytes,
        payload: bytes,
        *,
        settled: bool = False,
        state: Any = None,
        resume: bool = False,
        aborted: bool = False,
        message_format: int = 0,
    ) -> Delivery:
        if link.state is not _MAPPED or not link.is_sender:
            raise LocalProtocolError(f"send on {link!r}")
        if link.credit <= 0 and not resume:
            raise LocalProtocolError(f"send on {link!r} without credit")
        if len(tag) > 32:
            raise LocalProtocolError("delivery tags are at most 32 bytes")
        session = link.session
        delivery_id = session.next_delivery_id
        session.next_delivery_id = (delivery_id + 1) & MAX_UINT
        delivery = Delivery(link, delivery_id, tag, payload, False, None, resume, message_format)
        if settled:
            delivery.local_settled = True
        else:
            session.outgoing[delivery_id] = delivery
        if not resume:
            link.credit -= 1
            link.delivery_count = (link.delivery_count + 1) & MAX_UINT
        if session.pending_dispositions:
            self.conn._flush_dispositions(session)
        room = self.conn.remote_max_frame_size - transfer_overhead(tag, state)
        if room <= 0:
            raise LocalProtocolError("max-frame-size too small for a transfer frame")
        total = len(payload)
        if total <= room:  # (one frame: most messages)
            self._write_transfer(session, transfer_head(
                session.channel, link.handle, delivery_id, tag, message_format, settled, False, state, resume,
                aborted, total), payload)
            return delivery
        offset = 0
        first = True
        while True:
            # (a view: a large message is not copied per frame; the head and the payload go
            # straight into the output buffer, with no frame object in between)
            chunk = memoryview(payload)[offset: offset + room] if total > room else payload
            offset += len(chunk)
            more = offset < total
            head = transfer_head(
                session.channel, link.handle, delivery_id if first else None, tag if first else None,
                message_format, settled, more, state if first else None, resume and first, aborted and not more,
                len(chunk),
            )
            self._write_transfer(session, head, chunk)
            first = False
            if not more:
                break
        return delivery

    def disposition(self, delivery: Delivery, state: Any = None, *, settled: bool = False) -> None:
        """Update (and optionally settle) a delivery; consecutive updates go out as ranges."""
        link = delivery.link
        session = link.session
        if delivery.local_settled:
            return
        if settled:
            delivery.local_settled = True
            if link.is_sender:
                session.outgoing.pop(delivery.delivery_id, None)
            else:
                session.incoming.pop(delivery.delivery_id, None)
        if session.state is not _MAPPED or link.state is _CLOSED:
            return
        session.pending_dispositions.append((link.role, delivery.delivery_id, settled, state))
        self.conn._dirty.add(session)

    def _write_transfer(self, session: Session, head: bytes | bytearray, payload: bytes | memoryview) -> None:
        if session.remote_incoming_window > 0 and not session.blocked:
            session.remote_incoming_window -= 1
            session.next_outgoing_id = (session.next_outgoing_id + 1) & MAX_UINT
            out = self.conn._out
            out += head
            out += payload
        else:
            session.blocked.append((head, payload))

    def _on_transfer(self, session: Session, t: Transfer, payload: bytes) -> None:
        if session.incoming_window <= 0:
            raise SessionError(session.channel, Condition.WINDOW_VIOLATION, "transfer beyond the incoming window")
        session.incoming_window -= 1
        session.next_incoming_id = (session.next_incoming_id + 1) & MAX_UINT
        link = session.remote_links.get(t.handle)
        if link is None:
            raise SessionError(session.channel, Condition.UNATTACHED_HANDLE, f"transfer on unattached handle {t.handle}")
        if link.state is not _MAPPED:
            return  # detached by us: discard until the peer's detach
        if link.is_sender:
            raise SessionError(session.channel, Condition.NOT_ALLOWED, f"transfer towards sending link {link.name!r}")
        partial = link.partial
        if partial is None:
            if t.delivery_id is None or t.delivery_tag is None:
                raise SessionError(session.channel, Condition.INVALID_FIELD, "first transfer lacks delivery-id or delivery-tag")
            if t.aborted:
                self.conn._events.append(DeliveryAborted(link=link, tag=t.delivery_tag))
                return
            if link.credit <= 0 and not t.resume:
                if link.revoked <= 0:
                    self.conn._detach_with_error(link, Condition.TRANSFER_LIMIT_EXCEEDED, "transfer without link credit")
                    return
                link.revoked -= 1  # sent before our flow took the credit back: legal
                link.credit += 1
            if not t.resume:
                link.credit -= 1
                link.delivery_count = (link.delivery_count + 1) & MAX_UINT
            delivery = Delivery(link, t.delivery_id, t.delivery_tag, b"", bool(t.settled), t.state, t.resume,
                                t.message_format or 0)
            if not t.more:
                delivery.payload = payload
                self._received_delivery(session, link, delivery)
                return
            link.partial = delivery
            link.partial_size = 0
            link.partial_chunks = []  # (joined into the payload at the last frame)
            self.conn.assembling[link] = None
            partial = delivery
        if t.aborted:
            link.partial = None
            link.partial_chunks = []
            self.conn.assembling.pop(link, None)
            self.conn._events.append(DeliveryAborted(link=link, tag=partial.tag))
            return
        if t.delivery_id is not None and t.delivery_id != partial.delivery_id:
            raise SessionError(session.channel, Condition.INVALID_FIELD, "delivery-id changed within a multi-frame delivery")
        link.partial_chunks.append(payload)
        link.partial_size += len(payload)
        if t.settled:
            partial.settled = True
        if t.state is not None:
            partial.state = t.state
        if link.max_message_size and link.partial_size > link.max_message_size:
            link.partial = None
            link.partial_chunks = []
            self.conn.assembling.pop(link, None)
            self.conn._detach_with_error(link, Condition.MESSAGE_SIZE_EXCEEDED,
                                    f"message exceeds max-message-size {link.max_message_size}")
            return
        if not t.more:
            link.partial = None
            partial.payload = b"".join(link.partial_chunks)
            link.partial_chunks = []
            self.conn.assembling.pop(link, None)
            self._received_delivery(session, link, partial)

    def arriving(self) -> list[Link]:
        """The links with a multi-frame delivery arriving now (forgetting those that ended)."""
        live = [link for link in self.conn.assembling if link.partial is not None and link.state is _MAPPED]
        if len(live) != len(self.conn.assembling):
            self.conn.assembling = dict.fromkeys(live)
        return live

    def _received_delivery(self, session: Session, link: Link, delivery: Delivery) -> None:
        if link.max_message_size and len(delivery.payload) > link.max_message_size:
            self.conn._detach_with_error(link, Condition.MESSAGE_SIZE_EXCEEDED,
                                    f"message exceeds max-message-size {link.max_message_size}")
            return
        if not delivery.settled:
            session.incoming[delivery.delivery_id] = delivery
        events = self.conn._events
        if events:
            last = events[-1]
            if type(last) is DeliveriesReceived and last.link is link:
                last.deliveries.append(delivery)  # (the same batch: nothing came between)
                return
        events.append(DeliveriesReceived(link=link, deliveries=[delivery]))

    def _on_disposition(self, session: Session, d: Disposition) -> None:
        table = session.outgoing if d.role is _RECEIVER else session.incoming
        first = d.first
        last = d.last if d.last is not None else first
        if last < first:
            raise SessionError(session.channel, Condition.INVALID_FIELD, f"disposition range {first}..{last}")
        events = self.conn._events
        ids: Iterable[int]
        if last - first + 1 <= len(table):
            ids = range(first, last + 1)
        else:
            ids = sorted(i for i in table if first <= i <= last)
        settled = d.settled
        state = d.state
        for i in ids:
            delivery = table.get(i)
            if delivery is None:
                continue  # already settled, or from a link since detached: a no-op by design
            if state is not None:
                delivery.state = state
            if settled:
                delivery.settled = True
                del table[i]
            events.append(DeliveryUpdated(delivery=delivery, state=state, settled=settled))
