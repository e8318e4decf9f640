"""``MemoryStore``, composed of its jobs, and ``migrate_database``."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from memtui.core.embed import Embedder
from memtui.core.store.connection import Clock
from memtui.core.store.erasure import Erasure
from memtui.core.store.errors import MemoryStoreError
from memtui.core.store.files import (
    SQLITE_READ_ERRORS,
    sqlite_error_text,
    sqlite_file_problem,
    uri_path,
)
from memtui.core.store.ingest import BulkIngest
from memtui.core.store.maintenance import Maintenance
from memtui.core.store.schema import (
    SCHEMA_VERSION,
    apply_migrations,
    read_schema_state,
    refuse_unusable_schema,
)
from memtui.core.store.writers import RecordWriters


class MemoryStore(Erasure, BulkIngest, RecordWriters, Maintenance):
    """A memtui memory database (SQLite with FTS5), or an in-memory one for ``path=None``.

    Each job is a class of its own (``memtui.core.store``'s modules): the
    connection and its lock, reads and counts, the audit log, vectors, the
    writers, bulk ingest, erasure and maintenance. Every mutation writes its
    audit event in the same transaction.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        read_only: bool = False,
        clock: Clock | None = None,
        embedder: Embedder | None = None,
        operator: str | None = None,
        busy_timeout_ms: int = 5000,
    ) -> None:
        self.default_operator = operator
        self.last_event_id = None
        super().__init__(path, read_only=read_only, clock=clock, busy_timeout_ms=busy_timeout_ms)
        try:
            self._prepare_schema()
            self.embedder = None
            if embedder is not None:
                self._adopt_embedder(embedder)
            else:
                self.embedder = self._recorded_builtin()
        except BaseException:
            self._conn.close()
            raise

    def _prepare_schema(self) -> None:
        """Refuse a file this memtui cannot open, and migrate an older one (audited)."""
        version, tables = read_schema_state(self._conn, self.path)
        refuse_unusable_schema(self.path, version, tables, read_only=self.read_only)
        if version == SCHEMA_VERSION:
            return
        with self._write():
            apply_migrations(self._conn, version)
            if version >= 1:  # an existing database changed shape: say so in its log
                self._append_audit(
                    action="migrate",
                    record_ids=[],
                    operator=None,
                    details={"from_schema": version, "to_schema": SCHEMA_VERSION},
                )


def migrate_database(
    path: str | Path, *, operator: str | None = None, clock: Clock | None = None
) -> dict[str, Any]:
    """Upgrade the memtui database at ``path`` to this memtui's schema, in place.

    What a writable open does on its own, for a file that read-only opens
    refuse until it is done. The migrations are forward-only and run in one
    transaction with a ``migrate`` audit event. Refuses, changing nothing: a
    missing path, a file that is not SQLite, an empty file (there is nothing
    to upgrade: ingest makes a database), another program's database and a
    file from a newer memtui. Returns ``{"from_schema", "to_schema",
    "event_id"}`` (``event_id`` None when the file was already current).
    """
    path = Path(path)
    if path.is_dir():
        raise MemoryStoreError(f"{path} is a directory, not a memtui database file")
    if not path.exists():
        raise MemoryStoreError(f"no database at {path}; check the path")
    problem = sqlite_file_problem(path)
    if problem is not None:
        raise MemoryStoreError(f"{path} {problem}")
    probe = sqlite3.connect(f"file:{uri_path(path)}?mode=ro", uri=True)
    try:
        version = probe.execute("PRAGMA user_version").fetchone()[0]
        tables = probe.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'")
        has_tables = tables.fetchone()[0] > 0
    except SQLITE_READ_ERRORS as exc:
        raise MemoryStoreError(
            f"{path} is not a usable SQLite database: {sqlite_error_text(exc)}"
        ) from None
    finally:
        probe.close()
    if version == 0 and not has_tables:
        empty = "empty (0 bytes)" if path.stat().st_size == 0 else "without tables"
        raise MemoryStoreError(
            f"{path} is {empty}: there is nothing to upgrade; "
            f"`memtui ingest CORPUS.json --db {path}` makes a memtui database there"
        )
    with MemoryStore(path, clock=clock, operator=operator) as store:  # refuses newer, foreign
        event_id = store.last_event_id if version != SCHEMA_VERSION else None
    return {"from_schema": version, "to_schema": SCHEMA_VERSION, "event_id": event_id}
