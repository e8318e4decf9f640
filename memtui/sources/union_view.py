"""Foreign stores that read two tables as one record list, through a ``UNION ALL`` view.

The adapter's ``_items()`` is the view's SQL. Every row of it has ``part`` (0 for
the first table, 1 for the second), ``rid`` (the row's id in its table), ``tier``,
``record_type``, a column per scope key (but those in ``extra_scope_keys``) and
``live`` (1 when the row is shown by default). ``tiers`` names part 0's tier, then
part 1's. The second table may be absent: the view then holds part 0 only.

Records are keyed ``(part, rid)``: ``_key`` parses a record id into its key and
``_load`` builds the records of a list of keys; filters, counts, facets, pages
and lookups are written once here, over the view.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any

from memtui.sources.base import (
    DEFAULT_PAGE_SIZE,
    Page,
    SourceError,
    SourceRecord,
    TierFacet,
    check_limit,
)
from memtui.sources.foreign import ForeignSqliteSource

ViewKey = tuple[int, Any]


class UnionViewSource(ForeignSqliteSource):
    """A foreign SQLite store read through the two-table view of the module docstring."""

    #: scope keys that are not columns of the view: ``_extra_filter`` filters on
    #: them and ``_extra_scope_rows`` counts their values
    extra_scope_keys: tuple[str, ...] = ()

    @abstractmethod
    def _items(self) -> str:
        """The view's SQL."""

    @abstractmethod
    def _has_second_table(self) -> bool:
        """Whether part 1's table is in the store."""

    @abstractmethod
    def _key(self, record_id: str) -> ViewKey | None:
        """The ``(part, rid)`` of a record id; None when it is not one of this store's."""

    @abstractmethod
    def _load(self, keys: Iterable[ViewKey]) -> dict[ViewKey, SourceRecord]:
        """The records of those keys that are in the store, by key."""

    def _extra_filter(self, key: str, value: Any) -> tuple[str, list[Any]]:
        """The WHERE clause over the view, and its parameters, for an extra scope key."""
        raise NotImplementedError(key)

    def _extra_scope_rows(
        self, key: str, items: str, where: str, params: list[Any], tier: str
    ) -> list[tuple[Any, ...]]:
        """``(value, count)`` rows of an extra scope key in one tier, ordered by value."""
        raise NotImplementedError(key)

    def _where(
        self, filters: Mapping[str, Any] | None, include_hidden: bool
    ) -> tuple[str, list[Any]]:
        filters = self.check_filters(filters)
        clauses: list[str] = []
        params: list[Any] = []
        for key, value in filters.items():  # keys are allowlisted column names of the view
            if key in self.extra_scope_keys:
                clause, extra = self._extra_filter(key, value)
                clauses.append(clause)
                params.extend(extra)
            elif value is None:
                clauses.append(f"{key} IS NULL")
            else:
                clauses.append(f"{key} = ?")
                params.append(value)
        if not include_hidden:
            clauses.append("live = 1")
        return (" AND ".join(clauses) or "1"), params

    def record_count(self) -> int:
        return self.query(f"SELECT count(*) FROM ({self._items()})")[0][0]

    def facets(
        self, filters: Mapping[str, Any] | None = None, *, include_hidden: bool = False
    ) -> list[TierFacet]:
        where, params = self._where(filters, include_hidden)
        items = self._items()
        counts = dict(
            self.query(f"SELECT tier, count(*) FROM ({items}) WHERE {where} GROUP BY tier", params)
        )
        columns = [k for k in self.scope_keys if k not in self.extra_scope_keys]
        out = []
        for part, tier in enumerate(self.tiers):
            if part == 1 and not self._has_second_table():
                continue
            scopes: dict[str, dict[str, int]] = {}
            for key in (*columns, *self.extra_scope_keys):
                if key in self.extra_scope_keys:
                    rows = self._extra_scope_rows(key, items, where, params, tier)
                else:
                    rows = self.query(
                        f"SELECT {key}, count(*) FROM ({items}) WHERE {where} AND tier = ? "
                        f"AND {key} IS NOT NULL GROUP BY {key} ORDER BY {key}",
                        [*params, tier],
                    )
                if rows:
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
            key = self._key(after)
            if key is None:
                raise SourceError(f"cursor {after!r} is not a {self.kind_label} record id")
            where += " AND (part, rid) > (?, ?)"
            params.extend(key)
        keys = [
            (part, rid)
            for part, rid in self.query(
                f"SELECT part, rid FROM ({self._items()}) WHERE {where} ORDER BY part, rid LIMIT ?",
                [*params, limit + 1],
            )
        ]
        more = len(keys) > limit
        keys = keys[:limit]
        found = self._load(keys)
        records = [found[k] for k in keys if k in found]
        return Page(records=records, next_cursor=records[-1].id if more and records else None)

    def get(self, record_id: str) -> SourceRecord | None:
        key = self._key(record_id)
        if key is None or (key[0] == 1 and not self._has_second_table()):
            return None
        return self._load([key]).get(key)

    def get_many(self, record_ids: Iterable[str]) -> dict[str, SourceRecord]:
        keys = [k for k in (self._key(i) for i in record_ids) if k is not None]
        if not self._has_second_table():
            keys = [k for k in keys if k[0] == 0]
        return {r.id: r for r in self._load(keys).values()}
