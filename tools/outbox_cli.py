"""``once outbox``: make the outbox's tables, write rows from a script, run the relay."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from once.client.outbox.dialect import DatabaseUnreachable, OutboxError, connect
from once.client.outbox.schema import init, read_layout
from once.client.outbox.send import send

from .exits import CommandError, Exit


def outbox(a: argparse.Namespace) -> int:
    action, db, args, shard, key, headers = a.action, a.db, a.args, a.shard, a.key, a.header
    if action == "run":
        return _run(a)
    try:
        conn = connect(db, create=action == "init")
    except DatabaseUnreachable as e:
        raise CommandError(Exit.UNREACHABLE, str(e)) from None
    except OutboxError as e:  # (a URL it cannot use, a driver not installed, no such file)
        raise CommandError(Exit.USAGE, str(e)) from None
    try:
        if action == "init":
            if args:
                raise CommandError(Exit.USAGE, f"init takes no arguments (got {' '.join(args)})")
            layout = init(conn, a.shards, a.partitions)
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


def _http(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise CommandError(Exit.USAGE, f"--http {value}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def _run(a: argparse.Namespace) -> int:
    """The relay, until SIGTERM or Ctrl-C."""
    from once.outbox.metrics import serve
    from once.outbox.relay import OutboxRelay
    from once.router.loop import run

    db, routers, lease = a.db, a.router, a.lease
    if not routers:
        raise CommandError(Exit.USAGE, "run needs --router amqp://HOST:PORT (one or more: failover in that order)")
    if not 0.5 <= lease <= 600:
        raise CommandError(Exit.USAGE, f"--lease {lease:g}: expected 0.5 to 600 seconds")
    for name, value in (("--stuck", a.stuck), ("--stranded-after", a.stranded_after)):
        if not 1 <= value <= 86400:
            raise CommandError(Exit.USAGE, f"{name} {value:g}: expected 1 to 86400 seconds")
    http = _http(a.http) if a.http else None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    from once.router.journal import Journal, Source

    journal = Journal(a.journal, Source.PUBLISHER, a.name or "outbox-relay", sync_every_row=True) if a.journal else None
    relay = OutboxRelay(db, routers, lease=lease, renew=lease / 5, stuck=a.stuck, stranded_after=a.stranded_after,
                  journal=journal, name=a.name)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        served = ""
        if http is not None:
            try:
                server, port = await serve(relay, *http)
            except OSError as e:
                raise CommandError(Exit.USAGE, f"--http {a.http}: {e.strerror or e}") from None
            served = f" http://{http[0]}:{port}"
        print(f"outbox relay: {db} to {', '.join(routers)}{served}", flush=True)
        await relay.run(stop)

    try:
        run(main())
    except OutboxError as e:
        raise CommandError(Exit.USAGE, str(e)) from None
    print(f"outbox relay: stopped; {relay.deleted} row(s) delivered, {relay.dead} dead-lettered", flush=True)
    return Exit.OK
