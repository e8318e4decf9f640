"""Reading records: scope filters and the live rule as SQL, records by id and by
page, and the counts per tier and scope (facets) kept until the data changes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from memtui.core.records import TIERS, MemoryRecord
from memtui.core.store.connection import StoreConnection
from memtui.core.store.errors import MemoryStoreError
from memtui.core.store.rows import _RECORD_COLUMNS, _row_to_record

FILTER_ALLOWLIST: frozenset[str] = frozenset(
    {"tier", "record_type", "profile_hash", "engagement", "run_id", "tool_name", "url_pattern"}
)


def check_filter_key(key: str) -> None:
    if key not in FILTER_ALLOWLIST:
        raise MemoryStoreError(
            f"filter '{key}' is not in the scope-key allowlist "
            f"({', '.join(sorted(FILTER_ALLOWLIST))})"
        )


class RecordReads(StoreConnection):
    """Scoped reads and counts."""

    def _live_clause(
        self, include_refuted: bool, include_expired: bool, prefix: str = ""
    ) -> tuple[str, list[Any]]:
        """The live rule as SQL: not refuted, and ``expires_at > now`` (strict); ``""``
        when both are included. ``prefix`` qualifies the columns (``"r."``)."""
        clauses: list[str] = []
        params: list[Any] = []
        if not include_refuted:
            clauses.append(f"{prefix}refuted = 0")
        if not include_expired:
            clauses.append(f"({prefix}expires_at IS NULL OR {prefix}expires_at > ?)")
            params.append(self.now_text())
        return " AND ".join(clauses), params

    def scope_clause(
        self,
        filters: dict[str, Any] | None,
        *,
        include_refuted: bool = False,
        include_expired: bool = False,
        alias: str = "",
    ) -> tuple[str, list[Any]]:
        """SQL condition and parameters for allowlisted filters plus the live rule.

        Filter names reach SQL only after the allowlist check; values are always
        bound parameters. A ``tier`` that is not one of ``TIERS`` is refused (it
        could only match nothing, which would read as "no records"). Returns
        ``("1", [])`` when nothing restricts.
        """
        prefix = f"{alias}." if alias else ""
        clauses: list[str] = []
        params: list[Any] = []
        for key, value in (filters or {}).items():
            check_filter_key(key)
            if key == "tier" and value not in TIERS:
                raise MemoryStoreError(f"unknown tier {value!r}; tiers are {', '.join(TIERS)}")
            if value is None:
                clauses.append(f"{prefix}{key} IS NULL")
            else:
                clauses.append(f"{prefix}{key} = ?")
                params.append(value)
        live, live_params = self._live_clause(include_refuted, include_expired, prefix)
        if live:
            clauses.append(live)
            params.extend(live_params)
        return (" AND ".join(clauses) or "1"), params

    def fetch(
        self,
        *,
        include_refuted: bool = False,
        include_expired: bool = False,
        limit: int | None = None,
        after_id: int | None = None,
        **filters: Any,
    ) -> list[MemoryRecord]:
        """Records matching allowlisted scope filters, in id order.

        Refuted and expired records are left out unless asked for. ``limit`` and
        ``after_id`` page through a large scope by keyset, never by offset.
        """
        where, params = self.scope_clause(
            filters, include_refuted=include_refuted, include_expired=include_expired
        )
        if after_id is not None:
            where += " AND id > ?"
            params.append(int(after_id))
        sql = f"SELECT {_RECORD_COLUMNS} FROM records WHERE {where} ORDER BY id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [_row_to_record(row) for row in self.query(sql, params)]

    def get(self, record_id: int) -> MemoryRecord | None:
        """One record by id, whatever its state (refuted and expired included)."""
        rows = self.query(f"SELECT {_RECORD_COLUMNS} FROM records WHERE id = ?", (int(record_id),))
        return _row_to_record(rows[0]) if rows else None

    def get_many(self, record_ids: Iterable[int]) -> dict[int, MemoryRecord]:
        ids = [int(i) for i in record_ids]
        out: dict[int, MemoryRecord] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.query(
                f"SELECT {_RECORD_COLUMNS} FROM records WHERE id IN ({marks})", chunk
            ):
                record = _row_to_record(row)
                out[record.id] = record
        return out

    def _existing(self, record_id: int) -> MemoryRecord:
        try:
            key = int(record_id)
        except (TypeError, ValueError):
            raise MemoryStoreError(f"record id must be a whole number, got {record_id!r}") from None
        rows = self.query(f"SELECT {_RECORD_COLUMNS} FROM records WHERE id = ?", (key,))
        if not rows:
            raise MemoryStoreError(f"no record with id {key}")
        return _row_to_record(rows[0])

    def record_count(self) -> int:
        return self.query("SELECT count(*) FROM records")[0][0]

    def tier_counts(
        self, *, include_refuted: bool = False, include_expired: bool = False
    ) -> dict[str, int]:
        """Record counts per tier (every tier present, zero included), computed in SQL.

        Counted from indexes: every row per tier, less the few the live rule
        leaves out (refuted; expired), which have small partial indexes of their own.
        """
        counts = dict.fromkeys(TIERS, 0)
        counts.update(self._tier_totals())
        for (tier,), count in self._hidden_counts(("tier",), include_refuted, include_expired):
            counts[tier] -= count
        return counts

    def _hidden_counts(
        self,
        keys: Sequence[str],
        include_refuted: bool,
        include_expired: bool,
        where: str = "",
        params: Sequence[Any] = (),
    ) -> list[tuple[tuple[Any, ...], int]]:
        """Counts, grouped by ``keys``, of the rows the live rule hides.

        Refuted rows come from ``records_refuted``; expired rows that are not
        also refuted (or all expired rows, when refuted ones are shown) from
        ``records_expiry``. Each hidden row is counted once.
        """
        columns = ", ".join(keys)
        extra = f" AND {where}" if where else ""
        out: list[tuple[tuple[Any, ...], int]] = []
        if not include_refuted:
            for row in self.query(
                f"SELECT {columns}, count(*) FROM records INDEXED BY records_refuted "
                f"WHERE refuted != 0{extra} "
                f"GROUP BY {columns}",
                list(params),
            ):
                out.append((tuple(row[:-1]), row[-1]))
        if not include_expired:
            also = "" if include_refuted else " AND refuted = 0"
            for row in self.query(
                f"SELECT {columns}, count(*) FROM records INDEXED BY records_expiry "
                f"WHERE expires_at IS NOT NULL AND expires_at <= ?{also}{extra} "
                f"GROUP BY {columns}",
                [self.now_text(), *params],
            ):
                out.append((tuple(row[:-1]), row[-1]))
        return out

    def scope_counts(
        self, tier: str, *, include_refuted: bool = False, include_expired: bool = False
    ) -> dict[str, dict[str, int]]:
        """Counts of one tier's records by profile and by engagement (None: unscoped)."""
        if tier not in TIERS:
            raise MemoryStoreError(f"unknown tier {tier!r}; tiers are {', '.join(TIERS)}")
        result: dict[str, dict[str, int]] = {}
        for key in ("profile_hash", "engagement"):
            totals: dict[Any, int] = {}
            for value, count in self.query(
                f"SELECT {key}, count(*) FROM records WHERE tier = ? GROUP BY {key}", [tier]
            ):
                totals[value] = count
            for (value,), count in self._hidden_counts(
                (key,), include_refuted, include_expired, "tier = ?", [tier]
            ):
                totals[value] -= count
            result[key] = {
                value: totals[value]
                for value in sorted(v for v in totals if v is not None)
                if totals[value] > 0
            }
        return result

    FACET_KEYS: tuple[str, ...] = ("profile_hash", "engagement")

    def scope_facets(
        self, *, include_refuted: bool = False, include_expired: bool = False
    ) -> dict[str, tuple[int, dict[str, dict[str, int]]]]:
        """Every tier's record count and its counts by profile and by engagement.

        The same numbers as ``tier_counts`` and ``scope_counts`` for each tier, in
        one pass: the totals come from two covering-index scans (kept until the
        database changes, so the live and the all-inclusive view share them) less
        the rows the live rule hides, from their small partial indexes.
        """
        totals = self._scope_totals()
        out: dict[str, tuple[int, dict[str, dict[str, int]]]] = {}
        tier_totals = dict.fromkeys(TIERS, 0)
        per_key: dict[str, dict[tuple[str, Any], int]] = {}
        for key in self.FACET_KEYS:
            counts = dict(totals[key])
            for (tier, value), count in self._hidden_counts(
                ("tier", key), include_refuted, include_expired
            ):
                counts[(tier, value)] -= count
            per_key[key] = counts
        for (tier, _value), count in per_key[self.FACET_KEYS[0]].items():
            tier_totals[tier] = tier_totals.get(tier, 0) + count
        for tier, total in tier_totals.items():
            scopes: dict[str, dict[str, int]] = {}
            for key in self.FACET_KEYS:
                values = {
                    value: count
                    for (t, value), count in per_key[key].items()
                    if t == tier and value is not None and count > 0
                }
                scopes[key] = dict(sorted(values.items()))
            out[tier] = (total, scopes)
        return out

    def clear_count_cache(self) -> None:
        """Forget the cached count totals (the next count scans its indexes again).

        Never needed for correctness (the cache is keyed by ``change_token``); the
        benchmarks use it to measure a count as a first look pays for it.
        """
        for name in ("tier totals", "scope totals"):
            self._derived.pop(name, None)

    def _tier_totals(self) -> dict[str, int]:
        """Row counts per tier, hidden rows included; the live and the all-inclusive
        counts share one index scan."""
        return self.derived(
            "tier totals",
            lambda store: {
                tier: count
                for tier, count in store.query("SELECT tier, count(*) FROM records GROUP BY tier")
            },
        )

    def _scope_totals(self) -> dict[str, dict[tuple[str, Any], int]]:
        """Row counts by (tier, profile) and by (tier, engagement), hidden rows included.

        A second look (the live view after the all-inclusive one, a filter list,
        the lanes' choices) costs nothing until the database changes. Each query
        takes the lock alone, so a page read (the first screen) can run between
        the two scans.
        """

        def build(store: RecordReads) -> dict[str, dict[tuple[str, Any], int]]:
            return {
                key: {
                    (tier, value): count
                    for tier, value, count in store.query(
                        f"SELECT tier, {key}, count(*) FROM records GROUP BY tier, {key}"
                    )
                }
                for key in self.FACET_KEYS
            }

        return self.derived("scope totals", build)

    def engagements(self) -> list[str]:
        rows = self.query(
            "SELECT DISTINCT engagement FROM records WHERE engagement IS NOT NULL ORDER BY 1"
        )
        return [r[0] for r in rows]

    def profiles(self) -> list[str]:
        rows = self.query(
            "SELECT DISTINCT profile_hash FROM records WHERE profile_hash IS NOT NULL ORDER BY 1"
        )
        return [r[0] for r in rows]

    def blast_radius(self, *, engagement: str) -> dict[str, dict[str, int]]:
        """What ``forget_scope(engagement=...)`` would erase: counts by tier, then type."""
        out: dict[str, dict[str, int]] = {}
        for tier, record_type, count in self.query(
            "SELECT tier, record_type, count(*) FROM records WHERE engagement = ? "
            "GROUP BY tier, record_type ORDER BY tier, record_type",
            (engagement,),
        ):
            out.setdefault(tier, {})[record_type] = count
        return out
