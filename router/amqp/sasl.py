"""SASL negotiation (AMQP 1.0 Part 5): the server and client halves, sans-IO.

The mechanisms are the application's: the server asks a callable (``authenticate``) what
an init's response means, and it answers with a user, a refusal, or a ``SaslStep`` that
sends a challenge and takes the next response (SCRAM's exchange: ``router/security/users.py``).
Single-step mechanisms here: ANONYMOUS, PLAIN and EXTERNAL (the identity TLS established:
the response is at most an authorization identity). The users file, certificates and the
SCRAM arithmetic stay out of the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from .performatives import SaslCode, SaslInit, SaslMechanisms, SaslOutcome


@dataclass(frozen=True, slots=True)
class SaslStep:
    """Where a server's exchange stands after a client message."""

    user: str | None = None  # authenticated as (done)
    challenge: bytes | None = None  # not done: send this challenge, and give the response to ``next``
    next: Callable[[bytes], SaslStep] | None = None
    additional: bytes | None = None  # the outcome's additional data (SCRAM: the server's proof)
    claimed: str | None = None  # refused: who the client said it was (for the log; never a secret)


# (mechanism, initial response) -> the authenticated user name, None when refused, or a step.
Authenticator = Callable[[str, bytes], "str | SaslStep | None"]


class ClientExchange(Protocol):
    """A client's side of a multi-step mechanism (SCRAM)."""

    def first(self) -> bytes: ...  # the init's initial response
    def respond(self, challenge: bytes) -> bytes: ...
    def verify(self, additional: bytes | None) -> bool: ...  # the server proved itself


@dataclass(frozen=True, slots=True)
class SaslServerConfig:
    mechanisms: tuple[str, ...]
    authenticate: Authenticator
    # A client that sends the bare AMQP header (no SASL layer) is taken as anonymous.
    allow_bare: bool = True


@dataclass(frozen=True, slots=True)
class SaslClientConfig:
    mechanism: str = "ANONYMOUS"
    username: str = ""
    password: str = ""
    # a multi-step mechanism's client (SCRAM: ``router/security/users.py``), made per connection
    exchange: Callable[[SaslClientConfig], ClientExchange] | None = None

    def initial_response(self) -> bytes:
        if self.mechanism == "PLAIN":
            return b"\x00" + self.username.encode() + b"\x00" + self.password.encode()
        if self.mechanism == "EXTERNAL":
            return self.username.encode()  # (the authorization identity asked for; may be empty)
        return b"anonymous"


def parse_plain(response: bytes) -> tuple[str, str, str] | None:
    """PLAIN's ``authzid NUL authcid NUL passwd`` (RFC 4616) as three strings; None when malformed."""
    parts = response.split(b"\x00")
    if len(parts) != 3:
        return None
    try:
        return parts[0].decode(), parts[1].decode(), parts[2].decode()
    except UnicodeDecodeError:
        return None


def plain_identity(response: bytes) -> str | None:
    """The user a PLAIN response claims to be (for log lines: never a password)."""
    creds = parse_plain(response)
    return creds[1] if creds is not None else None


def server_mechanisms(config: SaslServerConfig) -> SaslMechanisms:
    return SaslMechanisms(sasl_server_mechanisms=config.mechanisms)


def requested_identity(init: SaslInit) -> str | None:
    return plain_identity(init.initial_response or b"") if init.mechanism == "PLAIN" else None


def server_step(config: SaslServerConfig, init: SaslInit) -> SaslStep:
    """What the init's mechanism and response come to."""
    if init.mechanism not in config.mechanisms:
        return SaslStep()
    answer = config.authenticate(init.mechanism, init.initial_response or b"")
    return answer if isinstance(answer, SaslStep) else SaslStep(user=answer)


def outcome_of(step: SaslStep) -> SaslOutcome:
    if step.user is None:
        return SaslOutcome(code=SaslCode.AUTH)
    return SaslOutcome(code=SaslCode.OK, additional_data=step.additional)


def client_init(config: SaslClientConfig, offered: tuple[str, ...], hostname: str | None,
                exchange: ClientExchange | None = None) -> SaslInit | None:
    if config.mechanism not in offered:
        return None
    response = exchange.first() if exchange is not None else config.initial_response()
    return SaslInit(mechanism=config.mechanism, initial_response=response, hostname=hostname)
