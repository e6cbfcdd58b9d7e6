"""What the layers of an AMQP connection share (``connection.py``): the connection's state,
and the frames every layer writes with it: a performative, a session's or a link's flow,
the dispositions a session has pending, a link's detach.

``Connection`` is this class and the four layers it holds as objects (``negotiation``,
``sessions``, ``links``, ``deliveries``); each layer is given the connection as this
class, so a layer reads the state and writes frames without importing the connection
(or another layer)."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from .connection_state import MAX_UINT, Mode, State, Step, error_of, step
from .endpoints import EndpointState, Link, Session
from .errors import AMQPError, Condition, LocalProtocolError
from .events import LinkDetached
from .frames import MIN_MAX_FRAME_SIZE, FrameReader, build_frame
from .performatives import Detach, Error, Flow, Open, Role
from .sasl import SaslClientConfig, SaslServerConfig
from .transfer import encode_disposition

# (module constants: an enum member lookup is slow on Python 3.11, see records/table.py)
_OPEN, _AMQP_HEADER = State.OPEN, State.AMQP_HEADER
_MAPPED = EndpointState.MAPPED
_RECEIVER = Role.RECEIVER
_ROLE_AND_ID = itemgetter(0, 1)


class ConnectionState:
    def __init__(
        self,
        mode: Mode,
        container_id: str,
        *,
        hostname: str | None = None,
        max_frame_size: int = 65536,
        channel_max: int = 255,
        idle_timeout: float | None = None,
        incoming_window: int = 2048,
        sasl_server: SaslServerConfig | None = None,
        sasl_client: SaslClientConfig | None = None,
        properties: dict[Any, Any] | None = None,
        offered_capabilities: tuple[str, ...] | None = None,
    ) -> None:
        self.mode = mode
        self.container_id = container_id
        self.hostname = hostname
        self.max_frame_size = max(max_frame_size, MIN_MAX_FRAME_SIZE)
        self.channel_max = channel_max
        self.idle_timeout = idle_timeout
        self.incoming_window = incoming_window
        self.sasl_server = sasl_server
        self.sasl_client = sasl_client
        self.properties = properties
        self.offered_capabilities = offered_capabilities
        self.state = State.START
        self.user: str | None = None
        # SASL in progress: the server's next step (``SaslStep.next``) or the client's exchange;
        # the mechanism the client chose (empty until its init)
        self._sasl: Any = None
        self._sasl_mechanism = ""
        # links with a multi-frame delivery arriving (the router bounds their bytes: ``arriving``)
        self.assembling: dict[Link, None] = {}
        self.remote_open: Open | None = None
        self.remote_max_frame_size = MIN_MAX_FRAME_SIZE
        self.remote_idle_timeout: float | None = None
        self.open_sent = False
        self.failed: AMQPError | None = None
        self.sessions: dict[int, Session] = {}
        self.remote_sessions: dict[int, Session] = {}
        self._reader = FrameReader(self.max_frame_size)
        self._out = bytearray()
        self._events: list[Any] = []
        self._received = False
        self._sent = False
        self._last_received: float | None = None
        self._last_sent: float | None = None
        self._dirty: set[Session] = set()  # sessions with dispositions to write
        self._sasl_header_seen = False  # (a client: the server's SASL header came)
        self._compose()

    def _compose(self) -> None:
        """The layers that act on this state (``Connection`` makes them)."""

    def _require_open(self) -> None:
        if self.state not in (_OPEN, _AMQP_HEADER) or not self.open_sent:
            raise LocalProtocolError(f"connection is {self.state.value}")

    def _write(self, channel: int, performative: Any) -> None:
        if channel in self.sessions and self.sessions[channel].pending_dispositions:
            self._flush_dispositions(self.sessions[channel])
        self._out += build_frame(channel, performative)

    def _send_flow(self, session: Session, link: Link | None, echo: bool = False,
                   properties: dict[Any, Any] | None = None) -> None:
        if session.state is not EndpointState.MAPPED:
            return
        flow = Flow(
            next_incoming_id=session.next_incoming_id, incoming_window=session.incoming_window,
            next_outgoing_id=session.next_outgoing_id, outgoing_window=session.outgoing_window, echo=echo,
        )
        if link is not None:
            if link.state is not EndpointState.MAPPED:
                return
            flow.handle = link.handle
            flow.delivery_count = link.delivery_count
            flow.link_credit = max(link.credit, 0)
            flow.available = link.available if link.is_sender else None
            flow.drain = link.drain
            flow.properties = properties
        self._write(session.channel, flow)

    def _flush_dispositions(self, session: Session) -> None:
        pending = session.pending_dispositions
        if not pending:
            return
        session.pending_dispositions = []
        if session.state is not _MAPPED:
            return
        pending.sort(key=_ROLE_AND_ID)  # (stable: two updates of one delivery keep their order)
        out = self._out
        channel = session.channel
        role, first, settled, state = pending[0]
        last = first
        for r, i, s, st in pending[1:]:
            if r is role and i == last + 1 and s == settled and (st is state or st == state):
                last = i
                continue
            out += encode_disposition(channel, role is _RECEIVER, first, last, settled, state)
            role, first, last, settled, state = r, i, i, s, st
        out += encode_disposition(channel, role is _RECEIVER, first, last, settled, state)

    def _unblock(self, session: Session) -> None:
        out = self._out
        while session.blocked and session.remote_incoming_window > 0:
            session.remote_incoming_window -= 1
            session.next_outgoing_id = (session.next_outgoing_id + 1) & MAX_UINT
            head, payload = session.blocked.popleft()
            out += head
            out += payload

    def detach(self, link: Link, *, closed: bool = True, error: Error | None = None) -> None:
        if link.state in (EndpointState.CLOSE_SENT, EndpointState.CLOSED):
            return
        session = link.session
        self._flush_dispositions(session)
        if link.state is EndpointState.UNMAPPED:
            return
        self._write(session.channel, Detach(handle=link.handle, closed=closed or None, error=error))  # type: ignore[arg-type]
        if _closing(link):  # (writing the detach may have failed the connection)
            return
        step(link, Step.SEND_CLOSE)
        if link.remote_handle is None:  # never attached by the peer: nothing more will come
            self._forget_link(link)

    def _forget_link(self, link: Link) -> None:
        session = link.session
        session.links.pop(link.handle, None)
        if link.remote_handle is not None:
            session.remote_links.pop(link.remote_handle, None)
        # (the session's table is the one index of unsettled deliveries: a per-link one by
        # tag cost a dict entry per delivery on both sides for this rare walk)
        table = session.outgoing if link.is_sender else session.incoming
        gone = [i for i, d in table.items() if d.link is link]
        for i in gone:
            del table[i]

    def _detach_with_error(self, link: Link, condition: Condition, description: str) -> None:
        err = error_of(condition, description)
        link.detach_error = err
        self.detach(link, closed=True, error=err)
        self._events.append(LinkDetached(link=link, closed=True, error=err))


def _closing(link: Link) -> bool:
    """Whether ``link``'s detach has gone out (or the link is gone): read afresh, as a call
    in between may have changed it."""
    return link.state is EndpointState.CLOSE_SENT or link.state is EndpointState.CLOSED
