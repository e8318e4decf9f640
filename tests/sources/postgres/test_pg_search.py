"""Search of a LangGraph ``PostgresStore``: the keyword lane on memtui's index, the
vector lane in the database (pgvector's ``<=>``), the same breakdown as every source."""

from __future__ import annotations

import pytest
from conftest import fixed_clock

from memtui.core.embed import HashEmbedder
from memtui.core.search import cosine
from memtui.sources import open_source
from memtui.sources.postgres.vectors import parse_vector, vector_text

from .support import EMBEDDER, sql, vector_text_casts


def opened(url, **kwargs):
    return open_source(url, clock=fixed_clock, **kwargs)


def raw_sql_order(url, query, where="", params=()):
    """The nearest live items by LangGraph's own kind of query, best first (positive only)."""
    vector = vector_text(EMBEDDER([query])[0])
    rows = sql(
        url,
        "SELECT s.prefix || '/' || s.key, 1 - (v.embedding <=> %s::vector) FROM store_vectors v "
        "JOIN store s ON s.prefix = v.prefix AND s.key = v.key "
        "WHERE (s.expires_at IS NULL OR s.expires_at > %s) "
        + where
        + " ORDER BY v.embedding <=> %s::vector LIMIT 100",
        (vector, fixed_clock(), *params, vector),
    )
    return [(f"lg:{key}", score) for key, score in rows if score > 0]


def vector_pool(response):
    found = [(r.id, r.trace.vector.raw) for r in response.candidates if r.trace.vector.raw]
    return sorted(found, key=lambda pair: -pair[1])


def same_order(pool, expected):
    """The same scores best first, and the same ids at each score (ties in any order)."""
    assert [round(s, 12) for _, s in pool] == [round(s, 12) for _, s in expected]
    assert sorted((-round(s, 12), i) for i, s in pool) == sorted(
        (-round(s, 12), i) for i, s in expected
    )


def test_the_keyword_breakdown_recomputes(lg_url):
    with opened(lg_url) as source:
        response = source.search("trip", limit=5)
        trace = response.trace
        assert trace.fallback.startswith("no embedder for these 8-dim vectors")
        assert trace.vector_search is None
        assert trace.source.kind == "langgraph-postgres"
        assert trace.source.index_refreshed.startswith("built ")
        ids = [r.id for r in response.results]
        assert "lg:sessions.s-1/short" not in ids  # expired
        assert trace.excluded["expired"] == 1
        for result in response.results:
            assert result.score == (
                trace.weights["keyword"] * result.trace.keyword.normalized
                + trace.weights["vector"] * result.trace.vector.normalized
            )
            detail = source.explain("trip", result.id)
            assert detail["total"] == pytest.approx(result.trace.keyword.raw, abs=1e-6)


def test_the_vector_lane_is_the_databases_order_and_recomputes(lg_store):
    # Exact in both (the planner may walk the HNSW index even at 34 rows once the table
    # is analyzed): the same order is then the same order, not two approximations.
    database = lg_store.split("?")[0].rsplit("/", 1)[1]
    sql(lg_store, f'ALTER DATABASE "{database}" SET enable_indexscan = off')
    lg_url = lg_store
    with opened(lg_url) as source:
        response = source.search("coffee trip", embedder=EMBEDDER, limit=50, any_terms=True)
        trace = response.trace
        assert trace.fallback is None
        assert trace.vector_search == (
            "exact scan (the planner did not use store_vectors_embedding_idx for this query)"
        )
        pool = vector_pool(response)
        expected = raw_sql_order(lg_url, "coffee trip")
        same_order(pool, expected)
        assert len(pool) > 20
        query = EMBEDDER(["coffee trip"])[0]
        for record_id, raw in pool:
            namespace, key = record_id[3:].rsplit("/", 1)
            (embedding,) = sql(
                lg_url,
                "SELECT embedding::text FROM store_vectors WHERE prefix = %s AND key = %s",
                (namespace, key),
            )[0]
            assert cosine(query, parse_vector(embedding)) == pytest.approx(raw, abs=1e-6)
        assert trace.vectors_missing == 0
        assert trace.pools["vector"].size == len(pool)


def test_filters_apply_in_the_vector_lanes_sql(lg_store):
    database = lg_store.split("?")[0].rsplit("/", 1)[1]
    sql(lg_store, f'ALTER DATABASE "{database}" SET enable_indexscan = off')  # exact: see above
    lg_url = lg_store
    with opened(lg_url) as source:
        response = source.search(
            "trip", embedder=EMBEDDER, filters={"namespace": "memories.user-1"}, limit=50
        )
        pool = vector_pool(response)
        assert pool and all(i.startswith("lg:memories.user-1") for i, _ in pool)
        expected = raw_sql_order(
            lg_url,
            "trip",
            "AND (s.prefix = %s OR s.prefix LIKE %s)",
            ("memories.user-1", "memories.user-1.%"),
        )
        same_order(pool, expected)


def test_the_trace_names_the_index_when_the_plan_uses_it(lg_store):
    # The planner scans 34 rows rather than walk an index; with sequential scans priced
    # out for the database (as at scale), the same query walks the store's HNSW index.
    database = lg_store.split("?")[0].rsplit("/", 1)[1]
    sql(lg_store, f'ALTER DATABASE "{database}" SET enable_seqscan = off')
    with opened(lg_store) as source:
        trace = source.search("trip", embedder=EMBEDDER).trace
        assert trace.vector_search == (
            "index: hnsw store_vectors_embedding_idx (approximate); "
            "hnsw.ef_search 200, at least the rows asked for"
        )
        assert trace.to_dict()["vector_search"] == trace.vector_search
    sql(lg_store, "DROP INDEX store_vectors_embedding_idx")
    with opened(lg_store) as source:
        trace = source.search("trip", embedder=EMBEDDER).trace
        assert trace.vector_search == "exact scan (no cosine index on store_vectors.embedding)"
        assert "no cosine index" in source.vectors.describe()


def test_the_vector_lane_needs_an_embedder_of_the_stores_dimension(lg_url):
    with opened(lg_url) as source:
        trace = source.search("trip", embedder=HashEmbedder(16)).trace
        assert trace.fallback == (
            "no embedder for these 8-dim vectors: hash-16 makes 16-dim vectors"
        )
        assert trace.vector_search is None
        trace = source.search("trip", embedder=EMBEDDER, keyword_only=True).trace
        assert trace.fallback == "keyword-only search was requested: the vector lane is off"


def test_a_store_without_vectors_searches_by_keyword(pg_url):
    from .support import write_store

    write_store(pg_url, index=False)
    with opened(pg_url) as source:
        assert not source.has_vectors()
        trace = source.search("trip", embedder=EMBEDDER).trace
        assert "no store_vectors" in trace.fallback or "no stored vectors" in trace.fallback


def test_the_vector_lane_counts_what_the_live_rule_and_the_scope_left_out(lg_url):
    with opened(lg_url) as source:
        trace = source.search(
            "scratch note trip", embedder=EMBEDDER, filters={"namespace": "sessions.s-1"}
        ).trace
        left_out = trace.excluded_by_lane["vector"]
        assert left_out["expired"] == 1  # the expired scratch note, in scope
        outside = sql(
            lg_url,
            "SELECT count(DISTINCT (s.prefix, s.key)) FROM store_vectors v JOIN store s "
            "ON s.prefix = v.prefix AND s.key = v.key WHERE s.prefix <> 'sessions.s-1' "
            "AND (s.expires_at IS NULL OR s.expires_at > %s) "
            "AND 1 - (v.embedding <=> %s::vector) > 0",
            (fixed_clock(), vector_text(EMBEDDER(["scratch note trip"])[0])),
        )[0][0]
        assert left_out["out_of_scope"] == outside > 0  # the pool had room: any positive one
        unfiltered = source.search("scratch note trip", embedder=EMBEDDER).trace
        assert unfiltered.excluded_by_lane["vector"]["out_of_scope"] == 0


def test_only_the_k_nearest_vectors_are_turned_into_text(lg_url):
    """The lane reads the vectors back as text for its k results, not for every row the
    sort reads: the cast is in the top node of the plan alone."""
    with opened(lg_url) as source:
        statement = source.vectors.lane_sql(source, {}, 10)
        assert vector_text_casts(source, statement, "embedding") == ["0:Subquery Scan"]
