"""One version of a LanceDB table as memtui holds it: read once, rows decoded on demand.

The table is read once per version into Arrow (the vector column apart, as one
matrix). What every view needs at once is taken from the columns: the row ids
sorted (the keyset order), each row's scope for filtering (crewAI's ``scope``,
``categories_str`` parsed once per distinct value, ``source``) and the scope
counts (Arrow's ``value_counts``). A row becomes a ``SourceRecord`` only when it
is shown or read (a page, a get, a search's results), and is kept then: at
100,000 rows decoding every row took 4 s, a page of them 1 ms.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

from memtui.sources.base import SourceRecord
from memtui.sources.lancedb.rows import record_id_of
from memtui.sources.qdrant.filters import matches

CHUNK = 256
"""Rows decoded at once while a page or a filter walks the table."""


class RowScope:
    """What a filter looks at in a row (a record's tier, type and scope), undecoded."""

    __slots__ = ("record_type", "scope", "tier")

    def __init__(self, tier: str, record_type: str, scope: Mapping[str, Any]) -> None:
        self.tier = tier
        self.record_type = record_type
        self.scope = scope


def categories_of(text: Any) -> list[str]:
    """crewAI's ``categories_str`` (a JSON list) as the record's categories."""
    if not isinstance(text, str) or not text:
        return []
    try:
        value = json.loads(text)
    except ValueError:
        return []
    return [str(c) for c in value] if isinstance(value, list) else []


class TableSnapshot:
    """The rows of one table version, in id order, decoded as they are asked for."""

    def __init__(
        self,
        data: Any,
        *,
        key_column: str,
        decode: Callable[[Mapping[str, Any], str], SourceRecord],
        tier: str,
        record_type: str,
        crewai: bool,
        matrix: Any = None,
        version: int | None = None,
    ) -> None:
        self.data = data
        self.version = version
        self.matrix = matrix
        self._decode = decode
        self._tier, self._type, self._crewai = tier, record_type, crewai
        self.keys: list[Any] = data.column(key_column).to_pylist() if data.num_rows else []
        record_ids = [record_id_of(k) for k in self.keys]
        self.order = sorted(range(len(record_ids)), key=record_ids.__getitem__)
        self.ids = [record_ids[i] for i in self.order]
        self.row_of = {rid: n for n, rid in enumerate(record_ids)}
        self._record_ids = record_ids
        self._decoded: dict[int, SourceRecord] = {}
        self._scopes: list[RowScope] | None = None
        self._facets: dict[str, dict[str, int]] | None = None

    def __len__(self) -> int:
        return len(self.order)

    # -- records

    def records_at(self, rows: Sequence[int]) -> list[SourceRecord]:
        """The records of these row numbers (table order), decoded once."""
        missing = [r for r in dict.fromkeys(rows) if r not in self._decoded]
        if missing:
            for row, values in zip(missing, self.data.take(missing).to_pylist(), strict=True):
                self._decoded[row] = self._decode(values, str(self.keys[row]))
        return [self._decoded[r] for r in rows]

    def get(self, record_id: str) -> SourceRecord | None:
        row = self.row_of.get(record_id)
        return None if row is None else self.records_at([row])[0]

    def key_of(self, record_id: str) -> Any:
        row = self.row_of.get(record_id)
        return None if row is None else self.keys[row]

    def select(self, filters: Mapping[str, Any], start: int = 0) -> Iterator[SourceRecord]:
        """The records from position ``start`` of the id order on that match ``filters``;
        only matching rows are decoded."""
        scopes = self.scopes() if filters else None
        for at in range(start, len(self.order), CHUNK):
            rows = self.order[at : at + CHUNK]
            if scopes is not None:
                rows = [r for r in rows if matches(scopes[r], filters)]
            yield from self.records_at(rows)

    def contents(self, text: str | None, skip: Collection[int] = ()) -> set[str]:
        """Every row's text but the ``skip`` rows' (a forget's byte check leaves out what a
        row it keeps still holds)."""
        rows = [n for n in range(len(self.keys)) if n not in skip]
        if self._crewai and text:
            column = self.data.column(text).to_pylist()
            return {str(column[n] or "") for n in rows}
        return {r.content for r in self.records_at(rows)}

    # -- scopes

    def scopes(self) -> list[RowScope]:
        """Each row's scope, by row number (crewAI's three keys; a plain table has none)."""
        if self._scopes is None:
            count = len(self.keys)
            if not self._crewai:
                empty = RowScope(self._tier, self._type, {})
                self._scopes = [empty] * count
            else:
                parsed: dict[Any, list[str]] = {}

                def categories(text: Any) -> list[str]:
                    found = parsed.get(text)
                    if found is None:
                        found = parsed[text] = categories_of(text)
                    return found

                scope = self.data.column("scope").to_pylist()
                listed = self.data.column("categories_str").to_pylist()
                source = self._column("source", count)
                self._scopes = [
                    RowScope(
                        self._tier,
                        self._type,
                        {
                            "scope": str(scope[n] or "/"),
                            "categories": categories(listed[n]),
                            "source": str(source[n] or "") or None,
                        },
                    )
                    for n in range(count)
                ]
        return self._scopes

    def _column(self, name: str, count: int) -> list[Any]:
        if name in self.data.column_names:
            return list(self.data.column(name).to_pylist())
        return [None] * count

    def scope_counts(self) -> dict[str, dict[str, int]]:
        """Every scope value with its row count, from the columns' value counts."""
        if self._facets is None:
            self._facets = self._count_scopes() if self._crewai and len(self.keys) else {}
        return self._facets

    def _count_scopes(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}

        def add(key: str, value: str | None, n: int) -> None:
            if value is not None:
                bucket = out.setdefault(key, {})
                bucket[value] = bucket.get(value, 0) + n

        for value, n in self._value_counts("scope"):
            add("scope", str(value or "/"), n)
        for value, n in self._value_counts("source"):
            add("source", str(value or "") or None, n)
        for value, n in self._value_counts("categories_str"):
            for category in dict.fromkeys(categories_of(value)):
                add("categories", category, n)
        return out

    def _value_counts(self, column: str) -> list[tuple[Any, int]]:
        if column not in self.data.column_names:
            return [(None, len(self.keys))]
        counted = self.data.column(column).value_counts()
        return list(
            zip(
                counted.field("values").to_pylist(),
                counted.field("counts").to_pylist(),
                strict=True,
            )
        )
