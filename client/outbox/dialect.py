"""SQLite and PostgreSQL as the outbox sees them: how to connect from a URL, how a query
names its parameters, and the few words of DDL that differ.

SQLite is the embedded default (``sqlite:///path/outbox.db``: nothing to install); the
application hands us its own ``sqlite3`` connection. PostgreSQL (``postgresql://...``) goes
through psycopg 3, the maintained driver (the ``outbox`` extra installs it); its
connection is the application's too. One ``Dialect`` per kind, chosen by the connection's
type, so the same statements serve both.
"""

from __future__ import annotations

import pathlib
import sqlite3
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse


class OutboxError(Exception):
    """A one-line reason the outbox cannot do what it was asked (a bad URL, no tables...)."""


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str
    param: str  # how a statement marks a parameter
    id_column: str  # an id that only grows and is never given twice, the primary key
    blob: str
    bigint: str

    def sql(self, statement: str) -> str:
        """``statement`` with ``?`` for each parameter, in this dialect's style."""
        return statement if self.param == "?" else statement.replace("?", self.param)

    def among(self, ids: list[int]) -> tuple[str, tuple[Any, ...]]:
        """``id`` is one of ``ids``: a condition and its parameters. PostgreSQL takes the
        list as one array (one statement however many); SQLite a parameter each (the
        caller keeps a list under SQLite's 32,766)."""
        if self.name == "postgresql":
            return "id = ANY(%s)", (ids,)
        return f"id IN ({', '.join('?' for _ in ids)})", tuple(ids)


# (AUTOINCREMENT: without it SQLite gives the largest id again after that row is deleted,
# and a row's id is its message's identity in the network)
SQLITE = Dialect("sqlite", "?", "id INTEGER PRIMARY KEY AUTOINCREMENT", "BLOB", "INTEGER")
POSTGRES = Dialect("postgresql", "%s", "id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "BYTEA", "BIGINT")


def dialect_of(conn: Any) -> Dialect:
    """The dialect of an open connection: ``sqlite3`` or psycopg 3."""
    if isinstance(conn, sqlite3.Connection):
        return SQLITE
    if type(conn).__module__.startswith("psycopg"):
        return POSTGRES
    raise OutboxError(f"not an sqlite3 or psycopg connection: {type(conn).__name__}")


UNREACHABLE = ("Connection refused", "timeout expired", "No such file or directory", "the database system is",
               "server closed the connection", "Network is unreachable", "No route to host")


class DatabaseUnreachable(OutboxError):
    """No database server answered at the URL (it is down, or not up yet)."""


def sqlite_path(url: str) -> str:
    """The file of ``sqlite:///PATH``: relative to the working directory with three
    slashes (``sqlite:///outbox.db``), absolute with four (``sqlite:////var/lib/o.db``), as
    SQLAlchemy and most tools read these URLs."""
    parsed = urlparse(url)
    path = parsed.path[1:] if not parsed.netloc else f"{parsed.netloc}{parsed.path}"
    if not path or path == "/":
        raise OutboxError(f"{url}: expected sqlite:///PATH (relative) or sqlite:////PATH (absolute)")
    return path


def connect(url: str, create: bool = True) -> Any:
    """A connection for ``url``: ``sqlite:///path`` or ``postgresql://user@host:port/db``.
    Autocommit off: the caller commits (``send`` puts rows in the caller's transaction).
    ``create``: an SQLite file that is not there is made (else that is an error: a send to
    a mistyped path must not leave an empty database behind)."""
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        path = sqlite_path(url)
        try:
            if create:
                conn = sqlite3.connect(path, timeout=30)
            else:
                conn = sqlite3.connect(f"{pathlib.Path(path).absolute().as_uri()}?mode=rw", timeout=30, uri=True)
        except sqlite3.Error as e:
            if not create and not pathlib.Path(path).exists():
                raise OutboxError(f"{url}: no database at {path} (once outbox init --db {url} makes one)") from None
            raise OutboxError(f"{url}: {e}") from None
        conn.execute("PRAGMA journal_mode=WAL")  # (readers do not wait for the relay's deletes)
        return conn
    if parsed.scheme in ("postgresql", "postgres"):
        try:
            import psycopg
        except ImportError:
            raise OutboxError("PostgreSQL needs psycopg 3: pip install 'once[outbox]'") from None
        try:
            return psycopg.connect(url)
        except psycopg.Error as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            # (libpq says why in words only: no server there, or one starting or stopping, is
            # worth waiting for; a refusal it sent, a wrong password or database, is not)
            if isinstance(e, psycopg.OperationalError) and any(w in str(e) for w in UNREACHABLE):
                raise DatabaseUnreachable(f"{url}: {first}") from None
            raise OutboxError(f"{url}: {first}") from None
    raise OutboxError(f"{url}: expected sqlite:///PATH or postgresql://...")
