"""Finding what a Postgres store lost by comparing key hashes, not reading every key.

Every row has a *key hash*: Postgres's ``hashtext`` of its key's text in the ``C``
collation (LangGraph: ``prefix`` and ``key``, each hashed and the two combined by
``#``, cheaper than hashing their concatenation; mem0: the id), computed by the
database when it sends the row (``hash_sql``) and kept beside the row in memtui's
index: both sides of the comparison are the database's own hashes, never one made
here.

A refresh that finds the store's count not what the index will hold reads every
row's hash from the store in one aggregate (``StoreBuckets.hashes``: the hashes
packed into one ``bytea`` by ``string_agg``, which Postgres computes in parallel
workers; a ``GROUP BY`` of 65,536 buckets measured 2-3x slower, one hash table too
large for the workers to share). memtui then counts them per *fine bucket* (the
hash's low 16 bits) and compares with the counts its index keeps as it writes; in
the fine buckets that differ it compares the full hashes, so after D deletions about
D of the index's ids are looked up in the store by its primary key, whatever the
store's size. When most of the index's rows are in buckets that differ (the hashes
no longer agree: a restore on another machine; or most rows gone) the index is built
again rather than compared (``MOSTLY_DIFFERENT``).

A row the refresh's window missed (its ``updated_at`` older than the mark) leaves
its hash with more rows in the store than the index holds: the store's ids with
that hash are read by a scan (``StoreBuckets.ids_with``). A missed row and a deleted
one with the same full hash between two refreshes cancel out (docs/sources.md says
so).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

FINE_BUCKETS = 1 << 16
"""The buckets both sides count (a hash's low 16 bits): a refresh compares the full
hashes only in the ones whose counts differ."""
FINE_MASK = FINE_BUCKETS - 1


class Reads(Protocol):
    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...


MOSTLY_DIFFERENT = 0.5
"""The share of the index's rows in differing buckets beyond which a refresh builds the
index again (a build reads every row once; comparing would look each one up)."""


def hash_sql(*key_texts: str) -> str:
    """SQL giving the key hash of a key made of these SQL text expressions: a 32-bit int,
    each part's ``hashtext`` combined by exclusive or."""
    return " # ".join(f'hashtext(({text}) COLLATE "C")' for text in key_texts)


def fine_counts(hashes: Any) -> Any:
    """Rows per fine bucket of these hashes (an int64 array of ``FINE_BUCKETS``)."""
    return np.bincount(np.asarray(hashes, dtype=np.int64) & FINE_MASK, minlength=FINE_BUCKETS)


class StoreBuckets:
    """The database's side of the comparison, for one table: its key's text parts and
    what turns a row's ``id_columns`` into the record id."""

    def __init__(
        self,
        reads: Reads,
        table: str,
        key_texts: Sequence[str],
        id_columns: str,
        record_id: Callable[[Sequence[Any]], str],
    ) -> None:
        self.reads = reads
        self.table = table
        self.hash = hash_sql(*key_texts)
        self.id_columns = id_columns
        self.record_id = record_id

    def hashes(self) -> Any:
        """Every row's key hash (an int32 array, in no order): 4 bytes a row over the
        wire (one ``bytea`` holds 256 million of them). Read on the source's second
        connection where it has one (``side_query``), so that a refresh reads the
        changed rows on the first meanwhile."""
        read = getattr(self.reads, "side_query", self.reads.query)
        packed = read(
            f"SELECT string_agg(int4send(({self.hash})), ''::bytea) FROM {self.table} AS t"
        )[0][0]
        if packed is None:
            return np.zeros(0, dtype=np.int32)
        return np.frombuffer(bytes(packed), dtype=">i4").astype(np.int32)

    def ids_with(self, hashes: Sequence[int]) -> set[str]:
        """The record ids of the rows whose key hash is one of these."""
        if not hashes:
            return set()
        rows = self.reads.query(
            f"SELECT {self.id_columns} FROM {self.table} AS t WHERE ({self.hash}) = ANY(%s::int[])",
            [list(hashes)],
        )
        return {self.record_id(row) for row in rows}
