"""The Search tab: results, expandable breakdowns that add up, what-if weights."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from textual.widgets import Input, Select

from memtui.core.search import hybrid_search, rerank
from memtui.core.store import MemoryStore
from memtui.tui import search_view
from memtui.tui.app import make_app
from memtui.tui.breakdown import arithmetic, num, score_text
from memtui.tui.search_view import RESULT_LIMIT, ResultList, SearchPane
from memtui.tui.testing import build_sample_db, fixed_clock, screen_text, settle

SIZE = (120, 40)
QUERY = "sql injection"


@pytest.fixture
def store(tmp_path: Path):
    path = build_sample_db(tmp_path / "sample.db")
    with MemoryStore(path, clock=fixed_clock) as opened:
        yield opened


async def run_query(pilot, text: str) -> None:
    await pilot.press("slash")
    await settle(pilot)
    for char in text:
        await pilot.press(char if char != " " else "space")
    await pilot.press("enter")
    await settle(pilot)


async def test_query_enter_runs_search_and_focuses_results(store: MemoryStore):
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await run_query(pilot, QUERY)
        results = app.query_one(ResultList)
        assert app.focused is results
        expected = hybrid_search(store, QUERY, limit=RESULT_LIMIT)
        shown = [int(results.get_option_at_index(i).id) for i in range(results.option_count)]
        assert shown == [r.record_id for r in expected.results]
        assert results.highlighted == 0
        text = screen_text(app)
        assert score_text(expected.results[0].score) in text


async def test_enter_expands_a_breakdown_that_adds_up(store: MemoryStore):
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await run_query(pilot, QUERY)
        pane = app.query_one(SearchPane)
        expected = hybrid_search(store, QUERY, limit=RESULT_LIMIT)
        top = expected.results[0]
        await pilot.press("enter")
        await settle(pilot)
        assert pane.expanded == {top.record_id}
        numbers = arithmetic(top, expected.trace)
        # The arithmetic shown recomputes the response's score exactly.
        assert numbers.keyword.weight == expected.trace["weights"]["keyword"]
        assert numbers.vector.weight == expected.trace["weights"]["vector"]
        assert numbers.keyword.raw == top.trace["keyword"]["raw"]
        assert abs(numbers.total - top.score) < 1e-12
        assert numbers.adds_up
        text = screen_text(app)
        assert "✓ adds up" in text
        for value in (
            numbers.keyword.raw,
            numbers.keyword.normalized,
            numbers.vector.raw,
            numbers.vector.normalized,
            top.score,
        ):
            assert num(value) in text
        # The printed parts are the true parts rounded (up or down), and they sum to the
        # printed score exactly, so a reader adding them up gets the score shown.
        kw_part, vec_part, total = numbers.shown
        assert abs(float(kw_part) - numbers.keyword.part) < 1e-4
        assert abs(float(vec_part) - numbers.vector.part) < 1e-4
        assert round(float(kw_part) * 1e4) + round(float(vec_part) * 1e4) == round(
            float(total) * 1e4
        )
        assert total == score_text(top.score)
        assert f"{kw_part} + {vec_part} = {total}" in text
        pools = expected.trace["pools"]
        assert f"pool {pools['keyword']['size']} candidates" in text
        assert f"min {num(pools['vector']['min'])}" in text
        assert "scores 0 in the other" in text
        # Per-term BM25 contributions add up to the keyword lane's raw score.
        explanation = pane.explanations[top.record_id]
        assert abs(explanation["total"] - top.trace["keyword"]["raw"]) < 1e-6
        for term in explanation["terms"]:
            assert term["term"] in text
            assert num(term["contribution"]) in text
        assert "Σ " + num(explanation["total"]) in text
        # enter again collapses it.
        await pilot.press("enter")
        await settle(pilot)
        assert pane.expanded == set()
        assert "✓ adds up" not in screen_text(app)


async def test_vector_only_result_says_keyword_scores_zero(store: MemoryStore):
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await run_query(pilot, "sqlmap")
        await pilot.press("enter")
        await settle(pilot)
        text = screen_text(app)
        assert "found by the vector lane only, so it scores 0 in the keyword lane" in text
        assert "✓ adds up" in text


async def test_what_if_weights_rerank_and_show_rank_changes(store: MemoryStore):
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await run_query(pilot, QUERY)
        pane = app.query_one(SearchPane)
        results = app.query_one(ResultList)
        base = hybrid_search(store, QUERY, limit=RESULT_LIMIT)
        for _ in range(3):
            await pilot.press("left_square_bracket")
        await settle(pilot)
        assert pane.keyword_tenths == 6
        expected = rerank(base, {"keyword": 0.6, "vector": 0.4})
        shown = [int(results.get_option_at_index(i).id) for i in range(results.option_count)]
        assert shown == [r.record_id for r in expected.results]
        assert shown != [r.record_id for r in base.results]
        text = screen_text(app)
        assert "keyword 0.6" in text and "vector 0.4" in text and "what-if" in text
        moved = next(r for r in expected.results if r.trace["previous_rank"] != r.rank)
        delta = moved.trace["previous_rank"] - moved.rank
        assert (f"↑{delta}" if delta > 0 else f"↓{-delta}") in text
        # An expanded breakdown follows the what-if weights and still adds up.
        await pilot.press("enter")
        await settle(pilot)
        text = screen_text(app)
        assert "× 0.60" in text and "× 0.40" in text and "✓ adds up" in text
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert pane.keyword_tenths == 5
        await pilot.press("equals_sign")
        await settle(pilot)
        assert pane.keyword_tenths == 3
        shown = [int(results.get_option_at_index(i).id) for i in range(results.option_count)]
        assert shown == [r.record_id for r in base.results]
        assert "(default)" in screen_text(app)


async def test_weights_stop_at_the_ends(store: MemoryStore):
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await run_query(pilot, QUERY)
        pane = app.query_one(SearchPane)
        for _ in range(12):
            await pilot.press("right_square_bracket")
        await settle(pilot)
        assert pane.keyword_tenths == 0
        assert "keyword 0.0" in screen_text(app)


async def test_scope_filter_restricts_results(store: MemoryStore):
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await run_query(pilot, QUERY)
        app.query_one("#filter-tier", Select).value = "longterm"
        await settle(pilot)
        pane = app.query_one(SearchPane)
        assert pane.filters == {"tier": "longterm"}
        assert pane.response is not None and pane.response.results
        assert {pane.records[r.record_id].tier for r in pane.response.results} == {"longterm"}
        expected = hybrid_search(store, QUERY, limit=RESULT_LIMIT, filters={"tier": "longterm"})
        assert [r.record_id for r in pane.response.results] == [
            r.record_id for r in expected.results
        ]


async def test_running_search_shows_it_is_working(store: MemoryStore, monkeypatch):
    release = threading.Event()
    real = search_view.hybrid_search

    def slow(*args, **kwargs):
        release.wait(5)
        return real(*args, **kwargs)

    monkeypatch.setattr(search_view, "hybrid_search", slow)
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash")
        await settle(pilot)
        app.query_one("#query", Input).value = QUERY
        await pilot.press("enter")
        await pilot.pause()
        results = app.query_one(ResultList)
        assert results.loading
        assert "searching…" in screen_text(app)
        release.set()
        await settle(pilot)
        assert not results.loading
        assert "searching…" not in screen_text(app)


async def test_search_errors_are_shown(store: MemoryStore, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("the index is on fire")

    monkeypatch.setattr(search_view, "hybrid_search", broken)
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await run_query(pilot, QUERY)
        assert any("the index is on fire" in n.message for n in app._notifications)
        assert "search failed" in screen_text(app)
        assert not app.query_one(ResultList).loading


async def test_empty_query_after_sanitizing_says_why(store: MemoryStore):
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await run_query(pilot, "()")
        assert "empty query" in screen_text(app)
        assert app.focused is app.query_one("#query", Input)


@pytest.mark.parametrize("query", ["sql injection", "time-based blind sql", "sqlmap", "idor"])
def test_every_breakdown_adds_up_on_screen(store: MemoryStore, query: str):
    base = hybrid_search(store, query, limit=RESULT_LIMIT)
    for tenths in range(11):
        response = rerank(base, {"keyword": tenths / 10, "vector": 1 - tenths / 10})
        for result in response.candidates:
            numbers = arithmetic(result, response.trace)
            assert numbers.adds_up, (query, tenths, result.record_id)
            kw_part, vec_part, total = numbers.shown
            units = [round(float(x) * 1e4) for x in (kw_part, vec_part, total)]
            assert units[0] + units[1] == units[2]
            assert abs(float(kw_part) - numbers.keyword.part) < 1e-4
            assert abs(float(vec_part) - numbers.vector.part) < 1e-4
            assert total == score_text(result.score)
