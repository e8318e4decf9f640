"""memtui's one connection to a Postgres database: read-only unless writes are allowed,
retried when the database is busy, every failure one line without the password.

- Read-only is the database's rule, not memtui's promise: the session runs with
  ``default_transaction_read_only = on`` and every transaction memtui opens is
  ``READ ONLY``, so a write fails in the server (SQLSTATE 25006) even by mistake.
  ``--allow-writes`` opens the session writable; the forget path then opens its
  own read-write transactions.
- A read that meets a serialization failure, a deadlock, a lock timeout or the
  statement timeout (SQLSTATE 40001, 40P01, 55P03, 57014) is tried again with
  backoff, like "database busy" for a SQLite store; after the last try it is one
  line saying so.
- A connection refused, a failed authentication, a missing database: one line
  naming the URL without its password and what to do.
- psycopg is imported here, when a Postgres store is opened (the ``postgres`` extra).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from memtui.sources.postgres.url import PgTarget
from memtui.sources.shapes import SourceError

EXTRA_MISSING = "opening a Postgres store needs the postgres extra: pip install 'memtui[postgres]'"
RETRIED_STATES = frozenset({"40001", "40P01", "55P03", "57014"})
"""Serialization failure, deadlock, lock not available (lock_timeout), statement timeout."""
READ_ONLY_STATE = "25006"
BACKOFF_SECONDS = (0.05, 0.1, 0.2, 0.4, 0.8)
CONNECT_TIMEOUT_SECONDS = 10
LOCK_TIMEOUT_MS = 2000
STATEMENT_TIMEOUT_MS = 30000


def require_psycopg() -> Any:
    """The psycopg module, or the one line saying which extra installs it."""
    try:
        import psycopg
    except ImportError:
        raise SourceError(EXTRA_MISSING) from None
    return psycopg


class BusyDatabase(SourceError):
    """The database stayed busy (locks, serialization, timeouts) through every retry."""


class ReadOnlyRefusal(SourceError):
    """The database refused a write: the session is read-only (no --allow-writes)."""


def connect_problem(target: PgTarget, message: str) -> str:
    """A connection failure as one line: what happened to which URL, what to do."""
    text = " ".join(target.scrub(message).split())
    low = text.lower()
    where = target.display
    if "password authentication failed" in low or "authentication failed" in low:
        return (
            f"authentication failed for {where}: check the user and the password "
            "(in the URL, PGPASSWORD or ~/.pgpass)"
        )
    if "no password supplied" in low or "password is required" in low:
        return f"{where} asks for a password: give it in the URL, PGPASSWORD or ~/.pgpass"
    if "does not exist" in low and "database" in low:
        return f"no such database at {where}: check the database name in the URL"
    if "role" in low and "does not exist" in low:
        return f"no such user at {where}: check the user name in the URL"
    if "service" in low and ("not found" in low or "definition" in low):
        return f"cannot use {where}: {_first_clause(text)} (check PGSERVICEFILE)"
    reason = _first_clause(text)
    return (
        f"cannot connect to {where}: {reason}; check that the server is running and the "
        "host, port or socket folder in the URL"
    )


def _first_clause(text: str) -> str:
    """The driver's reason, short: past its ``connection failed:`` preamble."""
    for lead in ("connection failed:", "connection is bad:"):
        if text.lower().startswith(lead):
            text = text[len(lead) :].strip()
    return text[:240]


class PgConnection:
    """One psycopg connection (autocommit: no transaction stays open between calls).

    Not thread-safe by itself: the source holds its lock around every call.
    """

    def __init__(
        self,
        target: PgTarget,
        *,
        read_only: bool = True,
        backoff: Sequence[float] = BACKOFF_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
        lock_timeout_ms: int = LOCK_TIMEOUT_MS,
        statement_timeout_ms: int = STATEMENT_TIMEOUT_MS,
    ) -> None:
        self.target = target
        self.read_only = read_only
        self.backoff = tuple(backoff)
        self.sleep = sleep
        self.lock_timeout_ms = int(lock_timeout_ms)
        self.statement_timeout_ms = int(statement_timeout_ms)
        self.retries = 0
        """How many statements were tried again since the connection opened."""
        self._psycopg = require_psycopg()
        self._conn = self._open()

    # -- opening

    def _open(self) -> Any:
        psycopg = self._psycopg
        try:
            conn = psycopg.connect(
                self.target.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS
            )
        except psycopg.Error as exc:
            raise SourceError(connect_problem(self.target, str(exc))) from None
        except (ValueError, TypeError) as exc:  # a URL libpq cannot parse
            raise SourceError(
                f"{self.target.display} is not a URL libpq reads: {self.target.scrub(str(exc))}"
            ) from None
        try:
            conn.read_only = self.read_only
            flag = "on" if self.read_only else "off"
            conn.execute(f"SET default_transaction_read_only = {flag}")
            conn.execute(f"SET lock_timeout = {self.lock_timeout_ms}")
            conn.execute(f"SET statement_timeout = {self.statement_timeout_ms}")
            conn.execute("SET application_name = 'memtui'")
        except psycopg.Error as exc:
            conn.close()
            raise SourceError(connect_problem(self.target, str(exc))) from None
        return conn

    @property
    def raw(self) -> Any:
        """The psycopg connection (for a writer's own transaction; hold the source's lock)."""
        return self._conn

    def info(self) -> dict[str, Any]:
        """Where the session is: host (or socket folder), port, database, user."""
        info = self._conn.info
        return {"host": info.host, "port": info.port, "dbname": info.dbname, "user": info.user}

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.close()

    # -- statements

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        """One statement, fetched to the end, retried while the database is busy."""
        return self.run(lambda conn: _fetch(conn.execute(sql, params or None)))

    def run(self, work: Callable[[Any], Any], *, transaction: bool = False) -> Any:
        """``work(connection)``, tried again with backoff while the database is busy.

        With ``transaction``, ``work`` runs in one transaction (read-only when the
        session is), rolled back on any error; its ``SET LOCAL`` lasts for it alone.
        """
        psycopg = self._psycopg
        attempt = 0
        reconnected = False
        while True:
            try:
                self._reopen_if_broken()
                if not transaction:
                    return work(self._conn)
                with self._conn.transaction():
                    return work(self._conn)
            except psycopg.Error as exc:
                if self._conn.broken and self.read_only and not reconnected:
                    reconnected = True  # the server dropped the session: a read is safe again
                    continue
                state = getattr(exc, "sqlstate", None)
                if state in RETRIED_STATES and attempt < len(self.backoff):
                    self.retries += 1
                    self.sleep(self.backoff[attempt])
                    attempt += 1
                    continue
                raise self.error(exc) from None

    def _reopen_if_broken(self) -> None:
        """A connection the server dropped (a restart, a terminated backend) is opened
        again; a read that failed on it is tried once more (a write never is)."""
        if self._conn.closed or self._conn.broken:
            self.close()
            self._conn = self._open()

    def error(self, exc: Exception) -> SourceError:
        """A driver error as memtui's one line (the password scrubbed out)."""
        state = getattr(exc, "sqlstate", None)
        text = " ".join(self.target.scrub(str(exc)).split())[:300]
        where = self.target.display_with_schema
        if state in RETRIED_STATES:
            return BusyDatabase(
                f"the database {where} stayed busy ({text}) through "
                f"{len(self.backoff) + 1} tries; try again"
            )
        if state == READ_ONLY_STATE:
            return ReadOnlyRefusal(
                f"{where} is open read-only: memtui opens foreign stores read-only; "
                "pass --allow-writes to change it"
            )
        if state is None and self._conn.broken:
            return SourceError(connect_problem(self.target, text))
        return SourceError(f"reading {where} failed: {text}")

    @contextlib.contextmanager
    def cursor(self) -> Iterator[Any]:
        """A cursor of the connection (a caller's own statements; errors become lines)."""
        psycopg = self._psycopg
        try:
            with self._conn.cursor() as cur:
                yield cur
        except psycopg.Error as exc:
            raise self.error(exc) from None


def _fetch(cursor: Any) -> list[tuple[Any, ...]]:
    return list(cursor.fetchall()) if cursor.description is not None else []
