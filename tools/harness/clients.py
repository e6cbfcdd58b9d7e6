"""Harness client processes: ``python -m tools.harness.clients pub|sub SPEC_JSON``.

Each writes its own records under the run directory; the harness reads them at the end
(and for progress while running):

* once publisher: ``pub-NAME.jsonl``: ``{"e": "sent"|"accepted"|"rejected", "id", "t"}``
  (a "sent" line is written before the message is handed to the library, so every
  message that may exist is listed). Its store is ``pub-NAME.db``.
* once subscriber: the table ``received`` in its store ``sub-NAME.db``, written in the
  same transaction that records the acceptance: exactly what the application saw, also
  across a crash of this process.
* proton subscriber: ``sub-NAME.jsonl``: ``{"id", "count", "first", "t"}`` per message
  received, written before accepting (at-least-once: a crash may repeat the last ones).

Message ids are ``PUBLISHER:SEQ`` (SEQ = the once publisher's delivery tag, from 0).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

RECEIVED = """CREATE TABLE IF NOT EXISTS received
              (n INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT, redelivered INTEGER, t REAL)"""


def _line(f: Any, **kw: Any) -> None:
    f.write(json.dumps(kw) + "\n")
    f.flush()


async def run_once_publisher(spec: dict[str, Any]) -> None:
    from router.amqp.performatives import Accepted
    from router.clientlib import Publisher

    out = Path(spec["out"])
    name = spec["name"]
    records = open(out / f"pub-{name}.jsonl", "a")

    def outcome(tag: int, state: Any) -> None:
        _line(records, e="accepted" if isinstance(state, Accepted) else "rejected", id=f"{name}:{tag}", t=time.time())

    pub = Publisher(spec["routers"], spec["topic"], out / f"pub-{name}.db", name=name, on_outcome=outcome)
    await pub.start()
    total, rate, window = spec["messages"], spec["rate"], spec.get("window", 500)
    start = time.monotonic()
    first = pub.next_tag
    in_flight: set[asyncio.Future[Any]] = set()
    for seq in range(first, total):
        while len(in_flight) >= window:
            await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
            in_flight = {f for f in in_flight if not f.done()}
        if rate:
            due = start + (seq - first) / rate
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        mid = f"{name}:{seq}"
        _line(records, e="sent", id=mid, t=time.time())
        in_flight.add(pub.send_nowait(f"body of {mid}".encode(), mid))
    await pub.wait_settled()
    print("done", flush=True)
    await pub.close()


async def run_once_subscriber(spec: dict[str, Any]) -> None:
    from router.clientlib import Subscriber

    out = Path(spec["out"])
    name = spec["name"]
    sub = Subscriber(spec["routers"], spec["topic"], out / f"sub-{name}.db", name=name, grace=spec.get("grace", 30))
    sub.db.execute(RECEIVED)
    await sub.start()
    await sub.attached.wait()
    print("attached", flush=True)
    accepting: list[Any] = []
    async for msg in sub:
        row = (str(msg.message_id), int(msg.redelivered), time.time())
        accepting.append(asyncio.ensure_future(msg.accept(
            lambda db, row=row: db.execute("INSERT INTO received (id, redelivered, t) VALUES (?, ?, ?)", row))))
        if sub.queued == 0 or len(accepting) >= 200:  # accepted together: one transaction
            await asyncio.gather(*accepting)
            accepting.clear()


def run_proton_subscriber(spec: dict[str, Any]) -> None:
    from proton import Message
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    out = Path(spec["out"])
    name = spec["name"]
    records = open(out / f"sub-{name}.jsonl", "a")

    class Handler(MessagingHandler):
        def __init__(self) -> None:
            super().__init__(prefetch=200, auto_accept=False)

        def on_start(self, event: Any) -> None:
            conn = event.container.connect(urls=spec["routers"])
            event.container.create_receiver(conn, spec["topic"], name=name)

        def on_link_opened(self, event: Any) -> None:
            if event.receiver is not None:
                print("attached", flush=True)

        def on_message(self, event: Any) -> None:
            msg: Message = event.message
            _line(records, id=str(msg.id), count=msg.delivery_count, first=bool(msg.first_acquirer), t=time.time())
            self.accept(event.delivery)

    container = Container(Handler())
    container.container_id = f"harness-{name}"
    container.run()


def main() -> None:
    kind, spec = sys.argv[1], json.loads(sys.argv[2])
    if kind == "pub":
        import uvloop
        uvloop.run(run_once_publisher(spec))
    elif spec.get("client") == "proton":
        run_proton_subscriber(spec)
    else:
        import uvloop
        uvloop.run(run_once_subscriber(spec))


if __name__ == "__main__":
    main()
