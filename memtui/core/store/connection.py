"""The store's connection: opening the file, its pragmas, the lock around every
statement, reads that fetch every row, the write transaction and the WAL checkpoint."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self, TypeVar

from memtui.core.records import format_timestamp, lenient_text
from memtui.core.store.errors import MemoryStoreError
from memtui.core.store.files import (
    SQLITE_READ_ERRORS,
    fts5_available,
    sqlite_error_text,
    sqlite_file_problem,
    uri_path,
)

CHECKPOINT_RETRIES = 10
CHECKPOINT_RETRY_DELAY = 0.05

_PROGRESS_STEPS = 1000  # virtual-machine steps between two calls of a progress handler
_T = TypeVar("_T")

Clock = Callable[[], datetime]
Progress = Callable[[int, int], None]


class _StatementWatch:
    """SQLite's progress handler for one statement: stop it, or act once it has run long.

    Returning non-zero makes SQLite abandon the statement ("interrupted"),
    which ``sqlite3`` raises as ``OperationalError``; unlike
    ``Connection.interrupt()``, only this statement stops.
    """

    __slots__ = ("busy_steps", "cancelled", "steps", "when_busy")

    def __init__(
        self,
        busy_steps: int,
        when_busy: Callable[[], None] | None,
        cancelled: Callable[[], bool] | None,
    ) -> None:
        self.steps = 0
        self.busy_steps = busy_steps
        self.when_busy = when_busy
        self.cancelled = cancelled

    def __call__(self) -> int:
        if self.cancelled is not None and self.cancelled():
            return 1
        if self.when_busy is not None:
            self.steps += _PROGRESS_STEPS
            if self.steps >= self.busy_steps:
                action, self.when_busy = self.when_busy, None
                action()
        return 0


def _system_clock() -> datetime:
    return datetime.now(UTC)


def _file_identity(path: Path | None) -> tuple[int, int] | None:
    """The device and inode ``path`` names now; None for no path or no file."""
    if path is None:
        return None
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def _undecodable(exc: sqlite3.OperationalError) -> bool:
    """Whether a read failed on stored text that is not UTF-8 (``sqlite3``'s decoding)."""
    return str(exc).startswith("Could not decode to UTF-8")


class StoreConnection:
    """One SQLite file (or an in-memory database), its connections and its lock."""

    def __init__(
        self,
        path: str | Path | None,
        *,
        read_only: bool,
        clock: Clock | None,
        busy_timeout_ms: int,
    ) -> None:
        self.path = None if path is None else Path(path)
        self.read_only = read_only
        self.clock: Clock = clock or _system_clock
        self._lock = threading.RLock()
        self._side: sqlite3.Connection | None = None
        self._side_lock = threading.Lock()
        self._write_serial = 0
        self._derived: dict[str, tuple[tuple[int, int], Any]] = {}
        self._busy_timeout_ms = int(busy_timeout_ms)
        if not fts5_available():
            raise MemoryStoreError(
                f"this Python's SQLite {sqlite3.sqlite_version} was built without FTS5, "
                "which memtui needs for its full-text index; use a Python whose SQLite "
                "has FTS5 (python.org and most distribution builds do)"
            )
        # What the path named as it was opened (device, inode), taken first: a caller can
        # tell later whether the path still names the file this store reads and writes.
        self.file_identity = _file_identity(self.path)
        self._conn = self._connect(busy_timeout_ms)
        if self.file_identity is None:  # a new file, created by this open
            self.file_identity = _file_identity(self.path)
        # Kept for query_tuples, the hot reads: used only under the lock, one read at a time.
        self._tuples = self._conn.cursor()
        self._tuples.row_factory = None

    def _connect(self, busy_timeout_ms: int) -> sqlite3.Connection:
        if self.path is None:
            if self.read_only:
                raise MemoryStoreError("an in-memory store cannot be opened read-only")
            conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        else:
            if self.path.is_dir():
                raise MemoryStoreError(f"{self.path} is a directory, not a memtui database file")
            exists = self.path.exists()
            if not exists and self.read_only:
                raise MemoryStoreError(f"no database at {self.path}; check the path")
            if exists:
                self._check_magic()
            elif not self.path.parent.exists():
                raise MemoryStoreError(f"folder {self.path.parent} does not exist")
            mode = "ro" if self.read_only else "rwc"
            uri = f"file:{uri_path(self.path)}?mode={mode}"
            try:
                conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            except sqlite3.Error as exc:
                raise MemoryStoreError(f"cannot open {self.path}: {exc}") from None
        conn.row_factory = sqlite3.Row
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            conn.execute("PRAGMA secure_delete = ON")
            if self.path is not None and not self.read_only:
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        except SQLITE_READ_ERRORS as exc:
            conn.close()
            raise MemoryStoreError(
                f"{self.path} is not a usable SQLite database: {sqlite_error_text(exc)}"
            ) from None
        return conn

    def _check_magic(self) -> None:
        assert self.path is not None
        problem = sqlite_file_problem(self.path)
        if problem is not None:
            raise MemoryStoreError(f"{self.path} {problem}")

    def close(self) -> None:
        """Close the file, once a vector cache built from it is published (or deleted)."""
        from memtui.core import vector_cache

        vector_cache.wait_for_writes()
        with self._lock:
            self._conn.close()
        with self._side_lock:
            if self._side is not None:
                self._side.close()
                self._side = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connection(self) -> sqlite3.Connection:
        """The store's connection, for the core's read-only query modules (search, lanes)."""
        return self._conn

    @property
    def lock(self) -> threading.RLock:
        """Held around every statement on the main connection (and around a forget from
        its delete to the vector cache's carry-over); hold it to read several
        statements as one consistent view."""
        return self._lock

    def now(self) -> datetime:
        moment = self.clock()
        if moment.tzinfo is None:
            raise MemoryStoreError("the store's clock returned a naive datetime; return UTC")
        return moment

    def now_text(self) -> str:
        return format_timestamp(self.now())

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        """Run one read and fetch every row, so that no read transaction stays open."""
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.OperationalError as exc:
                if not _undecodable(exc):
                    raise
            return self._read_leniently(lambda: self._conn.execute(sql, params).fetchall())

    def _read_leniently(self, read: Callable[[], _T]) -> _T:
        """``read`` again, with text that is not UTF-8 read as ``UndecodedText``.

        Only after a read met such text (another writer's): the strict default
        decodes faster, and a row read this way names its damage instead of
        failing the whole read. Call under the lock.
        """
        self._conn.text_factory = lenient_text
        try:
            return read()
        finally:
            self._conn.text_factory = str

    def query_tuples(
        self,
        sql: str,
        params: Sequence[Any] | dict[str, Any] = (),
        *,
        when_busy: Callable[[], None] | None = None,
        busy_steps: int = 0,
        cancelled: Callable[[], bool] | None = None,
    ) -> list[tuple]:
        """``query`` with plain tuples for rows (cheaper than ``sqlite3.Row`` in hot paths).

        ``when_busy`` is called once, from SQLite's progress handler, when the
        statement has run ``busy_steps`` virtual-machine steps (counted in
        thousands): so that a reader can start work that only a long statement
        needs. When ``cancelled()`` turns true while the statement runs, SQLite
        stops it and ``sqlite3.OperationalError`` ("interrupted") is raised. Both
        run inside the statement, so neither may read through this store.
        """
        with self._lock:
            if when_busy is None and cancelled is None:
                return self._tuples_leniently_on_error(sql, params)
            self._conn.set_progress_handler(
                _StatementWatch(busy_steps, when_busy, cancelled), _PROGRESS_STEPS
            )
            try:
                return self._tuples_leniently_on_error(sql, params)
            finally:
                self._conn.set_progress_handler(None, 0)

    def _tuples_leniently_on_error(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple]:
        try:
            return self._tuples.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if not _undecodable(exc):
                raise
        return self._read_leniently(lambda: self._tuples.execute(sql, params).fetchall())

    def side_query(
        self, sql: str, params: Sequence[Any] | dict[str, Any] = ()
    ) -> list[tuple[Any, ...]] | None:
        """Run one read on a second, read-only connection to the same file.

        So that a reader (search) can run two statements at once, one on each
        connection: SQLite runs them on two cores. Every row is fetched, so no
        read transaction stays open. None for an in-memory store (one
        connection only), and when the second connection cannot be opened.
        """
        if self.path is None:
            return None
        with self._side_lock:
            if self._side is None:
                try:
                    side = sqlite3.connect(
                        f"file:{uri_path(self.path)}?mode=ro",
                        uri=True,
                        isolation_level=None,
                        check_same_thread=False,
                    )
                    side.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
                except sqlite3.Error:
                    return None
                self._side = side
            return self._side.execute(sql, params).fetchall()

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        if self.read_only:
            raise MemoryStoreError("this database is open read-only; reopen it without --read-only")
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if "locked" in str(exc) or "busy" in str(exc):
                    raise MemoryStoreError(
                        "the database is busy (another process is writing); try again"
                    ) from None
                raise
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._conn.execute("COMMIT")
            finally:
                self._write_serial += 1

    def _require_writable(self) -> None:
        if self.read_only:
            raise MemoryStoreError("this database is open read-only; reopen it without --read-only")

    def data_version(self) -> int:
        """SQLite's ``data_version``: changes when another connection commits.

        Cheap enough to poll, so a view can refresh when a live agent writes.
        """
        with self._lock:
            return self._conn.execute("PRAGMA data_version").fetchall()[0][0]

    def change_token(self) -> tuple[int, int]:
        """A value that changes whenever the data may have changed.

        ``PRAGMA data_version`` moves when another connection commits; the
        store counts its own write transactions. Readers key their caches
        (the hidden rows of the live rule, document frequencies) on it.
        """
        return (self.data_version(), self._write_serial)

    def derived(self, name: str, build: Callable[[Self], _T]) -> _T:
        """``build(self)``, kept under ``name`` until the data changes (``change_token``).

        For what readers compute from the whole database and look up again and
        again: count totals, the rows the live rule hides, document frequencies.
        The token is read before the build, so a write during it leaves a value
        that the next look finds out of date.
        """
        token = self.change_token()
        held = self._derived.get(name)
        if held is not None and held[0] == token:
            return held[1]
        value = build(self)
        self._derived[name] = (token, value)
        return value

    def _checkpoint(self) -> tuple[bool, str | None]:
        if self.path is None:
            return True, None
        # The checkpoint waits for readers through the busy handler; keep each
        # wait short so that a pinned WAL costs a bounded, reported delay.
        for attempt in range(CHECKPOINT_RETRIES):
            with self._lock:
                self._conn.execute("PRAGMA busy_timeout = 50")
                try:
                    busy, _, _ = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                finally:
                    self._conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            if busy == 0:
                return True, None
            time.sleep(CHECKPOINT_RETRY_DELAY * (attempt + 1))
        return False, (
            "another connection holds a read transaction, so the write-ahead log "
            "could not be truncated; old page images may remain until it is"
        )

    def checkpoint(self) -> bool:
        """Checkpoint and truncate the WAL now; True when it finished."""
        return self._checkpoint()[0]
