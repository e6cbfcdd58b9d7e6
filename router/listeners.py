"""Every socket the project opens, listening or dialling, is made here, from a table of
listener kinds: what a kind listens for (the protocol object each accepted socket gets)
and how it is dialled. AMQP client connections and inter-router links today; TLS and MQTT
listeners are the next kinds (an ``ssl`` context and another protocol factory).
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Kind(Enum):
    AMQP = "amqp"  # clients (the topology's ``listen``)
    INTER_ROUTER = "inter-router"  # neighbour routers (``inter_router``)
    HTTP = "http"  # metrics, health, the management API and the console (``http``)
    MQTT = "mqtt"  # MQTT clients (``mqtt``)


@dataclass(frozen=True, slots=True)
class ListenerKind:
    kind: Kind
    reuse_address: bool = True
    # (TLS: an ssl.SSLContext here; every socket of the kind is wrapped)
    ssl: Any = None


KINDS: dict[Kind, ListenerKind] = {
    Kind.AMQP: ListenerKind(Kind.AMQP),
    Kind.INTER_ROUTER: ListenerKind(Kind.INTER_ROUTER),
    Kind.HTTP: ListenerKind(Kind.HTTP),
    Kind.MQTT: ListenerKind(Kind.MQTT),
}


class ListenError(OSError):
    """A listener could not be opened; ``str()`` is the one line an operator reads."""

    def __str__(self) -> str:
        return self.strerror or ""


_WHY = {errno.EADDRINUSE: "the address is in use (another router, or a broker, AMQP or MQTT, on that port?): stop it, "
                          "or choose another port in the topology or with --listen",
        errno.EADDRNOTAVAIL: "this host has no such address: use one of its own (or 0.0.0.0)",
        errno.EACCES: "not allowed to listen there (ports below 1024 need privileges): choose a port above 1023"}


async def listen(kind: Kind, factory: Callable[[], asyncio.Protocol], host: str,
                 port: int) -> tuple[asyncio.AbstractServer, str, int]:
    """Listen for ``kind`` on host:port (0: a free port); returns the server and where it listens.
    ``ListenError`` (one line naming the address and what to do) when it cannot."""
    spec = KINDS[kind]
    try:
        server = await asyncio.get_running_loop().create_server(factory, host, port,
                                                                reuse_address=spec.reuse_address, ssl=spec.ssl)
    except OSError as e:
        why = _WHY.get(e.errno or 0, e.strerror or str(e))
        raise ListenError(e.errno, f"cannot listen for {kind.value} on {host}:{port}: {why}") from None
    bound_host, bound_port = server.sockets[0].getsockname()[:2]
    return server, bound_host, bound_port


async def dial(kind: Kind, factory: Callable[[], Any], host: str, port: int, timeout: float | None = None) -> Any:
    """Connect to a ``kind`` listener; returns the protocol object. OSError/TimeoutError on failure."""
    spec = KINDS[kind]
    connecting = asyncio.get_running_loop().create_connection(factory, host, port, ssl=spec.ssl)
    _, protocol = await (asyncio.wait_for(connecting, timeout) if timeout is not None else connecting)
    return protocol
