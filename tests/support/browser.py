"""The system's headless Chromium for the console tests (Playwright drives it)."""

from __future__ import annotations

import shutil

from support.debian import install

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium() -> str:
    """The system's Chromium, installed from Debian's packages when it is not there."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    install("chromium", "the console test")
    found = shutil.which("chromium")
    assert found, "apt-get installed chromium, and there is no chromium on PATH"
    return found
