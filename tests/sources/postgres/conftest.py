"""One private Postgres server (with pgvector) for the whole test session; a database each.

``pg_server`` starts pgserver's bundled Postgres 16 in a temporary folder once per
session (once per xdist worker); ``pg_url`` creates a fresh database for one test
(``CREATE DATABASE`` copies ``template1``: milliseconds) and drops it after.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_NAMES = itertools.count(1)
PASSWORD_USER = "memtui_reader"
PASSWORD = "Sw0rdfish-Zeta-7q"
"""A role that must give its password (scram-sha-256), for the redaction tests."""
NO_FLUSH = ("fsync", "synchronous_commit")
"""Settings the session's server runs without: the tests check memtui, not that Postgres
survives a power cut, and each test's ``CREATE DATABASE`` and ``DROP DATABASE`` waited
on flushes (0.53 s together, 0.28 s without). Every write still reaches the data files
(a checkpoint writes them out), so the scans of the tables' files see what they saw."""


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """The session's server, in a folder of its own under the system's temporary folder.

    Not under pytest's ``tmp_path`` tree: run as root, pgserver runs Postgres as a user of
    its own and opens the folders on the way to the data folder to it, and every pytest
    session that starts (another worktree's, a second run) closes pytest's base folder
    (``pytest-of-USER``) to its owner again: the server would lose its data folder mid-run
    (PANIC: permission denied). ``cleanup_mode="delete"`` removes the folder at the end.
    """
    pgserver = pytest.importorskip("pgserver")
    pytest.importorskip("psycopg")
    folder = Path(tempfile.mkdtemp(prefix="memtui-pg-"))
    server = pgserver.get_server(folder, cleanup_mode="delete")
    hba = folder / "pg_hba.conf"
    hba.write_text(f"local all {PASSWORD_USER} scram-sha-256\n" + hba.read_text())
    admin(server, f"CREATE ROLE {PASSWORD_USER} LOGIN SUPERUSER PASSWORD '{PASSWORD}'")
    for setting in NO_FLUSH:
        admin(server, f"ALTER SYSTEM SET {setting} = off")
    admin(server, "SELECT pg_reload_conf()")
    try:
        yield server
    finally:
        server.cleanup()


def database_url(server: Any, name: str, userinfo: str | None = None) -> str:
    """The server's socket URL for database ``name`` (as ``userinfo`` when given:
    ``user:password``)."""
    uri = server.get_uri()
    head, _, query = uri.partition("?")
    if userinfo is not None:
        head = f"postgresql://{userinfo}@/x"
    return f"{head.rsplit('/', 1)[0]}/{name}?{query}"


def admin(server: Any, sql: str) -> None:
    """One statement as the server's superuser, outside a transaction."""
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute(sql)


@contextlib.contextmanager
def new_database(server: Any) -> Iterator[str]:
    """A new, empty database of ``server`` for the block, as a socket URL."""
    name = f"memtui_{os.getpid()}_{next(_NAMES)}"
    admin(server, f'CREATE DATABASE "{name}"')
    try:
        yield database_url(server, name)
    finally:
        admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_url(pg_server: Any) -> Iterator[str]:
    """A new, empty database of the session's server, as a socket URL."""
    with new_database(pg_server) as url:
        yield url


@pytest.fixture(scope="module")
def lg_url(pg_server: Any) -> Iterator[str]:
    """A LangGraph ``PostgresStore`` (``support.ITEMS``, HNSW index) for a module's
    read-only tests: written once, never changed by them."""
    from .support import write_store

    with new_database(pg_server) as url:
        write_store(url)
        yield url


@pytest.fixture
def lg_store(pg_url: str) -> str:
    """The same store in a database of this test's own (a test that changes it)."""
    from .support import write_store

    write_store(pg_url)
    return pg_url
