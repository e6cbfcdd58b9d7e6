"""The sans-IO AMQP 1.0 connection: bytes in, events out, bytes to send.

The connection is one class holding four layers, one object and one module each:
``negotiation`` (headers, SASL, open/close, failure), ``sessions``, ``links`` and
``deliveries``. Its state, and the frames every layer writes (a performative, a flow,
pending dispositions, a detach), are its one base, ``ConnectionState`` (``shared.py``):
what each layer is given, so that no layer imports the connection or another layer.
What the application calls is this class's.

Rules of the engine (everything that changes protocol state lives in these modules):

* ``receive_data(data)`` parses every complete frame in ``data`` and returns the events
  they cause. A peer's protocol violation never raises: the engine queues the right
  close/end/detach (or, before the header exchange, our header) and reports it as an
  event (``ConnectionFailed``, ``SessionEnded``, ``LinkDetached``).
* The application acts through methods (``begin``, ``attach``, ``flow``, ``send``,
  ``disposition``, ...). Misuse raises ``LocalProtocolError``.
* ``data_to_send()`` returns what to write. ``tick(now)`` drives idle timeouts; the
  engine never reads a clock.
* Remote open/begin/end/detach/close are answered automatically; a remote attach is
  not: the application decides (the router may hold a subscriber's attach back).
"""

from __future__ import annotations

from typing import Any

from .connection_state import OPEN_STATES, Mode, State, admits
from .deliveries import Deliveries
from .endpoints import Delivery, EndpointState, Link, Session
from .errors import Condition, FramingError, ProtocolError, SessionError
from .frames import EMPTY_FRAME, FrameType
from .links import Links
from .negotiation import Negotiation
from .performatives import (
    Attach,
    Begin,
    Close,
    Detach,
    Disposition,
    End,
    Error,
    Flow,
    Open,
    ReceiverSettleMode,
    Role,
    SenderSettleMode,
    Source,
    Target,
    Transfer,
)
from .sessions import Sessions
from .shared import ConnectionState

__all__ = ["Connection", "Mode", "State"]

# Enum members as module constants: on Python 3.11 every ``State.X`` is a lookup through
# EnumType.__getattr__'s slot (~70 ns); the read path makes ~20 of them per read.
_START, _AMQP_HEADER, _SASL, _OPEN, _CLOSE_SENT, _CLOSED = (
    State.START, State.AMQP_HEADER, State.SASL, State.OPEN, State.CLOSE_SENT, State.CLOSED)
_EP_CLOSE_SENT = EndpointState.CLOSE_SENT
_FT_SASL = FrameType.SASL
_CLIENT = Mode.CLIENT


class Connection(ConnectionState):
    # the layers, made by ``_compose`` (called by ``ConnectionState.__init__``, whose
    # arguments are this class's)
    negotiation: Negotiation
    session_layer: Sessions
    link_layer: Links
    delivery_layer: Deliveries

    def _compose(self) -> None:
        self.negotiation = Negotiation(self)
        self.session_layer = Sessions(self)
        self.link_layer = Links(self)
        self.delivery_layer = Deliveries(self)

    @property
    def closed(self) -> bool:
        return self.state is _CLOSED

    # ------------------------------------------------------- negotiation

    def open(self) -> None:
        """Client: start the connection (header, SASL if configured, then open)."""
        self.negotiation.open()

    def close(self, error: Error | None = None) -> None:
        self.negotiation.close(error)

    # ---------------------------------------------------------- sessions

    def begin(self) -> Session:
        return self.session_layer.begin()

    def end(self, session: Session, error: Error | None = None) -> None:
        self.session_layer.end(session, error)

    # ------------------------------------------------------------- links

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
        return self.link_layer.attach(
            session, name, role, link=link, source=source, target=target, snd_settle_mode=snd_settle_mode,
            rcv_settle_mode=rcv_settle_mode, unsettled=unsettled, incomplete_unsettled=incomplete_unsettled,
            max_message_size=max_message_size, properties=properties, offered_capabilities=offered_capabilities,
            desired_capabilities=desired_capabilities)


    def flow(self, link: Link, credit: int, *, drain: bool = False, echo: bool = False) -> None:
        """Receiver: grant ``credit`` (the new absolute credit, not an increment)."""
        self.link_layer.flow(link, credit, drain=drain, echo=echo)

    def announce(self, link: Link, properties: dict[Any, Any]) -> None:
        """Sender: a flow frame carrying ``properties`` (news about the link, credit unchanged)."""
        self.link_layer.announce(link, properties)

    def drained(self, link: Link) -> None:
        """Sender: nothing left to send while the receiver drains; consume the rest of the credit."""
        self.link_layer.drained(link)

    def set_available(self, link: Link, available: int) -> None:
        self.link_layer.set_available(link, available)

    def drop_arriving(self, link: Link, condition: Condition, description: str) -> None:
        """Refuse the delivery arriving on ``link``: its bytes are let go and the link detached
        with the error (the caller drops its side of the link)."""
        self.link_layer.drop_arriving(link, condition, description)

    # -------------------------------------------------------- deliveries

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
        return self.delivery_layer.send(link, tag, payload, settled=settled, state=state, resume=resume,
                                        aborted=aborted, message_format=message_format)

    def disposition(self, delivery: Delivery, state: Any = None, *, settled: bool = False) -> None:
        """Update (and optionally settle) a delivery; consecutive updates go out as ranges."""
        self.delivery_layer.disposition(delivery, state, settled=settled)

    def arriving(self) -> list[Link]:
        """The links with a multi-frame delivery arriving now (forgetting those that ended)."""
        return self.delivery_layer.arriving()

    # ------------------------------------------------------------ bytes

    def receive_data(self, data: bytes | bytearray) -> list[Any]:
        events: list[Any] = []
        self._events = events
        if self.state is _CLOSED or not data:
            return events
        self._reader.feed(data)
        try:
            self._process()
        except ProtocolError as e:
            self.negotiation._fail(e)
        except Exception as bug:  # a bug of ours must still close only this connection
            # The peer learns only that it was ours; the detail is for our own log line.
            # (its own name: compiled, one name is one type across the except clauses)
            self.negotiation._fail(ProtocolError(Condition.INTERNAL_ERROR, "internal error"),
                                   detail=f"{type(bug).__name__}: {bug}")
        return events

    def data_to_send(self) -> bytes:
        if self._dirty:
            flush = self._flush_dispositions
            for session in self._dirty:
                flush(session)
            self._dirty.clear()
        if not self._out:
            return b""
        out = bytes(self._out)
        self._out.clear()
        if out != EMPTY_FRAME:  # a lone heartbeat was already timed by tick()
            self._sent = True
        return out

    def tick(self, now: float) -> float | None:
        """Apply idle timeouts at time ``now``; return when to call again (None: never)."""
        if self._last_received is None or self._received:
            self._last_received = now
            self._received = False
        if self._last_sent is None or self._sent:
            self._last_sent = now
            self._sent = False
        if self.state not in OPEN_STATES:
            return None
        deadlines = []
        if self.idle_timeout:
            if now - self._last_received > self.idle_timeout:
                self.negotiation._fail(ProtocolError(Condition.RESOURCE_LIMIT_EXCEEDED,
                                                     f"no frame for {self.idle_timeout:g}s (idle timeout)"))
                return None
            deadlines.append(self._last_received + self.idle_timeout)
        if self.remote_idle_timeout:
            half = self.remote_idle_timeout / 2
            if now - self._last_sent >= half:
                self._out += EMPTY_FRAME
                self._last_sent = now
            deadlines.append(self._last_sent + half)
        return min(deadlines) if deadlines else None

    def _process(self) -> None:
        reader = self._reader
        while self.state is not _CLOSED:
            if self.state is _START or self.state is _AMQP_HEADER or (
                self.state is _SASL and self.mode is _CLIENT and not self._sasl_header_seen
            ):
                header = reader.take(8)
                if header is None:
                    return
                self._received = True
                self.negotiation._on_header(header)
                continue
            moved = False
            frames = reader.frames()
            try:
                for frame in frames:
                    # The idle timeout counts frames, not bytes: bytes that never make a
                    # frame (a stream broken mid-frame, the peer stuck in one) keep nothing
                    # alive (harness soak seeds 12020 and 12042: a link whose bytes had been
                    # swallowed stayed "up" for ever, and an attach waited on it).
                    moved = self._received = True
                    before = self.state
                    if frame.type is _FT_SASL:
                        if self.state is not _SASL:
                            raise FramingError("SASL frame outside the SASL layer", Condition.NOT_ALLOWED)
                        self.negotiation._on_sasl(frame.body)
                    else:
                        if self.state is _SASL:
                            raise FramingError("AMQP frame inside the SASL layer", Condition.NOT_ALLOWED)
                        self._on_frame(frame.channel, frame.body, frame.payload)
                    if self.state is not before and self.state is not _OPEN:
                        break  # the next bytes may be a protocol header, not a frame
            finally:
                frames.close()
            self.session_layer._after_batch()
            if not moved or self.state in (_OPEN, _CLOSE_SENT):
                if reader.pending() == 0 or not moved:
                    return

    def _on_frame(self, channel: int, body: Any, payload: bytes) -> None:
        if body is None:
            return  # heartbeat
        kind = type(body)
        if kind is Transfer or kind is Disposition or kind is Flow:
            session = self.remote_sessions.get(channel)
            if session is None:
                raise ProtocolError(Condition.NOT_ALLOWED, f"{kind.__name__} on unmapped channel {channel}")
            if session.state is _EP_CLOSE_SENT:
                return  # we ended this session; discard until the peer's end
            try:
                if kind is Transfer:
                    self.delivery_layer._on_transfer(session, body, payload)
                elif kind is Disposition:
                    self.delivery_layer._on_disposition(session, body)
                else:
                    self.link_layer._on_flow(session, body)
            except SessionError as e:
                self.session_layer._end_with_error(session, e)
            return
        why = admits(self.state, self.remote_open is not None, kind)
        if why is not None:
            raise ProtocolError(Condition.ILLEGAL_STATE, why)
        if kind is Open:
            self.negotiation._on_open(body)
        elif kind is Close:
            self.negotiation._on_close(body)
        elif kind is Begin:
            self.session_layer._on_begin(channel, body)
        else:
            session = self.remote_sessions.get(channel)
            if session is None:
                raise ProtocolError(Condition.NOT_ALLOWED, f"{kind.__name__} on unmapped channel {channel}")
            if kind is End:
                self.session_layer._on_end(session, body)
                return
            if session.state is _EP_CLOSE_SENT:
                return
            try:
                if kind is Attach:
                    self.link_layer._on_attach(session, body)
                elif kind is Detach:
                    self.link_layer._on_detach(session, body)
            except SessionError as e:
                self.session_layer._end_with_error(session, e)
