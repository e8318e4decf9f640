"""``LanceSource``: one LanceDB table behind the ``MemorySource`` interface.

The table is read once per version (every row, the vectors kept for memtui's
index), paged and filtered in memory; a forget runs ``erasure``.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from memtui.sources.base import (
    DEFAULT_PAGE_SIZE,
    DetailSection,
    Page,
    SourceError,
    SourceRecord,
    SourceSummary,
    TierFacet,
    check_limit,
)
from memtui.sources.cache import FilterSql, fingerprint_text
from memtui.sources.foreign import ForeignSource
from memtui.sources.foreign_erasure import GapsOutcome
from memtui.sources.lancedb import erasure
from memtui.sources.lancedb.folder import TableInfo
from memtui.sources.lancedb.rows import (
    ID_PREFIX,
    ROWID,
    crewai_record,
    id_column,
    is_crewai,
    key_of,
    record_id_of,
    table_record,
    text_column,
    vector_column,
)
from memtui.sources.qdrant.collections import CollectionChoiceError
from memtui.sources.qdrant.filters import list_filter_sql, matches

Clock = Callable[[], datetime]


class TableChoiceError(CollectionChoiceError):
    """The database holds several tables and none was named (the app shows a picker)."""

    def __init__(self, where: str, tables: Sequence[TableInfo]) -> None:
        super().__init__(where, tables)  # type: ignore[arg-type]
        listed = "; ".join(t.describe() for t in tables) or "none"
        self.args = (
            f"{where} holds {len(tables)} LanceDB tables; pick one with --collection NAME: "
            f"{listed}",
        )

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass
class _Snapshot:
    records: list[SourceRecord] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    by_id: dict[str, SourceRecord] = field(default_factory=dict)
    keys: dict[str, Any] = field(default_factory=dict)
    vectors: dict[str, bytes] = field(default_factory=dict)
    version: int | None = None


class LanceSource(ForeignSource):
    """A LanceDB table (crewAI's ``memories``, or any other)."""

    kind = "lancedb"
    kind_label = "LanceDB table"
    hidden_state = "expired"
    id_prefix = ID_PREFIX
    write_capabilities = frozenset({"forget", "forget_scope"})

    def __init__(
        self,
        folder: Path,
        *,
        table: str,
        read_only: bool = True,
        clock: Clock | None = None,
        operator: str | None = None,
        audit_db: str | Path | None = None,
        cache_root: Path | None = None,
    ) -> None:
        import lance

        self.table = table
        self.table_path = folder / f"{table}.lance"
        try:
            dataset = lance.dataset(str(self.table_path))
        except Exception as exc:
            raise SourceError(f"cannot open LanceDB table {table} in {folder}: {exc}") from None
        schema = dataset.schema
        self.crewai = is_crewai(set(schema.names))
        self.vector = vector_column(schema)
        self.key_column = id_column(schema)
        self.text = "content" if self.crewai else text_column(schema)
        self.tiers = ("memories",) if self.crewai else (table,)
        self.scope_keys = ("scope", "categories", "source") if self.crewai else ()
        self.list_scope_keys = ("categories",) if self.crewai else ()
        self.forget_scope_keys = self.scope_keys
        if not self.crewai:
            self.write_capabilities = frozenset({"forget"})
        self._snap = _Snapshot()
        super().__init__(
            folder,
            read_only=read_only,
            clock=clock,
            operator=operator,
            audit_db=audit_db,
            cache_root=cache_root,
        )
        self._reload()

    # -- no SQLite connection: the table is read with pylance

    def _connect(self) -> Any:
        return None

    def _columns(self) -> dict[str, list[str]]:
        return {}

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return []

    def _close_connection(self) -> None:
        """Nothing stays open: each read opens the table's dataset anew."""

    # -- what it is

    @property
    def label(self) -> str:
        what = "crewAI memory" if self.crewai else self.kind_label
        return f"{self.path.name}/{self.table} ({what})"

    @property
    def expiry_rule(self) -> str:
        return "no expiry: a row is live until it is deleted"

    def has_vectors(self) -> bool:
        return self.vector is not None

    def vector_dim(self) -> int | None:
        return self.vector[1] if self.vector else None

    def audit_source(self) -> dict[str, Any]:
        return {**super().audit_source(), "table": self.table}

    def summary(self) -> SourceSummary:
        base = super().summary()
        counts = dict(base.counts)
        snap = self._current()
        counts["rows"] = len(snap.records)
        gaps = self.gap_counts()
        counts.update({k: v for k, v in gaps.items() if v})
        vector = f"{self.vector[0]} ({self.vector[1]} dims)" if self.vector else "none"
        notes = [
            f"table {self.table}: {len(snap.records)} rows, version {snap.version}, "
            f"text column {self.text or 'none'}, vector column {vector}",
            *erasure.gap_notes(gaps),
            *base.notes,
        ]
        return SourceSummary(
            kind=base.kind,
            label=base.label,
            path=base.path,
            read_only=base.read_only,
            counts=counts,
            notes=notes,
        )

    def gap_counts(self) -> dict[str, int]:
        """``erasure.gaps`` once per version of the table (it reads the older versions)."""
        key = self.state_key()
        cached = getattr(self, "_gaps", None)
        if cached is None or cached[0] != key:
            cached = (key, erasure.gaps(self.table_path, self.key_column, self.text))
            self._gaps = cached
        return dict(cached[1])

    def collections(self) -> list[TableInfo]:
        from memtui.sources.lancedb.folder import table_infos

        return table_infos(self.path)

    # -- loading and freshness

    def state_key(self) -> Any:
        return erasure.version_listing(self.table_path)

    def _reload(self) -> None:
        import lance
        import numpy as np

        with self._lock:
            dataset = lance.dataset(str(self.table_path))
            data = dataset.to_table(with_row_id=self.key_column == ROWID)
            vectors: dict[str, bytes] = {}
            if self.vector is not None and data.num_rows:
                matrix = np.asarray(
                    data.column(self.vector[0]).combine_chunks().flatten(), dtype="<f4"
                ).reshape(data.num_rows, self.vector[1])
                data = data.drop_columns([self.vector[0]])
            else:
                matrix = None
            skip = {ROWID}
            records = []
            keys: dict[str, Any] = {}
            for index, row in enumerate(data.to_pylist()):
                key = row.get(self.key_column)
                if self.crewai:
                    record = crewai_record(row, str(key))
                else:
                    record = table_record(
                        row, str(key), table=self.table, text=self.text, skip=skip
                    )
                records.append(record)
                keys[record.id] = key
                if matrix is not None:
                    vectors[record.id] = matrix[index].tobytes()
            records.sort(key=lambda r: r.id)
            self._snap = _Snapshot(
                records=records,
                ids=[r.id for r in records],
                by_id={r.id: r for r in records},
                keys=keys,
                vectors=vectors,
                version=dataset.version,
            )
            self._snap_key = self.state_key()

    def _current(self) -> _Snapshot:
        with self._lock:
            if self.state_key() != getattr(self, "_snap_key", None):
                self._reload()
            return self._snap

    def refresh(self) -> None:
        self._reload()

    # -- reading

    def _select(
        self, filters: Mapping[str, Any] | None, include_hidden: bool, start: int = 0
    ) -> Iterator[SourceRecord]:
        checked = self.check_filters(filters)
        for record in self._current().records[start:]:
            if matches(record, checked):
                yield record

    def cache_filter_sql(self) -> FilterSql:
        return list_filter_sql(set(self.list_scope_keys))

    def record_count(self) -> int:
        return len(self._current().records)

    def fingerprint(self) -> str:
        snap = self._current()
        return fingerprint_text([self.kind, self.table, self._snap_key, len(snap.records)])

    def facets(
        self, filters: Mapping[str, Any] | None = None, *, include_hidden: bool = False
    ) -> list[TierFacet]:
        tiers: dict[str, int] = {}
        scopes: dict[str, dict[str, int]] = {}
        tier = self.tiers[0]
        for record in self._select(filters, include_hidden):
            tiers[record.tier] = tiers.get(record.tier, 0) + 1
            for key in self.scope_keys:
                value = record.scope.get(key)
                values = value if isinstance(value, list) else [value]
                for item in dict.fromkeys(str(v) for v in values if v is not None):
                    counts = scopes.setdefault(key, {})
                    counts[item] = counts.get(item, 0) + 1
        if tier not in tiers:
            return []
        return [
            TierFacet(
                tier=tier,
                count=tiers[tier],
                scopes={k: dict(sorted(v.items())) for k, v in sorted(scopes.items())},
            )
        ]

    def page(
        self,
        filters: Mapping[str, Any] | None = None,
        *,
        after: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        include_hidden: bool = False,
    ) -> Page:
        limit = check_limit(limit)
        snap = self._current()
        start = 0
        if after:
            if key_of(after) is None:
                raise SourceError(f"cursor {after!r} is not a {self.kind_label} record id")
            start = bisect.bisect_right(snap.ids, after)
        return Page.of(self._select(filters, include_hidden, start), limit)

    def get(self, record_id: str) -> SourceRecord | None:
        return self._current().by_id.get(str(record_id))

    def get_many(self, record_ids: Iterable[str]) -> dict[str, SourceRecord]:
        snap = self._current()
        return {str(i): snap.by_id[str(i)] for i in record_ids if str(i) in snap.by_id}

    def id_hint(self, record_id: str) -> str | None:
        if key_of(record_id) is not None:
            return None
        candidate = record_id_of(str(record_id).strip())
        if self.get(candidate) is not None:
            return f"memtui's id of row {str(record_id).strip()} is {candidate}"
        return f"a {self.kind_label} record's id is {ID_PREFIX}:ID, as `memtui records` lists it"

    def notes(self, record: SourceRecord) -> str:
        return f"row {self._current().keys.get(record.id)}"

    def detail(self, record_id: str) -> list[DetailSection]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        from memtui.core.secrets import mask_metadata

        sections = [
            DetailSection(
                title="row (columns, secrets masked; the vector left out)",
                columns=("json",),
                rows=[(json.dumps(mask_metadata(record.metadata), indent=2, sort_keys=True),)],
            )
        ]
        if self.vector:
            sections.append(
                DetailSection(
                    title="stored embedding",
                    columns=("table", "column", "dims"),
                    rows=[(self.table, self.vector[0], self.vector[1])],
                )
            )
        sections.append(self.history_section(record.id))
        return sections

    # -- search: memtui's index, the table's own vectors

    def cache_vectors(self) -> dict[str, bytes]:
        return dict(self._current().vectors)

    # -- forget

    def forget_preview(self, record_id: str) -> dict[str, Any]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        return {
            "records": [record.id],
            "rule": erasure.RULE,
            "counts": {"rows": 1},
        }

    def scope_records(self, key: str, value: str) -> list[SourceRecord]:
        return [r for r in self._current().records if matches(r, {key: value})]

    def _apply_forget(self, record: SourceRecord) -> dict[str, Any]:
        return self._apply_forget_many([record])

    def _apply_forget_many(self, records: Sequence[SourceRecord]) -> dict[str, Any]:
        snap = self._current()
        keys = [snap.keys[r.id] for r in records if r.id in snap.keys]
        probes = [r.content.encode("utf-8")[:256] for r in records if r.content]
        probes.extend(str(k).encode("utf-8") for k in keys if self.key_column != ROWID)
        live = {r.content for r in snap.records if r.id not in {x.id for x in records}}
        probes = [p for p in probes if p.decode("utf-8", "replace") not in live]
        result = erasure.delete_and_rewrite(self.table_path, self.key_column, keys, probes)
        before = len(snap.records)
        self._reload()
        if self.key_column == ROWID:  # row ids move when fragments are rewritten: count
            gone = len(self._snap.records) == before - len(keys)
        else:
            gone = all(r.id not in self._snap.by_id for r in records)
        return {
            "removed": [r.id for r in records],
            "checks": {"rows_gone": gone, **result.checks},
            "probes": [],
            "details": {"table": self.table, **result.details},
        }

    def _purge_applied(self, applied: dict[str, Any]) -> tuple[dict[str, bool], dict[str, Any]]:
        """Nothing more: ``_apply_forget`` rewrote the fragments, removed the older
        versions and read every file under the table (its checks)."""
        return {}, {}

    # -- the gap: deleted rows the table's files still hold

    def forget_gaps_preview(self) -> dict[str, Any]:
        ids = erasure.gap_ids(self.table_path, self.key_column, self.text)
        counts = erasure.gaps(self.table_path, self.key_column, self.text)
        return {
            "records": ids,
            "rule": erasure.GAPS_RULE,
            "counts": counts,
            "nothing": "no erasure gap: no deleted row is left on file",
            "question": (
                f"Rewrite the fragments of {self.table} without its {len(ids)} deleted row(s) "
                f"and remove its {counts['old_versions']} older version(s)? This cannot be undone"
            ),
        }

    def forget_gaps(self, *, reason: str, operator: str | None = None) -> GapsOutcome:
        return erasure.forget_gaps(self, reason=reason, operator=operator)
