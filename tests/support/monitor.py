"""What a test watches a router with while something else happens to it: a well-behaved
client pair that must keep being answered, and the router process's resident memory."""

from __future__ import annotations

import threading
from pathlib import Path

from proton import Delivery

from .proton_clients import ProtonPublisher, ProtonSubscriber
from .routers import wait_for


def rss(pid: int) -> int:
    """A process's resident memory, bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class Monitor:
    """A well-behaved Proton publisher and subscriber on their own topic, one message at a
    time; ``answered`` counts the outcomes, each of which must be accepted."""

    def __init__(self, url: str) -> None:
        self.sub = ProtonSubscriber(url, "steady", name="steady-sub")
        self.pub = ProtonPublisher(url, "steady")
        self.answered = 0
        self.wrong: list[object] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            outcome = self.pub.send_wait("tick")
            if outcome != Delivery.ACCEPTED:
                self.wrong.append(outcome)
            self.answered += 1

    def progresses(self, by: int = 100) -> None:
        start = self.answered
        wait_for(lambda: self.answered >= start + by, timeout=120, what=f"{by} monitor messages answered")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(60)
        assert not self.wrong, self.wrong
        self.pub.close()
        self.sub.close()
