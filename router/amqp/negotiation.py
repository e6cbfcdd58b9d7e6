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
    SaslChallenge,
    SaslCode,
    SaslInit,
    SaslMechanisms,
    SaslOutcome,
    SaslResponse,
)
from .sasl import (
    client_init,
    outcome_of,
    requested_identity,
    server_mechanisms,
    server_step,
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
            self._on_sasl_server(body)
            return
        config = self.sasl_client
        assert config is not None
        if isinstance(body, SaslMechanisms):
            exchange = config.exchange(config) if config.exchange is not None else None
            init = client_init(config, tuple(body.sasl_server_mechanisms), self.hostname, exchange)
            if init is None:
                raise ProtocolError(Condition.NOT_IMPLEMENTED, f"server offers none of {config.mechanism}")
            self._sasl = exchange
            self._write_sasl(init)
        elif isinstance(body, SaslChallenge):
            if self._sasl is None:
                raise FramingError("a SASL challenge for a single-step mechanism", Condition.NOT_ALLOWED)
            self._write_sasl(SaslResponse(response=self._sasl.respond(body.challenge)))
        elif isinstance(body, SaslOutcome):
            ok = body.code == SaslCode.OK
            why = "SASL authentication failed"
            if ok and self._sasl is not None and not self._sasl.verify(body.additional_data):
                # (the server must prove it knows the password too: a SCRAM server that
                # cannot is not the one we meant to reach)
                ok, why = False, "the server did not prove it holds our credentials (SCRAM)"
            self._sasl = None
            self._events.append(SaslDone(ok=ok, mechanism=config.mechanism, user=config.username or None))
            if not ok:
                self.state = State.CLOSED
                self.failed = ProtocolError(Condition.UNAUTHORIZED_ACCESS, f"SASL outcome {body.code}: {why}")
                self._events.append(ConnectionFailed(condition=Condition.UNAUTHORIZED_ACCESS.value, description=why))
                return
            self._out += AMQP_HEADER
            self._send_open()
            self.state = State.AMQP_HEADER
        else:
            raise FramingError(f"unexpected SASL frame {type(body).__name__}", Condition.NOT_ALLOWED)

    def _on_sasl_server(self, body: Any) -> None:
        config = self.sasl_server
        pending = self._sasl
        if config is not None and isinstance(body, SaslInit) and pending is None and not self._sasl_mechanism:
            self._sasl_mechanism = body.mechanism or "?"
            step = server_step(config, body)
            requested = requested_identity(body)
        elif isinstance(body, SaslResponse) and pending is not None:
            self._sasl = None
            step = pending(body.response)
            requested = None
        else:
            raise FramingError(f"unexpected SASL frame {type(body).__name__}", Condition.NOT_ALLOWED)
        if step.challenge is not None and step.next is not None:
            self._sasl = step.next
            self._write_sasl(SaslChallenge(challenge=step.challenge))
            return
        mechanism = self._sasl_mechanism
        self._write_sasl(outcome_of(step))
        user = step.user
        self._events.append(SaslDone(ok=user is not None, mechanism=mechanism, user=user,
                                     requested=None if user is not None else step.claimed or requested))
        if user is None:
            self.state = State.CLOSED
            self.failed = ProtocolError(Condition.UNAUTHORIZED_ACCESS, f"SASL {mechanism} authentication failed")
            return
        self.user = user
        self.state = State.AMQP_HEADER

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
