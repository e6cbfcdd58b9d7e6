"""The harness's outbox application: ``client: outbox`` (``clients.py`` runs it).

It writes ``messages`` committed rows for its topic into the outbox, ``per_tx`` to a
transaction, at ``rate`` rows a second, keys spread over the partitions; every
``rollback_every``-th transaction rolls back (those rows must never reach anyone). Each
transaction also writes its id to ``harness_tx``: when the database goes away during a
commit, the application asks, once it is back, whether that transaction committed (what
a real application does; otherwise it could not know which of its rows exist).

Records, for the checker and the audit (message ids are the relay's, ``TABLE:ID``):

* ``pub-NAME.jsonl``: ``{"e": "committed", "id", "t"}`` per row, after its commit: owed to
  every subscriber.
* ``journal/publisher-NAME-TABLE.csv``: ``sent`` at each row's insert, ``committed`` at its
  commit; one file per table, its node ``NAME/TABLE``: order is promised per partition.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from once.client.outbox.dialect import connect, dialect_of
from once.client.outbox.identity import message_id, row_gid
from once.client.outbox.schema import read_layout, table
from once.client.outbox.send import send
from once.router.journal import Event, Journal, Source

KEYS = 8
BACK_WITHIN = 60.0  # seconds the database may be away


def _reconnect(url: str) -> Any:
    deadline = time.monotonic() + BACK_WITHIN
    while True:
        try:
            return connect(url)
        except Exception:  # noqa: BLE001 - (the database is restarting)
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _committed(conn: Any, tx: str) -> bool:
    cur = conn.cursor()
    cur.execute(dialect_of(conn).sql("SELECT 1 FROM harness_tx WHERE id = ?"), (tx,))
    found = cur.fetchone() is not None
    conn.commit()
    return found


def run_outbox_app(spec: dict[str, Any]) -> None:
    out, name, topic, url = Path(spec["out"]), spec["name"], spec["topic"], spec["db"]
    per_tx, every, total, rate = spec["per_tx"], spec["rollback_every"], spec["messages"], spec["rate"]
    records = open(out / f"pub-{name}.jsonl", "a")
    journals: dict[str, Journal] = {}
    # (the first connection as every later one: the scenario may restart the database
    # before a loaded machine has started this process; CI at 9aed307, its cores busy)
    conn = _reconnect(url)
    layout = read_layout(conn)
    assert layout is not None
    insert_tx = dialect_of(conn).sql("INSERT INTO harness_tx (id) VALUES (?)")
    committed = tx = 0
    start = time.monotonic()
    while committed < total:
        if rate:
            delay = start + committed / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        n = min(per_tx, total - committed)
        tx_id = f"{name}-{tx}"
        back = bool(every) and tx % every == every - 1
        tx += 1
        rows: list[tuple[str, int, int]] = []  # (table, row id, insert time in us)
        try:
            for i in range(n):
                key = f"k{(committed + i) % KEYS}"
                row = send(conn, topic, f"{tx_id} row {i}".encode(), key=key, layout=layout)
                rows.append((table(0, layout.partition_of(key, 0)), row, time.time_ns() // 1000))
            conn.cursor().execute(insert_tx, (tx_id,))
            if back:
                conn.rollback()
                continue
            conn.commit()
        except Exception:  # noqa: BLE001 - the database went away: did this transaction commit?
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - (gone already)
                pass
            conn = _reconnect(url)
            if back or not rows or not _committed(conn, tx_id):
                continue  # (not committed: the next transaction writes these messages)
        for t, row, t_us in rows:
            journal = journals.get(t)
            if journal is None:
                journal = journals[t] = Journal(out / "journal" / f"publisher-{name}-{t}.csv", Source.PUBLISHER,
                                                f"{name}/{t}", sync_every_row=True)
            gid, mid = row_gid(layout.instance, t, topic, row), message_id(t, row)
            journal.add_at(t_us, Event.SENT, gid, topic, mid=mid)
        for t, row, _ in rows:
            journals[t].add(Event.COMMITTED, row_gid(layout.instance, t, topic, row), topic, mid=message_id(t, row))
            records.write(json.dumps({"e": "committed", "id": message_id(t, row), "t": time.time()}) + "\n")
        records.flush()
        committed += n
    conn.close()
    for journal in journals.values():
        journal.close()
    print("done", flush=True)
