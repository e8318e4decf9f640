"""One private Postgres server (with pgvector) for the whole test session; a database each.

``pg_server`` starts pgserver's bundled Postgres 16 in a temporary folder once per
session (once per xdist worker); ``pg_url`` creates a fresh database for one test
(``CREATE DATABASE`` copies ``template1``: milliseconds) and drops it after.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any

import pytest

_NAMES = itertools.count(1)


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pgserver = pytest.importorskip("pgserver")
    pytest.importorskip("psycopg")
    folder = tmp_path_factory.mktemp("pg")
    server = pgserver.get_server(folder, cleanup_mode="stop")
    try:
        yield server
    finally:
        server.cleanup()


def database_url(server: Any, name: str) -> str:
    """The server's socket URL for database ``name``."""
    uri = server.get_uri()
    head, _, query = uri.partition("?")
    return f"{head.rsplit('/', 1)[0]}/{name}?{query}"


def admin(server: Any, sql: str) -> None:
    """One statement as the server's superuser, outside a transaction."""
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute(sql)


@pytest.fixture
def pg_url(pg_server: Any) -> Iterator[str]:
    """A new, empty database of the session's server, as a socket URL."""
    name = f"memtui_{os.getpid()}_{next(_NAMES)}"
    admin(pg_server, f'CREATE DATABASE "{name}"')
    try:
        yield database_url(pg_server, name)
    finally:
        admin(pg_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
