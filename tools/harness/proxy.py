"""A loopback TCP proxy that a test can cut and block: an inter-router link that flaps."""

from __future__ import annotations

import socket
import threading
import time


class Proxy:
    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.blocked = threading.Event()
        # Cleared while the link is frozen: bytes are held (nothing passes either way, the
        # connections stay open), as in a silent partition, where TCP keeps what was sent
        # and delivers it in order once the path heals, or the peers give up on it first.
        # (Dropping bytes from the middle of an open stream is a fault TCP never shows a
        # peer: a router could not tell it from memory corruption.)
        self.flowing = threading.Event()
        self.flowing.set()
        self.delay = 0.0  # seconds each chunk waits before it is passed on: a slow link
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        self.connections_made = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.blocked.is_set():
                client.close()  # the link is "down": refuse
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.conns += [client, upstream]
                self.connections_made += 1
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if self.delay:
                    time.sleep(self.delay)  # (this direction's own thread: the other flows on)
                self.flowing.wait()  # (and the reader stops reading: the sender's buffers fill)
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self, block: bool = True) -> None:
        """Drop every connection through the proxy (and refuse new ones while blocked)."""
        if block:
            self.blocked.set()
        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def freeze(self) -> None:
        """Hold every byte but keep every connection open: only the idle timeout can tell."""
        self.flowing.clear()

    def slow(self, delay: float) -> None:
        """Hold every chunk ``delay`` seconds before passing it on (in order, as TCP would)."""
        self.delay = delay

    def heal(self) -> None:
        self.blocked.clear()
        self.delay = 0.0
        self.flowing.set()

    def close(self) -> None:
        self._closed = True
        self.cut()
        self.flowing.set()  # (held pumps meet their closed sockets and end)
        self.listener.close()
