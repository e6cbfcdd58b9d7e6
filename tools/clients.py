"""``once send`` / ``once recv``: small Proton clients for trying a router out."""

from __future__ import annotations

import sys
from collections.abc import Iterable

from proton import Message
from proton.utils import BlockingConnection, SendException


def send(url: str, topic: str, bodies: list[str], count: int | None, timeout: float) -> int:
    items: Iterable[str]
    if count is not None:
        items = (f"message {i}" for i in range(count))
    elif bodies:
        items = bodies
    else:
        items = (line.rstrip("\n") for line in sys.stdin)
    conn = BlockingConnection(url, timeout=timeout)
    sender = conn.create_sender(topic)
    failures = 0
    sent = 0
    try:
        for body in items:
            try:
                sender.send(Message(body=body), timeout=timeout)  # returns once every subscriber accepted
            except SendException as e:
                failures += 1
                print(f"not accepted: {body!r}: {e.state}", file=sys.stderr)
            sent += 1
    finally:
        conn.close()
    print(f"sent {sent}, accepted {sent - failures}")
    return 1 if failures else 0


def recv(url: str, topic: str, count: int, name: str | None, timeout: float | None) -> int:
    conn = BlockingConnection(url)
    receiver = conn.create_receiver(topic, name=name or f"recv-{topic}")
    # The attach has completed: from now on every message published to the topic arrives.
    print(f"subscribed to {topic} on {url}", file=sys.stderr, flush=True)
    got = 0
    try:
        while count == 0 or got < count:
            try:
                msg = receiver.receive(timeout=timeout)
            except Exception:  # noqa: BLE001 - Proton's Timeout: idle for too long
                break
            print(msg.body, flush=True)
            receiver.accept()
            got += 1
    except KeyboardInterrupt:
        pass
    finally:
        conn.close()
    return 0
