"""The outbox's tables and the application's ``send``, on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from once.client.outbox.dialect import OutboxError, connect
from once.client.outbox.schema import init, read_layout, table
from once.client.outbox.send import send, send_many


def _rows(conn, shard: int = 0, partition: int = 0) -> list[tuple]:
    cur = conn.cursor()
    cur.execute(f"SELECT id, topic, msg_key, headers, body FROM {table(shard, partition)} ORDER BY id")
    rows = [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in cur.fetchall()]
    conn.commit()
    return rows


def test_init_makes_the_seeds_tables_once_and_keeps_its_layout(conn, db_url: str):
    layout = init(conn, shards=2, partitions=3)
    assert (layout.shards, layout.partitions) == (2, 3) and len(layout.instance) == 16
    assert layout.tables() == [(s, p) for s in range(2) for p in range(3)]
    for s, p in layout.tables():
        assert _rows(conn, s, p) == []
    assert init(conn, shards=2, partitions=3) == layout  # (again: the same outbox)
    with pytest.raises(OutboxError, match="exists with 2 shards of 3 partitions, not 2 of 4"):
        init(conn, shards=2, partitions=4)
    if db_url.startswith("sqlite"):
        other = connect(db_url.replace("outbox.db", "other.db"))
        assert init(other).instance != layout.instance  # (each outbox its own identity)
        other.close()


def test_a_row_is_written_in_the_callers_transaction_and_only_a_commit_sends_it(conn):
    init(conn)
    first = send(conn, "orders", b"\x00kept", headers={"kind": "new"})
    conn.commit()
    send(conn, "orders", b"rolled back")
    conn.rollback()
    later = send(conn, "orders", b"\xffalso kept")
    conn.commit()
    assert later > first
    assert _rows(conn) == [(first, "orders", None, json.dumps({"kind": "new"}), b"\x00kept"),
                           (later, "orders", None, None, b"\xffalso kept")]


def test_a_key_keeps_its_messages_in_one_partition_and_shards_are_apart(conn):
    layout = init(conn, shards=2, partitions=4)
    for i in range(8):
        send(conn, "t", f"a{i}".encode(), key="customer-7", layout=layout)
    send(conn, "t", b"spare", shard=1, key="customer-7")
    conn.commit()
    p = layout.partition_of("customer-7", 0)
    assert [r[4] for r in _rows(conn, 0, p)] == [f"a{i}".encode() for i in range(8)]
    assert [r[4] for r in _rows(conn, 1, p)] == [b"spare"]
    assert all(_rows(conn, 0, q) == [] for q in range(4) if q != p)


def test_send_many_writes_a_batch_in_the_callers_transaction_each_key_in_order(conn):
    layout = init(conn, shards=1, partitions=3)
    keys = [f"k{i % 5}" for i in range(40)]
    ids = send_many(conn, "t", [f"m{i}".encode() for i in range(40)], keys=keys, layout=layout)
    send_many(conn, "t", [b"gone"] * 10, layout=layout)
    conn.rollback()
    conn.commit()
    ids = send_many(conn, "t", [f"m{i}".encode() for i in range(40)], keys=keys, layout=layout)
    conn.commit()
    by_table: dict[int, list[tuple[int, str, bytes]]] = {}
    for i, (row, key) in enumerate(zip(ids, keys)):
        by_table.setdefault(layout.partition_of(key, 0), []).append((row, key, f"m{i}".encode()))
    for p in range(3):
        assert [(r[0], r[2], r[4]) for r in _rows(conn, 0, p)] == by_table.get(p, [])  # (ids in the batch's order)
    with pytest.raises(OutboxError, match="2 keys for 3 bodies"):
        send_many(conn, "t", [b"a", b"b", b"c"], keys=["x", "y"])


@pytest.mark.parametrize(("call", "says"), [
    (lambda c: send(c, "a/+", b"x"), "'a/+' is a pattern"),
    (lambda c: send(c, "", b"x"), "a message needs a topic"),
    (lambda c: send(c, "t", "text"), "the body is bytes, not str"),
    (lambda c: send_many(c, "t", [b"x", "text"]), "the body is bytes, not str"),
    (lambda c: send(c, "t", b"x", shard=2), "shard 2: the outbox has shards 0..1"),
])
def test_a_bad_message_is_refused_in_one_line(conn, call, says: str):
    init(conn)
    with pytest.raises(OutboxError, match=says.replace("+", r"\+").replace(".", r"\.")):
        call(conn)


def test_without_tables_the_error_says_to_run_init(conn):
    with pytest.raises(OutboxError, match="no outbox tables here: run once outbox init"):
        read_layout(conn)
    with pytest.raises(OutboxError, match="no outbox tables here"):
        send(conn, "t", b"x")


@pytest.mark.parametrize("url", ["mysql://x", "sqlite://", "postgresql://nobody@127.0.0.1:1/none"])
def test_a_bad_url_is_one_line(url: str):
    with pytest.raises(OutboxError) as e:
        connect(url)
    assert "\n" not in str(e.value) and url in str(e.value)


def test_the_command_line_makes_the_tables_and_commits_rows_in_one_transaction(db_url: str, capsys):
    from once.tools.cli import main

    assert main(["outbox", "init", "--db", db_url, "--partitions", "2"]) == 0
    assert "2 shard(s) of 2 partition(s)" in capsys.readouterr().out
    assert main(["outbox", "send", "orders", "a", "b", "--db", db_url, "--key", "k", "--header", "x=1"]) == 0
    assert main(["outbox", "send", "a/+", "x", "--db", db_url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'a/+' is a pattern" in err
    conn = connect(db_url)
    layout = read_layout(conn)
    rows = _rows(conn, 0, layout.partition_of("k", 0))
    conn.close()
    assert [(r[1], r[2], r[3], r[4]) for r in rows] == [("orders", "k", '{"x": "1"}', b"a"), ("orders", "k", '{"x": "1"}', b"b")]


def test_a_relative_sqlite_url_is_relative_and_a_send_makes_no_database(tmp_path: Path, monkeypatch, capsys):
    """``sqlite:///outbox.db`` is a file in the working directory (it was one at the file
    system's root), ``sqlite:////abs`` an absolute one; a send to a file that is not there
    says so and leaves none behind (issue 50, item 3)."""
    from once.tools.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["outbox", "init", "--db", "sqlite:///outbox.db"]) == 0
    assert (tmp_path / "outbox.db").exists() and not Path("/outbox.db").exists()
    assert main(["outbox", "send", "t", "x", "--db", f"sqlite:///{tmp_path / 'outbox.db'}"]) == 0
    capsys.readouterr()
    assert main(["outbox", "send", "t", "x", "--db", "sqlite:///nope.db"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no database at nope.db" in err and "once outbox init" in err
    assert not (tmp_path / "nope.db").exists() and not Path("/nope.db").exists()


@pytest.mark.parametrize("url", ["mysql://x", "sqlite://"])
def test_a_url_the_outbox_cannot_use_is_a_usage_error(url: str, capsys):
    """(exit 2 with the line that names it; it was 4, "no router answers": issue 50, item 11)"""
    from once.tools.cli import main

    assert main(["outbox", "init", "--db", url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and url in err
