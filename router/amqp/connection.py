"""The sans-IO AMQP 1.0 connection: bytes in, events out, bytes to send.

Rules of this module (everything that changes protocol state lives here):

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

from enum import Enum
from typing import Any

from .endpoints import Delivery, EndpointState, Link, Session
from .errors import AMQPError, Condition, FramingError, LocalProtocolError, ProtocolError, SessionError
from .events import (
    ConnectionClosed,
    ConnectionFailed,
    ConnectionOpened,
    DeliveryAborted,
    DeliveryReceived,
    DeliveryUpdated,
    LinkAttached,
    LinkDetached,
    LinkFlow,
    SaslDone,
    SessionBegun,
    SessionEnded,
)
from .frames import AMQP_HEADER, EMPTY_FRAME, MIN_MAX_FRAME_SIZE, SASL_HEADER, FrameReader, FrameType, build_frame
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
    SaslCode,
    SaslInit,
    SaslMechanisms,
    SaslOutcome,
    SenderSettleMode,
    Source,
    Target,
    Transfer,
)
from .sasl import (
    SaslClientConfig,
    SaslServerConfig,
    client_init,
    requested_identity,
    server_mechanisms,
    server_outcome,
)
from .transfer import encode_disposition, encode_transfer, transfer_overhead


class Mode(Enum):
    CLIENT = "client"
    SERVER = "server"


class State(Enum):
    START = "start"  # nothing exchanged
    SASL = "sasl"  # SASL frames flowing
    AMQP_HEADER = "amqp-header"  # waiting for the peer's AMQP header (after SASL, or as client)
    OPEN = "open"  # AMQP frames flowing
    CLOSE_SENT = "close-sent"
    CLOSED = "closed"


_OPEN_STATES = (State.OPEN, State.CLOSE_SENT)
MAX_UINT = 0xFFFFFFFF


def _error(condition: Condition | str, description: str) -> Error:
    cond = condition.value if isinstance(condition, Condition) else condition
    return Error(condition=cond, description=description or None)


class Connection:
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
        self.state = State.START
        self.user: str | None = None
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
        self._dirty: set[Session] = set()

    # ------------------------------------------------------------ I/O side

    @property
    def closed(self) -> bool:
        return self.state is State.CLOSED

    def receive_data(self, data: bytes) -> list[Any]:
        events: list[Any] = []
        self._events = events
        if self.state is State.CLOSED or not data:
            return events
        self._received = True
        self._reader.feed(data)
        try:
            self._process()
        except ProtocolError as e:
            self._fail(e)
        except Exception as e:  # a bug of ours must still close only this connection
            # The peer learns only that it was ours; the detail is for our own log line.
            self._fail(ProtocolError(Condition.INTERNAL_ERROR, "internal error"), detail=f"{type(e).__name__}: {e}")
        return events

    def data_to_send(self) -> bytes:
        if self._dirty:
            for session in self._dirty:
                self._flush_dispositions(session)
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
        if self.state not in _OPEN_STATES:
            return None
        deadlines = []
        if self.idle_timeout:
            if now - self._last_received > self.idle_timeout:
                self._fail(ProtocolError(Condition.RESOURCE_LIMIT_EXCEEDED, f"no frame for {self.idle_timeout:g}s (idle timeout)"))
                return None
            deadlines.append(self._last_received + self.idle_timeout)
        if self.remote_idle_timeout:
            half = self.remote_idle_timeout / 2
            if now - self._last_sent >= half:
                self._out += EMPTY_FRAME
                self._last_sent = now
            deadlines.append(self._last_sent + half)
        return min(deadlines) if deadlines else None

    # ------------------------------------------------------- connection API

    def open(self) -> None:
        """Client: start the connection (header, SASL if configured, then open)."""
        if self.mode is not Mode.CLIENT or self.state is not State.START:
            raise LocalProtocolError("open() starts a client connection once")
        if self.sasl_client is not None:
            self._out += SASL_HEADER
            self.state = State.SASL
        else:
            self._out += AMQP_HEADER
            self._send_open()
            self.state = State.AMQP_HEADER

    def close(self, error: Error | None = None) -> None:
        if self.state is State.CLOSED or self.state is State.CLOSE_SENT:
            return
        if self.state is not State.OPEN or not self.open_sent:
            if self.state in (State.OPEN, State.AMQP_HEADER) and not self.open_sent:
                self._send_open()
            elif self.state is not State.OPEN and not self.open_sent:
                self.state = State.CLOSED
                return
        self._write(0, Close(error=error))
        self.state = State.CLOSE_SENT

    def begin(self) -> Session:
        self._require_open()
        channel = self._free_channel()
        session = Session(channel, self.incoming_window)
        self.sessions[channel] = session
        self._write(channel, self._begin_for(session))
        session.state = EndpointState.SENT
        return session

    def end(self, session: Session, error: Error | None = None) -> None:
        if session.state in (EndpointState.CLOSE_SENT, EndpointState.CLOSED):
            return
        self._flush_dispositions(session)
        self._write(session.channel, End(error=error))
        session.state = EndpointState.CLOSED if session.state is EndpointState.CLOSE_SENT else EndpointState.CLOSE_SENT

    # ------------------------------------------------------------- link API

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
            link.state = EndpointState.SENT
        elif link.state is EndpointState.RECEIVED:
            link.state = EndpointState.MAPPED
        else:
            raise LocalProtocolError(f"{link!r} does not wait for an attach")
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
        self._write(session.channel, attach)
        return link

    def detach(self, link: Link, *, closed: bool = True, error: Error | None = None) -> None:
        if link.state in (EndpointState.CLOSE_SENT, EndpointState.CLOSED):
            return
        session = link.session
        self._flush_dispositions(session)
        if link.state is EndpointState.UNMAPPED:
            return
        self._write(session.channel, Detach(handle=link.handle, closed=closed or None, error=error))  # type: ignore[arg-type]
        if link.state is EndpointState.CLOSE_SENT or link.state is EndpointState.CLOSED:
            return
        link.state = EndpointState.CLOSE_SENT
        if link.remote_handle is None:  # never attached by the peer: nothing more will come
            self._forget_link(link)

    def flow(self, link: Link, credit: int, *, drain: bool = False, echo: bool = False) -> None:
        """Receiver: grant ``credit`` (the new absolute credit, not an increment)."""
        if link.is_sender:
            raise LocalProtocolError("flow(credit) is for receiving links; senders use drained()/available()")
        if credit < link.credit:
            link.revoked += link.credit - credit
        link.credit = credit
        link.drain = drain
        self._send_flow(link.session, link, echo=echo)

    def drained(self, link: Link) -> None:
        """Sender: nothing left to send while the receiver drains; consume the rest of the credit."""
        link.delivery_count = (link.delivery_count + link.credit) & MAX_UINT
        link.credit = 0
        self._send_flow(link.session, link)

    def set_available(self, link: Link, available: int) -> None:
        link.available = available
        self._send_flow(link.session, link)

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
        if link.state is not EndpointState.MAPPED or not link.is_sender:
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
            link.unsettled[tag] = delivery
        if not resume:
            link.credit -= 1
            link.delivery_count = (link.delivery_count + 1) & MAX_UINT
        self._flush_dispositions(session)
        room = self.remote_max_frame_size - transfer_overhead(tag, state)
        if room <= 0:
            raise LocalProtocolError("max-frame-size too small for a transfer frame")
        total = len(payload)
        offset = 0
        first = True
        while True:
            chunk = payload[offset: offset + room] if total > room else payload
            offset += len(chunk)
            more = offset < total
            frame = encode_transfer(
                session.channel, link.handle, delivery_id if first else None, tag if first else None,
                message_format, settled, more, state if first else None, resume and first, aborted and not more, chunk,
            )
            self._write_transfer(session, frame)
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
        delivery.local_state = state
        if settled:
            delivery.local_settled = True
            link.unsettled.pop(delivery.tag, None)
            if link.is_sender:
                session.outgoing.pop(delivery.delivery_id, None)
            else:
                session.incoming.pop(delivery.delivery_id, None)
        if session.state is not EndpointState.MAPPED or link.state is EndpointState.CLOSED:
            return
        session.pending_dispositions.append((link.role, delivery.delivery_id, settled, state))
        self._dirty.add(session)

    # ----------------------------------------------------------- internals

    def _require_open(self) -> None:
        if self.state not in (State.OPEN, State.AMQP_HEADER) or not self.open_sent:
            raise LocalProtocolError(f"connection is {self.state.value}")

    def _free_channel(self) -> int:
        for ch in range(self.channel_max + 1):
            if ch not in self.sessions:
                return ch
        raise LocalProtocolError("no free channel")

    def _free_handle(self, session: Session) -> int:
        h = 0
        while h in session.links:
            h += 1
        if h > session.handle_max:
            raise LocalProtocolError("no free handle")
        return h

    def _begin_for(self, session: Session) -> Begin:
        return Begin(
            remote_channel=session.remote_channel, next_outgoing_id=session.next_outgoing_id,
            incoming_window=session.incoming_window, outgoing_window=session.outgoing_window,
        )

    def _send_open(self) -> None:
        self._write(0, Open(
            container_id=self.container_id, hostname=self.hostname, max_frame_size=self.max_frame_size,
            channel_max=self.channel_max,
            idle_time_out=int(self.idle_timeout * 1000) if self.idle_timeout else None, properties=self.properties,
        ))
        self.open_sent = True

    def _write(self, channel: int, performative: Any) -> None:
        if channel in self.sessions and self.sessions[channel].pending_dispositions:
            self._flush_dispositions(self.sessions[channel])
        self._out += build_frame(channel, performative)

    def _write_sasl(self, performative: Any) -> None:
        self._out += build_frame(0, performative, ftype=FrameType.SASL)

    def _write_transfer(self, session: Session, frame: bytes | bytearray) -> None:
        if session.remote_incoming_window > 0 and not session.blocked:
            session.remote_incoming_window -= 1
            session.next_outgoing_id = (session.next_outgoing_id + 1) & MAX_UINT
            self._out += frame
        else:
            session.blocked.append(frame)  # type: ignore[arg-type]

    def _unblock(self, session: Session) -> None:
        while session.blocked and session.remote_incoming_window > 0:
            session.remote_incoming_window -= 1
            session.next_outgoing_id = (session.next_outgoing_id + 1) & MAX_UINT
            self._out += session.blocked.popleft()

    def _send_flow(self, session: Session, link: Link | None, echo: bool = False) -> None:
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
        self._write(session.channel, flow)

    def _flush_dispositions(self, session: Session) -> None:
        pending = session.pending_dispositions
        if not pending:
            return
        session.pending_dispositions = []
        if session.state is not EndpointState.MAPPED:
            return
        pending.sort(key=lambda p: (p[0], p[1]))
        out = self._out
        channel = session.channel
        role, first, settled, state = pending[0]
        last = first
        for r, i, s, st in pending[1:]:
            if r is role and i == last + 1 and s == settled and (st is state or st == state):
                last = i
                continue
            out += encode_disposition(channel, role is Role.RECEIVER, first, last, settled, state)
            role, first, last, settled, state = r, i, i, s, st
        out += encode_disposition(channel, role is Role.RECEIVER, first, last, settled, state)

    def _fail(self, error: AMQPError, detail: str | None = None) -> None:
        """Close the connection because of ``error``; report it once (with ``detail`` if given)."""
        if self.failed is not None or self.state is State.CLOSED:
            return
        self.failed = error
        if self.state in (State.OPEN, State.AMQP_HEADER):
            if not self.open_sent:
                self._send_open()
            self._out += build_frame(0, Close(error=_error(error.condition, error.description)))
        self.state = State.CLOSED
        cond = error.condition.value if isinstance(error.condition, Condition) else error.condition
        self._events.append(ConnectionFailed(condition=cond, description=detail or error.description))

    # ---------------------------------------------------------- receiving

    def _process(self) -> None:
        reader = self._reader
        while self.state is not State.CLOSED:
            if self.state is State.START or self.state is State.AMQP_HEADER or (
                self.state is State.SASL and self.mode is Mode.CLIENT and not getattr(self, "_sasl_header_seen", False)
            ):
                header = reader.take(8)
                if header is None:
                    return
                self._on_header(header)
                continue
            moved = False
            frames = reader.frames()
            try:
                for frame in frames:
                    moved = True
                    before = self.state
                    if frame.type is FrameType.SASL:
                        if self.state is not State.SASL:
                            raise FramingError("SASL frame outside the SASL layer", Condition.NOT_ALLOWED)
                        self._on_sasl(frame.body)
                    else:
                        if self.state is State.SASL:
                            raise FramingError("AMQP frame inside the SASL layer", Condition.NOT_ALLOWED)
                        self._on_frame(frame.channel, frame.body, frame.payload)
                    if self.state is not before and self.state is not State.OPEN:
                        break  # the next bytes may be a protocol header, not a frame
            finally:
                frames.close()
            self._after_batch()
            if not moved or self.state in (State.OPEN, State.CLOSE_SENT):
                if reader.pending() == 0 or not moved:
                    return

    def _after_batch(self) -> None:
        # Re-open each session's incoming window in one flow frame per batch, not per transfer.
        for session in self.sessions.values():
            if session.state is EndpointState.MAPPED and session.incoming_window < session.initial_incoming_window // 2:
                session.incoming_window = session.initial_incoming_window
                self._send_flow(session, None)

    def _on_header(self, header: bytes) -> None:
        if self.mode is Mode.SERVER:
            if self.state is State.START and header == SASL_HEADER and self.sasl_server is not None:
                self._out += SASL_HEADER
                self._write_sasl(server_mechanisms(self.sasl_server))
                self.state = State.SASL
                return
            if header == AMQP_HEADER and (self.state is State.AMQP_HEADER or self.sasl_server is None or self.sasl_server.allow_bare):
                self._out += AMQP_HEADER
                self.state = State.OPEN
                return
            ours = SASL_HEADER if self.state is State.START and self.sasl_server is not None else AMQP_HEADER
            self._out += ours
            self.state = State.CLOSED
            self.failed = FramingError(f"unsupported protocol header {header!r}")
            self._events.append(ConnectionFailed(condition=Condition.FRAMING_ERROR.value,
                                                 description=f"unsupported protocol header {header!r}"))
            return
        expected = SASL_HEADER if self.state is State.SASL else AMQP_HEADER
        if header != expected:
            self.state = State.CLOSED
            self.failed = FramingError(f"peer answered with protocol header {header!r}")
            self._events.append(ConnectionFailed(condition=Condition.FRAMING_ERROR.value, description=str(self.failed)))
            return
        if self.state is State.SASL:
            self._sasl_header_seen = True
        else:
            self.state = State.OPEN

    def _on_sasl(self, body: Any) -> None:
        if self.mode is Mode.SERVER:
            if not isinstance(body, SaslInit) or self.sasl_server is None:
                raise FramingError(f"unexpected SASL frame {type(body).__name__}", Condition.NOT_ALLOWED)
            outcome, user = server_outcome(self.sasl_server, body)
            self._write_sasl(outcome)
            self._events.append(SaslDone(ok=user is not None, mechanism=body.mechanism, user=user,
                                         requested=None if user is not None else requested_identity(body)))
            if user is None:
                self.state = State.CLOSED
                self.failed = ProtocolError(Condition.UNAUTHORIZED_ACCESS, f"SASL {body.mechanism} authentication failed")
                return
            self.user = user
            self.state = State.AMQP_HEADER
            return
        assert self.sasl_client is not None
        if isinstance(body, SaslMechanisms):
            init = client_init(self.sasl_client, tuple(body.sasl_server_mechanisms), self.hostname)
            if init is None:
                raise ProtocolError(Condition.NOT_IMPLEMENTED, f"server offers none of {self.sasl_client.mechanism}")
            self._write_sasl(init)
        elif isinstance(body, SaslOutcome):
            ok = body.code == SaslCode.OK
            self._events.append(SaslDone(ok=ok, mechanism=self.sasl_client.mechanism, user=self.sasl_client.username or None))
            if not ok:
                self.state = State.CLOSED
                self.failed = ProtocolError(Condition.UNAUTHORIZED_ACCESS, f"SASL outcome {body.code}")
                self._events.append(ConnectionFailed(condition=Condition.UNAUTHORIZED_ACCESS.value, description="SASL authentication failed"))
                return
            self._out += AMQP_HEADER
            self._send_open()
            self.state = State.AMQP_HEADER
        else:
            raise FramingError(f"unexpected SASL frame {type(body).__name__}", Condition.NOT_ALLOWED)

    def _on_frame(self, channel: int, body: Any, payload: bytes) -> None:
        if body is None:
            return  # heartbeat
        kind = type(body)
        if kind is Transfer or kind is Disposition or kind is Flow:
            session = self.remote_sessions.get(channel)
            if session is None:
                raise ProtocolError(Condition.NOT_ALLOWED, f"{kind.__name__} on unmapped channel {channel}")
            if session.state is EndpointState.CLOSE_SENT:
                return  # we ended this session; discard until the peer's end
            try:
                if kind is Transfer:
                    self._on_transfer(session, body, payload)
                elif kind is Disposition:
                    self._on_disposition(session, body)
                else:
                    self._on_flow(session, body)
            except SessionError as e:
                self._end_with_error(session, e)
            return
        if self.remote_open is None and kind is not Open:
            raise ProtocolError(Condition.ILLEGAL_STATE, f"{kind.__name__} before open")
        if kind is Open:
            self._on_open(body)
        elif kind is Close:
            self._on_close(body)
        elif kind is Begin:
            self._on_begin(channel, body)
        else:
            session = self.remote_sessions.get(channel)
            if session is None:
                raise ProtocolError(Condition.NOT_ALLOWED, f"{kind.__name__} on unmapped channel {channel}")
            if kind is End:
                self._on_end(session, body)
                return
            if session.state is EndpointState.CLOSE_SENT:
                return
            try:
                if kind is Attach:
                    self._on_attach(session, body)
                elif kind is Detach:
                    self._on_detach(session, body)
            except SessionError as e:
                self._end_with_error(session, e)

    def _end_with_error(self, session: Session, e: SessionError) -> None:
        err = _error(e.condition, e.description)
        self.end(session, err)
        self._events.append(SessionEnded(session=session, error=err))

    def _on_open(self, open_: Open) -> None:
        if self.remote_open is not None:
            raise ProtocolError(Condition.ILLEGAL_STATE, "second open")
        self.remote_open = open_
        self.remote_max_frame_size = max(min(open_.max_frame_size, 0xFFFFFFFF), MIN_MAX_FRAME_SIZE)
        self.remote_idle_timeout = open_.idle_time_out / 1000 if open_.idle_time_out else None
        self.channel_max = min(self.channel_max, open_.channel_max)
        if not self.open_sent:
            self._send_open()
        self._events.append(ConnectionOpened(open=open_))

    def _on_close(self, close: Close) -> None:
        if self.state is not State.CLOSE_SENT:
            self._write(0, Close())
        self.state = State.CLOSED
        self._events.append(ConnectionClosed(error=close.error))

    def _on_begin(self, channel: int, begin: Begin) -> None:
        if channel > self.channel_max:
            raise ProtocolError(Condition.NOT_ALLOWED, f"channel {channel} above channel-max {self.channel_max}")
        if channel in self.remote_sessions:
            raise ProtocolError(Condition.NOT_ALLOWED, f"begin on channel {channel} already in use")
        if begin.remote_channel is not None:
            session = self.sessions.get(begin.remote_channel)
            if session is None or session.state is not EndpointState.SENT:
                raise ProtocolError(Condition.NOT_ALLOWED, f"begin answers unknown channel {begin.remote_channel}")
            reply = False
        else:
            session = Session(self._free_channel(), self.incoming_window)
            self.sessions[session.channel] = session
            reply = True
        session.remote_channel = channel
        session.next_incoming_id = begin.next_outgoing_id
        session.remote_incoming_window = begin.incoming_window
        session.remote_outgoing_window = begin.outgoing_window
        session.handle_max = min(session.handle_max, begin.handle_max)
        self.remote_sessions[channel] = session
        if reply:
            self._write(session.channel, self._begin_for(session))
        session.state = EndpointState.MAPPED
        self._events.append(SessionBegun(session=session))

    def _on_end(self, session: Session, end: End) -> None:
        answered = session.state is EndpointState.CLOSE_SENT
        if not answered:
            self._flush_dispositions(session)
            self._write(session.channel, End())
        session.state = EndpointState.CLOSED
        self.sessions.pop(session.channel, None)
        if session.remote_channel is not None:
            self.remote_sessions.pop(session.remote_channel, None)
        for link in list(session.links.values()):
            if link.state is not EndpointState.CLOSED:
                link.state = EndpointState.CLOSED
                if not answered:
                    self._events.append(LinkDetached(link=link, closed=False, error=end.error))
        if not answered:
            self._events.append(SessionEnded(session=session, error=end.error))

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
            link.state = EndpointState.RECEIVED
            link.source, link.target = attach.source, attach.target
            link.snd_settle_mode, link.rcv_settle_mode = attach.snd_settle_mode, attach.rcv_settle_mode
        else:
            link.state = EndpointState.MAPPED
        link.remote_handle = attach.handle
        link.remote_attach = attach
        link.remote_max_message_size = attach.max_message_size or 0
        if attach.role is Role.SENDER:
            link.delivery_count = attach.initial_delivery_count or 0
        session.remote_links[attach.handle] = link
        self._events.append(LinkAttached(link=link, attach=attach, reply_needed=reply_needed))

    def _on_detach(self, session: Session, detach: Detach) -> None:
        link = session.remote_links.get(detach.handle)
        if link is None:
            raise SessionError(session.channel, Condition.UNATTACHED_HANDLE, f"detach of unattached handle {detach.handle}")
        answered = link.state is EndpointState.CLOSE_SENT
        if not answered:
            self._flush_dispositions(session)
            self._write(session.channel, Detach(handle=link.handle, closed=detach.closed or None))  # type: ignore[arg-type]
        link.state = EndpointState.CLOSED
        self._forget_link(link)
        if not answered or detach.error is not None:
            self._events.append(LinkDetached(link=link, closed=detach.closed, error=detach.error))

    def _forget_link(self, link: Link) -> None:
        session = link.session
        session.links.pop(link.handle, None)
        if link.remote_handle is not None:
            session.remote_links.pop(link.remote_handle, None)
        table = session.outgoing if link.is_sender else session.incoming
        for d in link.unsettled.values():
            table.pop(d.delivery_id, None)
        if link.state is not EndpointState.CLOSE_SENT:
            link.state = EndpointState.CLOSED

    def _detach_with_error(self, link: Link, condition: Condition, description: str) -> None:
        err = _error(condition, description)
        link.detach_error = err
        self.detach(link, closed=True, error=err)
        self._events.append(LinkDetached(link=link, closed=True, error=err))

    def _on_flow(self, session: Session, flow: Flow) -> None:
        nid = flow.next_incoming_id
        if nid is None:
            nid = 0
        session.remote_incoming_window = (nid + flow.incoming_window - session.next_outgoing_id) & MAX_UINT
        if session.remote_incoming_window > 0x7FFFFFFF:
            session.remote_incoming_window = 0
        session.remote_outgoing_window = flow.outgoing_window
        if session.blocked:
            self._unblock(session)
        if flow.handle is None:
            if flow.echo:
                self._send_flow(session, None)
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
            self._send_flow(session, link)
        self._events.append(LinkFlow(link=link, drain=flow.drain))

    def _on_transfer(self, session: Session, t: Transfer, payload: bytes) -> None:
        if session.incoming_window <= 0:
            raise SessionError(session.channel, Condition.WINDOW_VIOLATION, "transfer beyond the incoming window")
        session.incoming_window -= 1
        session.next_incoming_id = (session.next_incoming_id + 1) & MAX_UINT
        link = session.remote_links.get(t.handle)
        if link is None:
            raise SessionError(session.channel, Condition.UNATTACHED_HANDLE, f"transfer on unattached handle {t.handle}")
        if link.state is not EndpointState.MAPPED:
            return  # detached by us: discard until the peer's detach
        if link.is_sender:
            raise SessionError(session.channel, Condition.NOT_ALLOWED, f"transfer towards sending link {link.name!r}")
        partial = link.partial
        if partial is None:
            if t.delivery_id is None or t.delivery_tag is None:
                raise SessionError(session.channel, Condition.INVALID_FIELD, "first transfer lacks delivery-id or delivery-tag")
            if t.aborted:
                self._events.append(DeliveryAborted(link=link, tag=t.delivery_tag))
                return
            if link.credit <= 0 and not t.resume:
                if link.revoked <= 0:
                    self._detach_with_error(link, Condition.TRANSFER_LIMIT_EXCEEDED, "transfer without link credit")
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
            delivery.payload = []  # type: ignore[assignment]
            partial = delivery
        if t.aborted:
            link.partial = None
            self._events.append(DeliveryAborted(link=link, tag=partial.tag))
            return
        if t.delivery_id is not None and t.delivery_id != partial.delivery_id:
            raise SessionError(session.channel, Condition.INVALID_FIELD, "delivery-id changed within a multi-frame delivery")
        partial.payload.append(payload)  # type: ignore[attr-defined]
        link.partial_size += len(payload)
        if t.settled:
            partial.settled = True
        if t.state is not None:
            partial.state = t.state
        if link.max_message_size and link.partial_size > link.max_message_size:
            link.partial = None
            self._detach_with_error(link, Condition.MESSAGE_SIZE_EXCEEDED,
                                    f"message exceeds max-message-size {link.max_message_size}")
            return
        if not t.more:
            link.partial = None
            partial.payload = b"".join(partial.payload)  # type: ignore[arg-type]
            self._received_delivery(session, link, partial)

    def _received_delivery(self, session: Session, link: Link, delivery: Delivery) -> None:
        if link.max_message_size and len(delivery.payload) > link.max_message_size:
            self._detach_with_error(link, Condition.MESSAGE_SIZE_EXCEEDED,
                                    f"message exceeds max-message-size {link.max_message_size}")
            return
        if not delivery.settled:
            session.incoming[delivery.delivery_id] = delivery
            link.unsettled[delivery.tag] = delivery
        self._events.append(DeliveryReceived(delivery=delivery))

    def _on_disposition(self, session: Session, d: Disposition) -> None:
        table = session.outgoing if d.role is Role.RECEIVER else session.incoming
        first = d.first
        last = d.last if d.last is not None else first
        if last < first:
            raise SessionError(session.channel, Condition.INVALID_FIELD, f"disposition range {first}..{last}")
        events = self._events
        if last - first + 1 <= len(table):
            ids = range(first, last + 1)
        else:
            ids = sorted(i for i in table if first <= i <= last)  # type: ignore[assignment]
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
                delivery.link.unsettled.pop(delivery.tag, None)
            events.append(DeliveryUpdated(delivery=delivery, state=state, settled=settled))
