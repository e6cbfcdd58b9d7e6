"""The relay against a real router process, on SQLite and on a real PostgreSQL: committed
rows reach every subscriber, ours exactly once, each partition's in order, across a
SIGKILL of the relay mid-batch; rolled-back rows never; the tables end empty."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from once.client import Subscriber
from once.client.outbox.dialect import connect
from once.client.outbox.schema import init, rows_left, table
from once.client.outbox.send import send
from support.proton_clients import ProtonSubscriber
from support.routers import RouterProcess, until

ROOT = Path(__file__).resolve().parents[2]
ROWS_PER_TX = 10


def _relay(db_url: str, router: RouterProcess, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:  # (the child has its own copy of the file)
        return subprocess.Popen([sys.executable, "-m", "once.tools.cli", "outbox", "run", "--db", db_url, "--router",
                                 router.url, "--lease", "1.5"], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"))


def _write(db_url: str, transactions: int, keys: int = 2, partitions: int = 2, shards: int = 1) -> list[str]:
    """Rows in transactions of ten, over ``keys`` keys (and the first ``shards`` shards, a
    transaction's rows in one); every fifth transaction rolls back. The message ids
    (table:id) of the committed ones, in commit order."""
    conn = connect(db_url)
    layout = init(conn, shards=2, partitions=partitions)
    committed = []
    for t in range(transactions):
        ids = []
        for i in range(ROWS_PER_TX):
            key = f"k{i % keys}"
            shard = t % shards
            row = send(conn, "orders", f"t{t}-{i}".encode(), key=key, layout=layout, headers={"t": str(t)},
                       shard=shard)
            ids.append(f"{table(shard, layout.partition_of(key, 0))}:{row}")
        if t % 5 == 4:
            conn.rollback()
        else:
            conn.commit()
            committed += ids
    conn.close()
    return committed




def _in_order_per_partition(ids: list[str]) -> bool:
    last: dict[str, int] = {}
    for mid in ids:
        t, _, n = mid.rpartition(":")
        if int(n) < last.get(t, -1):
            return False
        last[t] = int(n)
    return True


async def test_committed_rows_reach_every_subscriber_across_a_sigkilled_relay(router: RouterProcess, tmp_path: Path,
                                                                             db_url: str):
    committed = _write(db_url, 40)  # 320 rows committed, 80 rolled back
    ours: list[str] = []
    sub = Subscriber([router.url], "orders", tmp_path / "sub.db")
    await sub.start()
    await asyncio.wait_for(sub.attached.wait(), 10)
    proton = ProtonSubscriber(router.url, "orders", name="outbox-proton")

    async def take() -> None:
        while True:
            msg = await sub.receive(60)
            ours.append(str(msg.message_id))
            await msg.accept()

    taker = asyncio.get_running_loop().create_task(take())
    relay = _relay(db_url, router, tmp_path / "relay.log")
    try:
        try:
            await until(lambda: len(ours) >= 60, 30, "the first rows")
        except AssertionError:
            raise AssertionError(f"no rows: relay log {(tmp_path / 'relay.log').read_text()[-2000:]}; "
                                 f"left {rows_left(db_url)}") from None
        relay.send_signal(signal.SIGKILL)  # mid-batch: rows in flight, some accepted and not deleted
        relay.wait(10)
        left_at_kill = rows_left(db_url)
        relay = _relay(db_url, router, tmp_path / "relay.log")
        await until(lambda: len(set(ours)) >= len(committed) and rows_left(db_url) == 0, 60, "every row, and empty tables")
    finally:
        relay.send_signal(signal.SIGTERM)
        relay.wait(10)
        taker.cancel()
        await sub.close()
    _both_got_every_row(ours, proton, committed)
    log = (tmp_path / "relay.log").read_text()
    assert "Traceback" not in log
    # (the kill was mid-stream: it left rows, which the second relay delivered)
    assert "stopped; " in log, log[-2000:]
    after = int(log.split("stopped; ")[1].split(" row(s)")[0])
    assert left_at_kill > 0 and after >= left_at_kill, (left_at_kill, after)


def _both_got_every_row(ours: list[str], proton: ProtonSubscriber, committed: list[str]) -> None:
    """Ours: every committed row exactly once, nothing rolled back, each partition in order;
    Proton's: every row at least once (repeats come marked), first arrivals in order."""
    theirs = [str(m.id) for m in _drain(proton)]
    proton.close()
    assert sorted(ours) == sorted(committed), "ours: exactly once, and nothing rolled back"
    assert _in_order_per_partition(ours)
    assert set(theirs) == set(committed)
    assert _in_order_per_partition(list(dict.fromkeys(theirs)))


def _drain(sub: ProtonSubscriber) -> list:
    out = []
    while not sub.messages.empty():
        out.append(sub.messages.get_nowait())
    return out


async def test_two_relays_share_the_tables_and_one_takes_over_when_the_other_is_killed(
        router: RouterProcess, tmp_path: Path, db_url: str):
    committed = _write(db_url, 100, keys=8, partitions=4, shards=2)  # 800 rows committed, both shards
    ours: list[str] = []
    sub = Subscriber([router.url], "orders", tmp_path / "sub.db")
    await sub.start()
    await asyncio.wait_for(sub.attached.wait(), 10)
    proton = ProtonSubscriber(router.url, "orders", name="takeover-proton")

    go = asyncio.Event()  # (past the first 40 our subscriber holds its acceptances: rows stay in flight)

    async def take() -> None:
        while True:
            msg = await sub.receive(60)
            if len(ours) >= 40:
                await go.wait()
            ours.append(str(msg.message_id))
            await msg.accept()

    taker = asyncio.get_running_loop().create_task(take())
    first = _relay(db_url, router, tmp_path / "first.log")
    second = None
    try:
        await until(lambda: len(ours) >= 40, 30, "the first rows")
        # a second relay comes: the first gives back half its tables, rows in flight
        second = _relay(db_url, router, tmp_path / "second.log")
        took = tmp_path / "second.log"
        await until(lambda: took.exists() and " took [(" in took.read_text(), 30, "the second relay's share")
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        left_at_kill = rows_left(db_url)
        go.set()
        await until(lambda: len(set(ours)) >= len(committed) and rows_left(db_url) == 0, 60, "every row, and empty tables")
    finally:
        for relay in (first, second):
            if relay is not None and relay.poll() is None:
                relay.send_signal(signal.SIGTERM)
                relay.wait(10)
        taker.cancel()
        await sub.close()
    _both_got_every_row(ours, proton, committed)
    assert left_at_kill > 0
    log = (tmp_path / "second.log").read_text()
    assert "Traceback" not in log + (tmp_path / "first.log").read_text()
    # (the survivor served its share first, then every table: the killed relay's too, once
    # its leases ran out)
    serving = [line.split("serving ")[1].count("(") for line in log.splitlines() if "serving " in line]
    assert serving[0] < 8 and serving[-1] == 8, log[-1500:]


async def test_a_row_a_long_transaction_commits_late_below_rows_already_sent_is_sent_too(
        router: RouterProcess, tmp_path: Path, postgres):
    """tw-tkms's trap: a row's id comes at its insert, its visibility at its commit. A relay
    that kept a "last id seen" would skip it; ours reads each table from its lowest id."""
    db_url = postgres.new_database()
    long, short = connect(db_url), connect(db_url)
    layout = init(short, shards=1, partitions=1)
    late = send(long, "orders", b"late", layout=layout)  # (the transaction stays open)
    early = [send(short, "orders", f"e{i}".encode(), layout=layout) for i in range(5)]
    short.commit()
    assert late < min(early)
    proton = ProtonSubscriber(router.url, "orders", name="late-proton")
    relay = _relay(db_url, router, tmp_path / "relay.log")
    try:
        got = [bytes(m.body) for m in proton.take(5)]
        assert got == [f"e{i}".encode() for i in range(5)]
        await until(lambda: rows_left(db_url) == 0, 20, "the committed rows deleted")
        long.commit()  # now it is visible, below every id already sent
        assert bytes(proton.get(20).body) == b"late"
        await until(lambda: rows_left(db_url) == 0, 20, "the late row deleted")
    finally:
        relay.send_signal(signal.SIGTERM)
        relay.wait(10)
        proton.close()
        long.close()
        short.close()
