"""mem0's pgvector collection, written by mem0's own ``PGVector``: browsed in the database
as mem0 reads it, searched with the same recomputable breakdown, its history attached."""

from __future__ import annotations

import json

import pytest
from conftest import fixed_clock

from memtui.core.search import cosine
from memtui.sources import SourceError, open_source
from memtui.sources.postgres.key_buckets import FINE_BUCKETS
from memtui.sources.postgres.vectors import parse_vector, plan_uses, vector_text

from .conftest import new_database
from .mem0_support import (
    EMBEDDER,
    MEMORIES,
    embed,
    library,
    memory_id,
    record_id,
    sql,
    write_collection,
    write_history,
    write_telemetry,
)
from .support import vector_text_casts

pytest.importorskip("mem0")


@pytest.fixture(scope="module")
def m0_url(pg_server):
    """One collection (``memories``) beside mem0's telemetry table, for read-only tests."""
    with new_database(pg_server) as url:
        write_collection(url).connection_pool.close()
        write_telemetry(url)
        yield url


@pytest.fixture(scope="module")
def mem0_library(m0_url):
    """mem0's own ``PGVector`` reading the module's collection."""
    store = library(m0_url)
    yield store
    store.connection_pool.close()


def opened(url, **kwargs):
    return open_source(url, clock=fixed_clock, **kwargs)


def test_recognized_as_mem0s_collection_beside_its_telemetry_table(m0_url):
    with opened(m0_url) as source:
        assert source.kind == "mem0-pgvector"
        assert source.collection == "memories"
        assert source.label.endswith("(mem0 pgvector collection memories)")
        assert (source.table_name, source.id_column, source.payload_column) == (
            "memories",
            "id",
            "payload",
        )
        assert source.forget_scope_keys == ("user_id", "agent_id", "run_id")
        summary = source.summary()
        assert summary.counts["records"] == len(MEMORIES) and summary.counts["live"] == 22
        assert summary.counts["vectors"] == len(MEMORIES)
        assert "vectors: vector(8) in memories.vector; index memories_hnsw_idx (hnsw, " in (
            " | ".join(summary.notes)
        )


def test_every_record_is_mem0s_own_list_and_get(m0_url, mem0_library):
    (listed,) = mem0_library.list(top_k=1000)
    with opened(m0_url) as source:
        records = {r.id: r for r in source.iter_records(include_hidden=True, page_size=5)}
        assert set(records) == {f"mem0:{item.id}" for item in listed}
        for item in listed:
            record = records[f"mem0:{item.id}"]
            assert record.content == item.payload["data"]
            assert record.created_at == item.payload["created_at"]
            assert record.scope == {k: item.payload.get(k) for k in source.scope_keys}
            assert record.metadata["hash"] == item.payload["hash"]
            own = mem0_library.get(item.id)
            assert source.get(record.id) == record and own.payload == item.payload
        assert records[record_id("steps")].tier == "procedural"
        assert records[record_id("steps")].record_type == "procedural_memory"
        assert records[record_id("rome")].metadata["metadata"] == {"topic": "travel"}
        shown = json.dumps(records[record_id("token")].to_json())
        assert "sk-zz" not in shown  # a secret-named metadata key is masked
        assert "text_lemmatized" not in json.dumps(records[record_id("paris")].metadata)


def test_mem0s_expiry_rule_and_the_clock(m0_url):
    with opened(m0_url) as source:
        assert source.get(record_id("old")).state == "expired"  # 2026-11-29 < today
        assert source.get(record_id("soon")).state == "live"  # today itself is live
        live = {r.id for r in source.iter_records()}
        assert record_id("old") not in live and record_id("soon") in live
    with opened(m0_url, now="2026-12-01T00:00:00Z") as later:
        assert later.get(record_id("soon")).state == "expired"
        assert later.summary().counts["live"] == 21


def test_facets_are_counted_in_the_database_as_mem0_filters_them(m0_url, mem0_library):
    with opened(m0_url) as source:
        facets = {f.tier: f for f in source.facets(include_hidden=True)}
        assert {t: f.count for t, f in facets.items()} == {"memory": 22, "procedural": 1}
        assert facets["memory"].scopes["user_id"] == {"alice": 3, "bob": 3, "carol": 2, "dave": 14}
        assert facets["memory"].scopes["agent_id"] == {"helper": 2}
        assert facets["procedural"].scopes == {"agent_id": {"deployer": 1}}
        assert source.tier_counts() == {"memory": 21, "procedural": 1}
        for user in ("alice", "bob", "dave"):
            (own,) = mem0_library.list(filters={"user_id": user}, top_k=1000)
            page = source.page({"user_id": user}, include_hidden=True, limit=1000)
            assert {r.id for r in page.records} == {f"mem0:{i.id}" for i in own}
            (facet,) = source.facets({"user_id": user}, include_hidden=True)
            assert facet.count == len(own)
        (helper,) = source.facets({"agent_id": "helper"})
        assert helper.count == 2 and helper.scopes["user_id"] == {"alice": 1, "bob": 1}


def test_pages_are_keyset_pages_on_the_primary_key(m0_url):
    with opened(m0_url) as source:
        whole = source.page(limit=1000, include_hidden=True).records
        assert [r.metadata["memory_id"] for r in whole] == sorted(
            str(m) for (m,) in sql(m0_url, "SELECT id FROM memories ORDER BY id")
        )
        second = source.page(after=whole[3].id, limit=4, include_hidden=True)
        assert [r.id for r in second.records] == [r.id for r in whole[4:8]]
        assert second.next_cursor == whole[7].id
        statement, params = source.page_sql(
            {"user_id": "dave"}, after=whole[3].id, limit=200, include_hidden=False
        )
        with pytest.raises(SourceError, match="is not a mem0 pgvector collection record id"):
            source.page(after="lg:x/y")
    import psycopg

    with psycopg.connect(m0_url, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")  # as at scale: the planner walks the key
        plan = conn.execute(f"EXPLAIN (FORMAT JSON) {statement}", params).fetchone()[0]
    assert plan_uses(plan, "memories_pkey")


def test_a_bare_memory_id_is_hinted(m0_url):
    with opened(m0_url) as source:
        bare = memory_id("paris")
        assert source.get(bare) is None
        assert source.id_hint(bare) == f"memtui's id of mem0 memory {bare} is mem0:{bare}"
        assert "mem0:MEMORY_ID" in source.id_hint("paris")


def same_order(pool, expected):
    """The same scores best first (to 1e-6), the same ids at each score (ties in any
    order)."""
    assert [s for _, s in pool] == pytest.approx([s for _, s in expected], abs=1e-6)
    assert sorted((-round(s, 6), i) for i, s in pool) == sorted(
        (-round(s, 6), i) for i, s in expected
    )


def vector_pool(response):
    found = [(r.id, r.trace.vector.raw) for r in response.candidates if r.trace.vector.raw]
    return sorted(found, key=lambda pair: -pair[1])


def test_the_vector_lane_is_mem0s_own_search_and_recomputes(m0_url, mem0_library):
    query = "coffee trip"
    with opened(m0_url) as source:
        response = source.search(query, embedder=EMBEDDER, limit=50, any_terms=True)
        trace = response.trace
        assert trace.fallback is None
        assert trace.vector_search == "index: hnsw memories_hnsw_idx (approximate)"
        pool = vector_pool(response)
        own = mem0_library.search(query, embed(query), top_k=100)
        expected = [
            (f"mem0:{o.id}", o.score)
            for o in own
            if o.score > 0 and f"mem0:{o.id}" != record_id("old")  # expired: not in the lane
        ]
        same_order(pool, expected)
        vector = EMBEDDER([query])[0]
        for found_id, raw in pool:
            (text,) = sql(
                m0_url, "SELECT vector::text FROM memories WHERE id = %s", (found_id[5:],)
            )[0]
            assert cosine(vector, parse_vector(text)) == pytest.approx(raw, abs=1e-6)
            assert source.vectors.last[found_id][1] == parse_vector(text)
        assert trace.vectors_missing == 0
        for result in response.results:
            assert result.score == (
                trace.weights["keyword"] * result.trace.keyword.normalized
                + trace.weights["vector"] * result.trace.vector.normalized
            )
            if result.trace.keyword.raw is not None:
                detail = source.explain(query, result.id)
                assert detail["total"] == pytest.approx(result.trace.keyword.raw, abs=1e-6)


def test_filters_apply_in_the_vector_lanes_sql(m0_url, mem0_library):
    with opened(m0_url) as source:
        response = source.search(
            "trip", embedder=EMBEDDER, filters={"user_id": "alice"}, limit=50, any_terms=True
        )
        pool = vector_pool(response)
        own = mem0_library.search("trip", embed("trip"), top_k=100, filters={"user_id": "alice"})
        same_order(pool, [(f"mem0:{o.id}", o.score) for o in own if o.score > 0])
        assert len(pool) == 3


def test_the_keyword_lane_without_an_embedder(m0_url):
    with opened(m0_url) as source:
        response = source.search("trip", limit=10)
        trace = response.trace
        assert trace.fallback.startswith("no embedder for these 8-dim vectors")
        assert trace.source.kind == "mem0-pgvector"
        assert trace.source.index_refreshed.startswith(("built ", "up to date as of"))
        ids = [r.id for r in response.results]
        assert record_id("paris") in ids and record_id("old") not in ids
        assert trace.excluded["expired"] == 1


def test_an_exact_scan_without_the_index_and_the_trace_says_so(pg_server):
    with new_database(pg_server) as url:
        write_collection(url).connection_pool.close()
        sql(url, "DROP INDEX memories_hnsw_idx")
        with opened(url) as source:
            trace = source.search("trip", embedder=EMBEDDER).trace
            assert trace.vector_search == "exact scan (no cosine index on memories.vector)"
            assert "no cosine index: the vector lane scans every vector exactly" in (
                source.vectors.describe()
            )


def test_the_keyword_index_is_refreshed_by_what_changed(pg_server):
    with new_database(pg_server) as url:
        store = write_collection(url)
        with opened(url) as source:
            source.search("coffee")
            assert source.index.last_sync.action == "built"
            assert source.index.last_sync.rows_read == len(MEMORIES)
            version = source.data_version()
        payload = dict(store.get(memory_id("rome")).payload)
        payload.update(data="Rome trip moved to October", updated_at="2026-11-30T11:30:00+00:00")
        store.update(memory_id("rome"), vector=embed(payload["data"]), payload=payload)
        store.delete(memory_id("bulk03"))
        store.delete(memory_id("paris"))
        store.connection_pool.close()
        with opened(url) as source:
            found = [r.id for r in source.search("october").results]
            sync = source.index.last_sync
            assert sync.action == "refreshed"
            # the changed memory, and the one stamped at the mark (read again within the lag)
            assert sync.rows_read == 2 and sync.written == 1 and sync.removed == 2
            # the full key hashes were compared where the fine buckets differ: no id of a
            # memory the store still holds was read back
            assert sync.buckets_compared == FINE_BUCKETS
            assert sync.ids_read == 0
            assert found == [record_id("rome")]
            assert record_id("paris") not in [r.id for r in source.search("paris").results]
            assert source.data_version() != version  # the app's "live: N new" probe moved
        # an expiration_date set without a new updated_at is read by the probe's digest
        sql(
            url,
            'UPDATE memories SET payload = payload || \'{"expiration_date": "2026-11-01"}\' '
            "WHERE id = %s",
            (memory_id("coffee"),),
        )
        with opened(url) as source:
            found = [r.id for r in source.search("coffee", limit=50).results]
            sync = source.index.last_sync
            assert sync.expiries_read == 3 and sync.rows_read == 1  # the expiries, the mark's row
            assert record_id("coffee") not in found and record_id("bulk00") in found


def test_mem0s_history_attached_shows_a_records_events(m0_url, tmp_path):
    history = write_history(tmp_path / "history.db")
    with opened(m0_url, mem0_history=history) as source:
        sections = source.detail(record_id("dark"))
        events = sections[0]
        assert events.title == f"mem0 history ({history})"
        assert [row[0] for row in events.rows] == ["ADD", "UPDATE"]
        assert events.rows[1][2] == "prefers light mode"
        assert sections[1].title == "payload (full JSON, secrets masked)"
        summary = source.summary()
        assert summary.counts["deleted_with_text"] == 1
        assert (
            "erasure gap: 1 memory mem0 deleted still has text readable in its history.db; "
            "clear it with `memtui forget-gaps URL --mem0-history PATH --allow-writes`"
        ) in summary.notes
    with opened(m0_url) as source:
        (events, *_) = source.detail(record_id("dark"))
        assert "give it with --mem0-history" in events.note


def test_a_history_of_another_store_is_refused(m0_url, tmp_path):
    from mem0.memory.storage import SQLiteManager

    other = SQLiteManager(str(tmp_path / "other.db"))
    other.add_history("00000000-0000-4000-8000-000000000001", None, "elsewhere", "ADD")
    other.close()
    with pytest.raises(SourceError, match="shares no memory id with collection memories"):
        opened(m0_url, mem0_history=tmp_path / "other.db")
    with pytest.raises(SourceError, match="no mem0 history at"):
        opened(m0_url, mem0_history=tmp_path / "missing.db")


def test_the_query_vector_is_bound_not_spliced(m0_url):
    with opened(m0_url) as source:
        statement, params = source.vectors.lane_sql(source, {"user_id": "x' OR '1'='1"}, 10)
        assert "x'" not in statement and params[0] == "<query>"
        assert vector_text([0.5, 1.0]) == "[0.5,1.0]"


def test_only_the_k_nearest_vectors_are_turned_into_text(m0_url):
    with opened(m0_url) as source:
        statement = source.vectors.lane_sql(source, {"user_id": "alice"}, 10)
        assert vector_text_casts(source, statement, "vector") == ["0:Subquery Scan"]
