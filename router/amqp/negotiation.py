"""The connection's negotiation: protocol headers, SASL, open and close, and the one
way a connection fails (``_fail``).

One layer of ``Connection`` (``connection.py``): a mixin over its state, declared in
``connection_state.py``."""

from __future__ import annotations

from typing import Any

from mypy_extensions import trait

from .connection_state import ConnectionState, Mode, State, error_of
from .errors import AMQPError, Condition, FramingError, LocalProtocolError, ProtocolError
from .events import (
    ConnectionClosed,
    ConnectionFailed,
    ConnectionOpened,
    SaslDone,
)
from .frames import AMQP_HEADER, MIN_MAX_FRAME_SIZE, SASL_HEADER, FrameType, build_frame
from .performatives import (
    Close,
    Error,
    Open,
    SaslCode,
    SaslInit,
    SaslMechanisms,
    SaslOutcome,
)
from .sasl import (
    client_init,
    requested_identity,
    server_mechanisms,
    server_outcome,
)


@trait
class Negotiation(ConnectionState):
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

    def _send_open(self) -> None:
        self._write(0, Open(
            container_id=self.container_id, hostname=self.hostname, max_frame_size=self.max_frame_size,
            channel_max=self.channel_max,
            idle_time_out=int(self.idle_timeout * 1000) if self.idle_timeout else None, properties=self.properties,
            offered_capabilities=self.offered_capabilities,
        ))
        self.open_sent = True

    def _write_sasl(self, performative: Any) -> None:
        self._out += build_frame(0, performative, ftype=FrameType.SASL)

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

    def _fail(self, error: AMQPError, detail: str | None = None) -> None:
        """Close the connection because of ``error``; report it once (with ``detail`` if given)."""
        if self.failed is not None or self.state is State.CLOSED:
            return
        self.failed = error
        if self.state in (State.OPEN, State.AMQP_HEADER):
            if not self.open_sent:
                self._send_open()
            self._out += build_frame(0, Close(error=error_of(error.condition, error.description)))
        self.state = State.CLOSED
        cond = error.condition.value if isinstance(error.condition, Condition) else error.condition
        self._events.append(ConnectionFailed(condition=cond, description=detail or error.description))
