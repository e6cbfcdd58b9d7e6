"""The sans-IO AMQP 1.0 connection: bytes in, events out, bytes to send.

The connection is this orchestrator and four layers, one module each (mixins over the
state declared in ``connection_state.py``): ``negotiation`` (headers, SASL, open/close,
failure), ``sessions``, ``links`` and ``deliveries``.

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
from .endpoints import EndpointState, Link, Session
from .errors import AMQPError, Condition, FramingError, LocalProtocolError, ProtocolError, SessionError
from .frames import EMPTY_FRAME, MIN_MAX_FRAME_SIZE, FrameReader, FrameType, build_frame
from .links import Links
from .negotiation import Negotiation
from .performatives import (
    Attach,
    Begin,
    Close,
    Detach,
    Disposition,
    End,
    Flow,
    Open,
    Transfer,
)
from .sasl import (
    SaslClientConfig,
    SaslServerConfig,
)
from .sessions import Sessions

__all__ = ["Connection", "Mode", "State"]

# Enum members as module constants: on Python 3.11 every ``State.X`` is a lookup through
# EnumType.__getattr__'s slot (~70 ns); the read path makes ~20 of them per read.
_START, _AMQP_HEADER, _SASL, _OPEN, _CLOSE_SENT, _CLOSED = (
    State.START, State.AMQP_HEADER, State.SASL, State.OPEN, State.CLOSE_SENT, State.CLOSED)
_EP_CLOSE_SENT = EndpointState.CLOSE_SENT
_FT_SASL = FrameType.SASL
_CLIENT = Mode.CLIENT


class Connection(Negotiation, Sessions, Links, Deliveries):
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
        self._sasl: Any = None
        self._sasl_mechanism = ""
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
        self._dirty: set[Session] = set()

    @property
    def closed(self) -> bool:
        return self.state is _CLOSED

    def receive_data(self, data: bytes | bytearray) -> list[Any]:
        events: list[Any] = []
        self._events = events
        if self.state is _CLOSED or not data:
            return events
        self._reader.feed(data)
        try:
            self._process()
        except ProtocolError as e:
            self._fail(e)
        except Exception as bug:  # a bug of ours must still close only this connection
            # The peer learns only that it was ours; the detail is for our own log line.
            # (its own name: compiled, one name is one type across the except clauses)
            self._fail(ProtocolError(Condition.INTERNAL_ERROR, "internal error"), detail=f"{type(bug).__name__}: {bug}")
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
        if self.state not in OPEN_STATES:
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

    def _require_open(self) -> None:
        if self.state not in (_OPEN, _AMQP_HEADER) or not self.open_sent:
            raise LocalProtocolError(f"connection is {self.state.value}")

    def _write(self, channel: int, performative: Any) -> None:
        if channel in self.sessions and self.sessions[channel].pending_dispositions:
            self._flush_dispositions(self.sessions[channel])
        self._out += build_frame(channel, performative)

    def _process(self) -> None:
        reader = self._reader
        while self.state is not _CLOSED:
            if self.state is _START or self.state is _AMQP_HEADER or (
                self.state is _SASL and self.mode is _CLIENT and not getattr(self, "_sasl_header_seen", False)
            ):
                header = reader.take(8)
                if header is None:
                    return
                self._received = True
                self._on_header(header)
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
                        self._on_sasl(frame.body)
                    else:
                        if self.state is _SASL:
                            raise FramingError("AMQP frame inside the SASL layer", Condition.NOT_ALLOWED)
                        self._on_frame(frame.channel, frame.body, frame.payload)
                    if self.state is not before and self.state is not _OPEN:
                        break  # the next bytes may be a protocol header, not a frame
            finally:
                frames.close()
            self._after_batch()
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
                    self._on_transfer(session, body, payload)
                elif kind is Disposition:
                    self._on_disposition(session, body)
                else:
                    self._on_flow(session, body)
            except SessionError as e:
                self._end_with_error(session, e)
            return
        why = admits(self.state, self.remote_open is not None, kind)
        if why is not None:
            raise ProtocolError(Condition.ILLEGAL_STATE, why)
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
            if session.state is _EP_CLOSE_SENT:
                return
            try:
                if kind is Attach:
                    self._on_attach(session, body)
                elif kind is Detach:
                    self._on_detach(session, body)
            except SessionError as e:
                self._end_with_error(session, e)
