"""``once launch TOPOLOGY``: every router of a topology on this machine, one OS process each."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

from router.config import load_topology


def launch(topology_path: str, stop: threading.Event | None = None, journal: str | None = None) -> int:
    topology = load_topology(topology_path)  # validate before starting anything
    procs: dict[str, subprocess.Popen[str]] = {}
    stop = stop or threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    status = 0
    try:
        for rid in topology.routers:
            procs[rid] = subprocess.Popen(
                [sys.executable, "-m", "tools.cli", "router", topology_path, "--id", rid,
                 *(["--journal", journal] if journal else [])],
                stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"),
                cwd=os.getcwd(),
            )
        for rid, proc in procs.items():
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            if not line.startswith(f"router {rid} ready"):
                print(f"router {rid} failed to start (exit {proc.wait()})", file=sys.stderr)
                return 1
            print(line, flush=True)
        print(f"{len(procs)} router(s) ready; Ctrl-C stops them", flush=True)
        while not stop.wait(0.2):
            dead = [rid for rid, p in procs.items() if p.poll() is not None]
            if dead:
                print(f"router {dead[0]} exited with {procs[dead[0]].returncode}", file=sys.stderr)
                status = 1
                break
        return status
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        print("all routers stopped", flush=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
