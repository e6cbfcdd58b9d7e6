"""The connection's negotiation: protocol headers, SASL, open and close, and the one
way a connection fails (``_fail``).

One layer of ``Connection`` (``connection.py``), an object it holds. It is given the
connection as ``ConnectionState`` (``shared.py``): the state it reads and writes, and the
frames every layer writes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .connection_state import Mode, State, error_of
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

if TYPE_CHECKING:
    from .shared import ConnectionState


class Negotiation:
    def __init__(self, conn: ConnectionState) -> None:
        self.conn = conn

    def open(self) -> None:
        """Client: start the connection (header, SASL if configured, then open)."""
        if self.conn.mode is not Mode.CLIENT or self.conn.state is not State.START:
            raise LocalProtocolError("open() starts a client connection once")
        if self.conn.sasl_client is not None:
            self.conn._out += SASL_HEADER
            self.conn.state = State.SASL
        else:
            self.conn._out += AMQP_HEADER
            self._send_open()
            self.conn.state = State.AMQP_HEADER

    def close(self, error: Error | None = None) -> None:
        if self.conn.state is State.CLOSED or self.conn.state is State.CLOSE_SENT:
            return
        if self.conn.state is not State.OPEN or not self.conn.open_sent:
            if self.conn.state in (State.OPEN, State.AMQP_HEADER) and not self.conn.open_sent:
                self._send_open()
            elif self.conn.state is not State.OPEN and not self.conn.open_sent:
                self.conn.state = State.CLOSED
                return
        self.conn._write(0, Close(error=error))
        self.conn.state = State.CLOSE_SENT

    def _send_open(self) -> None:
        self.conn._write(0, Open(
            container_id=self.conn.container_id, hostname=self.conn.hostname, max_frame_size=self.conn.max_frame_size,
            channel_max=self.conn.channel_max,
            idle_time_out=int(self.conn.idle_timeout * 1000) if self.conn.idle_timeout else None, properties=self.conn.properties,
            offered_capabilities=self.conn.offered_capabilities,
        ))
        self.conn.open_sent = True

    def _write_sasl(self, performative: Any) -> None:
        self.conn._out += build_frame(0, performative, ftype=FrameType.SASL)

    def _on_header(self, header: bytes) -> None:
        if self.conn.mode is Mode.SERVER:
            if self.conn.state is State.START and header == SASL_HEADER and self.conn.sasl_server is not None:
                self.conn._out += SASL_HEADER
                self._write_sasl(server_mechanisms(self.conn.sasl_server))
                self.conn.state = State.SASL
                return
            if header == AMQP_HEADER and (self.conn.state is State.AMQP_HEADER or self.conn.sasl_server is None or self.conn.sasl_server.allow_bare):
                self.conn._out += AMQP_HEADER
                self.conn.state = State.OPEN
                return
            ours = SASL_HEADER if self.conn.state is State.START and self.conn.sasl_server is not None else AMQP_HEADER
            self.conn._out += ours
            self.conn.state = State.CLOSED
            self.conn.failed = FramingError(f"unsupported protocol header {header!r}")
            self.conn._events.append(ConnectionFailed(condition=Condition.FRAMING_ERROR.value,
                                                 description=f"unsupported protocol header {header!r}"))
            return
        expected = SASL_HEADER if self.conn.state is State.SASL else AMQP_HEADER
        if header != expected:
            self.conn.state = State.CLOSED
            self.conn.failed = FramingError(f"peer answered with protocol header {header!r}")
            self.conn._events.append(ConnectionFailed(condition=Condition.FRAMING_ERROR.value, description=str(self.conn.failed)))
            return
        if self.conn.state is State.SASL:
            self.conn._sasl_header_seen = True
        else:
            self.conn.state = State.OPEN

    def _on_sasl(self, body: Any) -> None:
        if self.conn.mode is Mode.SERVER:
            self._on_sasl_server(body)
            return
        config = self.conn.sasl_client
        assert config is not None
        if isinstance(body, SaslMechanisms):
            exchange = config.exchange(config) if config.exchange is not None else None
            init = client_init(config, tuple(body.sasl_server_mechanisms), self.conn.hostname, exchange)
            if init is None:
                raise ProtocolError(Condition.NOT_IMPLEMENTED, f"server offers none of {config.mechanism}")
            self.conn._sasl = exchange
            self._write_sasl(init)
        elif isinstance(body, SaslChallenge):
            if self.conn._sasl is None:
                raise FramingError("a SASL challenge for a single-step mechanism", Condition.NOT_ALLOWED)
            self._write_sasl(SaslResponse(response=self.conn._sasl.respond(body.challenge)))
        elif isinstance(body, SaslOutcome):
            ok = body.code == SaslCode.OK
            why = "SASL authentication failed"
            if ok and self.conn._sasl is not None and not self.conn._sasl.verify(body.additional_data):
                # (the server must prove it knows the password too: a SCRAM server that
                # cannot is not the one we meant to reach)
                ok, why = False, "the server did not prove it holds our credentials (SCRAM)"
            self.conn._sasl = None
            self.conn._events.append(SaslDone(ok=ok, mechanism=config.mechanism, user=config.username or None))
            if not ok:
                self.conn.state = State.CLOSED
                self.conn.failed = ProtocolError(Condition.UNAUTHORIZED_ACCESS, f"SASL outcome {body.code}: {why}")
                self.conn._events.append(ConnectionFailed(condition=Condition.UNAUTHORIZED_ACCESS.value, description=why))
                return
            self.conn._out += AMQP_HEADER
            self._send_open()
            self.conn.state = State.AMQP_HEADER
        else:
            raise FramingError(f"unexpected SASL frame {type(body).__name__}", Condition.NOT_ALLOWED)

    def _on_sasl_server(self, body: Any) -> None:
        config = self.conn.sasl_server
        pending = self.conn._sasl
        if config is not None and isinstance(body, SaslInit) and pending is None and not self.conn._sasl_mechanism:
            self.conn._sasl_mechanism = body.mechanism or "?"
            step = server_step(config, body)
            requested = requested_identity(body)
        elif isinstance(body, SaslResponse) and pending is not None:
            self.conn._sasl = None
            step = pending(body.response)
            requested = None
        else:
            raise FramingError(f"unexpected SASL frame {type(body).__name__}", Condition.NOT_ALLOWED)
        if step.challenge is not None and step.next is not None:
            self.conn._sasl = step.next
            self._write_sasl(SaslChallenge(challenge=step.challenge))
            return
        mechanism = self.conn._sasl_mechanism
        self._write_sasl(outcome_of(step))
        user = step.user
        self.conn._events.append(SaslDone(ok=user is not None, mechanism=mechanism, user=user,
                                     requested=None if user is not None else step.claimed or requested))
        if user is None:
            self.conn.state = State.CLOSED
            self.conn.failed = ProtocolError(Condition.UNAUTHORIZED_ACCESS, f"SASL {mechanism} authentication failed")
            return
        self.conn.user = user
        self.conn.state = State.AMQP_HEADER

    def _on_open(self, open_: Open) -> None:
        if self.conn.remote_open is not None:
            raise ProtocolError(Condition.ILLEGAL_STATE, "second open")
        self.conn.remote_open = open_
        self.conn.remote_max_frame_size = max(min(open_.max_frame_size, 0xFFFFFFFF), MIN_MAX_FRAME_SIZE)
        self.conn.remote_idle_timeout = open_.idle_time_out / 1000 if open_.idle_time_out else None
        self.conn.channel_max = min(self.conn.channel_max, open_.channel_max)
        if not self.conn.open_sent:
            self._send_open()
        self.conn._events.append(ConnectionOpened(open=open_))

    def _on_close(self, close: Close) -> None:
        if self.conn.state is not State.CLOSE_SENT:
            self.conn._write(0, Close())
        self.conn.state = State.CLOSED
        self.conn._events.append(ConnectionClosed(error=close.error))

    def _fail(self, error: AMQPError, detail: str | None = None) -> None:
        """Close the connection because of ``error``; report it once (with ``detail`` if given)."""
        if self.conn.failed is not None or self.conn.state is State.CLOSED:
            return
        self.conn.failed = error
        if self.conn.state in (State.OPEN, State.AMQP_HEADER):
            if not self.conn.open_sent:
                self._send_open()
            self.conn._out += build_frame(0, Close(error=error_of(error.condition, error.description)))
        self.conn.state = State.CLOSED
        cond = error.condition.value if isinstance(error.condition, Condition) else error.condition
        self.conn._events.append(ConnectionFailed(condition=cond, description=detail or error.description))
