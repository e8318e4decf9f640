"""Maintenance of the whole file: the full-text index rebuilt, free pages compacted."""

from __future__ import annotations

import sqlite3

from memtui.core.index import FTS_TABLE
from memtui.core.store.audit import AuditLog
from memtui.core.store.errors import MemoryStoreError


class Maintenance(AuditLog):
    """``rebuild_text_index`` and ``compact``, each audited."""

    def rebuild_text_index(self, *, operator: str | None = None) -> int:
        """Rebuild the full-text index from the records table; audited. Returns rows indexed."""
        with self._write():
            self._conn.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')")
            count = self._conn.execute("SELECT count(*) FROM records").fetchone()[0]
            self._append_audit(
                action="reindex-text", record_ids=[], operator=operator, details={"count": count}
            )
        return count

    def compact(self, *, operator: str | None = None) -> dict[str, int]:
        """Rewrite the file without free pages (VACUUM), then audit it.

        Content deleted before secure_delete was on can survive in free pages;
        a compacted file holds only live pages.
        """
        self._require_writable()
        with self._lock:
            before = self._conn.execute("PRAGMA freelist_count").fetchone()[0]
            try:
                self._conn.execute("VACUUM")
            except sqlite3.OperationalError as exc:
                raise MemoryStoreError(f"cannot compact now: {exc}") from None
        purged, _ = self._checkpoint()
        with self._write():
            self._append_audit(
                action="compact",
                record_ids=[],
                operator=operator,
                details={"free_pages_before": before, "wal_truncated": purged},
            )
        self._checkpoint()
        return {"free_pages_before": before}
