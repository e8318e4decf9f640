"""What memtui's index and the vector lane ask a Letta server's Postgres.

- ``LettaFeed`` (a ``ChangeFeed``) reads passages and blocks as one list: the probe
  is both tables' row counts, the latest ``updated_at`` and the count of
  soft-deleted rows; changed rows are those whose ``updated_at`` is after the mark,
  less the lag. Letta stamps ``updated_at`` with its server's clock on every
  update and soft delete (``set_updated_at``), not the database's: the mark is the
  latest ``updated_at`` the tables held when the read began. Deletions are found
  by key hashes of ``part`` and id (``key_buckets``).
- ``LettaVectors``: ``ORDER BY embedding <=> query LIMIT k`` on ``archival_passages``,
  the filters and the live rule in the same WHERE (through the shared ``nearest``).
  Letta zero-pads every embedding to ``vector(4096)`` (no HNSW index: pgvector
  indexes at most 2,000 dims), so the query is zero-padded the same way: zeros add
  nothing to a dot product or a norm, and the cosine the database computes is
  the cosine of the real components. Only passages whose ``embedding_config``
  names the query's dimension are ranked (another model's vectors are not
  comparable); the others count as missing. Each fetched vector is unpadded to
  its real dimension, with which the trace's cosine is recomputed.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memtui.core.cancel import stop_if
from memtui.core.search.hidden import dates_of
from memtui.core.search.scores import Lane, lane_from_ranking
from memtui.sources.foreign_index import CacheRow
from memtui.sources.letta_records import TIERS, record_id, tag_list, view_key
from memtui.sources.postgres.catalog import Catalog
from memtui.sources.postgres.index_sync import StoreProbe
from memtui.sources.postgres.key_buckets import StoreBuckets, hash_sql
from memtui.sources.postgres.vectors import ann_index, describe_vectors, nearest, vector_text

if TYPE_CHECKING:
    from memtui.sources.postgres.index_file import PostgresIndex
    from memtui.sources.postgres.letta import LettaPostgresSource

DIM_SQL = (
    "(CASE WHEN json_typeof(p.embedding_config->'embedding_dim') = 'number' "
    "THEN (p.embedding_config->>'embedding_dim')::numeric END)"
)
"""A passage's real embedding dimension (``embedding_config.embedding_dim``), in SQL."""


def iso(moment: Any) -> str | None:
    return moment.astimezone(UTC).isoformat() if isinstance(moment, datetime) else moment


PASSAGE_HASH = hash_sql("'0'::text", "p.id")
BLOCK_HASH = hash_sql("'1'::text", "b.id")
"""A row's key hash: of its part (0 passage, 1 block) and its id."""


class LettaFeed:
    """What memtui's index asks a Letta server's Postgres (``ChangeFeed``)."""

    def __init__(self, source: LettaPostgresSource) -> None:
        self.source = source
        keys = f"SELECT 0 AS part, id FROM {source.table('archival_passages')}"
        if source.has_blocks:
            keys += f" UNION ALL SELECT 1, id FROM {source.table('block')}"
        self.buckets = StoreBuckets(
            source,
            f"({keys})",
            ("t.part::text", "t.id"),  # a row's key: its part (0 passage, 1 block) and id
            "t.part, t.id",
            lambda row: record_id(int(row[0]), str(row[1])),
        )

    def _tables(self) -> list[str]:
        source = self.source
        tables = [source.table("archival_passages")]
        return tables + [source.table("block")] if source.has_blocks else tables

    def probe(self) -> StoreProbe:
        parts = [
            f"SELECT count(*) AS n, max(updated_at) AS latest, "
            f"count(*) FILTER (WHERE is_deleted) AS deleted FROM {table}"
            for table in self._tables()
        ]
        rows, latest, deleted = self.source.query(
            f"SELECT sum(n), max(latest), sum(deleted) FROM ({' UNION ALL '.join(parts)}) AS s"
        )[0]
        return StoreProbe(rows=int(rows or 0), latest=iso(latest), expiries=[int(deleted or 0)])

    def database_now(self) -> str:
        return str(iso(self.source.query("SELECT clock_timestamp()")[0][0]))

    def next_mark(self, now: str) -> str:
        """The latest ``updated_at`` the tables hold (read before their rows), else
        ``now``: Letta stamps it with its server's clock, not the database's."""
        parts = " UNION ALL ".join(f"SELECT max(updated_at) FROM {t}" for t in self._tables())
        latest = self.source.query(f"SELECT max(m) FROM ({parts}) AS s(m)")[0][0]
        return str(iso(latest)) if latest is not None else now

    def _select(self, passages_where: str = "TRUE", blocks_where: str = "TRUE") -> str:
        """What the index keeps of a row, each table's rows filtered by its clause."""
        source = self.source
        passages = (
            f"SELECT 0, p.id, p.text, {source.archive_sql()}, p.tags::text, NULL, "
            f"p.is_deleted, {PASSAGE_HASH} "
            f"FROM {source.table('archival_passages')} AS p WHERE {passages_where}"
        )
        if not source.has_blocks:
            return passages
        return (
            f"{passages} UNION ALL SELECT 1, b.id, b.value, NULL, NULL, b.label, b.is_deleted, "
            f"{BLOCK_HASH} "
            f"FROM {source.table('block')} AS b WHERE {blocks_where}"
        )

    @staticmethod
    def _index_row(row: Sequence[Any]) -> CacheRow:
        part, rid, content, archive, tags, label, deleted, key_hash = row
        return CacheRow(
            source_id=record_id(int(part), str(rid)),
            tier=TIERS[int(part)],
            record_type="passage" if int(part) == 0 else "block",
            content=content or "",
            scope={"archive": archive, "tag": tag_list(tags), "label": label},
            hidden=bool(deleted),
            expires_at=None,
            key_hash=int(key_hash),
        )

    def changed_rows(self, since: str | None) -> Iterator[CacheRow]:
        source = self.source
        if since is None:
            yield from source.stream(lambda _query: (self._select(), []), self._index_row)
            return
        mark = datetime.fromisoformat(since)
        sql = self._select("p.updated_at > %s", "b.updated_at > %s")
        params = [mark, mark] if source.has_blocks else [mark]
        yield from map(self._index_row, source.query(sql, params))

    def _by_id(self, ids: Sequence[str]) -> tuple[str, list[Any]]:
        """This select's WHERE clauses for these record ids (the others left out)."""
        keys = [k for k in (view_key(i) for i in ids) if k is not None]
        passages = [rid for part, rid in keys if part == 0]
        blocks = [rid for part, rid in keys if part == 1]
        params: list[Any] = [passages, blocks] if self.source.has_blocks else [passages]
        return self._select("p.id = ANY(%s)", "b.id = ANY(%s)"), params

    def rows_by_id(self, ids: Sequence[str]) -> list[CacheRow]:
        sql, params = self._by_id(ids)
        return [self._index_row(row) for row in self.source.query(sql, params)]

    def existing(self, ids: Sequence[str]) -> set[str]:
        sql, params = self._by_id(ids)
        return {record_id(int(r[0]), str(r[1])) for r in self.source.query(sql, params)}

    def expiries(self) -> dict[str, str | None]:
        return {}  # Letta's passages and blocks never expire


class LettaVectors:
    """``archival_passages.embedding``: its stored and real dimensions, and the lane."""

    def __init__(self, source: LettaPostgresSource, catalog: Catalog) -> None:
        self.source = source
        column = catalog.vector_column("archival_passages", "embedding")
        self.kind: str = column[0] if column else "vector"
        self.stored: int = column[1] if column else 0
        self.cast = catalog.type_name("archival_passages", "embedding")
        indexes = catalog.indexes.get("archival_passages", [])
        self.index, self.unusable = ann_index(indexes, "embedding")
        self._dims: Counter[int] | None = None
        self._missing: dict[Any, int] = {}
        self.last: dict[str, tuple[float, list[float]]] = {}
        """The last lane's pool by record id: raw score and the vector, unpadded."""

    def dims(self) -> Counter[int]:
        """Live passages with a vector per real dimension (read once)."""
        if self._dims is None:
            rows = self.source.query(
                f"SELECT {DIM_SQL}, count(*) FROM {self.source.table('archival_passages')} AS p "
                "WHERE p.embedding IS NOT NULL AND NOT coalesce(p.is_deleted, false) GROUP BY 1"
            )
            self._dims = Counter(
                {int(d): int(n) for d, n in rows if d is not None and d == int(d) and d > 0}
            )
        return self._dims

    def forget_counts(self) -> None:
        """Count the dimensions and the missing vectors again (passages were deleted)."""
        self._dims = None
        self._missing = {}

    def dim(self) -> int | None:
        """The real dimension most passages' vectors have (the one the lane ranks)."""
        found = self.dims().most_common()
        return min(d for d, n in found if n == found[0][1]) if found else None

    def describe(self) -> str:
        """The vectors and the index the vector lane can use, in words."""
        real = ", ".join(f"{n} of {d} dims" for d, n in sorted(self.dims().items())) or "none"
        what = (
            f"{self.kind}({self.stored}) in archival_passages.embedding, zero-padded "
            f"(real dims from embedding_config: {real})"
        )
        return describe_vectors(what, self.index, self.unusable)

    def lane_sql(self, filters: Mapping[str, Any], limit: int) -> tuple[str, list[Any]]:
        """The lane's statement (its query vector marked ``<query>``), for ``EXPLAIN``."""
        source = self.source
        where, params = source.where(filters, include_hidden=False)
        dim = self.dim() or 0
        distance = f"p.embedding <=> %s::{self.cast}"
        sql = (
            f"SELECT p.id, (p.embedding::real[])[1:%s], {distance} AS distance "
            f"FROM {source.table('archival_passages')} AS p "
            f"WHERE p.embedding IS NOT NULL AND {DIM_SQL} = %s AND p.id IN "
            f"(SELECT i.rid FROM ({source.items()}) AS i WHERE i.part = 0 AND {where}) "
            f"ORDER BY {distance} LIMIT %s"
        )
        return sql, [dim, "<query>", dim, *params, "<query>", limit]

    def lane(
        self,
        index: PostgresIndex,
        query_vector: Sequence[float],
        filters: Mapping[str, Any],
        pool_size: int,
        cancelled: Callable[[], bool] | None,
    ) -> Lane:
        """The pool: raw ``1 - distance`` of each passage, positive only, the database's
        order; the vectors kept unpadded (``last``)."""
        source = self.source
        stop_if(cancelled)
        sql, params = self.lane_sql(filters, pool_size)
        padded = list(query_vector) + [0.0] * max(0, self.stored - len(query_vector))
        literal = vector_text(padded)
        bound = [literal if p == "<query>" else p for p in params]
        rows, note = nearest(
            source, sql, bound, self.index, pool_size, "archival_passages.embedding"
        )
        stop_if(cancelled)
        fetched: dict[str, tuple[float, list[float]]] = {}
        for passage_id, head, distance in rows:
            if distance is not None and math.isfinite(distance) and 1.0 - distance > 0:
                values = [float(v) for v in head or []]
                fetched[record_id(0, str(passage_id))] = (1.0 - float(distance), values)
        cache_ids = index.cache_ids(fetched)
        ranking = [
            (cache_ids[rid], score) for rid, (score, _) in fetched.items() if rid in cache_ids
        ]
        dates = dates_of(index, [cid for cid, _ in ranking], filters)
        ranking = [(cid, score) for cid, score in ranking if cid in dates]
        lane = lane_from_ranking(ranking, pool_size, dates)
        lane.note = (
            f"{note}; the {len(query_vector)}-dim query zero-padded to {self.stored} as Letta "
            "pads its vectors (the cosine is the real dims')"
        )
        lane.missing = self.missing(filters, index.meta().get("source_fingerprint"))
        self.last = fetched
        return lane

    def missing(self, filters: Mapping[str, Any], version: Any) -> int:
        """Live, in-scope passages the lane can never find: no vector, or one of another
        dimension than the lane's (counted once per store version and filters)."""
        source = self.source
        where, params = source.where(filters, include_hidden=False)
        key = (version, repr(sorted(filters.items())))
        if key not in self._missing:
            rows = source.query(
                f"SELECT count(*) FROM {source.table('archival_passages')} AS p "
                f"WHERE (p.embedding IS NULL OR {DIM_SQL} IS DISTINCT FROM %s) AND p.id IN "
                f"(SELECT i.rid FROM ({source.items()}) AS i WHERE i.part = 0 AND {where})",
                [self.dim() or 0, *params],
            )
            self._missing = {key: int(rows[0][0])}
        return self._missing[key]
