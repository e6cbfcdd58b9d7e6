"""Sessions: begin and end, channels, and the session flow (incoming window).

One layer of ``Connection`` (``connection.py``), an object it holds. It is given the
connection as ``ConnectionState`` (``shared.py``): the state it reads and writes, and the
frames every layer writes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .connection_state import Step, error_of, step
from .endpoints import EndpointState, Session
from .errors import Condition, LocalProtocolError, ProtocolError, SessionError
from .events import (
    LinkDetached,
    SessionBegun,
    SessionEnded,
)
from .performatives import (
    Begin,
    End,
    Error,
)

if TYPE_CHECKING:
    from .shared import ConnectionState

_MAPPED = EndpointState.MAPPED  # (a module constant: see connection.py)


class Sessions:
    def __init__(self, conn: ConnectionState) -> None:
        self.conn = conn

    def begin(self) -> Session:
        self.conn._require_open()
        channel = self._free_channel()
        session = Session(channel, self.conn.incoming_window)
        self.conn.sessions[channel] = session
        self.conn._write(channel, self._begin_for(session))
        step(session, Step.SEND_OPEN)
        return session

    def end(self, session: Session, error: Error | None = None) -> None:
        if session.state in (EndpointState.CLOSE_SENT, EndpointState.CLOSED):
            return
        self.conn._flush_dispositions(session)
        self.conn._write(session.channel, End(error=error))
        step(session, Step.SEND_CLOSE)

    def _free_channel(self) -> int:
        for ch in range(self.conn.channel_max + 1):
            if ch not in self.conn.sessions:
                return ch
        raise LocalProtocolError("no free channel")

    def _begin_for(self, session: Session) -> Begin:
        return Begin(
            remote_channel=session.remote_channel, next_outgoing_id=session.next_outgoing_id,
            incoming_window=session.incoming_window, outgoing_window=session.outgoing_window,
        )

    def _on_begin(self, channel: int, begin: Begin) -> None:
        if channel > self.conn.channel_max:
            raise ProtocolError(Condition.NOT_ALLOWED, f"channel {channel} above channel-max {self.conn.channel_max}")
        if channel in self.conn.remote_sessions:
            raise ProtocolError(Condition.NOT_ALLOWED, f"begin on channel {channel} already in use")
        if begin.remote_channel is not None:
            session = self.conn.sessions.get(begin.remote_channel)
            if session is None or session.state is not EndpointState.SENT:
                raise ProtocolError(Condition.NOT_ALLOWED, f"begin answers unknown channel {begin.remote_channel}")
            reply = False
        else:
            session = Session(self._free_channel(), self.conn.incoming_window)
            self.conn.sessions[session.channel] = session
            reply = True
        session.remote_channel = channel
        session.next_incoming_id = begin.next_outgoing_id
        session.remote_incoming_window = begin.incoming_window
        session.remote_outgoing_window = begin.outgoing_window
        session.handle_max = min(session.handle_max, begin.handle_max)
        self.conn.remote_sessions[channel] = session
        step(session, Step.RECV_OPEN)
        if reply:
            self.conn._write(session.channel, self._begin_for(session))
            step(session, Step.SEND_OPEN)
        self.conn._events.append(SessionBegun(session=session))

    def _on_end(self, session: Session, end: End) -> None:
        answered = session.state is EndpointState.CLOSE_SENT
        if not answered:
            self.conn._flush_dispositions(session)
            self.conn._write(session.channel, End())
        step(session, Step.RECV_CLOSE)
        self.conn.sessions.pop(session.channel, None)
        if session.remote_channel is not None:
            self.conn.remote_sessions.pop(session.remote_channel, None)
        for link in list(session.links.values()):
            if link.state is not EndpointState.CLOSED:
                step(link, Step.ENDED)
                if not answered:
                    self.conn._events.append(LinkDetached(link=link, closed=False, error=end.error))
        if not answered:
            self.conn._events.append(SessionEnded(session=session, error=end.error))

    def _end_with_error(self, session: Session, e: SessionError) -> None:
        err = error_of(e.condition, e.description)
        self.end(session, err)
        self.conn._events.append(SessionEnded(session=session, error=err))

    def _after_batch(self) -> None:
        # Re-open each session's incoming window in one flow frame per batch, not per transfer.
        for session in self.conn.sessions.values():
            if session.state is _MAPPED and session.incoming_window < session.initial_incoming_window // 2:
                session.incoming_window = session.initial_incoming_window
                self.conn._send_flow(session, None)
