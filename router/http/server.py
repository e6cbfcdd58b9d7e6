"""The router's HTTP endpoint: metrics, health, the management API and the console.

Served from the router's own event loop, like its AMQP listeners. HTTP/1.1 is parsed by
``h11`` (sans-IO, as our AMQP engine: bytes in, events out), so this module is only the
asyncio glue and the routing. Reads are GET (or HEAD); the management writes
(``manage.py``) are POST, each by an admin of the users file, whatever ``auth.http`` says
of reads.

A request is answered whole, except ``/api/events``: a server-sent event stream that the
console keeps open and that gets one summary a second (``Stream``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import h11

from ..security.limits import ConnectionLimits, RateLimitedLog

log = logging.getLogger("once.http")

MAX_REQUEST = 16 * 1024  # a request's head: enough for any browser or scraper, small for a hostile one
IDLE_TIMEOUT = 60.0  # a keep-alive connection with no request for this long is closed
# Connections the endpoint serves at once, in all and per source host: a scraper, a few
# consoles and operators' tools need a handful; a flood of sockets past these is closed
# at once (one log line a while), and AMQP and MQTT clients never feel it.
MAX_CONNECTIONS = 256
MAX_PER_HOST = 32
# What an event stream may have waiting unwritten for a client that does not read: a few
# summaries; past it the client is gone as far as we are concerned (closed, logged).
STREAM_BUFFER = 64 * 1024


class HttpGuard:
    """The endpoint's connection limits (the router's ``ConnectionLimits`` bookkeeping, its
    own counts: ``MAX_CONNECTIONS``, ``MAX_PER_HOST``) and its refusals' log line, one per
    host a minute."""

    def __init__(self, most: int = MAX_CONNECTIONS, per_host: int = MAX_PER_HOST) -> None:
        self.counts = ConnectionLimits(most, per_host)
        self.refusals = RateLimitedLog(log, interval=60.0)

    def enter(self, host: str) -> bool:
        """Count a connection from ``host`` in; False (and logged) past a limit."""
        refusal = self.counts.admit(host)
        if refusal is None:
            return True
        which = "from one host " if refusal.limit == "max_connections_per_host" else ""
        self.refusals.warning(("refused", host), asyncio.get_running_loop().time(),
                              "http: refused connections from %s: max %d HTTP connections %sreached", host,
                              refusal.value, which)
        return False

    def leave(self, host: str) -> None:
        self.counts.release(host)


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes
    content_type: str = "application/json"

    @classmethod
    def json(cls, value: Any, status: int = 200) -> Reply:
        return cls(status, json.dumps(value, separators=(",", ":")).encode() + b"\n")

    @classmethod
    def text(cls, text: str, status: int = 200) -> Reply:
        return cls(status, text.encode(), "text/plain; charset=utf-8")


@dataclass(frozen=True, slots=True)
class Stream:
    """A server-sent event stream: ``next_event`` gives each event's data, every ``every`` seconds."""

    next_event: Callable[[], Any]
    every: float = 1.0


Handler = Callable[[dict[str, list[str]]], "Reply | Stream"]
# Who a request's ``Authorization`` header says it is (the value, or None without one): the
# user, or None to refuse it (``auth.http``)
Authenticator = Callable[[str | None, str], "str | None"]
OPEN_PATHS = frozenset({"/healthz", "/readyz"})  # (liveness and readiness probes say nothing of clients)
# A management write: the request's query and the admin who asked (``manage.py``)
Write = Callable[[dict[str, list[str]], str], "Reply"]


@dataclass(frozen=True, slots=True)
class Writes:
    """The endpoint's management writes and who may make them: ``authenticate`` checks the
    Basic credentials (always, for a write), ``admin`` says whether that user may write,
    ``refused`` is told of a refusal (logged with who and what)."""

    routes: dict[str, Write]
    authenticate: Authenticator
    admin: Callable[[str], bool]
    refused: Callable[[str, str, str], None]  # (user or "", path, host)


class HttpConnection(asyncio.Protocol):
    def __init__(self, routes: dict[str, Handler], streams: set[HttpConnection], limits: HttpGuard | None = None,
                 head_timeout: float = 10.0, authenticate: Authenticator | None = None, realm: str = "once",
                 hold: Callable[[object, int], None] | None = None, writes: Writes | None = None) -> None:
        self.routes = routes
        self.writes = writes  # (None: read-only)
        # what an event stream's unread bytes hold, told to the router's byte bound (``core/reserve.py``)
        self.hold = hold
        self.authenticate = authenticate  # (None: every reader may read)
        self.realm = realm
        self.streams = streams  # connections serving an event stream (closed at stop)
        self.limits = limits
        self.host: str | None = None  # counted in ``limits`` under this host
        self.head_timeout = head_timeout
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST)
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.head_timer: asyncio.TimerHandle | None = None
        self.stream_task: asyncio.Task[None] | None = None
        self.request: h11.Request | None = None  # its head came; answered at its end

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.limits is not None:
            peer = transport.get_extra_info("peername")
            host = str(peer[0]) if peer else "?"
            if not self.limits.enter(host):
                transport.abort()  # type: ignore[attr-defined]
                return
            self.host = host
        self._arm()

    def _arm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = asyncio.get_running_loop().call_later(IDLE_TIMEOUT, self.close)

    def _head_begins(self) -> None:
        """A request's first bytes came: its whole head must follow within ``head_timeout``
        (every byte re-arms the idle timer, so a client sending one a while, as slowloris
        does, would otherwise hold the connection for ever)."""
        if self.head_timer is None and self.head_timeout > 0:
            self.head_timer = asyncio.get_running_loop().call_later(self.head_timeout, self._head_expired)

    def _head_done(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_expired(self) -> None:
        self.head_timer = None
        self._send_error(408, f"the request head did not come whole within {self.head_timeout:g}s")

    def data_received(self, data: bytes) -> None:
        if self.h11.their_state is h11.IDLE:
            self._head_begins()
        self.h11.receive_data(data)
        self._arm()
        while self.transport is not None and not self.transport.is_closing():
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as e:
                self._send_error(e.error_status_hint, f"bad request: {e}")
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                self._head_done()
                # (h11 bounds a head that comes in pieces; one that came whole is bounded here)
                if len(event.target) + sum(len(k) + len(v) for k, v in event.headers) > MAX_REQUEST:
                    self._send_error(431, "request head too large")
                    return
                self.request = event
            elif isinstance(event, h11.EndOfMessage) and self.request is not None:
                # Answered once the request is whole (a body, if any, read and dropped): the
                # connection then serves the next one (answered at its head, the next cycle
                # could not start and every response closed the connection)
                request, self.request = self.request, None
                self._answer(request)
            elif isinstance(event, h11.ConnectionClosed):
                self.close()
                return

    def _answer(self, request: h11.Request) -> None:
        method = request.method.decode("ascii", "replace")
        url = urlsplit(request.target.decode("ascii", "replace"))
        if method == "POST" and self.writes is not None and url.path in self.writes.routes:
            self._management_write(request, url.path, parse_qs(url.query))
            return
        handler = self.routes.get(url.path)
        if handler is None:
            self._send(Reply.json({"error": f"no such path: {url.path}", "paths": sorted(self.routes)}, 404), method)
            return
        if method not in ("GET", "HEAD"):
            self._send(Reply.json({"error": f"{url.path} is read: GET or HEAD (writes are POST to "
                                            f"{', '.join(sorted(self.writes.routes)) if self.writes else 'nothing'})"},
                                  405), method, [(b"allow", b"GET, HEAD")])
            return
        if self.authenticate is not None and url.path not in OPEN_PATHS:
            given = next((v.decode("latin-1") for k, v in request.headers if k == b"authorization"), None)
            if self.authenticate(given, self.host or "?") is None:
                # (a browser asks for a user and password: the console's login)
                self._send(Reply.json({"error": "this router's HTTP endpoint needs a user of its users file "
                                                "(HTTP Basic: auth.http)"}, 401), method,
                           [(b"www-authenticate", f'Basic realm="{self.realm}", charset="UTF-8"'.encode())])
                return
        try:
            reply = handler(parse_qs(url.query))
        except Exception as e:  # noqa: BLE001 - a view's bug must not take the router down: say it, keep serving
            log.exception("http: %s %s failed", method, url.path)
            reply = Reply.json({"error": f"{type(e).__name__}: {e}"}, 500)
        if isinstance(reply, Stream) and method == "HEAD":
            # (its head alone: a stream's events are a body, which a HEAD has none of)
            self._send(Reply(200, b"", "text/event-stream"), method)
        elif isinstance(reply, Stream):
            self._start_stream(reply)
        else:
            self._send(reply, method)

    def _management_write(self, request: h11.Request, path: str, query: dict[str, list[str]]) -> None:
        """A management write: an admin's, authenticated every time, or refused (logged)."""
        writes = self.writes
        assert writes is not None
        given = next((v.decode("latin-1") for k, v in request.headers if k == b"authorization"), None)
        user = writes.authenticate(given, self.host or "?")
        if user is None:
            self._send(Reply.json({"error": "a management write needs an admin of the router's users file (HTTP "
                                            "Basic; a user in group admin)"}, 401), "POST",
                       [(b"www-authenticate", f'Basic realm="{self.realm}", charset="UTF-8"'.encode())])
            return
        if not writes.admin(user):
            writes.refused(user, path, self.host or "?")
            self._send(Reply.json({"error": f"{user} may not change the router: management writes are for users in "
                                            "group admin"}, 403), "POST")
            return
        try:
            reply = writes.routes[path](query, user)
        except Exception as e:  # noqa: BLE001 - a write's bug must not take the router down: say it, keep serving
            log.exception("http: POST %s failed", path)
            reply = Reply.json({"error": f"{type(e).__name__}: {e}"}, 500)
        self._send(reply, "POST")

    def _send(self, reply: Reply, method: str = "GET", extra: list[tuple[bytes, bytes]] | None = None) -> None:
        headers = [(b"content-type", reply.content_type.encode()), (b"content-length", str(len(reply.body)).encode()),
                   (b"cache-control", b"no-store"), *(extra or [])]
        self._write(h11.Response(status_code=reply.status, headers=headers))
        if method != "HEAD":
            self._write(h11.Data(data=reply.body))
        self._write(h11.EndOfMessage())
        if self.h11.our_state is h11.MUST_CLOSE:
            self.close()
            return
        try:
            self.h11.start_next_cycle()
        except h11.LocalProtocolError:  # (the client's side is not done: it sent a body we did not read)
            self.close()

    def _send_error(self, status: int, text: str) -> None:
        if self.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            try:
                self._write(h11.Response(status_code=status, headers=[(b"content-type", b"text/plain"),
                                                                     (b"content-length", str(len(text)).encode()),
                                                                     (b"connection", b"close")]))
                self._write(h11.Data(data=text.encode()))
                self._write(h11.EndOfMessage())
            except h11.LocalProtocolError:
                pass
        self.close()

    def _write(self, event: Any) -> None:
        data = self.h11.send(event)
        if data and self.transport is not None:
            self.transport.write(data)

    def _start_stream(self, stream: Stream) -> None:
        self._write(h11.Response(status_code=200, headers=[(b"content-type", b"text/event-stream"),
                                                           (b"cache-control", b"no-store")]))
        if self.timer is not None:  # (an event stream is never idle: it closes when the client goes)
            self.timer.cancel()
            self.timer = None
        self.streams.add(self)
        self.stream_task = asyncio.get_running_loop().create_task(self._stream(stream))

    async def _stream(self, stream: Stream) -> None:
        while self.transport is not None and not self.transport.is_closing():
            try:
                payload = json.dumps(stream.next_event(), separators=(",", ":"))
            except Exception:  # noqa: BLE001 - as in _answer: the stream ends, the router serves on
                log.exception("http: event stream failed")
                self.close()
                return
            if self.transport.get_write_buffer_size() > STREAM_BUFFER:
                # A client that does not read: what it left unread stays bounded (each
                # event would otherwise wait in our buffer for ever)
                log.warning("http: closed the event stream of %s: it read nothing of the last %d bytes",
                            self.host or "?", self.transport.get_write_buffer_size())
                self.transport.abort()
                return
            self._write(h11.Data(data=f"data: {payload}\n\n".encode()))
            if self.hold is not None:
                self.hold(self, self.transport.get_write_buffer_size())
            await asyncio.sleep(stream.every)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.streams.discard(self)
        if self.hold is not None:
            self.hold(self, 0)
        if self.limits is not None and self.host is not None:
            self.limits.leave(self.host)
            self.host = None
        self._head_done()
        if self.timer is not None:
            self.timer.cancel()
        if self.stream_task is not None:
            self.stream_task.cancel()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
