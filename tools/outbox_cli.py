"""``once outbox``: make the outbox's tables, write rows from a script, (next) run the relay."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from once.router.outbox.dialect import OutboxError, connect
from once.router.outbox.schema import init, read_layout
from once.router.outbox.send import send

from .exits import CommandError, Exit


def outbox(action: str, db: str, args: Sequence[str], shards: int, partitions: int, shard: int, key: str | None,
           headers: Sequence[str]) -> int:
    try:
        conn = connect(db)
    except OutboxError as e:
        raise CommandError(Exit.UNREACHABLE, str(e)) from None
    try:
        if action == "init":
            if args:
                raise CommandError(Exit.USAGE, f"init takes no arguments (got {' '.join(args)})")
            layout = init(conn, shards, partitions)
            print(f"outbox {layout.instance}: {layout.shards} shard(s) of {layout.partitions} partition(s) in {db}")
            return Exit.OK
        if action == "send":
            if not args:
                raise CommandError(Exit.USAGE, "send needs a TOPIC and at least one BODY")
            topic, bodies = args[0], list(args[1:]) or [line.rstrip("\n") for line in sys.stdin]
            pairs = [h.partition("=") for h in headers]
            if any(not k or not sep for k, sep, _ in pairs):
                raise CommandError(Exit.USAGE, f"--header takes NAME=VALUE (got {headers})")
            layout = read_layout(conn)
            ids = [send(conn, topic, b.encode(), shard=shard, key=key, headers={k: v for k, _, v in pairs} or None,
                        layout=layout) for b in bodies]
            conn.commit()  # (one transaction: all of them, or none)
            print(f"{len(ids)} row(s) committed to shard {shard}" + (f", key {key}" if key else ""))
            return Exit.OK
        raise CommandError(Exit.USAGE, f"unknown action {action!r} (init, send)")
    except OutboxError as e:
        raise CommandError(Exit.USAGE, str(e)) from None
    finally:
        conn.close()
