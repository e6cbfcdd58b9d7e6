from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.postgres import Postgres


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    server = Postgres()
    yield server
    server.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """A fresh outbox database: SQLite (the embedded default), then a real PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'outbox.db'}"
    return request.getfixturevalue("postgres").new_database()


@pytest.fixture
def conn(db_url: str) -> Iterator[object]:
    """A connection to the fresh outbox database, closed after the test."""
    from once.client.outbox.dialect import connect

    c = connect(db_url)
    yield c
    c.close()
