"""``LanceSource``: one LanceDB table behind the ``MemorySource`` interface.

The table is read once per version (``snapshot``: the columns in Arrow, the
vectors as one matrix for memtui's index, rows decoded when shown), paged and
filtered in memory; a forget runs ``erasure``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
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
from memtui.sources.lancedb.snapshot import TableSnapshot
from memtui.sources.qdrant.collections import CollectionChoiceError
from memtui.sources.qdrant.filters import list_filter_sql, matches
from memtui.sources.shapes import keyset_start

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


class LanceSource(ForeignSource):
    """A LanceDB table (crewAI's ``memories``, or any other)."""

    kind = "lancedb"
    kind_label = "LanceDB table"
    hidden_state = "expired"
    id_prefix = ID_PREFIX
    write_capabilities = frozenset({"forget", "forget_scope"})
    _snap: TableSnapshot

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
        counts["rows"] = len(snap)
        gaps = self.gap_counts()
        counts.update({k: v for k, v in gaps.items() if v})
        vector = f"{self.vector[0]} ({self.vector[1]} dims)" if self.vector else "none"
        notes = [
            f"table {self.table}: {len(snap)} rows, version {snap.version}, "
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
            matrix = None
            if self.vector is not None:
                if data.num_rows:
                    matrix = np.asarray(
                        data.column(self.vector[0]).combine_chunks().flatten(), dtype="<f4"
                    ).reshape(data.num_rows, self.vector[1])
                data = data.drop_columns([self.vector[0]])
            self._snap = TableSnapshot(
                data,
                key_column=self.key_column,
                decode=self._decode,
                tier=self.tiers[0],
                record_type="memory" if self.crewai else "row",
                crewai=self.crewai,
                matrix=matrix,
                version=dataset.version,
            )
            self._snap_key = self.state_key()

    def _decode(self, row: Mapping[str, Any], key: str) -> SourceRecord:
        if self.crewai:
            return crewai_record(row, key)
        return table_record(row, key, table=self.table, text=self.text, skip={ROWID})

    def _current(self) -> TableSnapshot:
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
        return self._current().select(self.check_filters(filters), start)

    def cache_filter_sql(self) -> FilterSql:
        return list_filter_sql(set(self.list_scope_keys))

    def record_count(self) -> int:
        return len(self._current())

    def fingerprint(self) -> str:
        snap = self._current()
        return fingerprint_text([self.kind, self.table, self._snap_key, len(snap)])

    #: the row count is known at once; the scopes are counted from the columns after
    quick_tier_counts = True

    def tier_counts(self, *, include_hidden: bool = False) -> dict[str, int]:
        count = len(self._current())
        return {self.tiers[0]: count} if count else {}

    def facets(
        self, filters: Mapping[str, Any] | None = None, *, include_hidden: bool = False
    ) -> list[TierFacet]:
        checked = self.check_filters(filters)
        snap = self._current()
        tier = self.tiers[0]
        if not checked:
            if not len(snap):
                return []
            scopes = snap.scope_counts()
            return [
                TierFacet(
                    tier=tier,
                    count=len(snap),
                    scopes={k: dict(sorted(v.items())) for k, v in sorted(scopes.items())},
                )
            ]
        count = 0
        counted: dict[str, dict[str, int]] = {}
        for row in snap.scopes():
            if not matches(row, checked):
                continue
            count += 1
            for key in self.scope_keys:
                value = row.scope.get(key)
                values = value if isinstance(value, list) else [value]
                for item in dict.fromkeys(str(v) for v in values if v is not None):
                    bucket = counted.setdefault(key, {})
                    bucket[item] = bucket.get(item, 0) + 1
        if not count:
            return []
        return [
            TierFacet(
                tier=tier,
                count=count,
                scopes={k: dict(sorted(v.items())) for k, v in sorted(counted.items())},
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
        start = keyset_start(self._current().ids, after, key_of, self.kind_label)
        return Page.of(self._select(filters, include_hidden, start), limit)

    def get(self, record_id: str) -> SourceRecord | None:
        return self._current().get(str(record_id))

    def get_many(self, record_ids: Iterable[str]) -> dict[str, SourceRecord]:
        snap = self._current()
        wanted = [str(i) for i in record_ids if str(i) in snap.row_of]
        records = snap.records_at([snap.row_of[i] for i in wanted])
        return dict(zip(wanted, records, strict=True))

    def id_hint(self, record_id: str) -> str | None:
        if key_of(record_id) is not None:
            return None
        candidate = record_id_of(str(record_id).strip())
        if self.get(candidate) is not None:
            return f"memtui's id of row {str(record_id).strip()} is {candidate}"
        return f"a {self.kind_label} record's id is {ID_PREFIX}:ID, as `memtui records` lists it"

    def notes(self, record: SourceRecord) -> str:
        return f"row {self._current().key_of(record.id)}"

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
        snap = self._current()
        if snap.matrix is None:
            return {}
        ids = [f"{ID_PREFIX}:{k}" for k in snap.keys]
        return {rid: snap.matrix[n].tobytes() for n, rid in enumerate(ids)}

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
        return list(self._current().select({key: value}))

    def _apply_forget(self, record: SourceRecord) -> dict[str, Any]:
        return self._apply_forget_many([record])

    def _apply_forget_many(self, records: Sequence[SourceRecord]) -> dict[str, Any]:
        snap = self._current()
        keys = [snap.key_of(r.id) for r in records if r.id in snap.row_of]
        probes = [r.content.encode("utf-8")[:256] for r in records if r.content]
        probes.extend(str(k).encode("utf-8") for k in keys if self.key_column != ROWID)
        live = snap.contents(self.text, skip={snap.row_of[r.id] for r in records})
        probes = [p for p in probes if p.decode("utf-8", "replace") not in live]
        result = erasure.delete_and_rewrite(self.table_path, self.key_column, keys, probes)
        before = len(snap)
        self._reload()
        if self.key_column == ROWID:  # row ids move when fragments are rewritten: count
            gone = len(self._snap) == before - len(keys)
        else:
            gone = all(r.id not in self._snap.row_of for r in records)
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
