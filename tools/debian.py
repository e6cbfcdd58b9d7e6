"""Debian packages installed when missing (the tests' PostgreSQL, Chromium and MQTT
clients; the outbox bench's PostgreSQL): as root through apt-get, again after an
``apt-get update`` when the first try fails (a fresh machine's package lists are empty)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

LOCK = Path("/tmp/once-apt.lock")  # (the tests run on two workers: one apt-get at a time)


def apt_install(package: str, needed_by: str) -> str | None:
    """Install ``package``; None, or a one-line reason it could not be."""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return f"{needed_by} needs Debian's {package}: apt-get install {package}"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # (released when the file closes)
        return _install(package, env)


def _install(package: str, env: dict[str, str]) -> str | None:
    if subprocess.run(["dpkg-query", "-W", "-f", "${Status}", package], capture_output=True,
                      text=True).stdout.endswith(" installed"):
        return None  # (another worker installed it while this one waited)
    result = None
    for update in (False, True):
        if update:
            subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True)
        result = subprocess.run(["apt-get", "install", "-y", "-q", package], env=env, capture_output=True, text=True)
        if result.returncode == 0:
            return None
    assert result is not None
    return f"apt-get install {package} failed: {(result.stderr.strip().splitlines() or ['?'])[-1]}"
