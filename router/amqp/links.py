"""Links: attach and detach, handles, link credit and flow.

One layer of ``Connection`` (``connection.py``), an object it holds. It is given the
connection as ``ConnectionState`` (``shared.py``): the state it reads and writes, and the
frames every layer writes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .connection_state import MAX_UINT, Step, error_of, step
from .endpoints import EndpointState, Link, Session
from .errors import Condition, LocalProtocolError, SessionError
from .events import (
    LinkAttached,
    LinkDetached,
    LinkFlow,
)
from .performatives import (
    Attach,
    Detach,
    Flow,
    ReceiverSettleMode,
    Role,
    SenderSettleMode,
    Source,
    Target,
)

if TYPE_CHECKING:
    from .shared import ConnectionState


class Links:
    def __init__(self, conn: ConnectionState) -> None:
        self.conn = conn

    def attach(
        self,
        session: Session,
        name: str,
        role: Role,
        *,
        link: Link | None = None,
        source: Source | None = None,
        target: Target | None = None,
        snd_settle_mode: SenderSettleMode = SenderSettleMode.MIXED,
        rcv_settle_mode: ReceiverSettleMode = ReceiverSettleMode.FIRST,
        unsettled: dict[Any, Any] | None = None,
        incomplete_unsettled: bool = False,
        max_message_size: int | None = None,
        properties: dict[Any, Any] | None = None,
        offered_capabilities: tuple[str, ...] | None = None,
        desired_capabilities: tuple[str, ...] | None = None,
    ) -> Link:
        """Attach a new link, or (``link`` given) answer the peer's attach of it."""
        if link is not None and (link.state in (EndpointState.CLOSED, EndpointState.CLOSE_SENT)
                                 or session.state is not EndpointState.MAPPED):
            return link  # the peer detached (or ended) in the same batch: nothing left to answer
        if session.state not in (EndpointState.MAPPED, EndpointState.SENT):
            raise LocalProtocolError(f"attach on {session!r}")
        if link is None:
            link = Link(session, name, self._free_handle(session), role)
            session.links[link.handle] = link
        step(link, Step.SEND_OPEN)  # a new link, or the answer to the peer's attach
        link.source, link.target = source, target
        link.snd_settle_mode, link.rcv_settle_mode = snd_settle_mode, rcv_settle_mode
        link.max_message_size = max_message_size or 0
        attach = Attach(
            name=link.name, handle=link.handle, role=link.role, snd_settle_mode=snd_settle_mode,
            rcv_settle_mode=rcv_settle_mode, source=source, target=target, unsettled=unsettled,
            incomplete_unsettled=incomplete_unsettled or None,  # type: ignore[arg-type]
            initial_delivery_count=link.delivery_count if link.is_sender else None,
            max_message_size=max_message_size, properties=properties,
            offered_capabilities=offered_capabilities, desired_capabilities=desired_capabilities,
        )
        self.conn._write(session.channel, attach)
        return link

    def flow(self, link: Link, credit: int, *, drain: bool = False, echo: bool = False) -> None:
        """Receiver: grant ``credit`` (the new absolute credit, not an increment)."""
        if link.is_sender:
            raise LocalProtocolError("flow(credit) is for receiving links; senders use drained()/available()")
        if credit < link.credit:
            link.revoked += link.credit - credit
        link.credit = credit
        link.drain = drain
        self.conn._send_flow(link.session, link, echo=echo)

    def announce(self, link: Link, properties: dict[Any, Any]) -> None:
        """Sender: a flow frame carrying ``properties`` (news about the link, credit unchanged)."""
        self.conn._send_flow(link.session, link, properties=properties)

    def drained(self, link: Link) -> None:
        """Sender: nothing left to send while the receiver drains; consume the rest of the credit."""
        link.delivery_count = (link.delivery_count + link.credit) & MAX_UINT
        link.credit = 0
        self.conn._send_flow(link.session, link)

    def set_available(self, link: Link, available: int) -> None:
        link.available = available
        self.conn._send_flow(link.session, link)

    def _free_handle(self, session: Session) -> int:
        h = 0
        while h in session.links:
            h += 1
        if h > session.handle_max:
            raise LocalProtocolError("no free handle")
        return h

    def _on_attach(self, session: Session, attach: Attach) -> None:
        if attach.handle in session.remote_links:
            raise SessionError(session.channel, Condition.HANDLE_IN_USE, f"handle {attach.handle} is attached")
        if attach.handle > session.handle_max:
            raise SessionError(session.channel, Condition.NOT_ALLOWED, f"handle {attach.handle} above handle-max")
        ours = Role.RECEIVER if attach.role is Role.SENDER else Role.SENDER
        link = next((lk for lk in session.links.values()
                     if lk.name == attach.name and lk.role is ours and lk.state is EndpointState.SENT), None)
        reply_needed = link is None
        if link is None:
            link = Link(session, attach.name, self._free_handle(session), ours)
            session.links[link.handle] = link
            link.source, link.target = attach.source, attach.target
            link.snd_settle_mode, link.rcv_settle_mode = attach.snd_settle_mode, attach.rcv_settle_mode
        step(link, Step.RECV_OPEN)
        link.remote_handle = attach.handle
        link.remote_attach = attach
        link.remote_max_message_size = attach.max_message_size or 0
        if attach.role is Role.SENDER:
            link.delivery_count = attach.initial_delivery_count or 0
        session.remote_links[attach.handle] = link
        self.conn._events.append(LinkAttached(link=link, attach=attach, reply_needed=reply_needed))

    def _on_detach(self, session: Session, detach: Detach) -> None:
        link = session.remote_links.get(detach.handle)
        if link is None:
            raise SessionError(session.channel, Condition.UNATTACHED_HANDLE, f"detach of unattached handle {detach.handle}")
        answered = link.state is EndpointState.CLOSE_SENT
        if not answered:
            self.conn._flush_dispositions(session)
            self.conn._write(session.channel, Detach(handle=link.handle, closed=detach.closed or None))  # type: ignore[arg-type]
        step(link, Step.RECV_CLOSE)
        self.conn._forget_link(link)
        if not answered or detach.error is not None:
            self.conn._events.append(LinkDetached(link=link, closed=detach.closed, error=detach.error))

    def drop_arriving(self, link: Link, condition: Condition, description: str) -> None:
        """Refuse the delivery arriving on ``link``: its bytes are let go and the link detached
        with the error (the caller drops its side of the link)."""
        link.partial = None
        link.partial_chunks = []
        link.partial_size = 0
        self.conn.assembling.pop(link, None)
        err = error_of(condition, description)
        link.detach_error = err
        self.conn.detach(link, closed=True, error=err)

    def _on_flow(self, session: Session, flow: Flow) -> None:
        nid = flow.next_incoming_id
        if nid is None:
            nid = 0
        session.remote_incoming_window = (nid + flow.incoming_window - session.next_outgoing_id) & MAX_UINT
        if session.remote_incoming_window > 0x7FFFFFFF:
            session.remote_incoming_window = 0
        session.remote_outgoing_window = flow.outgoing_window
        if session.blocked:
            self.conn._unblock(session)
        if flow.handle is None:
            if flow.echo:
                self.conn._send_flow(session, None)
            return
        link = session.remote_links.get(flow.handle)
        if link is None:
            raise SessionError(session.channel, Condition.UNATTACHED_HANDLE, f"flow for unattached handle {flow.handle}")
        # A receiver may grant credit right behind its attach, before we have answered it.
        if link.state is not EndpointState.MAPPED and link.state is not EndpointState.RECEIVED:
            return
        if link.is_sender:
            dc = flow.delivery_count if flow.delivery_count is not None else link.delivery_count
            link.credit = (dc + (flow.link_credit or 0) - link.delivery_count) & MAX_UINT
            if link.credit > 0x7FFFFFFF:
                link.credit = 0
            link.drain = flow.drain
        else:
            if flow.delivery_count is not None:
                advanced = (flow.delivery_count - link.delivery_count) & MAX_UINT
                if 0 < advanced <= 0x7FFFFFFF:  # the sender drained: its unused credit is gone
                    link.delivery_count = flow.delivery_count
                    link.credit = max(link.credit - advanced, 0)
            link.available = flow.available or 0
        if flow.echo:
            self.conn._send_flow(session, link)
        self.conn._events.append(LinkFlow(link=link, drain=flow.drain, properties=flow.properties))
