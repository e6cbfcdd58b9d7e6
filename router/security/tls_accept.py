"""A TLS listener: its accept loop, and each socket's admission and handshake.

asyncio's own TLS server (``create_server(ssl=...)``) admits a socket to the connection's
protocol only once its handshake is done: a socket in its handshake counts against no
connection limit, and a handshake that fails is logged nowhere (asyncio says so at debug
level, in its debug mode only). An operator whose client has the wrong CA would see
nothing. (``loop.start_tls`` on an accepted socket would do, but uvloop starts reading a
socket after its ``connection_made`` even when told to pause, so the ClientHello can reach
the plain protocol first.)

So a TLS listener accepts its sockets itself. Each is admitted against the router's
connection limits at once, as a plain socket is (a flood of silent handshakes counts per
host); then ``loop.connect_accepted_socket`` does the handshake within the handshake
deadline, with the listener's context (whose ``sni_callback`` hands each handshake the
newest certificates: ``tls.py``), and gives the connection's protocol the TLS transport.
A handshake that fails is logged with the peer and OpenSSL's reason (one line per host a
while) and its admission let go.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..engineio import EngineProtocol, admitted
from ..logs import fields

if TYPE_CHECKING:
    from ..context import RouterContext

log = logging.getLogger("once.router")

# OpenSSL's reasons an operator meets most, said in the terms of the topology
HINTS = {
    "TLSV1_ALERT_UNKNOWN_CA": "the client does not trust the router's certificate (give it the CA of tls.ca)",
    "SSLV3_ALERT_BAD_CERTIFICATE": "the client refused the router's certificate (its names or dates?)",
    # (Proton-C's answer when the certificate does not name the host it dialled: it matches
    # DNS names only, so amqps://127.0.0.1 fails against a certificate with IP:127.0.0.1)
    "SSLV3_ALERT_HANDSHAKE_FAILURE": "the client gave the handshake up: most often the router's certificate does "
                                     "not name the host it dialled (Proton clients match DNS names, never IP "
                                     "addresses: dial a name the certificate has)",
    "CERTIFICATE_VERIFY_FAILED": "the client's certificate does not verify against tls.ca",
    "PEER_DID_NOT_RETURN_A_CERTIFICATE": "no client certificate, and tls.require_client_certificate is set",
    "WRONG_VERSION_NUMBER": "not TLS (plain AMQP or MQTT on a TLS port?)",
    "HTTP_REQUEST": "not TLS: an HTTP request",
    "UNSUPPORTED_PROTOCOL": "no TLS version both allow (tls.min_version)",
    "NO_SHARED_CIPHER": "no cipher both allow (tls.ciphers)",
}


class TlsListener:
    """What ``Router.stop`` needs of a listener: ``close`` and ``wait_closed``."""

    def __init__(self, router: RouterContext, sock: socket.socket, factory: Callable[[], EngineProtocol],
                 context: ssl.SSLContext, timeout: float) -> None:
        self.router = router
        self.sock = sock
        self.factory = factory
        self.context = context
        self.timeout = timeout
        self.handshakes: set[asyncio.Task[None]] = set()  # (held: the loop keeps tasks weakly)
        self.where = "{}:{}".format(*sock.getsockname()[:2])
        self.task = asyncio.get_running_loop().create_task(self._accept())

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, addr = await loop.sock_accept(self.sock)
            except (ConnectionAbortedError, InterruptedError):
                continue  # (one socket gone before we took it: the next)
            except OSError as e:  # (out of descriptors, say: the sockets already here go on)
                self.router.guard_log.warning(("accept", id(self)), loop.time(), "router %s: cannot accept on %s: %s",
                                              self.router.id, self.where, e)
                await asyncio.sleep(0.1)  # (as asyncio's own servers wait, when out of descriptors)
                continue
            task = loop.create_task(self._handshake(conn, str(addr[0]), f"{addr[0]}:{addr[1]}"))
            self.handshakes.add(task)
            task.add_done_callback(self.handshakes.discard)

    async def _handshake(self, conn: socket.socket, host: str, remote: str) -> None:
        inner = self.factory()
        # (its address from the accept: a socket reset at once has none to tell later, and
        # the limits must let go of the host they counted)
        inner.host, inner.remote = host, remote
        if inner.counts_against_limits():
            if not admitted(self.router, host, remote, f"TLS connection from {remote}"):
                conn.close()
                return
            inner.admitted = True  # (released when it is lost, or here when its handshake fails)
        started = time.monotonic()
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: inner, conn, ssl=self.context, ssl_handshake_timeout=self.timeout or None)
        except BaseException as e:  # (OpenSSL's refusal, the deadline, the peer gone; or the router stops)
            conn.close()
            if inner.admitted and inner.transport is None:  # (never made: nothing else lets it go)
                inner.admitted = False
                self.router.limits.release(host)
            if isinstance(e, asyncio.CancelledError):
                raise
            if isinstance(e, Exception):
                self._failed(e, remote, host, time.monotonic() - started)

    def _failed(self, e: BaseException, remote: str, host: str, took: float) -> None:
        router = self.router
        if isinstance(e, ssl.SSLError):
            reason = getattr(e, "reason", None) or ""
            verify = getattr(e, "verify_message", None)
            why = f"{reason}: {HINTS[reason]}: {verify}" if verify and reason in HINTS else \
                f"{reason}: {HINTS[reason]}" if reason in HINTS else str(e)
        elif self.timeout and took >= self.timeout * 0.99:
            why = f"no TLS handshake within {self.timeout:g}s (handshake timeout)"
        else:
            # (a peer that went away mid-handshake, a port scanner's probe: nobody's error)
            log.info("router %s: TLS handshake from %s: the peer went away (%s)", router.id, remote,
                     str(e) or type(e).__name__, extra=fields("tls.gone", peer=remote, host=host))
            return
        router.guard_log.warning(("tls", host), asyncio.get_running_loop().time(),
                                 "router %s: TLS handshake from %s failed: %s", router.id, remote, why,
                                 extra=fields("tls.failed", peer=remote, host=host, reason=why))

    def close(self) -> None:
        self.task.cancel()
        for task in list(self.handshakes):
            task.cancel()

    async def wait_closed(self) -> None:
        await asyncio.gather(self.task, *self.handshakes, return_exceptions=True)
        self.sock.close()  # (once nothing waits on it any more)

