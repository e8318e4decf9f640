"""Letta's server in Postgres: recognized by its tables, browsed (tiers, archives, tags,
labels, soft-deleted passages hidden), searched (keyword lane on memtui's index, vector
lane in SQL on the zero-padded vectors, its cosine recomputed from the unpadded ones);
the shared record mapping's pure functions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import fixed_clock, one_error_line

from memtui.cli import main
from memtui.core.search import cosine
from memtui.sources import SourceError, open_source
from memtui.sources.letta_records import embedding_dim, json_value, tag_list, view_key
from memtui.sources.postgres.kinds import either

from .conftest import new_database
from .letta_support import (
    EMBEDDER,
    HUMAN,
    PASSAGES,
    passage_id,
    real_vector,
    record_id,
    sql,
    write_letta,
)

LIVE = [n for n, *_, deleted in PASSAGES if not deleted]


@pytest.fixture(scope="module")
def letta_url(pg_server: Any) -> Iterator[str]:
    """A Letta server database for a module's read-only tests: written once, never changed."""
    with new_database(pg_server) as url:
        write_letta(url)
        yield url


def opened(url: str, **options: Any) -> Any:
    return open_source(url, clock=fixed_clock, **options)


def test_the_pure_mapping_reads_sqlite_text_and_postgres_values_alike():
    assert json_value('{"a": 1}') == {"a": 1} == json_value({"a": 1})
    assert json_value("not json") == "not json" and json_value(None) is None
    assert tag_list('["x", 2]') == ["x", "2"] == tag_list(["x", 2])
    assert tag_list("null") == [] == tag_list({"x": 1})
    assert embedding_dim({"embedding_dim": 8}) == 8 == embedding_dim('{"embedding_dim": 8}')
    assert embedding_dim({"embedding_dim": True}) is None
    assert embedding_dim({"embedding_dim": 0}) is None and embedding_dim("[]") is None
    assert view_key("archival:p%2F1") == (0, "p/1") and view_key("core:b-1") == (1, "b-1")
    assert view_key("lg:x/y") is None
    assert either(["a"]) == "a" and either(["a", "b"]) == "a or b"
    assert either(["a", "b", "c"]) == "a, b or c"


def test_info_names_the_kind_and_the_erasure_gap(runner, letta_url):
    info = runner.invoke(main, ["info", letta_url])
    assert info.exit_code == 0, info.output
    assert "(Letta server Postgres)" in info.output.splitlines()[0]
    assert "erasure gap: 2 soft-deleted passage(s) still hold their text" in info.output
    assert "zero-padded (real dims from embedding_config: 30 of 8 dims)" in info.output
    data = json.loads(runner.invoke(main, ["info", letta_url, "--json"]).output)
    assert data["kind"] == "letta-postgres"
    assert data["counts"]["records"] == len(PASSAGES) + 2
    assert data["counts"]["live"] == len(LIVE) + 2
    assert data["counts"]["soft_deleted_passages"] == 2
    assert data["counts"]["block_history_rows"] == 3


def test_a_schema_with_only_some_of_lettas_tables_says_what_it_holds(runner, pg_url):
    sql(pg_url, "CREATE TABLE archives (id varchar PRIMARY KEY, name varchar)")
    sql(pg_url, "CREATE TABLE archival_passages (id varchar PRIMARY KEY, text varchar)")
    line = one_error_line(runner.invoke(main, ["info", pg_url]))
    assert line.endswith(
        "(schema public) holds 2 tables (archival_passages, archives) but no LangGraph store, "
        "mem0 pgvector collection or Letta server passages"
    )


def test_tiers_scopes_and_counts(letta_url):
    with opened(letta_url) as source:
        assert source.read_only and source.kind == "letta-postgres"
        facets = {f.tier: f for f in source.facets()}
        assert facets["archival"].count == len(LIVE) and facets["core"].count == 2
        assert facets["archival"].scopes["archive"] == {"ops-runbooks": 10, "research-notes": 20}
        assert facets["archival"].scopes["tag"] == {
            "bulk": 24,
            "ops": 2,
            "project": 2,
            "travel": 2,
        }
        assert facets["core"].scopes == {"label": {"human": 1, "persona": 1}}
        hidden = {f.tier: f for f in source.facets(include_hidden=True)}
        assert hidden["archival"].scopes["tag"]["secrets"] == 1
        assert source.tier_counts() == {"archival": len(LIVE), "core": 2}
        tagged = source.page({"tag": "project"}).records
        assert [r.id for r in tagged] == [record_id(1), record_id(2)]
        assert [r.content for r in source.page({"label": "human"}).records] == [
            "Name: Ada. Works on compilers. Allergic to qwphlumbix pollen."
        ]


def test_records_map_as_the_sqlite_source_maps_them(letta_url):
    with opened(letta_url) as source:
        passage = source.get(record_id(2))
        assert passage.scope == {
            "archive": "research-notes",
            "tag": ["travel", "project"],
            "label": None,
        }
        assert passage.metadata["embedding_dim"] == 8 and passage.metadata["stored_dims"] == 4096
        assert passage.metadata["metadata"] == {"source": "conversation", "turn": 2}
        assert passage.created_at.startswith("2026-11-29T") and passage.state == "live"
        assert source.notes(passage) == "hash-8 · tags: travel, project"
        deleted = source.get(record_id(4))
        assert deleted.state == "deleted"
        assert record_id(4) not in {r.id for r in source.iter_records()}
        block = source.get(f"core:{HUMAN}")
        assert block.tier == "core" and block.metadata["version"] == 3
        history = source.detail(block.id)[0]
        assert [row[0] for row in history.rows] == [1, 2, 3]
        assert source.detail(record_id(1))[0].rows == [("hash-8", 8, 4096)]
        hint = f"memtui's id of {passage_id(1)} is {record_id(1)}"
        assert source.id_hint(passage_id(1)) == hint
        assert source.id_hint("nope").startswith("a Letta record's id is archival:PASSAGE_ID")
        with pytest.raises(SourceError, match="is not a Letta server Postgres record id"):
            source.page(after="lg:x/y")


def test_the_vector_lane_ranks_the_padded_vectors_and_recomputes_the_cosine(letta_url):
    query = "Paris trip planned for the spring conference"
    with opened(letta_url) as source:
        response = source.search(query, embedder=EMBEDDER, limit=50, any_terms=True)
        trace = response.trace
        assert trace.fallback is None
        assert trace.vector_search.startswith(
            "exact scan (no cosine index on archival_passages.embedding); the 8-dim query "
            "zero-padded to 4096"
        )
        assert response.results[0].id == record_id(2)
        pool = [(r.id, r.trace.vector.raw) for r in response.candidates if r.trace.vector.raw]
        assert pool and record_id(4) not in dict(pool)  # soft-deleted: not in the lane
        vector = EMBEDDER([query])[0]
        number = {record_id(n): text for n, _, text, *_ in PASSAGES}
        for found_id, raw in pool:
            unpadded = source.vectors.last[found_id][1]
            assert unpadded == pytest.approx(real_vector(number[found_id]), abs=1e-7)
            assert len(unpadded) == 8
            assert cosine(vector, unpadded) == pytest.approx(raw, abs=1e-6)
        assert trace.vectors_missing == 0
        assert trace.excluded["deleted"] >= 0 and "refuted" not in trace.excluded


def test_the_keyword_lane_filters_and_hides_soft_deleted_passages(letta_url):
    with opened(letta_url) as source:
        found = source.search("trip", filters={"tag": "travel"})
        assert [r.id for r in found.results] == [record_id(2), record_id(6)]
        assert source.search("trip", filters={"tag": "ops"}).results == []
        hidden = source.search("zqxjvortex")
        assert hidden.results == [] and hidden.trace.excluded["deleted"] == 1
        assert hidden.trace.fallback.startswith("no embedder for these 8-dim vectors")
        assert hidden.trace.source.index_refreshed.startswith(("built ", "up to date as of"))
        assert [r.id for r in source.search("qwphlumbix").results] == [f"core:{HUMAN}"]


async def test_the_app_browses_the_letta_server(letta_url):
    from memtui.tui.app import make_app
    from memtui.tui.testing import screen_text, settle

    source = opened(letta_url)
    try:
        app = make_app(source, poll_interval=None)
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot)
            text = screen_text(app)
            assert "READ-ONLY" in text and f"{len(LIVE) + 2} live records" in text
            assert "archival" in text and "core" in text
            assert "The user writes a compiler" in text
    finally:
        source.close()
