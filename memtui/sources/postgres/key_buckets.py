"""Finding what a Postgres store lost by comparing hash buckets, not reading every key.

Every row has a *key hash*: Postgres's ``hashtext`` of its key text in the ``C``
collation (LangGraph: ``prefix``, U+001F, ``key``; mem0: the id), computed by the
database when it sends the row (``hash_sql``) and kept beside the row in memtui's
index: both sides of the comparison are the database's own hashes, never one made
here (``hashtext`` is a third of MD5's cost). When most of the index's rows are in
buckets that differ (the hashes no longer agree: a restore on another machine; or
most rows gone) the index is built again rather than compared (``MOSTLY_DIFFERENT``). A refresh that
finds fewer rows in the store than in the index counts the rows per bucket
(``hash & (buckets - 1)``) on both sides, in one ``GROUP BY`` each; the index's ids
in the buckets whose counts differ are then looked up in the store by its primary
key: after D deletions about ``D * ROWS_PER_BUCKET`` ids, whatever the store's size.

A row the refresh's window missed (its ``updated_at`` older than the mark) leaves
its bucket with more rows in the store than the lookup found: that bucket's ids
are read by a scan (``StoreBuckets.ids_in``). A missed row and a deletion in the
same bucket between two refreshes cancel out (docs/sources.md says so).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

ROWS_PER_BUCKET = 16
"""Rows per bucket, about (the ids a bucket that differs costs to read)."""
MAX_BUCKETS = 1 << 16


class Reads(Protocol):
    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...


MOSTLY_DIFFERENT = 0.5
"""The share of the index's rows in differing buckets beyond which a refresh builds the
index again (a build reads every row once; comparing would look each one up)."""


def hash_sql(key_text: str) -> str:
    """SQL giving the key hash of ``key_text`` (an SQL text expression): a 32-bit int."""
    return f'hashtext(({key_text}) COLLATE "C")'


def bucket_count(rows: int) -> int:
    """How many buckets (a power of two) for an index of ``rows`` rows."""
    wanted = max(64, rows // ROWS_PER_BUCKET)
    return min(MAX_BUCKETS, 1 << (wanted - 1).bit_length())


class StoreBuckets:
    """The database's side of the comparison, for one table: its key text and what
    turns a row's ``id_columns`` into the record id."""

    def __init__(
        self,
        reads: Reads,
        table: str,
        key_text: str,
        id_columns: str,
        record_id: Callable[[Sequence[Any]], str],
    ) -> None:
        self.reads = reads
        self.table = table
        self.hash = hash_sql(key_text)
        self.id_columns = id_columns
        self.record_id = record_id

    def counts(self, buckets: int) -> dict[int, int]:
        """Rows per bucket."""
        rows = self.reads.query(
            f"SELECT {self.hash} & %s, count(*) FROM {self.table} AS t GROUP BY 1", [buckets - 1]
        )
        return {int(b): int(n) for b, n in rows}

    def ids_in(self, buckets: int, chosen: Sequence[int]) -> set[str]:
        """The record ids of the rows in these buckets."""
        if not chosen:
            return set()
        rows = self.reads.query(
            f"SELECT {self.id_columns} FROM {self.table} AS t "
            f"WHERE ({self.hash} & %s) = ANY(%s::bigint[])",
            [buckets - 1, list(chosen)],
        )
        return {self.record_id(row) for row in rows}
