"""Every socket the project opens, listening or dialling, is made here, from a table of
listener kinds: what a kind listens for (the protocol object each accepted socket gets)
and how it is dialled: AMQP clients (plain and over TLS), inter-router links, HTTP and MQTT.
A TLS dial is given its ``ssl`` context (``tls.py``); a TLS listener accepts its sockets
itself, admits them and does their handshake (``tls_accept.py``).
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from ssl import SSLContext
from typing import Any


class Kind(Enum):
    AMQP = "amqp"  # clients (the topology's ``listen``)
    AMQPS = "amqps"  # clients over TLS (``amqps``)
    INTER_ROUTER = "inter-router"  # neighbour routers (``inter_router``)
    HTTP = "http"  # metrics, health, the management API and the console (``http``)
    MQTT = "mqtt"  # MQTT clients (``mqtt``)
    MQTTS = "mqtts"  # MQTT clients over TLS (``mqtts``)


@dataclass(frozen=True, slots=True)
class ListenerKind:
    kind: Kind
    reuse_address: bool = True


KINDS: dict[Kind, ListenerKind] = {
    Kind.AMQP: ListenerKind(Kind.AMQP),
    Kind.AMQPS: ListenerKind(Kind.AMQPS),
    Kind.INTER_ROUTER: ListenerKind(Kind.INTER_ROUTER),
    Kind.HTTP: ListenerKind(Kind.HTTP),
    Kind.MQTT: ListenerKind(Kind.MQTT),
    Kind.MQTTS: ListenerKind(Kind.MQTTS),
}


class ListenError(OSError):
    """A listener could not be opened; ``str()`` is the one line an operator reads."""

    def __str__(self) -> str:
        return self.strerror or ""


_WHY = {errno.EADDRINUSE: "the address is in use (another router, or a broker, AMQP or MQTT, on that port?): stop it, "
                          "or choose another port in the topology{flag}",
        errno.EADDRNOTAVAIL: "this host has no such address: use one of its own (or 0.0.0.0)",
        errno.EACCES: "not allowed to listen there (ports below 1024 need privileges): choose a port above 1023"}


async def listen(kind: Kind, factory: Callable[[], asyncio.Protocol], host: str, port: int,
                 ) -> tuple[asyncio.AbstractServer, str, int]:
    """Listen for ``kind`` on host:port (0: a free port); returns the server and where it listens.
    ``ListenError`` (one line naming the address and what to do) when it cannot."""
    spec = KINDS[kind]
    try:
        server = await asyncio.get_running_loop().create_server(factory, host, port, reuse_address=spec.reuse_address)
    except OSError as e:
        raise _listen_error(kind, host, port, e) from None
    bound_host, bound_port = server.sockets[0].getsockname()[:2]
    return server, bound_host, bound_port


def bind(kind: Kind, host: str, port: int) -> socket.socket:
    """A listening socket for ``kind`` on host:port (0: a free port), non-blocking, the
    address reused; a TLS listener accepts from it itself (``tls_accept.py``).
    ``ListenError`` when it cannot."""
    try:
        # (the first address the host name gives: a name with several binds only that one)
        family, _, _, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                      flags=socket.AI_PASSIVE)[0]
        sock = socket.create_server(address[:2], family=family, backlog=1024)
    except OSError as e:
        raise _listen_error(kind, host, port, e) from None
    sock.setblocking(False)
    return sock


def _listen_error(kind: Kind, host: str, port: int, e: OSError) -> ListenError:
    # (the flag that moves this listener, on ``once router`` and, for a one-router
    # topology, ``once launch``: a newcomer whose 5672 is taken is told what to type)
    flag = {Kind.AMQP: "--listen", Kind.HTTP: "--http", Kind.MQTT: "--mqtt"}.get(kind)
    why = _WHY.get(e.errno or 0, e.strerror or str(e)).format(flag=f" or with {flag} HOST:PORT" if flag else "")
    return ListenError(e.errno, f"cannot listen for {kind.value} on {host}:{port}: {why}")


async def dial(kind: Kind, factory: Callable[[], Any], host: str, port: int, timeout: float | None = None,
               ssl: SSLContext | None = None) -> Any:
    """Connect to a ``kind`` listener (over TLS with ``ssl``; a context that checks no host
    name leaves it to the caller to check whom it reached); returns the protocol object. OSError/TimeoutError
    (ssl.SSLError, an OSError, when the peer's certificate does not verify) on failure."""
    # (a context that checks host names is given the host; one that does not sends none)
    tls: dict[str, Any] = {"ssl": ssl, "server_hostname": host if ssl.check_hostname else ""} if ssl is not None else {}
    connecting = asyncio.get_running_loop().create_connection(factory, host, port, **tls)
    _, protocol = await (asyncio.wait_for(connecting, timeout) if timeout is not None else connecting)
    return protocol
