"""Who a client connection may authenticate as, and how: the SASL mechanisms a connection is
offered and what each proves, from the topology's ``auth`` and the connection's TLS.

- EXTERNAL: on a TLS connection whose client certificate the CA verified; the user is the
  certificate's common name (an authorization id, if given, must be that name).
- SCRAM-SHA-256 and SCRAM-SHA-512: when there is a users file (``users.py``).
- PLAIN: with a users file, over TLS only, unless ``auth.plain_without_tls`` allows it (a
  password sent in the clear is one anyone on the path has).
- ANONYMOUS (and a bare AMQP header, no SASL at all): where ``auth.allow_anonymous``.

Made per connection once its socket is up (the offer depends on its TLS); the users are
those loaded last (SIGHUP reloads them for new connections).
"""

from __future__ import annotations

from typing import Any

from ..amqp.sasl import SaslServerConfig, SaslStep, parse_plain
from ..config import Auth
from .tls import common_name
from .users import SCRAM, check_plain, scram_exchange


def offered(auth: Auth, tls: bool, cert_user: str | None) -> tuple[str, ...]:
    mechanisms: list[str] = []
    if cert_user is not None:
        mechanisms.append("EXTERNAL")
    if auth.users:
        mechanisms += SCRAM
        if tls or auth.plain_without_tls:
            mechanisms.append("PLAIN")
    if auth.allow_anonymous:
        mechanisms.append("ANONYMOUS")
    return tuple(mechanisms)


def password_user(auth: Auth, tls: bool, user: str, password: bytes) -> str | None:
    """A user name and password (PLAIN, MQTT's CONNECT): the user, or None."""
    if not (tls or auth.plain_without_tls):
        return None
    try:
        ok = check_plain(auth.users.get(user), password.decode())
    except UnicodeDecodeError:
        return None
    return user if ok else None


def client_sasl(auth: Auth, tls: bool, peercert: dict[str, Any] | None) -> SaslServerConfig:
    cert_user = common_name(peercert) if tls else None

    def authenticate(mechanism: str, response: bytes) -> str | SaslStep | None:
        if mechanism == "ANONYMOUS":
            return "anonymous" if auth.allow_anonymous else None
        if mechanism == "EXTERNAL":
            authzid = response.decode(errors="replace")
            return cert_user if cert_user is not None and authzid in ("", cert_user) else None
        if mechanism == "PLAIN":
            creds = parse_plain(response)
            if creds is None:
                return None
            authzid, user, password = creds
            # Acting as another user is not a right anyone has here: an authorization
            # id is accepted only when it names the authenticated user itself.
            if authzid and authzid != user:
                return SaslStep(claimed=user)
            return password_user(auth, tls, user, password.encode()) or SaslStep(claimed=user)
        if mechanism in SCRAM and auth.users:
            return scram_exchange(auth.users, mechanism)(response)
        return None

    return SaslServerConfig(offered(auth, tls, cert_user), authenticate, allow_bare=auth.allow_anonymous)


def user_groups(auth: Auth, user: str) -> tuple[str, ...]:
    """The user groups the users file gives ``user`` (the policies' ``groups``)."""
    found = auth.users.get(user)
    return found.groups if found is not None else ()
