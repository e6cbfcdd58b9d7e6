"""Proton subscribers as OS processes (``holding_subscriber.py``), so a test can SIGKILL them."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

HOLDER = Path(__file__).resolve().parent / "holding_subscriber.py"

_HOLDERS: list[subprocess.Popen[str]] = []
_LINES: dict[int, queue.Queue[str]] = {}
_READERS: dict[int, threading.Thread] = {}


def holder(url: str, container: str, link: str, topic: str = "susp", group: str = "") -> subprocess.Popen[str]:
    """Start one; returns once its link is attached. It prints a line per message and never
    accepts. ``group``: "shared", "exclusive" or "durable" to join a consumer group."""
    extra = [group] if group else []
    proc = subprocess.Popen([sys.executable, str(HOLDER), url, topic, container, link, *extra],
                            stdout=subprocess.PIPE, text=True)
    _HOLDERS.append(proc)
    # A thread reads the pipe: select() on it would miss lines already in Python's buffer.
    lines: queue.Queue[str] = queue.Queue()
    _LINES[proc.pid] = lines
    reader = _READERS[proc.pid] = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True)
    reader.start()
    assert json.loads(lines.get(timeout=15)) == {"attached": True}
    return proc


def lines(proc: subprocess.Popen[str], n: int, timeout: float = 15.0) -> list[dict]:
    """The next ``n`` messages it printed (body, delivery_count, first_acquirer)."""
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        try:
            out.append(json.loads(_LINES[proc.pid].get(timeout=max(0.01, deadline - time.monotonic()))))
        except queue.Empty:
            raise AssertionError(f"the subscriber process printed {len(out)} of {n} messages") from None
    return out


def reap() -> None:
    """Kill whatever holders are left (a test's teardown)."""
    while _HOLDERS:
        proc = _HOLDERS.pop()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        _READERS.pop(proc.pid).join(5)  # the pipe is at its end once the process is gone
        proc.stdout.close()
        _LINES.pop(proc.pid, None)
