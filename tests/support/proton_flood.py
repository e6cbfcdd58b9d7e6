"""A Proton publisher that sends as fast as the router grants credit (never waits for an
outcome before the next send), in its own thread with Proton's event loop."""

from __future__ import annotations

import threading
from typing import Any

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container


class _Flood(MessagingHandler):  # type: ignore[misc]
    def __init__(self, url: str, topic: str, count: int, body: bytes, links: int = 1,
                 user: str | None = None, password: str | None = None) -> None:
        super().__init__(auto_settle=True)
        self.url, self.topic, self.count, self.body, self.links = url, topic, count, body, links
        self.user, self.password = user, password
        self.refused: list[str] = []  # the errors links were detached with
        self.sent = 0
        self.accepted = 0
        self.other = 0
        self.credit = 0
        self.sender: Any = None
        self.conn: Any = None
        self.stop = False

    def on_start(self, event: Any) -> None:
        login = {} if self.user is None else {"user": self.user, "password": self.password, "allowed_mechs": "PLAIN"}
        self.conn = event.container.connect(self.url, **login)
        for i in range(self.links):  # (``count`` messages in all, on one connection)
            self.sender = event.container.create_sender(self.conn, self.topic, name=f"flood-{i}")
        event.container.schedule(0.05, self)

    def on_link_error(self, event: Any) -> None:
        cond = event.link.remote_condition
        self.refused.append(f"{cond.name}: {cond.description}" if cond is not None else "?")
        event.link.close()

    def on_timer_task(self, event: Any) -> None:
        if self.stop:
            # Closed, not left open: the container's loop ends once the router has closed
            # it too (a router stopping waits a while for clients' closes).
            self.conn.close()
            return
        self.credit = self.sender.credit if self.sender is not None else 0
        event.container.schedule(0.05, self)

    def on_sendable(self, event: Any) -> None:
        while event.sender.credit and self.sent < self.count:
            event.sender.send(Message(body=self.body))
            self.sent += 1
        self.credit = event.sender.credit

    def on_accepted(self, event: Any) -> None:
        self.accepted += 1

    def on_rejected(self, event: Any) -> None:
        self.other += 1

    def on_released(self, event: Any) -> None:
        self.other += 1


class ProtonFlood:
    """``sent``, ``accepted``, ``credit`` (the link's, as Proton sees it) are read live."""

    def __init__(self, url: str, topic: str, count: int, body: bytes, links: int = 1,
                 user: str | None = None, password: str | None = None) -> None:
        self.handler = _Flood(url, topic, count, body, links, user, password)
        self._thread = threading.Thread(target=Container(self.handler).run, daemon=True)
        self._thread.start()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.handler, name)

    def close(self) -> None:
        self.handler.stop = True
        self._thread.join(10)
