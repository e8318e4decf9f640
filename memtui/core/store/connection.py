"""The store's connection: opening the file (its refusals and pragmas), the write
transaction a read-only store refuses, and the WAL checkpoint a forget ends with.

The reads, the lock and the values kept until the data changes are the search
index's plumbing (``memtui.core.index_db.IndexDatabase``), shared with the index
of a foreign store.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Self

from memtui.core.index_db import IndexDatabase
from memtui.core.store.errors import MemoryStoreError
from memtui.core.store.files import (
    SQLITE_READ_ERRORS,
    fts5_available,
    sqlite_error_text,
    sqlite_file_problem,
    uri_path,
)

Clock = Callable[[], datetime]
Progress = Callable[[int, int], None]


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


class StoreConnection(IndexDatabase):
    """One memtui database file (or an in-memory database), its connections and its lock."""

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
        if not fts5_available():
            raise MemoryStoreError(
                f"this Python's SQLite {sqlite3.sqlite_version} was built without FTS5, "
                "which memtui needs for its full-text index; use a Python whose SQLite "
                "has FTS5 (python.org and most distribution builds do)"
            )
        # What the path named as it was opened (device, inode), taken first: a caller can
        # tell later whether the path still names the file this store reads and writes.
        self.file_identity = _file_identity(self.path)
        conn = self._connect(busy_timeout_ms)
        if self.file_identity is None:  # a new file, created by this open
            self.file_identity = _file_identity(self.path)
        super().__init__(
            conn, self.path, clock=clock or _system_clock, busy_timeout_ms=busy_timeout_ms
        )

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
        super().close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> datetime:
        moment = self.clock()
        if moment.tzinfo is None:
            raise MemoryStoreError("the store's clock returned a naive datetime; return UTC")
        return moment

    def busy_error(self) -> Exception:
        return MemoryStoreError("the database is busy (another process is writing); try again")

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``), rolled back if the block raises;
        refused on a read-only store. Every mutation writes its audit event in it."""
        self._require_writable()
        with super().write() as conn:
            yield conn

    _write = write

    def _require_writable(self) -> None:
        if self.read_only:
            raise MemoryStoreError("this database is open read-only; reopen it without --read-only")

    def _checkpoint(self) -> tuple[bool, str | None]:
        """``checkpoint``, and when the WAL could not be truncated why, in words."""
        if self.checkpoint():
            return True, None
        return False, (
            "another connection holds a read transaction, so the write-ahead log "
            "could not be truncated; old page images may remain until it is"
        )
