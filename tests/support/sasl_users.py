"""The router's own SASL authenticator (``router/security/authn.py``) for the engine's tests, over
users given with their passwords (hashed here, as the users file holds them)."""

from __future__ import annotations

from once.router.amqp.sasl import Authenticator
from once.router.config import Auth
from once.router.security.authn import client_sasl
from once.router.security.users import User, make_secrets


def plain_users(users: dict[str, str], allow_anonymous: bool) -> Authenticator:
    """As on a TLS connection (PLAIN allowed), with no client certificate."""
    auth = Auth({name: User(name, make_secrets(pw)) for name, pw in users.items()}, allow_anonymous)
    return client_sasl(auth, tls=True, peercert=None).authenticate
