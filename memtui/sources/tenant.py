"""Tenant evidence stores (a textbook design) as a memory source.

One table keyed by tenant and record id, with ``revision``, ``kind``
(``working`` | ``incident`` | ``runbook``), ``body``, ``source`` (a citation
such as ``runbook://queue/v1``) and an integer ``expiry`` in logical time.

- Tiers are the kinds; scopes are ``tenant`` and ``revision``; the source is
  shown as the record's citation.
- Expiry is logical: live means ``expiry > now``, strictly, with ``now`` given
  by ``--now N``. Without it no record is treated as expired (and the rule
  says so).
- Forget deletes one record id within one tenant only: the same id in
  another tenant is another record and stays.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memtui.core.records import format_timestamp
from memtui.sources.base import (
    DEFAULT_PAGE_SIZE,
    DetailSection,
    Page,
    SourceError,
    SourceRecord,
    TierFacet,
    check_limit,
    decode_id,
    encode_id,
)
from memtui.sources.foreign import ForeignSqliteSource

ID_PREFIX = "ev"
KINDS = ("working", "incident", "runbook")
# Logical time t maps to BASE + t microseconds in memtui's index cache (whose
# timestamps keep microseconds), so that the cache's native rule (live while
# expires_at > now) is exactly ``expiry > now``: distinct logical times stay
# distinct instants from about -6.3e16 to 2.5e17 (epoch seconds, milliseconds and
# microseconds all fit), and values beyond are clamped to datetime's years 1..9999.
_BASE = datetime(2000, 1, 1, tzinfo=UTC)
_LOWEST = datetime.min.replace(tzinfo=UTC)
_HIGHEST = datetime.max.replace(tzinfo=UTC)
_MIN_UNITS = (_LOWEST - _BASE) // timedelta(microseconds=1)
_MAX_UNITS = (_HIGHEST - _BASE) // timedelta(microseconds=1)
# The cache's expiry mapping; part of the fingerprint, so a cache built with another
# mapping (an earlier memtui's) is rebuilt.
_MAPPING = "logical-us"


def _logical_instant(value: int) -> datetime:
    return _BASE + timedelta(microseconds=max(_MIN_UNITS, min(_MAX_UNITS, int(value))))


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class TenantEvidenceSource(ForeignSqliteSource):
    kind = "tenant-evidence"
    kind_label = "tenant evidence store"
    tiers = KINDS
    scope_keys = ("tenant", "revision")
    hidden_state = "expired"

    def __init__(
        self, path: str | Path, *, table: str, logical_now: int | None = None, **kwargs: Any
    ) -> None:
        self.table = table
        self.logical_now = logical_now
        super().__init__(path, **kwargs)
        self.id_column = self._id_column()

    def _id_column(self) -> str:
        info = self.query(f"PRAGMA table_info({_ident(self.table)})")
        keys = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5] and r[1] != "tenant"]
        if keys:
            return keys[0]
        names = [r[1] for r in info]
        for candidate in ("record_id", "id"):
            if candidate in names:
                return candidate
        raise SourceError(
            f"{self.path}: table {self.table} has no record id column (a primary key beside "
            "tenant, or record_id)"
        )

    @property
    def expiry_rule(self) -> str:
        if self.logical_now is None:
            return (
                "logical-time rule: live while expiry > now (strict); no --now N was given, "
                "so no record is treated as expired"
            )
        return f"logical-time rule: live while expiry > now (strict); now = {self.logical_now}"

    def now_label(self) -> str:
        return "none given" if self.logical_now is None else str(self.logical_now)

    def clock_label(self) -> str:
        if self.logical_now is None:
            return "none given (logical time; pass --now N)"
        return f"{self.logical_now} (logical time)"

    def cache_now(self) -> datetime:
        # No now given: the lowest instant (no record is expired then; see cache_expiry).
        return _LOWEST if self.logical_now is None else _logical_instant(self.logical_now)

    def cache_expiry(self, record: SourceRecord) -> str | None:
        if self.logical_now is None or record.expires_at is None:
            return None
        return format_timestamp(_logical_instant(int(record.expires_at)))

    def fingerprint(self) -> str:
        # The cache's expiry mapping depends on whether a logical now was given.
        given = "now" if self.logical_now is not None else "no-now"
        return f"{super().fingerprint()}|{_MAPPING}|{given}"

    # -- reading

    def _columns_sql(self) -> str:
        return (
            f"tenant, {_ident(self.id_column)}, revision, kind, body, source, expiry "
            f"FROM {_ident(self.table)}"
        )

    def _where(
        self, filters: Mapping[str, Any] | None, include_hidden: bool
    ) -> tuple[str, list[Any]]:
        filters = self.check_filters(filters)
        clauses: list[str] = []
        params: list[Any] = []
        for key, value in filters.items():
            column = {"tier": "kind", "record_type": "'evidence'"}.get(key, key)
            if value is None:
                clauses.append(f"{column} IS NULL")
            else:
                clauses.append(f"{column} = ?")
                params.append(value)
        if not include_hidden and self.logical_now is not None:
            clauses.append("expiry > ?")
            params.append(self.logical_now)
        return (" AND ".join(clauses) or "1"), params

    def _record(self, row: tuple[Any, ...]) -> SourceRecord:
        tenant, rid, revision, kind, body, source, expiry = row
        expired = self.logical_now is not None and expiry is not None and expiry <= self.logical_now
        return SourceRecord(
            id=encode_id(ID_PREFIX, tenant, rid),
            tier=kind,
            record_type="evidence",
            content=body,
            scope={"tenant": tenant, "revision": revision},
            created_at=None,
            expires_at=expiry,
            state="expired" if expired else "live",
            metadata={"record_id": rid, "citation": source},
        )

    def record_count(self) -> int:
        return self.query(f"SELECT count(*) FROM {_ident(self.table)}")[0][0]

    def _data_fingerprint(self) -> Any:
        return list(
            self.query(f"SELECT count(*), max(rowid), sum(revision) FROM {_ident(self.table)}")[0]
        )

    def facets(
        self, filters: Mapping[str, Any] | None = None, *, include_hidden: bool = False
    ) -> list[TierFacet]:
        where, params = self._where(filters, include_hidden)
        table = _ident(self.table)
        counts = dict(
            self.query(f"SELECT kind, count(*) FROM {table} WHERE {where} GROUP BY kind", params)
        )
        tiers = list(KINDS) + sorted(k for k in counts if k not in KINDS)
        out = []
        for tier in tiers:
            scopes: dict[str, dict[str, int]] = {}
            for key in self.scope_keys:
                rows = self.query(
                    f"SELECT {key}, count(*) FROM {table} WHERE {where} AND kind = ? "
                    f"GROUP BY {key} ORDER BY {key}",
                    [*params, tier],
                )
                scopes[key] = {str(v): n for v, n in rows}
            out.append(TierFacet(tier=tier, count=counts.get(tier, 0), scopes=scopes))
        return out

    def page(
        self,
        filters: Mapping[str, Any] | None = None,
        *,
        after: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        include_hidden: bool = False,
    ) -> Page:
        limit = check_limit(limit)
        where, params = self._where(filters, include_hidden)
        if after:
            parts = decode_id(ID_PREFIX, after, 2)
            if parts is None:
                raise SourceError(f"cursor {after!r} is not a {self.kind_label} record id")
            where += f" AND (tenant, {_ident(self.id_column)}) > (?, ?)"
            params.extend(parts)
        rows = self.query(
            f"SELECT {self._columns_sql()} WHERE {where} "
            f"ORDER BY tenant, {_ident(self.id_column)} LIMIT ?",
            [*params, limit + 1],
        )
        return Page.of((self._record(r) for r in rows), limit)

    def _key(self, record_id: str) -> tuple[str, str] | None:
        parts = decode_id(ID_PREFIX, str(record_id), 2)
        return None if parts is None else (parts[0], parts[1])

    def get(self, record_id: str) -> SourceRecord | None:
        key = self._key(record_id)
        if key is None:
            return None
        rows = self.query(
            f"SELECT {self._columns_sql()} WHERE tenant = ? AND {_ident(self.id_column)} = ?", key
        )
        return self._record(rows[0]) if rows else None

    def get_many(self, record_ids: Iterable[str]) -> dict[str, SourceRecord]:
        out = {}
        for record_id in record_ids:
            record = self.get(record_id)
            if record is not None:
                out[record.id] = record
        return out

    def notes(self, record: SourceRecord) -> str:
        return f"cites {record.metadata.get('citation')} · expiry {record.expires_at}"

    def detail(self, record_id: str) -> list[DetailSection]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        same_id = self.query(
            f"SELECT tenant FROM {_ident(self.table)} WHERE {_ident(self.id_column)} = ? "
            "AND tenant != ? ORDER BY tenant",
            (record.metadata["record_id"], record.scope["tenant"]),
        )
        return [
            DetailSection(
                title="citation",
                columns=("source", "revision", "expiry", "now"),
                rows=[
                    (
                        record.metadata["citation"],
                        record.scope["revision"],
                        record.expires_at,
                        self.now_label(),
                    )
                ],
            ),
            DetailSection(
                title="same record id in other tenants (separate records; a forget keeps them)",
                columns=("tenant",),
                rows=[tuple(r) for r in same_id],
                note=None if same_id else "none",
            ),
            self.history_section(record.id),
        ]

    # -- forget

    def forget_preview(self, record_id: str) -> dict[str, Any]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        return {
            "records": [record.id],
            "rule": (
                f"Only record {record.metadata['record_id']!r} of tenant "
                f"{record.scope['tenant']!r} is deleted; the same id in other tenants stays."
            ),
            "counts": {"rows": 1},
        }

    def record_value_columns(self) -> list[tuple[str, str]]:
        return [(self.table, "body")]

    def _apply_forget(self, record: SourceRecord) -> dict[str, Any]:
        key = self._key(record.id)
        assert key is not None
        conn = self._conn
        table, column = _ident(self.table), _ident(self.id_column)
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(
                f"SELECT body, source FROM {table} WHERE tenant = ? AND {column} = ?", key
            ).fetchone()
            deleted = conn.execute(
                f"DELETE FROM {table} WHERE tenant = ? AND {column} = ?", key
            ).rowcount
            if deleted != 1:
                raise SourceError(f"expected to delete one row of tenant {key[0]!r}, not {deleted}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        gone = (
            conn.execute(f"SELECT 1 FROM {table} WHERE tenant = ? AND {column} = ?", key).fetchone()
            is None
        )
        body = str(row[0]) if row else ""
        return {
            "removed": [record.id],
            "checks": {"row_gone": gone},
            "probes": [body.encode("utf-8")] if body else [],
            "details": {"tenant": key[0]},
        }
