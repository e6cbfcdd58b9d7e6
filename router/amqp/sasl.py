"""SASL negotiation (AMQP 1.0 Part 5): the server and client halves, sans-IO.

The single-step mechanisms: ANONYMOUS, PLAIN and EXTERNAL (the identity TLS established:
the response is at most an authorization identity). Credentials are checked by a
callable the application gives, so the users file and certificates stay out of the engine.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

from .performatives import SaslCode, SaslInit, SaslMechanisms, SaslOutcome

# (mechanism, initial response) -> authenticated user name, or None when refused.
Authenticator = Callable[[str, bytes], "str | None"]


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


def users_authenticator(users: dict[str, str], allow_anonymous: bool) -> Authenticator:
    def authenticate(mechanism: str, response: bytes) -> str | None:
        if mechanism == "ANONYMOUS":
            return "anonymous" if allow_anonymous else None
        if mechanism == "PLAIN":
            creds = parse_plain(response)
            if creds is None:
                return None
            authzid, user, password = creds
            # Acting as another user is not a right anyone has here: an authorization
            # id is accepted only when it names the authenticated user itself.
            if authzid and authzid != user:
                return None
            if user in users and secrets.compare_digest(users[user].encode(), password.encode()):
                return user
        return None

    return authenticate


def server_mechanisms(config: SaslServerConfig) -> SaslMechanisms:
    return SaslMechanisms(sasl_server_mechanisms=config.mechanisms)


def requested_identity(init: SaslInit) -> str | None:
    return plain_identity(init.initial_response or b"") if init.mechanism == "PLAIN" else None


def server_outcome(config: SaslServerConfig, init: SaslInit) -> tuple[SaslOutcome, str | None]:
    if init.mechanism not in config.mechanisms:
        return SaslOutcome(code=SaslCode.AUTH), None
    user = config.authenticate(init.mechanism, init.initial_response or b"")
    return SaslOutcome(code=SaslCode.OK if user is not None else SaslCode.AUTH), user


def client_init(config: SaslClientConfig, offered: tuple[str, ...], hostname: str | None) -> SaslInit | None:
    if config.mechanism not in offered:
        return None
    return SaslInit(mechanism=config.mechanism, initial_response=config.initial_response(), hostname=hostname)
