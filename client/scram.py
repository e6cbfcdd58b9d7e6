"""SCRAM-SHA-256 and SCRAM-SHA-512 for our clients (the client library, ``client/shell.py``):
the client's side of the exchange, on ``scramp``, as the engine's ``ClientExchange``.

``scram("SCRAM-SHA-256", "alice", password)`` is a ``SaslClientConfig`` to give a client. The
password never crosses the wire; the router proves in its outcome that it holds the user's
hash, and a router that cannot is refused (``verify``)."""

from __future__ import annotations

from once.router.amqp.sasl import SaslClientConfig
from scramp import ScramClient, ScramException  # type: ignore[import-untyped]  # (no type marker)


class ScramExchange:
    def __init__(self, config: SaslClientConfig) -> None:
        self.client = ScramClient([config.mechanism], config.username, config.password)

    def first(self) -> bytes:
        return self.client.get_client_first().encode()

    def respond(self, challenge: bytes) -> bytes:
        try:
            self.client.set_server_first(challenge.decode())
            return self.client.get_client_final().encode()
        except (ScramException, UnicodeDecodeError):
            return b""  # (a challenge that is not SCRAM's: the router refuses the empty answer)

    def verify(self, additional: bytes | None) -> bool:
        if not additional:
            return False
        try:
            self.client.set_server_final(additional.decode())
        except (ScramException, UnicodeDecodeError):
            return False
        return True


def scram(mechanism: str, username: str, password: str) -> SaslClientConfig:
    if mechanism not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise ValueError(f"{mechanism}: expected SCRAM-SHA-256 or SCRAM-SHA-512")
    return SaslClientConfig(mechanism, username, password, exchange=ScramExchange)
