"""The once client library against a real router process: exactly-once across its own crash.

A "crash" here drops the client's TCP connection with no closing frame and abandons its
state in memory; only what it committed to its SQLite store survives, as after SIGKILL.
(The harness scenario ``subscriber-crash`` does the same with real SIGKILLed processes.)
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from once.client import Publisher, Subscriber
from once.router.amqp.performatives import Accepted
from once.tools.topology_ports import free_port
from support.routers import RouterProcess

EFFECT = "CREATE TABLE IF NOT EXISTS seen (id TEXT)"


async def _until(condition, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def _crash(client: Publisher | Subscriber) -> None:
    """Gone without a word: no detach, no close, nothing more committed."""
    client.closed = True
    client.conn._closing = True
    client.conn.abort()
    if client.conn._task is not None:
        client.conn._task.cancel()
    client.store.close()


async def _subscriber(url: str, path: Path) -> Subscriber:
    sub = Subscriber([url], "orders", path)
    sub.db.execute(EFFECT)
    await sub.start()
    await asyncio.wait_for(sub.attached.wait(), 10)
    return sub


async def _accept(msg) -> None:
    await msg.accept(lambda db: db.execute("INSERT INTO seen (id) VALUES (?)", (str(msg.message_id),)))


def _effects(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return [r[0] for r in db.execute("SELECT id FROM seen ORDER BY rowid")]
    finally:
        db.close()


async def test_send_completes_when_the_subscriber_accepted(router: RouterProcess, tmp_path: Path):
    sub = await _subscriber(router.url, tmp_path / "sub.db")
    async with Publisher([router.url], "orders", tmp_path / "pub.db") as pub:
        fut = pub.send_nowait(b"hello", "m0")
        msg = await sub.receive(10)
        assert msg.body == b"hello" and msg.message_id == "m0" and not msg.redelivered
        await asyncio.sleep(0.2)  # (not synchronisation: a window in which the outcome must NOT come)
        assert not fut.done()
        await _accept(msg)
        assert isinstance(await asyncio.wait_for(fut, 10), Accepted)
        assert pub.pending == 0
    await sub.close(unsubscribe=True)


async def test_subscriber_crash_and_restart_sees_everything_once(router: RouterProcess, tmp_path: Path):
    store = tmp_path / "sub.db"
    sub = await _subscriber(router.url, store)
    async with Publisher([router.url], "orders", tmp_path / "pub.db") as pub:
        futs = [pub.send_nowait(f"m{i}".encode(), f"m{i}") for i in range(40)]
        for _ in range(25):  # takes all 40 in, accepts the first 25, then dies
            await _accept(await sub.receive(10))
        await _until(lambda: sub.queued >= 15, what="the rest to arrive")
        await _crash(sub)
        assert _effects(store) == [f"m{i}" for i in range(25)]
        sub = await _subscriber(router.url, store)
        for _ in range(15):
            msg = await sub.receive(10)
            assert msg.redelivered  # it had been sent before the crash
            await _accept(msg)
        outcomes = await asyncio.wait_for(asyncio.gather(*futs), 10)
        assert all(isinstance(o, Accepted) for o in outcomes)
        assert _effects(store) == [f"m{i}" for i in range(40)]  # each once, in order
        assert sub.queued == 0
    await sub.close(unsubscribe=True)


async def test_publisher_crash_and_restart_resumes_without_duplicates(router: RouterProcess, tmp_path: Path):
    sub_store, pub_store = tmp_path / "sub.db", tmp_path / "pub.db"
    sub = await _subscriber(router.url, sub_store)
    pub = await Publisher([router.url], "orders", pub_store).start()
    for i in range(20):
        pub.send_nowait(f"m{i}".encode(), f"m{i}")
    held = [await sub.receive(10) for _ in range(20)]  # the router has all 20, none answered yet
    await _crash(pub)
    for msg in held[:5]:  # accepted while the publisher is away
        await _accept(msg)
    outcomes: dict[int, object] = {}
    pub = Publisher([router.url], "orders", pub_store, on_outcome=lambda tag, o: outcomes.setdefault(tag, o))
    assert pub.pending == 20 and pub.next_tag == 20
    await pub.start()
    for msg in held[5:]:
        await _accept(msg)
    await pub.wait_settled(10)
    assert sorted(outcomes) == list(range(20)) and all(isinstance(o, Accepted) for o in outcomes.values())
    assert _effects(sub_store) == [f"m{i}" for i in range(20)]
    assert sub.queued == 0 and sub.duplicates == 0  # nothing came twice, not even to be dropped
    await pub.close()
    await sub.close(unsubscribe=True)


async def test_messages_sent_while_no_router_is_up_go_out_once_after_restart(router: RouterProcess, tmp_path: Path):
    sub_store, pub_store = tmp_path / "sub.db", tmp_path / "pub.db"
    sub = await _subscriber(router.url, sub_store)
    nowhere = f"amqp://127.0.0.1:{free_port()}"
    pub = await Publisher([nowhere], "orders", pub_store).start()
    for i in range(5):
        pub.send_nowait(f"m{i}".encode(), f"m{i}")
    await _until(lambda: pub.pending == 5, what="the outbox")
    await _crash(pub)
    async with Publisher([nowhere, router.url], "orders", pub_store) as pub:  # fails over to the live one
        for _ in range(5):
            await _accept(await sub.receive(10))
        await pub.wait_settled(10)
        fut = pub.send_nowait(b"m5", "m5")  # tags go on after the ones from before the crash
        await _accept(await sub.receive(10))
        assert isinstance(await asyncio.wait_for(fut, 10), Accepted)
    assert _effects(sub_store) == [f"m{i}" for i in range(6)]
    await sub.close(unsubscribe=True)


def test_the_readme_example_runs(router: RouterProcess, tmp_path: Path, monkeypatch, capsys):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    first_router = 'ROUTERS = ["amqp://127.0.0.1:5672", "amqp://127.0.0.1:5673"]'
    assert first_router in code
    # the first address refuses (nothing listens there): the example fails over to ours
    code = code.replace(first_router, f'ROUTERS = ["amqp://127.0.0.1:{free_port()}", "{router.url}"]')
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out.strip() == "Accepted()"
    assert (tmp_path / "orders-sub.db").exists()


async def test_a_group_member_that_crashes_resumes_its_share_and_nothing_is_processed_twice(
        router: RouterProcess, tmp_path: Path):
    stores = [tmp_path / "m0.db", tmp_path / "m1.db"]

    async def member(path: Path) -> Subscriber:
        sub = Subscriber([router.url], "orders", path, group="billing")
        sub.db.execute(EFFECT)
        await sub.start()
        await asyncio.wait_for(sub.attached.wait(), 10)
        return sub

    m0, m1 = [await member(p) for p in stores]
    async with Publisher([router.url], "orders", tmp_path / "pub.db") as pub:
        futs = [pub.send_nowait(f"m{i}".encode(), f"m{i}") for i in range(40)]
        await _until(lambda: m0.queued + m1.queued == 40, what="the group's share of all 40")
        assert m0.queued and m1.queued  # both members have some
        for _ in range(m0.queued // 2):  # m0 accepts half of its share, then dies
            await _accept(await m0.receive(10))
        left = m0.queued
        await _crash(m0)
        while m1.queued:
            await _accept(await m1.receive(10))
        m0 = await member(stores[0])  # it can resume: its share waited for it, not for m1
        for _ in range(left):
            msg = await m0.receive(10)
            assert msg.redelivered
            await _accept(msg)
        outcomes = await asyncio.wait_for(asyncio.gather(*futs), 10)
        assert all(isinstance(o, Accepted) for o in outcomes)
    done = _effects(stores[0]) + _effects(stores[1])
    assert sorted(done) == sorted(f"m{i}" for i in range(40))  # each once, across the group
    assert m1.duplicates == 0
    for s in (m0, m1):
        await s.close(unsubscribe=True)


async def test_an_exclusive_members_active_flag_follows_the_take_over(router: RouterProcess, tmp_path: Path):
    async def member(name: str) -> Subscriber:
        sub = Subscriber([router.url], "orders", tmp_path / f"{name}.db", group="ledger", exclusive=True)
        sub.db.execute(EFFECT)
        await sub.start()
        await asyncio.wait_for(sub.attached.wait(), 10)
        return sub

    first = await member("first")
    second = await member("second")
    assert first.active is True and second.active is False  # the longest-waiting member is active
    async with Publisher([router.url], "orders", tmp_path / "pub.db") as pub:
        sent = pub.send_nowait(b"one", "one")
        await _accept(await first.receive(10))
        assert isinstance(await asyncio.wait_for(sent, 10), Accepted)
        assert second.queued == 0
        await first.close(unsubscribe=True)  # the active member leaves: the standby takes over
        await _until(lambda: second.active is True, what="the standby to be told it is active")
        sent = pub.send_nowait(b"two", "two")
        msg = await second.receive(10)
        assert msg.body == b"two"
        await _accept(msg)
        assert isinstance(await asyncio.wait_for(sent, 10), Accepted)
    await second.close(unsubscribe=True)


async def test_a_publisher_sends_on_credit_that_came_before_its_connect_call_returned(router: RouterProcess,
                                                                                      tmp_path: Path, monkeypatch):
    """The whole handshake, the attach and the first credit can be read before ``dial``
    returns to the connection's task (its loop busy elsewhere: an outbox relay's database
    read). The credit must be used then: nothing else comes to prompt a send later (an
    outbox relay stalled with 320 rows, 1 run in 20 on PostgreSQL)."""
    import once.client.connection as connection

    real = connection.dial

    async def late(*args, **kw):
        proto = await real(*args, **kw)
        await asyncio.sleep(0.5)  # (the handshake completes meanwhile)
        return proto

    monkeypatch.setattr(connection, "dial", late)
    sub = await _subscriber(router.url, tmp_path / "sub.db")
    async with Publisher([router.url], "orders", tmp_path / "pub.db") as pub:
        fut = pub.send_nowait(b"first", "m0")
        msg = await sub.receive(5)
        await _accept(msg)
        assert msg.body == b"first" and isinstance(await asyncio.wait_for(fut, 10), Accepted)
    await sub.close(unsubscribe=True)
