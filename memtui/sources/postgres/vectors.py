"""The vector lane of a LangGraph ``PostgresStore``, run in the database by pgvector.

``ORDER BY embedding <=> query LIMIT k`` on ``store_vectors`` joined to the live,
in-scope items (the filters and the live rule in the same WHERE). The planner uses
the store's own HNSW or IVFFlat index when it has one on ``embedding`` with a
cosine operator class (``vector_cosine_ops``), else scans every vector exactly; the
lane's ``note`` says which the plan did (``EXPLAIN`` before the query, in the same
read-only transaction), and that an index answer is approximate. For HNSW,
``hnsw.ef_search`` is raised to the pool's size for the query (pgvector returns at
most ``ef_search`` rows from the index).

An item with several embedded fields has a vector per field; as LangGraph's own
search, it scores as its best field (its raw score is ``1 - distance`` of that
field's vector, as the database computed it; the fetched vector recomputes it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memtui.core.cancel import stop_if
from memtui.core.search.hidden import dates_of
from memtui.core.search.scores import Lane, lane_from_ranking
from memtui.sources.base import encode_id
from memtui.sources.langgraph_read import ID_PREFIX
from memtui.sources.postgres.catalog import Catalog, IndexInfo
from memtui.sources.postgres.url import quote_identifier

if TYPE_CHECKING:
    from memtui.sources.postgres.index_file import PostgresIndex
    from memtui.sources.postgres.langgraph import LangGraphPostgresSource
    from memtui.sources.postgres.source import PostgresSource

TABLE = "store_vectors"
MAX_EF_SEARCH = 1000
COSINE_OPS = ("vector_cosine_ops", "halfvec_cosine_ops")


def vector_text(values: Sequence[float]) -> str:
    """A vector as pgvector reads it: ``[0.1,0.2]``."""
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


def parse_vector(text: Any) -> list[float]:
    """pgvector's text form (``[0.1,0.2]``) as floats."""
    body = str(text).strip().strip("[]")
    return list(map(float, body.split(","))) if body else []


def ef_search_for(limit: int) -> int:
    """pgvector returns at most ``hnsw.ef_search`` rows from an HNSW index: at least the
    rows asked for (40, pgvector's default, at the least; 1000, its most, at the most)."""
    return max(40, min(limit, MAX_EF_SEARCH))


def plan_uses(plan: Any, index_name: str) -> bool:
    """Whether an ``EXPLAIN (FORMAT JSON)`` plan scans the index ``index_name``."""
    if isinstance(plan, list):
        return any(plan_uses(p, index_name) for p in plan)
    if not isinstance(plan, dict):
        return False
    if plan.get("Index Name") == index_name:
        return True
    return any(plan_uses(plan[k], index_name) for k in ("Plan", "Plans") if k in plan)


def ann_index(
    indexes: Sequence[IndexInfo], column: str
) -> tuple[IndexInfo | None, list[IndexInfo]]:
    """The ANN index (HNSW, IVFFlat) on ``column`` that serves cosine distance, and those
    on it that do not."""
    ann = [i for i in indexes if i.method in ("hnsw", "ivfflat") and i.columns == (column,)]
    usable = [i for i in ann if i.opclasses and i.opclasses[0] in COSINE_OPS]
    return (usable[0] if usable else None), [i for i in ann if i not in usable]


def describe_vectors(what: str, index: IndexInfo | None, unusable: Sequence[IndexInfo]) -> str:
    """``vectors: vector(8) in store_vectors; index ... (hnsw, vector_cosine_ops)``."""
    if index is not None:
        used = f"index {index.name} ({index.method}, {index.opclasses[0]})"
    else:
        used = "no cosine index: the vector lane scans every vector exactly"
    others = "".join(
        f"; index {i.name} ({i.method}, {', '.join(i.opclasses)}) does not serve cosine"
        for i in unusable
    )
    return f"vectors: {what}; {used}{others}"


def nearest(
    source: PostgresSource,
    sql: str,
    bound: Sequence[Any],
    index: IndexInfo | None,
    limit: int,
    column: str,
) -> tuple[list[tuple[Any, ...]], str]:
    """The rows of a lane's statement and how its plan ran, in one read-only transaction:
    ``hnsw.ef_search`` raised to ``limit`` for an HNSW index, ``EXPLAIN`` first to say
    whether the planner used ``index`` (approximate) or scanned ``column`` exactly."""

    def run(conn: Any) -> tuple[list[tuple[Any, ...]], str]:
        if index is not None and index.method == "hnsw":
            conn.execute(f"SET LOCAL hnsw.ef_search = {ef_search_for(limit)}")
        plan = conn.execute(f"EXPLAIN (FORMAT JSON) {sql}", bound).fetchone()[0]
        rows = conn.execute(sql, bound).fetchall()
        if index is not None and plan_uses(plan, index.name):
            note = f"index: {index.method} {index.name} (approximate)"
        elif index is not None:
            note = f"exact scan (the planner did not use {index.name} for this query)"
        else:
            note = f"exact scan (no cosine index on {column})"
        return list(rows), note

    with source._lock:
        result: tuple[list[tuple[Any, ...]], str] = source.pg.run(run, transaction=True)
    return result


class PgVectors:
    """``store_vectors`` of one schema: its dimension, its index, and the lane."""

    def __init__(self, catalog: Catalog, schema: str) -> None:
        self.schema = schema
        self.table = f"{quote_identifier(schema)}.{quote_identifier(TABLE)}"
        column = catalog.vector_column(TABLE, "embedding")
        self.present = column is not None and catalog.has(
            TABLE, {"prefix": None, "key": None, "field_name": None}
        )
        self.kind: str = column[0] if column else "vector"
        self.dims: int | None = column[1] if column else None
        self.cast = catalog.type_name(TABLE, "embedding") if self.present else "vector"
        self.index, self.unusable = ann_index(catalog.indexes.get(TABLE, []), "embedding")
        self._counted: dict[tuple[Any, ...], int] = {}
        self.last: dict[str, tuple[float, str, Any]] = {}
        """The last lane's pool by record id: raw score, the field that scored, its vector
        as the database's text (``parse_vector`` reads it; not parsed unless asked for)."""

    def describe(self) -> str:
        """The vectors and the index the vector lane can use, in words."""
        return describe_vectors(f"{self.kind}({self.dims}) in {TABLE}", self.index, self.unusable)

    # -- the lane

    def lane_sql(
        self, source: LangGraphPostgresSource, filters: Mapping[str, Any], limit: int
    ) -> tuple[str, list[Any]]:
        """The lane's statement (its ``<query>`` parameters the query vector), for ``EXPLAIN``."""
        where, params = source.where(filters, include_hidden=False)
        return self.nearest_sql(source, where, params, limit)

    def nearest_sql(
        self, source: LangGraphPostgresSource, where: str, params: Sequence[Any], limit: int
    ) -> tuple[str, list[Any]]:
        """The nearest ``limit`` vectors of the items ``where`` keeps (on ``store AS s``)."""
        distance = f"v.embedding <=> %s::{self.cast}"
        nearest = (
            f"SELECT v.prefix, v.key, v.field_name, v.embedding, {distance} AS distance "
            f"FROM {self.table} AS v JOIN {source.table('store')} AS s "
            f"ON s.prefix = v.prefix AND s.key = v.key WHERE {where} "
            f"ORDER BY {distance} LIMIT %s"
        )
        # the vectors as text for the k nearest only (not for every row the sort reads)
        sql = (
            "SELECT n.prefix, n.key, n.field_name, n.embedding::text, n.distance "
            f"FROM ({nearest}) AS n ORDER BY n.distance"
        )
        return sql, ["<query>", *params, "<query>", limit]

    def fetch(
        self,
        source: LangGraphPostgresSource,
        query_vector: Sequence[float],
        statement: tuple[str, list[Any]],
        limit: int,
    ) -> tuple[list[tuple[Any, ...]], str]:
        """The rows of a nearest-vectors ``statement``, and how the plan ran it."""
        sql, params = statement
        literal = vector_text(query_vector)
        bound = [literal if p == "<query>" else p for p in params]
        return nearest(source, sql, bound, self.index, limit, f"{TABLE}.embedding")

    @staticmethod
    def best_fields(rows: Sequence[Sequence[Any]]) -> dict[str, tuple[float, str, Any]]:
        """Each item's best field, in the rows' order: raw ``1 - distance``, field, and its
        vector as the database's text (``parse_vector`` it: only the pool's are)."""
        best: dict[str, tuple[float, str, Any]] = {}
        for prefix, key, field_name, embedding, distance in rows:
            record_id = encode_id(ID_PREFIX, prefix, key)
            if record_id not in best and distance is not None and math.isfinite(distance):
                best[record_id] = (1.0 - float(distance), str(field_name), embedding)
        return best

    def fields(self, source: LangGraphPostgresSource, version: Any) -> int:
        """The most vectors one item has (one per embedded field), counted once per store
        version (a scan of store_vectors)."""
        key = ("fields", version)
        if key not in self._counted:
            rows = source.query(
                f"SELECT coalesce(max(n), 1) FROM (SELECT count(*) AS n FROM {self.table} "
                "GROUP BY prefix, key ORDER BY 1 DESC LIMIT 1) AS most"
            )
            self._counted = {k: v for k, v in self._counted.items() if k[1] == version}
            self._counted[key] = max(1, int(rows[0][0]))
        return self._counted[key]

    def pool_sql(
        self, source: LangGraphPostgresSource, filters: Mapping[str, Any], limit: int
    ) -> tuple[str, list[Any]]:
        """The nearest ``limit`` vectors in scope, live or expired, each row saying whether
        its item is live: one statement gives the pool and the expired items that would
        have been in it (the scope alone in the WHERE, so an HNSW index serves it)."""
        where, params = source.where(filters, include_hidden=True)
        live, live_params = source.where(None, include_hidden=False)
        distance = f"v.embedding <=> %s::{self.cast}"
        nearest = (
            f"SELECT v.prefix, v.key, v.field_name, v.embedding, {distance} AS distance, "
            f"{live} AS live FROM {self.table} AS v JOIN {source.table('store')} AS s "
            f"ON s.prefix = v.prefix AND s.key = v.key WHERE {where} "
            f"ORDER BY {distance} LIMIT %s"
        )
        sql = (
            "SELECT n.prefix, n.key, n.field_name, n.embedding::text, n.distance, n.live "
            f"FROM ({nearest}) AS n ORDER BY n.distance"
        )
        return sql, ["<query>", *live_params, *params, "<query>", limit]

    def lane(
        self,
        source: LangGraphPostgresSource,
        index: PostgresIndex,
        query_vector: Sequence[float],
        filters: Mapping[str, Any],
        pool_size: int,
        cancelled: Callable[[], bool] | None,
    ) -> Lane:
        """The pool: the best field of each item, raw ``1 - distance``, positive only.

        One query reads twice the pool's vectors in scope, live and expired: the live
        ones are the pool, the expired ones above its last score are what the live rule
        left out. Only when those rows do not fill the pool (and there were more) is the
        pool read again with the live rule in the query, and the expired ones apart."""
        stop_if(cancelled)
        version = index.meta().get("source_fingerprint")
        fields = self.fields(source, version)
        limit = pool_size * fields
        wide = min(2 * limit, MAX_EF_SEARCH)
        rows, note = self.fetch(source, query_vector, self.pool_sql(source, filters, wide), wide)
        stop_if(cancelled)
        live_rows = [r[:5] for r in rows if r[5]]
        best = self.best_fields(live_rows)
        ordered = [(rid, score) for rid, (score, _, _) in best.items() if score > 0][:pool_size]
        complete = len(ordered) >= pool_size or len(rows) < wide
        if not complete:
            rows, note = self.fetch(
                source, query_vector, self.lane_sql(source, filters, limit), limit
            )
            best = self.best_fields(rows)
            ordered = [(rid, s) for rid, (s, _, _) in best.items() if s > 0][:pool_size]
        cache_ids = index.cache_ids(rid for rid, _ in ordered)
        ranking = [(cache_ids[rid], score) for rid, score in ordered if rid in cache_ids]
        dates = dates_of(index, [cid for cid, _ in ranking], filters)
        ranking = [(cid, score) for cid, score in ranking if cid in dates]
        lane = lane_from_ranking(ranking, pool_size, dates)
        ef = self.ef_search(wide if complete else limit)
        used = ef is not None and note.startswith("index:")
        lane.note = note + (f"; hnsw.ef_search {ef}, at least the rows asked for" if used else "")
        lane.missing = self.missing(source, filters, version)
        line = ranking[-1][1] if len(ranking) >= pool_size else 0.0
        if complete:
            expired_rows = [r[:5] for r in rows if not r[5]]
            entering = [
                rid for rid, (s, _, _) in self.best_fields(expired_rows).items() if s > line
            ]
            expired = set(index.cache_ids(entering).values())
        else:
            expired = self.left_out(source, index, query_vector, filters, "expired", line, limit)
        lane.dropped = {
            "expired": expired,
            "out_of_scope": self.left_out(
                source, index, query_vector, filters, "out_of_scope", line, limit
            ),
        }
        self.last = {rid: best[rid] for rid, _ in ordered}
        return lane

    def ef_search(self, limit: int) -> int | None:
        """The ``hnsw.ef_search`` a lane of ``limit`` rows sets (None without HNSW)."""
        if self.index is None or self.index.method != "hnsw":
            return None
        return ef_search_for(limit)

    def left_out(
        self,
        source: LangGraphPostgresSource,
        index: PostgresIndex,
        query_vector: Sequence[float],
        filters: Mapping[str, Any],
        reason: str,
        line: float,
        limit: int,
    ) -> set[int]:
        """The index ids of the items left out for ``reason`` (expired, out of scope) that
        would have been in the pool: a cosine above its last one (any positive one while
        it has room). One more nearest-vectors query, only when such items can exist."""
        where = source.left_out_where(filters, reason)
        if where is None:
            return set()
        rows, _ = self.fetch(source, query_vector, self.nearest_sql(source, *where, limit), limit)
        entering = [rid for rid, (score, _, _) in self.best_fields(rows).items() if score > line]
        return set(index.cache_ids(entering).values())

    def missing(
        self, source: LangGraphPostgresSource, filters: Mapping[str, Any], version: Any
    ) -> int:
        """Live, in-scope items with no vector (the lane can never find them): an anti-join,
        counted once per store version, filters and minute of the clock."""
        where, params = source.where(filters, include_hidden=False)
        minute = source.now().replace(second=0, microsecond=0)
        key = ("missing", version, repr(sorted(filters.items())), minute)
        if key not in self._counted:
            rows = source.query(
                f"SELECT count(*) FROM {source.table('store')} AS s WHERE {where} AND NOT EXISTS "
                f"(SELECT 1 FROM {self.table} AS v WHERE v.prefix = s.prefix AND v.key = s.key)",
                params,
            )
            self._counted = {k: v for k, v in self._counted.items() if k[1] == version}
            self._counted[key] = int(rows[0][0])
        return self._counted[key]
