from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.routers import RouterProcess, write_topology  # noqa: E402


@pytest.fixture(autouse=True)
def _once_logger_as_it_was() -> Iterator[None]:
    """A test that runs a command in-process configures the ``once`` logger (a handler of
    its own, no propagation: ``router/logs.py``). It is put back after each test: else a
    later test on the same worker reads no log lines through ``caplog``, depending on
    which files ran before it."""
    log = logging.getLogger("once")
    handlers, propagate, level = log.handlers[:], log.propagate, log.level
    yield
    log.handlers[:] = handlers
    log.propagate = propagate
    log.setLevel(level)


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
