"""What memtui's index and the vector lane ask a mem0 pgvector collection.

- ``Mem0Feed`` (a ``ChangeFeed``): the probe is the row count, the latest
  payload ``updated_at`` and a digest of the expiration dates; changed rows are
  those whose ``updated_at`` (UTC ISO text, as mem0 writes it) is after the
  mark, less the lag. The mark is the latest ``updated_at`` the collection held
  when the read began (mem0 stamps it with the agent's clock, not the
  database's). Deletions are found by key hashes (the id's,
  ``key_buckets``); a row whose payload has no ``updated_at`` is read when its
  hash's count differs.
- ``Mem0Vectors``: ``ORDER BY vector <=> query LIMIT k`` on the collection, the
  filters and mem0's live rule in the same WHERE, through the shared
  ``nearest`` (the collection's HNSW index, ``COLLECTION_hnsw_idx``, or an exact
  scan; the trace says which). One vector per memory: its raw score is
  ``1 - distance`` as the database computed it.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memtui.core.cancel import stop_if
from memtui.core.search.hidden import dates_of
from memtui.core.search.scores import Lane, lane_from_ranking
from memtui.sources.base import decode_id, encode_id
from memtui.sources.foreign_index import CacheRow
from memtui.sources.mem0_payload import SCOPE_KEYS, expiry_moment
from memtui.sources.postgres.catalog import Catalog
from memtui.sources.postgres.index_sync import StoreProbe
from memtui.sources.postgres.key_buckets import StoreBuckets, hash_sql
from memtui.sources.postgres.vectors import (
    ann_index,
    describe_vectors,
    nearest,
    parse_vector,
    vector_text,
)

if TYPE_CHECKING:
    from memtui.sources.postgres.index_file import PostgresIndex
    from memtui.sources.postgres.mem0_pgvector import Mem0PgvectorSource

_DATA = "'data'"
_EXPIRY = "'expiration_date'"


class Mem0Feed:
    """What memtui's index asks a mem0 pgvector collection (``ChangeFeed``)."""

    def __init__(self, source: Mem0PgvectorSource) -> None:
        self.source = source
        prefix = source.id_prefix
        self.buckets = StoreBuckets(
            source, source._table, ("t.id::text",), "t.id", lambda r: encode_id(prefix, str(r[0]))
        )

    def probe(self) -> StoreProbe:
        source = self.source
        rows, latest, with_expiry, digest = source.query(
            "SELECT count(*), max(t.payload->>'updated_at'), "
            "count(t.payload->'expiration_date'), "
            "sum(hashtext(t.id::text || (t.payload->>'expiration_date')))::text "
            f"FROM {source._table} AS t"
        )[0]
        return StoreProbe(rows=int(rows), latest=latest, expiries=[int(with_expiry), digest])

    def database_now(self) -> str:
        moment = self.source.query("SELECT clock_timestamp()")[0][0]
        return moment.astimezone(UTC).isoformat() if isinstance(moment, datetime) else str(moment)

    def next_mark(self, now: str) -> str:
        """The latest ``updated_at`` the collection holds (read before its rows), else
        ``now``: mem0 stamps ``updated_at`` with the agent's clock, not the database's,
        so the data's own high-water mark is what the next refresh reads after."""
        latest = self.source.query(
            f"SELECT max(t.payload->>'updated_at') FROM {self.source._table} AS t"
        )[0][0]
        if latest:
            try:
                return datetime.fromisoformat(str(latest)).astimezone(UTC).isoformat()
            except ValueError:
                pass
        return now

    def _select(self) -> str:
        """What the index keeps of a row, as text from the database, and nothing more (no
        payload parsed here, no vector read)."""
        text = "CASE WHEN jsonb_typeof(t.payload->{0}) = 'string' THEN t.payload->>{0} END"
        scopes = ", ".join(f"NULLIF(t.payload->>'{k}', '')" for k in SCOPE_KEYS)
        return (
            f"SELECT t.id, {text.format(_DATA)}, t.payload->>'memory_type', {scopes}, "
            f"{text.format(_EXPIRY)}, {hash_sql('t.id::text')} FROM {self.source._table} AS t"
        )

    def _index_row(self, row: Sequence[Any]) -> CacheRow:
        memory_id, content, memory_type, *scopes, expires, key_hash = row
        procedural = memory_type == "procedural_memory"
        return CacheRow(
            source_id=encode_id(self.source.id_prefix, str(memory_id)),
            tier="procedural" if procedural else "memory",
            record_type="procedural_memory" if procedural else "memory",
            content=content or "",
            scope=dict(zip(SCOPE_KEYS, scopes, strict=True)),
            hidden=False,
            expires_at=expiry_moment(expires),
            key_hash=int(key_hash),
        )

    def changed_rows(self, since: str | None) -> Iterator[CacheRow]:
        source = self.source
        if since is not None:
            mark = datetime.fromisoformat(since).astimezone(UTC).isoformat()
            rows = source.query(
                f"{self._select()} WHERE t.payload->>'updated_at' > %s ORDER BY t.id", [mark]
            )
            yield from map(self._index_row, rows)
            return
        yield from source.stream(lambda _query: (self._select(), []), self._index_row)

    def rows_by_id(self, ids: Sequence[str]) -> list[CacheRow]:
        rows = self.source.query(
            f"{self._select()} WHERE t.id = ANY(%s::uuid[])", [self._memory_ids(ids)]
        )
        return [self._index_row(row) for row in rows]

    def existing(self, ids: Sequence[str]) -> set[str]:
        source = self.source
        rows = source.query(
            f"SELECT t.id FROM {source._table} AS t WHERE t.id = ANY(%s::uuid[])",
            [self._memory_ids(ids)],
        )
        return {encode_id(source.id_prefix, str(r[0])) for r in rows}

    def _memory_ids(self, ids: Sequence[str]) -> list[str]:
        """The memory ids (uuids) of these record ids; others left out."""
        out: list[str] = []
        for record_id in ids:
            parts = decode_id(self.source.id_prefix, record_id, 1)
            if parts is not None:
                try:
                    out.append(str(uuid.UUID(parts[0])))
                except ValueError:
                    continue
        return out

    def expiries(self) -> dict[str, str | None]:
        source = self.source
        rows = source.query(
            f"SELECT t.id, t.payload->>'expiration_date' FROM {source._table} AS t "
            "WHERE t.payload ? 'expiration_date'"
        )
        return {encode_id(source.id_prefix, str(i)): expiry_moment(e) for i, e in rows}


class Mem0Vectors:
    """The collection's ``vector`` column: its dimension, its index, and the lane."""

    def __init__(self, catalog: Catalog, table_name: str, table: str) -> None:
        self.table_name = table_name
        self.table = table
        column = catalog.vector_column(table_name, "vector")
        self.kind: str = column[0] if column else "vector"
        self.dims: int | None = column[1] if column else None
        self.cast = catalog.type_name(table_name, "vector") if column else "vector"
        self.index, self.unusable = ann_index(catalog.indexes.get(table_name, []), "vector")
        self._missing: dict[Any, int] = {}
        self.last: dict[str, tuple[float, list[float]]] = {}
        """The last lane's pool by record id: raw score and the vector it was fetched with."""

    def describe(self) -> str:
        """The vectors and the index the vector lane can use, in words."""
        return describe_vectors(
            f"{self.kind}({self.dims}) in {self.table_name}.vector", self.index, self.unusable
        )

    def lane_sql(
        self, source: Mem0PgvectorSource, filters: Mapping[str, Any], limit: int
    ) -> tuple[str, list[Any]]:
        """The lane's statement (its query vector marked ``<query>``), for ``EXPLAIN``."""
        where, params = source.where(filters, include_hidden=False)
        distance = f"t.vector <=> %s::{self.cast}"
        nearest = (
            f"SELECT t.id, t.vector, {distance} AS distance FROM {self.table} AS t "
            f"WHERE t.vector IS NOT NULL AND {where} ORDER BY {distance} LIMIT %s"
        )
        # the vectors as text for the k nearest only (not for every row the sort reads)
        sql = f"SELECT n.id, n.vector::text, n.distance FROM ({nearest}) AS n ORDER BY n.distance"
        return sql, ["<query>", *params, "<query>", limit]

    def lane(
        self,
        source: Mem0PgvectorSource,
        index: PostgresIndex,
        query_vector: Sequence[float],
        filters: Mapping[str, Any],
        pool_size: int,
        cancelled: Callable[[], bool] | None,
    ) -> Lane:
        """The pool: raw ``1 - distance`` of each memory, positive only, the database's
        order."""
        stop_if(cancelled)
        sql, params = self.lane_sql(source, filters, pool_size)
        literal = vector_text(query_vector)
        bound = [literal if p == "<query>" else p for p in params]
        rows, note = nearest(source, sql, bound, self.index, pool_size, f"{self.table_name}.vector")
        stop_if(cancelled)
        fetched: dict[str, tuple[float, list[float]]] = {}
        for memory_id, embedding, distance in rows:
            if distance is not None and math.isfinite(distance) and 1.0 - distance > 0:
                record_id = encode_id(source.id_prefix, str(memory_id))
                fetched[record_id] = (1.0 - float(distance), parse_vector(embedding))
        ordered = [(rid, score) for rid, (score, _) in fetched.items()]
        cache_ids = index.cache_ids(rid for rid, _ in ordered)
        ranking = [(cache_ids[rid], score) for rid, score in ordered if rid in cache_ids]
        dates = dates_of(index, [cid for cid, _ in ranking], filters)
        ranking = [(cid, score) for cid, score in ranking if cid in dates]
        lane = lane_from_ranking(ranking, pool_size, dates)
        lane.note = note
        lane.missing = self.missing(source, filters, index.meta().get("source_fingerprint"))
        self.last = fetched
        return lane

    def missing(self, source: Mem0PgvectorSource, filters: Mapping[str, Any], version: Any) -> int:
        """Live, in-scope memories with no vector (the lane can never find them), counted
        once per store version, filters and day."""
        where, params = source.where(filters, include_hidden=False)
        key = (version, repr(sorted(filters.items())), source.today())
        if key not in self._missing:
            rows = source.query(
                f"SELECT count(*) FROM {self.table} AS t WHERE t.vector IS NULL AND {where}",
                params,
            )
            self._missing = {key: int(rows[0][0])}
        return self._missing[key]
