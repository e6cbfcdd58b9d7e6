"""Debian packages the tests need, installed when missing (``once.tools.debian``);
otherwise the test fails saying what to install."""

from __future__ import annotations

import pytest
from once.tools.debian import apt_install


def install(package: str, needed_by: str) -> None:
    why = apt_install(package, needed_by)
    if why:
        pytest.fail(why)
