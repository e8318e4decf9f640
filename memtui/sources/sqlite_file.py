"""A foreign store in a SQLite file: its connection and its purge after a forget.

``memtui.sources.foreign.ForeignSqliteSource`` mixes this into the foreign-store
protocol; stores that are not one SQLite file (a Postgres server, a Qdrant folder or
server) supply their own connection and purge instead.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memtui.sources.base import SourceError
from memtui.sources.foreign_erasure import (
    BYTE_CHECK_LIMIT,
    CHECKPOINT_RETRIES,
    forgotten_bytes_gone,
)
from memtui.sources.foreign_forget import ForeignForgetting
from memtui.sources.foreign_store import uri_for


class SqliteFileStore(ForeignForgetting):
    """A foreign store in one SQLite file: read-only (``query_only``) unless writes are
    allowed, ``secure_delete`` on when they are."""

    _conn: sqlite3.Connection

    def _connect(self) -> sqlite3.Connection:
        mode = "ro" if self.read_only else "rw"
        try:
            conn = sqlite3.connect(
                uri_for(self.path, mode), uri=True, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA busy_timeout = 5000")
            if self.read_only:
                conn.execute("PRAGMA query_only = ON")
            else:
                conn.execute("PRAGMA secure_delete = ON")
        except sqlite3.Error as exc:
            raise SourceError(f"cannot open {self.path}: {exc}") from None
        return conn

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """One read, fetched to the end (no read transaction stays open)."""
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise SourceError(f"reading {self.path.name} failed: {exc}") from None

    def _columns(self) -> dict[str, list[str]]:
        tables = [r[0] for r in self.query("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {
            t: [r[1] for r in self.query(f'PRAGMA table_info("{t.replace(chr(34), "")}")')]
            for t in tables
        }

    def _close_connection(self) -> None:
        self._conn.close()

    def _purge_applied(self, applied: dict[str, Any]) -> tuple[dict[str, bool], dict[str, Any]]:
        """``_purge_file`` of the forget's probes (a store whose forget reports more to
        look for reads it here)."""
        return self._purge_file(applied.get("probes", []))

    def _purge_file(self, probes: Sequence[bytes]) -> tuple[dict[str, bool], dict[str, Any]]:
        """Purge what the delete freed and check that the forgotten bytes are gone.

        secure_delete was on for the delete, so the freed cells and pages are
        zeroed; VACUUM then rewrites the file without free pages (which also
        drops older free pages the store's own deletes left unzeroed), the WAL
        is truncated, and the file is searched for the forgotten bytes (beyond
        the live records' equal values).
        """
        checks: dict[str, bool] = {}
        details: dict[str, Any] = {}
        try:
            self._conn.execute("VACUUM")
            details["vacuumed"] = True
        except sqlite3.OperationalError as exc:
            details["vacuumed"] = False
            details["vacuum_problem"] = str(exc)
        mode = self._conn.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() == "wal":
            truncated = False
            for attempt in range(CHECKPOINT_RETRIES):
                busy = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                if busy == 0:
                    truncated = True
                    break
                time.sleep(0.05 * (attempt + 1))
            checks["wal_truncated"] = truncated
        details["free_pages_after"] = self._conn.execute("PRAGMA freelist_count").fetchone()[0]
        useful = [p for p in probes if p and len(p) >= 8]
        if useful:
            parts = [Path(str(self.path) + s) for s in ("", "-wal")]
            size = sum(p.stat().st_size for p in parts if p.exists())
            if size <= BYTE_CHECK_LIMIT:
                data = b"".join(p.read_bytes() for p in parts if p.exists())
                checks["bytes_gone"] = forgotten_bytes_gone(
                    self._conn, data, useful, self.record_value_columns()
                )
            else:
                details["bytes_check"] = f"skipped: the file is over {BYTE_CHECK_LIMIT} bytes"
        return checks, details
