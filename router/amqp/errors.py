"""AMQP error conditions and the exceptions that carry them.

An error raised while handling the peer's bytes is a *protocol* error: the engine turns
it into the matching close (connection scope), end (session scope) or detach (link
scope) frame. An error raised because our own application misused the engine is a
``LocalProtocolError`` and nothing is sent.
"""

from __future__ import annotations

from enum import StrEnum


class Condition(StrEnum):
    INTERNAL_ERROR = "amqp:internal-error"
    NOT_FOUND = "amqp:not-found"
    UNAUTHORIZED_ACCESS = "amqp:unauthorized-access"
    DECODE_ERROR = "amqp:decode-error"
    RESOURCE_LIMIT_EXCEEDED = "amqp:resource-limit-exceeded"
    NOT_ALLOWED = "amqp:not-allowed"
    INVALID_FIELD = "amqp:invalid-field"
    NOT_IMPLEMENTED = "amqp:not-implemented"
    RESOURCE_LOCKED = "amqp:resource-locked"
    PRECONDITION_FAILED = "amqp:precondition-failed"
    RESOURCE_DELETED = "amqp:resource-deleted"
    ILLEGAL_STATE = "amqp:illegal-state"
    FRAME_SIZE_TOO_SMALL = "amqp:frame-size-too-small"
    CONNECTION_FORCED = "amqp:connection:forced"
    FRAMING_ERROR = "amqp:connection:framing-error"
    REDIRECT = "amqp:connection:redirect"
    WINDOW_VIOLATION = "amqp:session:window-violation"
    ERRANT_LINK = "amqp:session:errant-link"
    HANDLE_IN_USE = "amqp:session:handle-in-use"
    UNATTACHED_HANDLE = "amqp:session:unattached-handle"
    DETACH_FORCED = "amqp:link:detach-forced"
    TRANSFER_LIMIT_EXCEEDED = "amqp:link:transfer-limit-exceeded"
    MESSAGE_SIZE_EXCEEDED = "amqp:link:message-size-exceeded"
    LINK_REDIRECT = "amqp:link:redirect"
    STOLEN = "amqp:link:stolen"


class AMQPError(Exception):
    """Base error: carries the wire condition and a human description."""

    def __init__(self, condition: Condition | str, description: str = "") -> None:
        super().__init__(f"{_value(condition)}: {description}" if description else _value(condition))
        self.condition = condition
        self.description = description


def condition_value(condition: Condition | str) -> str:
    """The wire string of a condition (ours as an enum, or whatever a peer sent)."""
    return condition.value if isinstance(condition, Condition) else str(condition)


_value = condition_value


class ProtocolError(AMQPError):
    """The peer broke the protocol; the whole connection is closed with this condition."""


class DecodeError(ProtocolError):
    def __init__(self, description: str) -> None:
        super().__init__(Condition.DECODE_ERROR, description)


class FramingError(ProtocolError):
    def __init__(self, description: str, condition: Condition = Condition.FRAMING_ERROR) -> None:
        super().__init__(condition, description)


class SessionError(ProtocolError):
    """Ends one session (``end`` with this error); the connection lives on."""

    def __init__(self, channel: int, condition: Condition | str, description: str = "") -> None:
        super().__init__(condition, description)
        self.channel = channel


class LinkError(ProtocolError):
    """Detaches one link (closed, with this error); the session lives on."""

    def __init__(self, channel: int, handle: int, condition: Condition | str, description: str = "") -> None:
        super().__init__(condition, description)
        self.channel = channel
        self.handle = handle


class LocalProtocolError(AMQPError):
    """Our own application asked the engine for something the protocol forbids."""

    def __init__(self, description: str) -> None:
        super().__init__(Condition.ILLEGAL_STATE, description)
