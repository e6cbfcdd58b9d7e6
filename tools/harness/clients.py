"""Harness client processes: ``python -m once.tools.harness.clients pub|sub SPEC_JSON``.

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
* proton publisher: ``pub-NAME.jsonl`` like ours. A standard client cannot resume its
  link: when its connection drops it sends again, as new deliveries, whatever had not
  been accepted (at-least-once), so a subscriber may get such a message twice, once per
  delivery; the checker counts those as publisher retries, not as duplicates.

MQTT clients (``client: mqtt``) are in ``mqtt_clients.py``; the outbox application
(``client: outbox``) in ``outbox_app.py``.

Message ids are ``PUBLISHER:SEQ`` (SEQ = the once publisher's delivery tag, from 0).

Every client also writes its delivery journal (``router/journal.py``) under
``journal/``, row by row as it happens, for ``once audit``. A once subscriber's journal
follows its store: rows are written after the transaction commits, and a restarted
subscriber first writes what a crash kept it from writing.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from once.router.journal import Event, Journal, Source

RECEIVED = """CREATE TABLE IF NOT EXISTS received
              (n INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT, redelivered INTEGER, t REAL, gid BLOB, t_acc REAL)"""


def _line(f: Any, **kw: Any) -> None:
    f.write(json.dumps(kw) + "\n")
    f.flush()


async def run_once_publisher(spec: dict[str, Any]) -> None:
    from once.client import Publisher
    from once.router.amqp.performatives import Accepted

    out = Path(spec["out"])
    name = spec["name"]
    records = open(out / f"pub-{name}.jsonl", "a")
    journal = Journal(out / "journal" / f"publisher-{name}.csv", Source.PUBLISHER, name, sync_every_row=True)
    topic = spec["topic"]

    def outcome(tag: int, state: Any) -> None:
        accepted = isinstance(state, Accepted)
        _line(records, e="accepted" if accepted else "rejected", id=f"{name}:{tag}", t=time.time())
        journal.add(Event.ACCEPTED if accepted else Event.REJECTED, pub.gid(tag), topic, mid=f"{name}:{tag}")

    pub = Publisher(spec["routers"], topic, out / f"pub-{name}.db", name=name, on_outcome=outcome)
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
        journal.add(Event.SENT, pub.gid(seq), topic, mid=mid)
        in_flight.add(pub.send_nowait(f"body of {mid}".encode(), mid))
    await pub.wait_settled()
    print("done", flush=True)
    await pub.close()


async def run_once_subscriber(spec: dict[str, Any]) -> None:
    from once.client import Subscriber

    out = Path(spec["out"])
    name = spec["name"]
    sub = Subscriber(spec["routers"], spec["topic"], out / f"sub-{name}.db", name=name, grace=spec.get("grace", 30),
                     group=spec.get("group") or None, exclusive=bool(spec.get("exclusive")))
    sub.db.execute(RECEIVED)
    journal = catch_up_journal(out, name, spec["topic"], sub.db)
    await sub.start()
    await sub.attached.wait()
    print("attached", flush=True)
    accepting: list[Any] = []
    rows: list[list[Any]] = []

    def effect(db: Any, row: list[Any]) -> None:
        row[3] = time.time()  # accepted: in the transaction, before the router can hear of it
        db.execute("INSERT INTO received (id, redelivered, t, gid, t_acc) VALUES (?, ?, ?, ?, ?)",
                   (row[0], row[4], row[1], row[2], row[3]))

    async for msg in sub:
        row = [_message_id(msg), time.time(), msg.gid, None, int(msg.redelivered)]
        rows.append(row)
        accepting.append(asyncio.ensure_future(msg.accept(lambda db, row=row: effect(db, row))))
        if sub.queued == 0 or len(accepting) >= 200:  # accepted together: one transaction
            await asyncio.gather(*accepting)
            accepting.clear()
            _journal_rows(journal, spec["topic"], [tuple(r) for r in rows])  # type: ignore[misc]
            rows.clear()


def _message_id(msg: Any) -> str:
    """``PUBLISHER:SEQ``: its message-id, or from its body (an MQTT publisher's has no id)."""
    if msg.message_id is not None:
        return str(msg.message_id)
    body = msg.body
    text = body.decode(errors="replace") if isinstance(body, (bytes, bytearray, memoryview)) else str(body)
    return text.removeprefix("body of ")


def _journal_rows(journal: Journal, topic: str, rows: list[tuple[str, float, bytes, float, int]],
                  written: int = 0) -> None:
    """The rows in time order: a batch's arrivals all come before its acceptances (one
    transaction after them). (Written per message, arrival then acceptance, the journal's
    forward-only times moved each arrival to just after the previous message's acceptance.)
    ``written``: the first rows' arrivals are in the journal already (a kill cut a batch)."""
    out = []
    for k, (mid, t, gid, t_acc, redelivered) in enumerate(rows):
        if k >= written:
            out.append((int(t * 1e6), 0, Event.RECEIVED, gid, "redelivery" if redelivered else "", mid))
        out.append((int(t_acc * 1e6), 1, Event.ACCEPTED, gid, "", mid))
    out.sort(key=lambda r: r[:2])  # (stable: arrivals in the same microsecond stay in order)
    for t_us, _, event, gid, peer, mid in out:
        journal.add_at(t_us, event, gid, topic, peer, mid)
    journal.flush()


def catch_up_journal(out: Path, name: str, topic: str, db: Any) -> Journal:
    """Open a once subscriber's journal and write the acceptances its store holds and the
    journal does not (this process, or an earlier one, died between the two)."""
    path = out / "journal" / f"subscriber-{name}.csv"
    got, done = 0, 0  # arrivals and acceptances written (a batch's arrivals come first: a kill may cut between)
    if path.exists():
        text = path.read_text()
        if text and not text.endswith("\n"):  # a row cut short by a kill: drop it
            text = text[:text.rfind("\n") + 1]
            path.write_text(text)
        got = sum(1 for line in text.splitlines() if ",received," in line)
        done = sum(1 for line in text.splitlines() if ",accepted," in line)
    journal = Journal(path, Source.SUBSCRIBER, name)
    missing = db.execute("SELECT id, t, gid, t_acc, redelivered FROM received WHERE n > ? ORDER BY n", (done,)).fetchall()
    _journal_rows(journal, topic, [(mid, t, gid, t_acc or t, red) for mid, t, gid, t_acc, red in missing],
                  written=max(got - done, 0))
    return journal


def _proton_tag(delivery: Any) -> bytes:
    """The delivery tag as bytes: Proton's ``Delivery.tag`` decodes it as UTF-8, which
    fails on our binary tags (the gid)."""
    import cproton

    return cproton.bytes2pybytes(cproton.lib.pn_delivery_tag(delivery._impl))


def _proton_records(spec: dict[str, Any], kind: str, source: Source) -> tuple[Any, Journal]:
    """A Proton client's records (``pub-``/``sub-NAME.jsonl``) and its journal, row by row."""
    out, name = Path(spec["out"]), spec["name"]
    return (open(out / f"{kind}-{name}.jsonl", "a"),
            Journal(out / "journal" / f"{source.value}-{name}.csv", source, name, sync_every_row=True))


def run_proton_subscriber(spec: dict[str, Any]) -> None:
    from proton import Message
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    name, topic = spec["name"], spec["topic"]
    records, journal = _proton_records(spec, "sub", Source.SUBSCRIBER)

    class Handler(MessagingHandler):
        def __init__(self) -> None:
            super().__init__(prefetch=200, auto_accept=False)

        def on_start(self, event: Any) -> None:
            conn = event.container.connect(urls=spec["routers"])
            group = spec.get("group")
            if group:
                from once.tools.clients import SharedSubscription
                event.container.create_receiver(conn, spec["topic"], name=f"{group}|{name}",
                                                options=SharedSubscription(exclusive=bool(spec.get("exclusive"))))
            else:
                event.container.create_receiver(conn, spec["topic"], name=name)

        def on_link_opened(self, event: Any) -> None:
            if event.receiver is not None:
                print("attached", flush=True)

        def on_message(self, event: Any) -> None:
            msg: Message = event.message
            t = time.time()  # one reading for the record and the journal: the harness and the audit time alike
            # (an MQTT publisher's message has no message-id: its body names it, as for MQTT subscribers)
            body = msg.body
            mid = str(msg.id) if msg.id is not None else (
                bytes(body).decode(errors="replace") if isinstance(body, (bytes, memoryview)) else str(body)
            ).removeprefix("body of ")
            _line(records, id=mid, count=msg.delivery_count, first=bool(msg.first_acquirer), t=t)
            gid = _proton_tag(event.delivery)
            repeat = msg.delivery_count > 0  # (the mark: see check.py)
            journal.add_at(int(t * 1e6), Event.RECEIVED, gid, topic, "redelivery" if repeat else "", mid=mid)
            self.accept(event.delivery)
            journal.add(Event.ACCEPTED, gid, topic, mid=mid)

    container = Container(Handler())
    container.container_id = f"harness-{name}"
    container.run()


def run_proton_publisher(spec: dict[str, Any]) -> None:
    from once.records.gid import compute_gid
    from proton import Message
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    name, topic = spec["name"], spec["topic"]
    records, journal = _proton_records(spec, "pub", Source.PUBLISHER)
    total, rate, window = spec["messages"], spec["rate"], spec.get("window", 500)
    container_id = f"harness-{name}"

    class Handler(MessagingHandler):
        def __init__(self) -> None:
            super().__init__(auto_settle=True)
            self.sender: Any = None
            self.incarnation: int | None = None  # the router's, for this attach: part of the gid
            self.next = 0  # the next message never sent
            self.again: list[int] = []  # sent on a link that dropped before its outcome came
            self.open: dict[int, tuple[bytes, bytes]] = {}  # seq -> (tag, gid) on the current link
            self.attempts: dict[int, int] = {}
            self.start = 0.0
            self.tries = 0  # connections made: each goes to the next router in turn
            self.finished = False

        def on_start(self, event: Any) -> None:
            self.start = time.monotonic()
            self._connect(event.container)
            event.container.schedule(0.01, self)

        def _connect(self, container: Any) -> None:
            # A connection of its own each time, not Proton's reconnect: Proton sends on the
            # new connection the transfers its old one had not written yet, ahead of the
            # ones this publisher sends again from the first without an outcome, so its
            # messages would reach the subscribers out of its own order.
            urls = spec["routers"]
            url = urls[self.tries % len(urls)]
            self.tries += 1
            conn = container.connect(url=url, reconnect=False)
            self.sender = container.create_sender(conn, topic, name=name)

        def on_link_opened(self, event: Any) -> None:
            if event.sender is not None:
                props = event.sender.remote_properties or {}
                self.incarnation = int(next((v for k, v in props.items() if str(k) == "once:incarnation"), 0))
                self._pump()

        def on_timer_task(self, event: Any) -> None:
            self._pump()
            if self.next < total or self.again or self.open:
                event.container.schedule(0.01, self)

        def on_sendable(self, event: Any) -> None:
            self._pump()

        def _pump(self) -> None:
            sender = self.sender
            if sender is None or self.incarnation is None or not sender.state & sender.REMOTE_ACTIVE:
                return
            due = total if not rate else min(total, int((time.monotonic() - self.start) * rate) + 1)
            while sender.credit > 0 and len(self.open) < window and (self.again or self.next < due):
                if self.again:
                    seq = self.again.pop(0)
                else:
                    seq, self.next = self.next, self.next + 1
                attempt = self.attempts.get(seq, 0)
                self.attempts[seq] = attempt + 1
                tag = f"{seq}.{attempt}".encode()
                mid = f"{name}:{seq}"
                gid = compute_gid(container_id, name, self.incarnation, tag)
                _line(records, e="sent", id=mid, t=time.time())
                journal.add(Event.SENT, gid, topic, mid=mid)
                sender.send(Message(id=mid, body=f"body of {mid}"), tag=tag)
                self.open[seq] = (tag, gid)

        def _outcome(self, event: Any, accepted: bool) -> None:
            tag = _proton_tag(event.delivery)
            seq = int(tag.split(b".")[0])
            sent = self.open.get(seq)
            if sent is None or sent[0] != tag:
                return  # an outcome for a copy we already gave up on
            del self.open[seq]
            gid = sent[1]
            mid = f"{name}:{seq}"
            _line(records, e="accepted" if accepted else "rejected", id=mid, t=time.time())
            journal.add(Event.ACCEPTED if accepted else Event.REJECTED, gid, topic, mid=mid)
            if len(self.open) == 0 and not self.again and self.next >= total:
                print("done", flush=True)
                self.finished = True
                event.connection.close()
                # (and the reactor with it: after a drained router's forced close, a connection
                # attempt of the failover could still be under way, and kept ``run`` from
                # returning: the publisher said done and never exited; its run stalled)
                event.container.stop()

        def on_accepted(self, event: Any) -> None:
            self._outcome(event, True)

        def on_rejected(self, event: Any) -> None:
            self._outcome(event, False)

        def on_disconnected(self, event: Any) -> None:
            # What had no outcome may or may not have reached anyone: send it again, in
            # order, as new deliveries, on a new connection's link (the next router).
            self.again = sorted(set(self.again) | set(self.open))
            self.open.clear()
            self.incarnation = None
            # (``==``: Proton hands out a new wrapper for the same connection)
            if not self.finished and self.sender is not None and event.connection == self.sender.connection:
                self.sender = None
                event.container.schedule(0.1 if self.tries >= len(spec["routers"]) else 0.0, _Reconnect(self))

        def on_transport_error(self, event: Any) -> None:
            pass  # (the router is gone or not there: on_disconnected tries the next)

    class _Reconnect:
        def __init__(self, handler: Any) -> None:
            self.handler = handler

        def on_timer_task(self, event: Any) -> None:
            self.handler._connect(event.container)

    container = Container(Handler())
    container.container_id = container_id
    container.run()


def main() -> None:
    kind, spec = sys.argv[1], json.loads(sys.argv[2])
    if spec.get("client") == "outbox":
        from .outbox_app import run_outbox_app
        run_outbox_app(spec)
    elif spec.get("client") == "mqtt":
        from .mqtt_clients import run_mqtt_publisher, run_mqtt_subscriber
        (run_mqtt_publisher if kind == "pub" else run_mqtt_subscriber)(spec)
    elif kind == "pub" and spec.get("client") == "proton":
        run_proton_publisher(spec)
    elif kind == "pub":
        import uvloop
        uvloop.run(run_once_publisher(spec))
    elif spec.get("client") == "proton":
        run_proton_subscriber(spec)
    else:
        import uvloop
        uvloop.run(run_once_subscriber(spec))


if __name__ == "__main__":
    main()
