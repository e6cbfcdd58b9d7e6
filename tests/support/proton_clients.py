"""Standard Proton clients for integration tests, each owning its connection in one thread.

Proton objects must stay on the thread that created them, so every client here runs
its own BlockingConnection inside a worker thread and talks to the test through queues.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

from proton import Message
from proton.utils import BlockingConnection, SendException


class ProtonSubscriber:
    """Receives on ``topic``; accepts automatically unless ``auto_accept`` is False."""

    def __init__(self, url: str, topic: str, name: str | None = None, credit: int = 100, auto_accept: bool = True,
                 container_id: str | None = None, options: Any = None, **conn_kw: Any) -> None:
        self.messages: queue.Queue[Message] = queue.Queue()
        self._commands: queue.Queue[str] = queue.Queue()
        self._ready = threading.Event()
        self.error: BaseException | None = None
        self.auto_accept = auto_accept
        self.attach_properties: Any = None
        self.arrivals: list[tuple[float, Any]] = []  # (when, body), in arrival order
        self._args = (url, topic, name, credit, container_id, options)
        self._conn_kw = conn_kw
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise AssertionError("subscriber did not attach")
        if self.error:
            raise self.error

    def _run(self) -> None:
        url, topic, name, credit, container_id, options = self._args
        try:
            kw = {"container_id": container_id} if container_id else {}
            conn = BlockingConnection(url, **kw, **self._conn_kw)
            rcv = conn.create_receiver(topic, name=name, credit=credit, options=options)
            self.attach_properties = rcv.link.remote_properties  # what the router's attach said
        except BaseException as e:  # noqa: BLE001 - reported to the test thread
            self.error = e
            self._ready.set()
            return
        self._ready.set()
        try:
            while True:
                try:
                    cmd = self._commands.get_nowait()
                except queue.Empty:
                    cmd = ""
                if cmd == "close":
                    conn.close()
                    return
                if cmd == "accept":
                    rcv.accept()
                elif cmd == "reject":
                    rcv.reject()
                elif cmd == "release":
                    rcv.release()
                try:
                    msg = rcv.receive(timeout=0.02)
                except Exception:  # noqa: BLE001 - Proton's Timeout
                    continue
                self.arrivals.append((time.monotonic(), msg.body))
                self.messages.put(msg)
                if self.auto_accept:
                    rcv.accept()
        except BaseException as e:  # noqa: BLE001
            self.error = e

    def command(self, cmd: str) -> None:
        self._commands.put(cmd)

    def get(self, timeout: float = 10.0) -> Message:
        return self.messages.get(timeout=timeout)

    def take(self, n: int, timeout: float = 20.0) -> list[Message]:
        return [self.get(timeout) for _ in range(n)]

    def close(self) -> None:
        self.command("close")
        self._thread.join(10)


class ProtonPublisher:
    """Sends from its own thread; ``send`` returns a future-like of the remote outcome."""

    def __init__(self, url: str, topic: str, name: str | None = None, options: Any = None, **conn_kw: Any) -> None:
        self._jobs: queue.Queue[tuple[Message, queue.Queue[Any]] | None] = queue.Queue()
        self._ready = threading.Event()
        self.error: BaseException | None = None
        self._args = (url, topic, name, options)
        self._conn_kw = conn_kw
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise AssertionError("publisher did not attach")
        if self.error:
            raise self.error

    def _run(self) -> None:
        url, topic, name, options = self._args
        try:
            conn = BlockingConnection(url, **self._conn_kw)
            snd = conn.create_sender(topic, name=name, options=options)
        except BaseException as e:  # noqa: BLE001
            self.error = e
            self._ready.set()
            return
        self._ready.set()
        while True:
            job = self._jobs.get()
            if job is None:
                conn.close()
                return
            msg, out = job
            if isinstance(msg, bytes):
                out.put(_send_raw(conn, snd, msg))
                continue
            try:
                d = snd.send(msg, timeout=60)
                out.put(d.remote_state)
            except SendException as e:  # Proton raises for any outcome but accepted
                out.put(e.state)
            except BaseException as e:  # noqa: BLE001
                out.put(e)

    def send(self, body: Any, **props: Any) -> queue.Queue[Any]:
        out: queue.Queue[Any] = queue.Queue()
        self._jobs.put((Message(body=body, **props), out))
        return out

    def send_raw(self, payload: bytes) -> queue.Queue[Any]:
        """Send ``payload`` as the message bytes; the queue gets (outcome, condition, description)."""
        out: queue.Queue[Any] = queue.Queue()
        self._jobs.put((payload, out))  # type: ignore[arg-type]
        return out

    def send_wait(self, body: Any, timeout: float = 30.0, **props: Any) -> Any:
        return self.send(body, **props).get(timeout=timeout)

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(10)


def _send_raw(conn: BlockingConnection, snd: Any, payload: bytes) -> tuple[Any, str | None, str | None]:
    link = snd.link
    _send_raw.tags += 1  # type: ignore[attr-defined]
    dlv = link.delivery(f"raw-{_send_raw.tags}")  # type: ignore[attr-defined]
    link.send(payload)
    link.advance()
    conn.wait(lambda: dlv.remote_state or dlv.remote.condition is not None or link.state & link.REMOTE_CLOSED,
              msg="raw send", timeout=60)
    cond = dlv.remote.condition or link.remote_condition
    result = (dlv.remote_state, cond.name if cond else None, cond.description if cond else None)
    dlv.settle()
    return result


_send_raw.tags = 0  # type: ignore[attr-defined]
