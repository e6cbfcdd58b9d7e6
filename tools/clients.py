"""``once send`` / ``once recv``: small Proton clients for trying a router out."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

from proton import Data, Message
from proton.reactor import ReceiverOption
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


class SharedSubscription(ReceiverOption):
    """A JMS 2.0 shared subscription (QPIDJMS-220), as any AMQP client can ask for one:
    source capabilities ``shared`` (and ``global`` unless it is scoped to the
    connection's container-id); ``once:exclusive`` for an exclusive group."""

    def __init__(self, global_: bool = True, exclusive: bool = False) -> None:
        self.caps = ["shared", "global"] if global_ else ["shared"]
        if exclusive:
            self.caps.append("once:exclusive")

    def apply(self, receiver: Any) -> None:
        caps = receiver.source.capabilities
        caps.put_array(False, Data.SYMBOL)
        caps.enter()
        for c in self.caps:
            caps.put_symbol(c)
        caps.exit()


def recv(url: str, topic: str, count: int, name: str | None, timeout: float | None,
         group: str | None = None, exclusive: bool = False) -> int:
    conn = BlockingConnection(url)
    options = SharedSubscription(exclusive=exclusive) if group else None
    link_name = name or (f"{group}|{os.getpid()}" if group else f"recv-{topic}")
    receiver = conn.create_receiver(topic, name=link_name, options=options)
    # The attach has completed: from now on every message published to the topic arrives.
    joined = f" in group {group}" if group else ""
    if group and exclusive:
        active = (receiver.link.remote_properties or {}).get("once:active")
        joined += " (active)" if active else " (standby: messages come once the active member goes)"
    print(f"subscribed to {topic} on {url}{joined}", file=sys.stderr, flush=True)
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
