"""The first layer of every foreign store: its connection, memtui's index of it, the
audit log beside it, and the hooks an adapter fills in.

``ForeignStore`` opens the store (read-only unless writes are allowed; how is the
subclass's: ``memtui.sources.sqlite_file`` for a SQLite file), keeps
memtui's index of it (``memtui.sources.cache.SourceIndex``, rebuilt when the
store's ``fingerprint`` moves on) and its audit log (``ForeignAudit``). An
adapter says what its index rows are (``cache_row``, ``searchable_text``,
``cache_expiry``, ``cache_vectors``, ``cache_filter_sql``) and how many records it
holds. ``memtui.sources.foreign_forget`` adds the forget protocol on top, and
``memtui.sources.foreign.ForeignSqliteSource`` search.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from memtui.sources.audit import ForeignAudit, default_audit_path
from memtui.sources.base import (
    HIDDEN_STATES,
    DetailSection,
    MemorySource,
    Progress,
    SourceError,
    SourceRecord,
    SourceSummary,
    display_time,
)
from memtui.sources.cache import (
    CacheRow,
    FilterSql,
    SourceIndex,
    file_fingerprint,
    fingerprint_text,
)

Clock = Callable[[], datetime]


def uri_for(path: Path, mode: str) -> str:
    """A ``file:`` URI opening the store at ``path`` in ``mode`` (``ro``, ``rw``)."""
    return f"file:{quote(str(path.resolve()), safe='/')}?mode={mode}"


def _system_clock() -> datetime:
    return datetime.now(UTC)


class ForeignStore(MemorySource):
    """A memory store that memtui did not write: its connection, index and audit log."""

    #: short prefix of this source's ids (``lg``, ``pref``...)
    id_prefix: str = ""

    def __init__(
        self,
        path: str | Path,
        *,
        read_only: bool = True,
        clock: Clock | None = None,
        operator: str | None = None,
        audit_db: str | Path | None = None,
        cache_root: Path | None = None,
    ) -> None:
        super().__init__(path, read_only=read_only)
        # The store's connection is guarded by self._lock (held per query); the
        # cached index by its own lock, so that building it in a worker never
        # blocks page/get calls from another thread.
        self._index_lock = threading.RLock()
        self.clock: Clock = clock or _system_clock
        self.operator = operator
        self.audit_path = Path(audit_db) if audit_db else default_audit_path(self.path)
        self.audit = ForeignAudit(self.audit_path, clock=self.clock, operator=operator)
        self._conn = self._connect()
        self.columns = self._columns()
        self.index = self.make_index(cache_root)

    def make_index(self, cache_root: Path | None) -> SourceIndex:
        """memtui's index of the store: rebuilt whenever ``fingerprint`` moves on (a store
        that can say what changed refreshes it in place instead: a Postgres store)."""
        return SourceIndex(
            kind=self.kind,
            store_path=self.path,
            allowed=self.filter_keys,
            filter_sql=self.cache_filter_sql(),
            clock=self.cache_now,
            fingerprint=self.fingerprint,
            rows=self._all_cache_rows,
            count=self.record_count,
            root=cache_root,
        )

    # -- connection

    @abstractmethod
    def _connect(self) -> Any:
        """The store's connection (a SQLite file's, a Postgres server's, a backend's)."""

    @abstractmethod
    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """One read of the store, fetched to the end."""

    @abstractmethod
    def _columns(self) -> dict[str, list[str]]:
        """The store's tables and their columns."""

    @abstractmethod
    def _close_connection(self) -> None:
        """Close what ``_connect`` opened (under ``self._lock``)."""

    def close(self) -> None:
        with self._lock:
            self._close_connection()
        self.index.close()
        self.audit.close()

    # -- what it is

    @property
    def capabilities(self) -> frozenset[str]:
        caps = set(self._plain_capabilities())
        if self.has_vectors():
            caps.add("vectors")
        if self.has_history():
            caps.add("history")
        return frozenset(caps)

    def _plain_capabilities(self) -> set[str]:
        """What the store can do whatever it holds (search, audit, forget when writable)."""
        caps = {"search", "audit"}
        if not self.read_only:
            caps.add("forget")
            if "forget_scope" in self.write_capabilities:
                caps.add("forget_scope")
        return caps

    def can(self, capability: str) -> bool:
        """One capability, without working out the others: whether a store's vectors are
        complete can take a read of its vector files (a Chroma segment's), which the app
        asking whether a key applies must not wait for."""
        if capability == "vectors":
            return self.has_vectors()
        if capability == "history":
            return self.has_history()
        return capability in self._plain_capabilities()

    def has_vectors(self) -> bool:
        return False

    def has_history(self) -> bool:
        return False

    def read_only_message(self) -> str:
        return (
            f"{self.label} is open read-only: memtui opens foreign stores read-only; "
            "pass --allow-writes to change it"
        )

    def now(self) -> datetime:
        moment = self.clock()
        if moment.tzinfo is None:
            raise SourceError("the clock returned a naive datetime; return UTC")
        return moment

    def cache_now(self) -> datetime:
        """The instant the cache's native rule compares mapped expiries with."""
        return self.now()

    def now_label(self) -> str:
        return self.now().isoformat()

    def summary(self) -> SourceSummary:
        base = super().summary()
        notes = list(base.notes)
        interrupted = self.interrupted_forgets()
        counts = dict(base.counts)
        if interrupted:
            counts["interrupted_forgets"] = len(interrupted)
            notes.append(
                f"{len(interrupted)} interrupted forget(s): an intent in the audit log has no "
                "outcome; check those records"
            )
        notes.append(f"audit log: {self.audit_path}")
        return SourceSummary(
            kind=base.kind,
            label=base.label,
            path=base.path,
            read_only=base.read_only,
            counts=counts,
            notes=notes,
        )

    def header_notes(self) -> list[str]:
        """The summary's notes, the audit log named by its file (``memtui info`` has the path)."""
        full = f"audit log: {self.audit_path}"
        return [
            f"audit log: {self.audit_path.name}" if note == full else note
            for note in self.summary().notes
        ]

    def data_version(self) -> Any:
        return self.fingerprint()

    # -- cache hooks

    @abstractmethod
    def record_count(self) -> int:
        """Every record, hidden included (for progress)."""

    def fingerprint(self) -> str:
        return fingerprint_text([file_fingerprint(self.path), self._data_fingerprint()])

    def _data_fingerprint(self) -> Any:
        return None

    def cache_filter_sql(self) -> FilterSql | None:
        return None

    def cache_expiry(self, record: SourceRecord) -> str | None:
        """The record's expiry mapped so that the native rule gives the source's rule."""
        return None

    def cache_vectors(self) -> dict[str, bytes]:
        """Stored vectors by source id (one per record), little-endian float32."""
        return {}

    def _all_cache_rows(self) -> Iterable[CacheRow]:
        vectors = self.cache_vectors()
        for record in self.iter_records(include_hidden=True, page_size=2000):
            yield self.cache_row(record, vectors.get(record.id))

    def cache_row(self, record: SourceRecord, vector: bytes | None = None) -> CacheRow:
        return CacheRow(
            source_id=record.id,
            tier=record.tier,
            record_type=record.record_type,
            content=self.searchable_text(record),
            scope=record.scope,
            hidden=record.state in HIDDEN_STATES - {"expired"},
            expires_at=self.cache_expiry(record),
            vector=vector,
        )

    def searchable_text(self, record: SourceRecord) -> str:
        return record.content

    def index_status(self) -> dict[str, Any]:
        with self._index_lock:
            return self.index.status()

    def build_index(self, progress: Progress | None = None) -> dict[str, Any]:
        with self._index_lock:
            self.index.store(progress)
            return self.index.status()

    # -- audit

    def audit_events(
        self, *, limit: int | None = None, before_id: int | None = None
    ) -> list[dict[str, Any]]:
        return self.audit.events(limit=limit, before_id=before_id)

    def verify_audit(self) -> str | None:
        return self.audit.verify()

    # -- helpers for adapters

    def history_section(self, record_id: str) -> DetailSection:
        rows = [
            (
                e["id"],
                display_time(e["at"]),
                e["operator"],
                e["action"],
                e.get("status", ""),
                e["reason"],
            )
            for e in reversed(self.audit_events())
            if record_id in [str(i) for i in e["record_ids"]]
        ]
        return DetailSection(
            title="memtui audit events naming this record",
            columns=("#", "at", "operator", "action", "status", "reason"),
            rows=rows,
            note=None if rows else "none",
        )
