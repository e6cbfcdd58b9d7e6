"""A real PostgreSQL server for tests (``once.tools.postgres_server``): installed when
missing through the tests' own helper, so a test fails saying what to install."""

from __future__ import annotations

from once.tools import postgres_server

from support.debian import install


class Postgres(postgres_server.Postgres):
    def __init__(self) -> None:
        super().__init__(install=lambda: install("postgresql", "the outbox tests"))
