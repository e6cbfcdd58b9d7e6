"""An in-memory SASL authenticator for the engine's tests: users and passwords given as
they are (the router keeps hashes only: ``router/users.py`` and ``router/authn.py``)."""

from __future__ import annotations

import secrets

from once.router.amqp.sasl import Authenticator, parse_plain


def plain_users(users: dict[str, str], allow_anonymous: bool) -> Authenticator:
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
