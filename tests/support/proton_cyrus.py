"""Proton C built with Debian's Cyrus SASL, for SCRAM from a real Proton client (issue 29).

Debian's ``libqpid-proton11`` and PyPI's python-qpid-proton wheels have no Cyrus SASL, so
no SCRAM. python-qpid-proton's source distribution bundles Proton C and compiles its Cyrus
SASL layer when ``pkg-config libsasl2`` answers: the set-up installs Debian's headers and
SASL modules when missing, builds that package once into a virtual environment under the
user's cache directory (about 20 s), and reuses it after. The client runs as a process of
that environment (``cyrus_client.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from support.debian import install

CLIENT = Path(__file__).with_name("cyrus_client.py")


def _cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "once-tests" / f"proton-cyrus-{version('python-qpid-proton')}"


def cyrus_python() -> Path:
    """The python of an environment whose Proton has Cyrus SASL (``SASL.extended()``)."""
    env = _cache()
    python = env / "bin" / "python"
    done = env / "built"  # (written last: a build cut short is started again, not trusted)
    if done.exists():
        return python
    for package in ("libsasl2-dev", "libsasl2-modules", "pkg-config"):
        if not _installed(package):
            install(package, "the Proton SCRAM test")
    shutil.rmtree(env, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, capture_output=True)
    built = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-cache-dir", "--no-binary",
                            "python-qpid-proton", f"python-qpid-proton=={version('python-qpid-proton')}"],
                           capture_output=True, text=True)
    if built.returncode != 0:
        pytest.fail(f"building python-qpid-proton with Cyrus SASL failed: {built.stderr.strip()[-500:]}")
    check = subprocess.run([str(python), "-c", "from proton import SASL; print(SASL.extended())"],
                           capture_output=True, text=True)
    if check.stdout.strip() != "True":
        pytest.fail(f"python-qpid-proton built without Cyrus SASL (is libsasl2-dev there?): {check.stderr[-300:]}")
    done.write_text("ok\n")
    return python


def _installed(package: str) -> bool:
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Status}", package], capture_output=True, text=True)
    return out.returncode == 0 and out.stdout.endswith("installed")
