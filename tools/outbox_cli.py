"""``once outbox``: make the outbox's tables, write rows from a script, run the relay."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from once.router.outbox.dialect import OutboxError, connect
from once.router.outbox.schema import init, read_layout
from once.router.outbox.send import send

from .exits import CommandError, Exit


def outbox(action: str, db: str, args: Sequence[str], shards: int, partitions: int, shard: int, key: str | None,
           headers: Sequence[str], routers: Sequence[str] = (), lease: float = 5.0) -> int:
    if action == "run":
        return _run(db, routers, lease)
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
        raise CommandError(Exit.USAGE, f"unknown action {action!r} (init, send, run)")
    except OutboxError as e:
        raise CommandError(Exit.USAGE, str(e)) from None
    finally:
        conn.close()


def _run(db: str, routers: Sequence[str], lease: float) -> int:
    """The relay, until SIGTERM or Ctrl-C."""
    from once.router.loop import run
    from once.router.outbox.relay import Relay

    if not routers:
        raise CommandError(Exit.USAGE, "run needs --router amqp://HOST:PORT (one or more: failover in that order)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if not 0.5 <= lease <= 600:
        raise CommandError(Exit.USAGE, f"--lease {lease:g}: expected 0.5 to 600 seconds")
    relay = Relay(db, routers, lease=lease, renew=lease / 5)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        print(f"outbox relay: {db} to {', '.join(routers)}", flush=True)
        await relay.run(stop)

    try:
        run(main())
    except OutboxError as e:
        raise CommandError(Exit.USAGE, str(e)) from None
    print(f"outbox relay: stopped; {relay.deleted} row(s) delivered, {relay.dead} dead-lettered", flush=True)
    return Exit.OK
