from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.routers import RouterProcess, write_topology  # noqa: E402


@pytest.fixture
def router(tmp_path: Path) -> Iterator[RouterProcess]:
    r = RouterProcess(write_topology(tmp_path))
    yield r
    r.stop()


@pytest.fixture
def make_router(tmp_path: Path) -> Iterator:
    started: list[RouterProcess] = []

    def make(**kw) -> RouterProcess:
        d = tmp_path / f"r{len(started)}"
        d.mkdir()
        r = RouterProcess(write_topology(d, **kw))
        started.append(r)
        return r

    yield make
    for r in started:
        r.stop()
