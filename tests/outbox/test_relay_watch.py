"""The relay in this process, against a real router: PostgreSQL's commits wake it (no
poll in the test's time), a row held past ``stuck`` has its links started again and is
still delivered once, rows held past the threshold are counted, logged and served as
metrics, and the relay rides out a PostgreSQL restart."""

from __future__ import annotations

import asyncio
import logging
import urllib.request
from pathlib import Path

import pytest
from once.client import Subscriber
from once.client.outbox.dialect import OutboxError, connect
from once.client.outbox.schema import init, rows_left
from once.client.outbox.send import send, send_many
from once.outbox.metrics import serve
from once.outbox.relay import OutboxRelay
from support.postgres import Postgres
from support.routers import RouterProcess, until


async def _subscriber(router: RouterProcess, tmp_path: Path, name: str = "sub") -> Subscriber:
    sub = Subscriber([router.url], "orders", tmp_path / f"{name}.db")
    await sub.start()
    await asyncio.wait_for(sub.attached.wait(), 10)
    return sub


async def test_a_postgresql_commit_wakes_the_relay_without_a_poll(router: RouterProcess, tmp_path: Path, postgres):
    db_url = postgres.new_database()
    conn = connect(db_url)
    layout = init(conn, shards=1, partitions=1)
    sub = await _subscriber(router, tmp_path)
    relay = OutboxRelay(db_url, [router.url], poll=3600)  # (no poll while the test runs: only a notification wakes it)
    stop = asyncio.Event()
    task = asyncio.get_running_loop().create_task(relay.run(stop))
    try:
        await until(lambda: relay.listener is not None and relay.listener.listening and relay.claims is not None
                     and relay.claims.held, 10, "the relay listening and serving")
        got = []
        for i in range(3):  # (each commit on its own: each one wakes it)
            heard = relay.listener.heard
            send(conn, "orders", f"m{i}".encode(), layout=layout)
            send(conn, "orders", f"m{i}".encode(), layout=layout)
            conn.rollback()  # (no notification: only a commit sends one)
            send(conn, "orders", f"m{i}".encode(), layout=layout)
            conn.commit()
            await until(lambda: relay.listener.heard > heard, 10, "the notification")  # noqa: B023
            assert relay.listener.heard == heard + 1
            msg = await sub.receive(10)
            got.append(bytes(msg.body))
            await msg.accept()
        assert got == [b"m0", b"m1", b"m2"]
        await until(lambda: rows_left(db_url) == 0, 10, "the rows deleted")
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
        await sub.close()
        conn.close()


async def test_a_row_held_past_stuck_restarts_its_links_is_counted_stranded_and_still_arrives_once(
        router: RouterProcess, tmp_path: Path, db_url: str, caplog):
    caplog.set_level(logging.INFO, "once.outbox")
    conn = connect(db_url)
    layout = init(conn, shards=1, partitions=1)
    send_many(conn, "orders", [f"m{i}".encode() for i in range(5)], layout=layout)
    conn.commit()
    sub = await _subscriber(router, tmp_path)
    relay = OutboxRelay(db_url, [router.url], stuck=1.0, stranded_after=0.5, count_every=0.2, renew=0.2)
    stop = asyncio.Event()
    task = asyncio.get_running_loop().create_task(relay.run(stop))
    server, port = await serve(relay, "127.0.0.1", 0)
    try:
        first = await sub.receive(10)  # held: the rows wait for it
        await until(lambda: relay.restarts >= 1, 15, "the links started again")
        await until(lambda: relay.watch.total() == 5, 15, "the held rows counted stranded")
        page = await asyncio.to_thread(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
                                       .read().decode())
        assert 'once_outbox_rows_stranded{table="outgoing_message_0_0"} 5.0' in page, page
        assert "once_outbox_link_restarts_total 1.0" in page or "once_outbox_link_restarts_total 2.0" in page, page
        await first.accept()
        got = [str(first.message_id)]
        while len(got) < 5:
            msg = await sub.receive(10)
            got.append(str(msg.message_id))
            await msg.accept()
        await until(lambda: rows_left(db_url) == 0, 15, "the rows deleted")
        await until(lambda: relay.watch.total() == 0, 15, "no stranded rows")
        assert got == [f"outgoing_message_0_0:{i}" for i in range(1, 6)], got  # (once each, in order)
        assert await asyncio.wait_for(_nothing_more(sub), 5)
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
        server.close()
        await sub.close()
        conn.close()
    said = caplog.text
    assert "waited over 1 s for their outcome: its links start again" in said
    assert "outgoing_message_0_0: 5 row(s) older than 0.5 s are waiting" in said
    assert "outgoing_message_0_0: no stranded rows now" in said


async def _nothing_more(sub: Subscriber) -> bool:
    try:
        msg = await sub.receive(1.0)
    except TimeoutError:
        return True
    raise AssertionError(f"delivered twice: {msg.message_id}")


async def test_the_relay_rides_out_a_postgresql_restart_under_load(router: RouterProcess, tmp_path: Path):
    pg = Postgres()  # (its own server: the others' tests keep theirs)
    try:
        db_url = pg.new_database()
        conn = connect(db_url)
        layout = init(conn, shards=1, partitions=1)
        sub = await _subscriber(router, tmp_path)
        relay = OutboxRelay(db_url, [router.url], renew=0.2)
        stop = asyncio.Event()
        task = asyncio.get_running_loop().create_task(relay.run(stop))
        got: list[str] = []

        async def take() -> None:
            while True:
                msg = await sub.receive(60)
                got.append(bytes(msg.body).decode())
                await msg.accept()

        taker = asyncio.get_running_loop().create_task(take())
        written = 0

        def write(n: int) -> None:
            nonlocal written
            send_many(conn, "orders", [f"m{written + i}".encode() for i in range(n)], layout=layout)
            conn.commit()
            written += n

        try:
            for _ in range(10):
                write(100)
            await until(lambda: len(got) >= 200, 30, "the first rows")
            await asyncio.to_thread(pg.stop, "fast")  # (mid-stream: rows in flight, deletes to come)
            await asyncio.to_thread(pg.start)
            conn.close()
            conn = connect(db_url)
            for _ in range(5):
                write(100)
            await until(lambda: len(set(got)) >= written and rows_left(db_url) == 0, 60, "every row, and an empty table")
            await until(lambda: relay.listener is not None and relay.listener.listening, 10, "LISTEN again")
        finally:
            stop.set()
            await asyncio.wait_for(task, 20)
            taker.cancel()
            await sub.close()
            conn.close()
        assert got == [f"m{i}" for i in range(written)]  # (once each, in order)
        assert relay.db_losses >= 1 and relay.listener.lost >= 1
    finally:
        pg.close()


async def test_a_relay_started_while_its_database_is_down_waits_for_it(router: RouterProcess, tmp_path: Path):
    """A relay whose first connection found PostgreSQL down took the refusal as final and
    ended, sending nothing (CI: the harness's outbox-database-restarts stops the database a
    second in, and a relay process slow to start on a loaded machine met it stopped). It
    now tries again until the database answers; a wrong database still ends it."""
    pg = Postgres()
    try:
        db_url = pg.new_database()
        conn = connect(db_url)
        layout = init(conn, shards=1, partitions=1)
        send_many(conn, "orders", [b"m0", b"m1"], layout=layout)
        conn.commit()
        conn.close()
        sub = await _subscriber(router, tmp_path)
        await asyncio.to_thread(pg.stop, "fast")
        relay = OutboxRelay(db_url, [router.url], renew=0.2)
        stop = asyncio.Event()
        task = asyncio.get_running_loop().create_task(relay.run(stop))
        try:
            await until(lambda: relay.conn is None and not task.done(), 10, "the relay waiting for its database")
            await asyncio.to_thread(pg.start)
            got = []
            for _ in range(2):
                msg = await sub.receive(60)
                got.append(bytes(msg.body).decode())
                await msg.accept()
            assert got == ["m0", "m1"]
        finally:
            stop.set()
            await asyncio.wait_for(task, 20)
            await sub.close()
        wrong = OutboxRelay(db_url.rsplit("/", 1)[0] + "/no_such_database", [router.url])
        with pytest.raises(OutboxError, match="no_such_database"):
            await wrong.run(asyncio.Event())
    finally:
        pg.close()
