"""Stopping OS processes we started: SIGTERM to all at once, SIGKILL to whatever hangs."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterable
from typing import Any

GRACE = 10.0  # seconds a process gets to stop on SIGTERM


def stop_all(procs: Iterable[subprocess.Popen[Any]], grace: float = GRACE, sig: int = signal.SIGTERM) -> None:
    """``sig`` to every one still running, all at once (they stop in parallel); then wait
    for each in turn, up to ``grace`` seconds, and SIGKILL one still running by then.
    Returns when all have exited (their return codes are set). (Routers: SIGINT stops one
    at once; SIGTERM has it leave the network cleanly, which waits for its clients to
    resume elsewhere: at a teardown, they will not.)"""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(sig)
    for proc in procs:
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
