"""The HTTP endpoint's event streams against a client that never reads (issue 49, item 18):
100 such clients held 394 MiB of unread events. The endpoint's connection class on a real
TCP socket in this process, with a route whose events are large and frequent, so the bound
is reached in a moment rather than in minutes of the console's one summary a second."""

from __future__ import annotations

import asyncio
import socket

from once.router.http.server import STREAM_BUFFER, HttpConnection, HttpGuard, Stream


async def test_an_event_stream_whose_client_reads_nothing_is_closed_past_its_buffer():
    streams: set[HttpConnection] = set()
    sent = 0

    def event() -> str:
        nonlocal sent
        sent += 1
        return "x" * 16_384

    routes = {"/api/events": lambda query: Stream(event, every=0.005)}
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: HttpConnection(routes, streams, HttpGuard()), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.setblocking(False)
    try:
        await loop.sock_connect(client, ("127.0.0.1", port))
        await loop.sock_sendall(client, b"GET /api/events HTTP/1.1\r\nHost: x\r\n\r\n")
        while not streams:  # (until the stream began)
            await asyncio.sleep(0.01)
        while streams:  # (until the endpoint let it go: it reads nothing, ever)
            conn = next(iter(streams))
            if conn.transport is not None:  # what waits unwritten stays near the bound
                assert conn.transport.get_write_buffer_size() <= STREAM_BUFFER + 16_384 + 64
            await asyncio.sleep(0.01)
        # it got as far as the bound, then no further
        assert sent * 16_384 > STREAM_BUFFER
    finally:
        client.close()
        server.close()
        await server.wait_closed()
