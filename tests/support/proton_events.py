"""Run a Proton Container (event API) in a thread and record what its handler saw."""

from __future__ import annotations

import threading
from typing import Any

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import ApplicationEvent, Container, EventInjector

from .routers import wait_for


class Recorder(MessagingHandler):
    """A handler that appends ``(what, detail)`` tuples to ``self.log`` in event order."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.log: list[tuple[str, Any]] = []
        self.lock = threading.Lock()
        self.container: Container | None = None
        self.connections: list[Any] = []

    def on_connection_init(self, event: Any) -> None:
        self.connections.append(event.connection)

    def note(self, what: str, detail: Any = None) -> None:
        with self.lock:
            self.log.append((what, detail))

    def seen(self, what: str) -> list[Any]:
        with self.lock:
            return [d for w, d in self.log if w == what]

    def wait_seen(self, what: str, n: int = 1, timeout: float = 10.0) -> list[Any]:
        wait_for(lambda: len(self.seen(what)) >= n, timeout, what=f"{n} x {what} (log: {self.log[-5:]})")
        return self.seen(what)


class ContainerThread:
    def __init__(self, handler: Recorder) -> None:
        self.handler = handler
        self.container = Container(handler)
        if getattr(handler, "container_id", None):
            self.container.container_id = handler.container_id  # the subscriber key's first half
        handler.container = self.container
        # The injector wakes the container's selector at once; a scheduled timer would
        # wait for its next poll timeout.
        self.injector = EventInjector()
        self.container.selectable(self.injector)
        self._tasks: list[tuple[Any, threading.Event]] = []
        handler.on_run_task = self._run_tasks  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.container.run, daemon=True)
        self.thread.start()

    def _run_tasks(self, event: Any) -> None:
        while self._tasks:
            fn, done = self._tasks.pop(0)
            fn()
            done.set()

    def call(self, fn: Any) -> None:
        """Run ``fn`` on the container's thread (Proton objects are single-threaded)."""
        done = threading.Event()
        self._tasks.append((fn, done))
        self.injector.trigger(ApplicationEvent("run_task"))
        wait_for(done.is_set, 10, what="container task")

    def stop(self) -> None:
        def shutdown() -> None:
            for conn in self.handler.connections:
                conn.close()
            self.injector.close()

        self.call(shutdown)
        self.thread.join(10)


class StreamPublisher(Recorder):
    """Sends N numbered messages as fast as credit allows; counts outcomes."""

    def __init__(self, url: str, topic: str, total: int) -> None:
        super().__init__()
        self.url, self.topic, self.total = url, topic, total
        self.sent = 0
        self.limit = total * 2 // 3  # the rest goes out after the link has healed
        self.outcomes: dict[int, Any] = {}
        self.keys = 0  # >0: message n carries group-id "k{n % keys}" (a consumer group's key)

    def on_start(self, event: Any) -> None:
        self.sender = event.container.create_sender(event.container.connect(self.url), self.topic, name="stream")

    def on_sendable(self, event: Any) -> None:
        self.send_more()

    def send_more(self) -> None:
        while self.sender.credit and self.sent < min(self.limit, self.total):
            msg = Message(body=self.sent)
            if self.keys:
                msg.group_id = f"k{self.sent % self.keys}"
            d = self.sender.send(msg)
            d.number = self.sent
            self.sent += 1

    def release_rest(self) -> None:
        self.release(self.total)

    def release(self, upto: int) -> None:
        """Let the first ``upto`` messages go (call on the container's thread)."""
        self.limit = upto
        self.send_more()

    def on_accepted(self, event: Any) -> None:
        with self.lock:
            self.outcomes[event.delivery.number] = "accepted"

    def on_rejected(self, event: Any) -> None:
        with self.lock:
            self.outcomes[event.delivery.number] = "rejected"

    def accepted(self) -> int:
        with self.lock:
            return sum(v == "accepted" for v in self.outcomes.values())

    def outcome_count(self) -> int:
        with self.lock:
            return len(self.outcomes)


def assert_at_least_once_marked(got: list[tuple[int, int, bool]], n: int) -> None:
    """What a standard receiver was handed, as (body, delivery-count, first-acquirer), for a
    stream of bodies 0..n-1 across a failover: nothing lost, first arrivals in publish
    order, and every repeat marked (delivery-count above 0, first-acquirer false)."""
    bodies = [b for b, _, _ in got]
    assert set(bodies) == set(range(n))  # nothing lost
    seen: set[int] = set()
    firsts = []
    for body, count, first in got:
        if body in seen:
            assert count >= 1 and first is False, f"unmarked duplicate of {body}"
        else:
            firsts.append(body)
        seen.add(body)
    assert firsts == list(range(n))  # first arrivals in publish order
