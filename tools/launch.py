"""``once launch TOPOLOGY``: every router of a topology on this machine, one OS process each.

It supervises them: a router that dies is logged and started again after a back-off
(0.5 s, doubling to 15 s while it keeps dying; back to 0.5 s once it stayed up a minute),
and the others keep running. ``--no-restart``: the first death stops them all, as before.
SIGINT/SIGTERM stop them all, and so does SIGHUP (its terminal closed: a supervisor that
died of it left its routers running, orphaned, holding their ports).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from once.router.config import load_topology
from once.tools.procs import stop_all

from .exits import CommandError, Exit

BACKOFF_FIRST = 0.5
BACKOFF_MAX = 15.0
STEADY = 60.0  # up this long: its next death starts the back-off over


class _Router:
    def __init__(self, rid: str, cmd: list[str]) -> None:
        self.rid = rid
        self.cmd = cmd
        self.proc: subprocess.Popen[str] | None = None
        self.started = 0.0
        self.delay = BACKOFF_FIRST
        self.due: float | None = None  # when to start it again

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, text=True,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"), cwd=os.getcwd())
        self.started = time.monotonic()

    def echo(self) -> None:
        """Pass its stdout on (the ready line), from a thread: a restart must not block the rest."""
        proc = self.proc
        assert proc is not None and proc.stdout is not None
        threading.Thread(target=lambda: [print(line.rstrip(), flush=True) for line in proc.stdout], daemon=True).start()


def launch(topology_path: str, stop: threading.Event | None = None, journal: str | None = None,
           restart: bool = True, logs: list[str] | None = None, state: str | None = None,
           override: list[str] | None = None) -> int:
    """``override``: ``--listen``/``--http`` for the one router of a one-router topology."""
    topology = load_topology(topology_path)  # validate before starting anything
    if override and len(topology.routers) != 1:
        raise CommandError(Exit.USAGE, f"--listen and --http are for a topology of one router; {topology_path} has "
                                       f"{len(topology.routers)}: give each its addresses in the file")
    stop = stop or threading.Event()
    got: list[int] = []  # the signal that stopped it: Ctrl-C ends with 130 (docs/commands.md, exit codes), SIGTERM with 0

    def on_signal(signum: int, frame: object) -> None:
        got.append(signum)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    routers = {rid: _Router(rid, [sys.executable, "-m", "once.tools.cli", "router", topology_path, "--id", rid,
                                  *(["--journal", journal] if journal else []),
                                  *(["--state", str(Path(state) / rid)] if state else []), *(logs or []),
                                  *(override or [])])
               for rid in topology.routers}
    try:
        for r in routers.values():
            r.start()
        for r in routers.values():
            assert r.proc is not None and r.proc.stdout is not None
            line = r.proc.stdout.readline().strip()
            if not line.startswith(f"router {r.rid} ready"):
                code = r.proc.wait()
                print(f"once launch: router {r.rid} failed to start (exit {code}; its error is above)",
                      file=sys.stderr)
                # Its own code when it is one of ours (2 bad file, 3 cannot listen), else 1.
                return code if code in (Exit.USAGE, Exit.ADDRESS) else Exit.FAILED
            print(line, flush=True)
            r.echo()
        print(f"{len(routers)} router(s) ready; Ctrl-C stops them", flush=True)
        while not stop.wait(0.2):
            now = time.monotonic()
            for r in routers.values():
                assert r.proc is not None
                if r.due is None and r.proc.poll() is not None:
                    if not restart:
                        print(f"once launch: router {r.rid} exited with {r.proc.returncode}; stopping the others "
                              "(--no-restart)", file=sys.stderr)
                        return 1
                    if now - r.started > STEADY:
                        r.delay = BACKOFF_FIRST
                    r.due = now + r.delay
                    print(f"once launch: router {r.rid} exited with {r.proc.returncode}; starting it again in "
                          f"{r.delay:g} s", file=sys.stderr, flush=True)
                    r.delay = min(r.delay * 2, BACKOFF_MAX)
                elif r.due is not None and now >= r.due:
                    r.due = None
                    r.start()
                    r.echo()
        return Exit.INTERRUPTED if signal.SIGINT in got else Exit.OK
    finally:
        stop_all([r.proc for r in routers.values() if r.proc is not None], sig=signal.SIGINT)
        try:
            print("all routers stopped", flush=True)
        except OSError:
            pass  # (its terminal is gone: SIGHUP)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
