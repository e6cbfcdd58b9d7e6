"""Debian packages the tests need, installed when missing: as root through apt-get (again
after an ``apt-get update`` when the first try fails, as on a fresh machine whose package
lists are empty); otherwise the test fails saying what to install."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def install(package: str, needed_by: str) -> None:
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.fail(f"{needed_by} needs Debian's {package}: apt-get install {package}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    result = None
    for update in (False, True):
        if update:
            subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True)
        result = subprocess.run(["apt-get", "install", "-y", "-q", package], env=env, capture_output=True, text=True)
        if result.returncode == 0:
            return
    assert result is not None
    pytest.fail(f"apt-get install {package} failed: {(result.stderr.strip().splitlines() or ['?'])[-1]}")
