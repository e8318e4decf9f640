"""LangGraph with several indexed text fields: an item scores as its best field, as
LangGraph's own search scores it, and the breakdown names the field that won."""

from __future__ import annotations

import sqlite3

import pytest
from click.testing import CliRunner
from conftest import fixed_clock
from fixtures.sources_support import LANGGRAPH_VECTORS, copy_fixture

from memtui.cli import main
from memtui.core.embed import HashEmbedder
from memtui.core.search import cosine
from memtui.core.store import pack_vector
from memtui.sources import open_source
from memtui.sources.base import encode_id
from memtui.sources.cache import unpack_f32
from memtui.tui.breakdown import render_breakdown

QUERY = "paris trip spring"
EMBED = HashEmbedder(8)
# Each item gets a second field; the dark-mode item's "title" is the query itself.
TITLES = {
    "pref-color": QUERY,
    "trip/2026:paris": "budget spreadsheet",
    "canary": "vault code word",
}


@pytest.fixture
def store(tmp_path):
    path = copy_fixture(LANGGRAPH_VECTORS, tmp_path)
    conn = sqlite3.connect(path)
    with conn:
        for key, title in TITLES.items():
            conn.execute(
                "INSERT INTO store_vectors (prefix, key, field_name, embedding, created_at, "
                "updated_at) VALUES ('memories.user-1', ?, 'title', ?, '2026-11-30 12:00:00', "
                "'2026-11-30 12:00:00')",
                (key, pack_vector(EMBED.embed_one(title))),
            )
    conn.close()
    return path


def langgraph_scores(path, query_vector) -> dict[str, tuple[float, str]]:
    """LangGraph's rule, read from the file: every field scored, the best kept."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT v.prefix, v.key, v.field_name, v.embedding FROM store_vectors AS v "
            "JOIN store AS s USING (prefix, key) ORDER BY v.field_name"
        ).fetchall()
    finally:
        conn.close()
    best: dict[str, tuple[float, str]] = {}
    for prefix, key, field_name, blob in rows:
        score = cosine(query_vector, unpack_f32(blob))
        rid = encode_id("lg", prefix, key)
        if rid not in best or score > best[rid][0]:
            best[rid] = (score, field_name)
    return best


def test_an_item_scores_as_its_best_field_and_the_breakdown_names_it(store):
    expected = langgraph_scores(store, EMBED.embed_one(QUERY))
    dark_mode = encode_id("lg", "memories.user-1", "pref-color")
    assert expected[dark_mode] == (pytest.approx(1.0), "title")
    with open_source(store, now="2026-11-30T12:00:30Z", clock=fixed_clock) as source:
        response = source.search(QUERY, embedder=EMBED, weights={"keyword": 0.0, "vector": 1.0})
        assert response.trace.fallback is None
        by_vector = [r for r in response.candidates if r.trace.vector.raw is not None]
        assert by_vector
        assert response.results[0].id == dark_mode  # by its title; its text is dark mode
        several = {encode_id("lg", "memories.user-1", key) for key in TITLES}
        for result in by_vector:
            score, field_name = expected[result.id]
            assert result.trace.vector.raw == pytest.approx(score, abs=1e-6)
            # The field is named where there was a choice (the default index has one, "$").
            named = field_name if result.id in several else None
            assert result.trace.vector.field == named
        shown = render_breakdown(response.results[0], response.trace, None).plain
        assert "best of its fields: title" in shown
        ranked = [r.id for r in response.results]
        lg_order = sorted(
            (rid for rid in expected if rid in {r.id for r in by_vector}),
            key=lambda rid: -expected[rid][0],
        )
        assert ranked[: len(lg_order)] == lg_order
        # Another query: the same item's other field wins, and says so.
        again = source.search(
            "dark mode editor", embedder=EMBED, weights={"keyword": 0.0, "vector": 1.0}
        )
        other = langgraph_scores(store, EMBED.embed_one("dark mode editor"))
        hit = next(r for r in again.candidates if r.id == dark_mode)
        assert hit.trace.vector.field == other[dark_mode][1] == "$"
        assert hit.trace.vector.raw == pytest.approx(other[dark_mode][0], abs=1e-6)


def test_search_explain_names_the_field_that_won(store):
    result = CliRunner().invoke(
        main,
        [
            "search",
            str(store),
            QUERY,
            "--explain",
            "--embedder",
            "hash-8",
            "--weights",
            "0,1",
            "--now",
            "2026-11-30T12:00:30Z",
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    first = result.output.split("#1  record ", 1)[1].split("#2  record ", 1)[0]
    assert first.startswith("lg:memories.user-1/pref-color")
    assert "vector   best of its fields: title" in first
