"""A Proton client with Cyrus SASL (run by ``proton_cyrus``'s environment, not imported):
connects over TLS as USER with MECHANISM, subscribes to TOPIC, publishes one message to it,
and prints what it received and the outcome its publisher heard; a refusal prints the
condition. Usage: cyrus_client.py URL CA USER PASSWORD MECHANISM TOPIC"""

from __future__ import annotations

import sys

from proton import Message, SSLDomain
from proton.handlers import MessagingHandler
from proton.reactor import Container


class Client(MessagingHandler):  # type: ignore[misc]
    def __init__(self, url: str, ca: str, user: str, password: str, mechanism: str, topic: str) -> None:
        super().__init__()
        self.url, self.user, self.password, self.mechanism, self.topic = url, user, password, mechanism, topic
        self.domain = SSLDomain(SSLDomain.MODE_CLIENT)
        self.domain.set_trusted_ca_db(ca)
        self.domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
        self.sent = False

    def on_start(self, event):  # noqa: ANN001, ANN201
        event.container.ssl.client = self.domain
        conn = event.container.connect(self.url, user=self.user, password=self.password,
                                       allowed_mechs=self.mechanism, sasl_enabled=True, reconnect=False)
        event.container.create_receiver(conn, self.topic)
        self.sender = event.container.create_sender(conn, self.topic)

    def on_link_opened(self, event):  # noqa: ANN001, ANN201
        if event.receiver is not None and not self.sent:  # subscribed: now publish
            self.sent = True
            self.sender.send(Message(body="by scram"))

    def on_message(self, event):  # noqa: ANN001, ANN201
        print(f"received {event.message.body}", flush=True)

    def on_accepted(self, event):  # noqa: ANN001, ANN201
        print("accepted", flush=True)
        event.connection.close()

    def on_transport_error(self, event):  # noqa: ANN001, ANN201
        cond = event.transport.condition
        print(f"refused {cond.name if cond else '?'}: {cond.description if cond else ''}", flush=True)


if __name__ == "__main__":
    Container(Client(*sys.argv[1:7])).run()
