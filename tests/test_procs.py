"""``stop_all``: SIGTERM stops a process that heeds it; one that ignores it is killed after the grace time."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from once.tools.procs import stop_all

_IGNORES_SIGTERM = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                    "print('ready', flush=True); time.sleep(60)")


def test_stop_all_terminates_and_kills_what_hangs() -> None:
    heeds = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
                             stdout=subprocess.PIPE, text=True)
    hangs = subprocess.Popen([sys.executable, "-c", _IGNORES_SIGTERM], stdout=subprocess.PIPE, text=True)
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    for proc in (heeds, hangs):
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"  # (its handler is set)
    started = time.monotonic()
    stop_all([heeds, hangs, done], grace=0.5)
    assert time.monotonic() - started < 10
    assert heeds.returncode == -signal.SIGTERM
    assert hangs.returncode == -signal.SIGKILL
    assert done.returncode == 0
    for proc in (heeds, hangs):
        assert proc.stdout is not None
        proc.stdout.close()
