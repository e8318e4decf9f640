"""The Search tab: results, expandable breakdowns that add up, what-if weights.

The tab works on the app's ``MemorySource`` only: a memtui database (a ``MemoryStore``
built here and wrapped by ``make_app`` in ``NativeSource``) and a foreign store (the
LangGraph fixture) are searched, filtered and explained the same way.
"""

from __future__ import annotations

import io
import json
import re
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixtures.sources_support import LANGGRAPH, LANGGRAPH_VECTORS, copy_fixture
from rich.console import Console
from textual.widgets import Input, Select

from memtui.cli import main
from memtui.core import vector_cache
from memtui.core.arithmetic import bm25_digits, lane_places
from memtui.core.search import LanePool, SearchRequest, hybrid_search, rerank
from memtui.core.search import engine as search_engine
from memtui.core.store import MemoryStore
from memtui.sources import open_source
from memtui.sources.native import NativeSource
from memtui.tui import search_status, search_view
from memtui.tui.app import make_app
from memtui.tui.breakdown import arithmetic, render_breakdown, score_text
from memtui.tui.format import fit, plural
from memtui.tui.search_status import (
    DEFAULT_KEYWORD_TENTHS,
    Found,
    SearchPhase,
    SearchState,
    weights_from_tenths,
)
from memtui.tui.search_view import RESULT_LIMIT, ResultList, SearchPane
from memtui.tui.testing import (
    SAMPLE_CORPUS,
    build_sample_db,
    fixed_clock,
    screen_text,
    settle,
    wait_for,
)

SIZE = (120, 40)
QUERY = "sql injection"
LG_NOW = "2026-11-30T12:00:30Z"
PARIS = "lg:memories.user-1/trip%2F2026%3Aparis"


@pytest.fixture
def store(tmp_path: Path):
    path = build_sample_db(tmp_path / "sample.db")
    with MemoryStore(path, clock=fixed_clock) as opened:
        yield opened


@pytest.fixture
def langgraph(tmp_path: Path):
    source = open_source(copy_fixture(LANGGRAPH, tmp_path / "lg"), now=LG_NOW)
    try:
        yield source
    finally:
        source.close()


async def start_query(pilot, text: str) -> None:
    """Put ``text`` in the query box and press enter, without waiting for the search."""
    await pilot.press("slash")
    await settle(pilot)
    pilot.app.query_one("#query", Input).value = text
    await pilot.press("enter")


async def run_query(pilot, text: str) -> None:
    """``text`` as the query (what typing it after "/" leaves in the box: the box selects
    its text as it takes focus), enter, and the search done. Typing itself: the query box
    tests below."""
    await start_query(pilot, text)
    await settle(pilot)


class HeldProgress:
    """Wraps the app's progress callback: passes each step on, holds the build at the first."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []
        self.paused, self.release = threading.Event(), threading.Event()

    def wrap(self, progress: Callable[[int, int], None]) -> Callable[[int, int], None]:
        def step(done: int, total: int) -> None:
            progress(done, total)  # the app's callback: the status line follows
            self.seen.append((done, total))
            if not self.paused.is_set():
                self.paused.set()
                self.release.wait(10)  # hold the build so the screen can be read mid-way

        return step


def shown_ids(results: ResultList) -> list[str]:
    return [results.get_option_at_index(i).id for i in range(results.option_count)]


def native_ids(response) -> list[str]:
    """The ids the app shows for a native response: the record id, as a string."""
    return [str(r.record_id) for r in response.results]


def select_values(select: Select) -> list[str]:
    return [value for _prompt, value in select._options if isinstance(value, str)]


# ---------------------------------------------------------------- redoing a breakdown

LANE_LINE = re.compile(
    r"^\s+(keyword|vector)\s+(?:raw (\S+) → norm|not in this lane's pool → norm) "
    r"(\S+) × (\S+) = (\S+)$"
)
FORMULA_TOP = re.compile(r"^\s+norm = \(\S+ − \S+\)$")
FORMULA_LINE = re.compile(r"^\s+norm = \((\S+) − (\S+)\) / \((\S+) − (\S+)\) ≈ (\S+)$")
SCORE_LINE = re.compile(r"^\s+score\s+(\S+) \+ (\S+) = (\S+) ≈ (\S+)\s+✓ adds up")
SHARE_LINE = re.compile(r"keyword (\d+)% · vector (\d+)%")
TERM_LINE = re.compile(r"^\s+\S+\s+df\s+\d+\s+idf \S+\s+tf\s+\d+\s+→ (\S+)$")
ROUNDING_LINE = re.compile(r"^\s+\(rounding\)\s+→ ([+-]\S+)$")
SIGMA_LINE = re.compile(r"^\s+Σ (\S+) = raw (\S+) ✓")
FOUR = Decimal("0.0001")


def close_to(printed: str, other: str, places: int = 4) -> bool:
    """Two printings of the same float, ``other`` to ``places``: they agree to its rounding."""
    a, b = Decimal(printed), Decimal(other)
    return abs(a - b) <= Decimal(1).scaleb(-places) / 2 + Decimal("1e-9") + abs(b) * Decimal(
        "1e-3"
    ) * ("e" in other)


def joined_formulas(lines: list[str]) -> list[str]:
    """A normalization broken before its ``/`` (a narrow list) joined into one line."""
    joined: list[str] = []
    for line in lines:
        if joined and FORMULA_TOP.match(joined[-1]) and line.lstrip().startswith("/ ("):
            joined[-1] += " " + line.strip()
        else:
            joined.append(line)
    return joined


def redo_breakdown(text: str, listed: str) -> int:
    """Redo every line of a breakdown's arithmetic from the digits printed; the lines checked.

    ``norm N × W = P``: P is N × W exactly. ``norm = (r − lo) / (hi − lo) ≈ N``: that
    quotient rounded half up to N's places is N. ``score a + b = s ≈ x``: a and b are the
    lanes' P, s their exact sum, x is s rounded half up and is the score listed. The share
    adds up to 100 and is the keyword part's share to the percent. The BM25 terms (and
    the rounding remainder) add up exactly to Σ, which is the raw score.
    """
    lines = joined_formulas(text.splitlines())
    norms: dict[str, Decimal] = {}
    parts: dict[str, str] = {}
    raws: dict[str, str | None] = {}
    lane = None
    checked = 0
    terms: list[Decimal] = []
    score_seen = sigma_seen = False
    for line in lines:
        if m := LANE_LINE.match(line):
            lane, raw, norm, weight, part = m.groups()
            assert Decimal(norm) * Decimal(weight) == Decimal(part), line
            if raw is None:
                assert Decimal(norm) == 0, line
            norms[lane], parts[lane], raws[lane] = Decimal(norm), part, raw
            checked += 1
        elif m := FORMULA_LINE.match(line):
            raw, low, high, low_again, q = m.groups()
            assert lane is not None and low == low_again, line
            quotient = (Decimal(raw) - Decimal(low)) / (Decimal(high) - Decimal(low))
            assert quotient.quantize(Decimal(q), ROUND_HALF_UP) == Decimal(q), line
            assert Decimal(q) == norms[lane] and q.count(".") == 1, (line, norms[lane])
            assert raw == raws[lane], (line, raws[lane])
            checked += 1
        elif "norm = 1 (every score in the pool is equal)" in line:
            assert lane is not None and norms[lane] == 1, line
            checked += 1
        elif m := SCORE_LINE.match(line):
            a, b, total, rounded = m.groups()
            assert (a, b) == (parts["keyword"], parts["vector"]), line
            assert Decimal(a) + Decimal(b) == Decimal(total), line
            assert Decimal(total).quantize(FOUR, ROUND_HALF_UP) == Decimal(rounded), line
            assert rounded == listed, (line, listed)
            score_seen = True
            checked += 1
        elif m := SHARE_LINE.search(line):
            keyword, vector = (int(x) for x in m.groups())
            assert keyword + vector == 100, line
            whole = Decimal(parts["keyword"]) + Decimal(parts["vector"])
            share = 100 * Decimal(parts["keyword"]) / whole
            assert abs(share - keyword) <= Decimal("0.5"), (line, share)
            checked += 1
        elif m := TERM_LINE.match(line) or ROUNDING_LINE.match(line):
            terms.append(Decimal(m.group(1)))
        elif m := SIGMA_LINE.match(line):
            sigma, raw = m.groups()
            assert sum(terms, Decimal(0)) == Decimal(sigma), (line, terms)
            assert sigma == raw, line
            assert raws["keyword"] is not None and close_to(raw, raws["keyword"]), line
            sigma_seen = True
            checked += 1 + len(terms)
        elif not line.lstrip().startswith(("▼", "▶")):  # the result's own line
            assert "≈" not in line and " = " not in line.replace("norm = 1", ""), (
                f"a line with arithmetic this test does not redo: {line!r}"
            )
    assert score_seen, text
    if raws.get("keyword") is not None and "per-term" not in text and "could not" not in text:
        assert sigma_seen, text
    return checked


def plain(renderable, width: int = 116) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None, legacy_windows=False)
    with console.capture() as capture:
        console.print(renderable)
    return capture.get()


def breakdown_text(pane: SearchPane, record_id) -> str:
    """The result's line and expanded breakdown as the results list renders them."""
    result = next(r for r in pane.response.results if r.id == str(record_id))
    return plain(pane._prompt(result))


def corpus_queries() -> list[str]:
    """Queries made from the sample corpus: every record's first two words, tools, techniques."""
    queries = {"sql injection", "time-based blind sql", "sqlmap", "idor", "the"}
    for record in json.loads(SAMPLE_CORPUS.read_text()):
        text = record.get("content") or record.get("title") or ""
        words = re.findall(r"[a-z0-9]+", text.lower())
        queries.add(" ".join(words[:2]))
        queries.add(" ".join(words[2:5]))
        for key in ("tool", "tool_name", "technique", "type", "record_type"):
            if record.get(key):
                queries.add(str(record[key]))
    return sorted(q for q in queries if q)


async def test_query_enter_runs_search_and_enter_expands_a_breakdown_that_adds_up(
    store: MemoryStore, monkeypatch
):
    """One app and one search, each check on its own: a quick search never shows the
    loading indicator; enter in the query box runs the search and focuses the results;
    enter on the top result expands a breakdown that adds up, enter again collapses it;
    r and f on a tactic ask the app with its string id."""
    loading_seen: list[bool] = []
    asked: list[tuple[str, object]] = []
    # "Quick" made certain on a busy machine: the first search's one-time work (the vector
    # matrix) done before, and a second to end in before the indicator would show.
    hybrid_search(store, QUERY, limit=RESULT_LIMIT)
    monkeypatch.setattr(search_view, "LOADING_AFTER_SECONDS", 1.0)
    app = make_app(store, check_on_start=False)
    monkeypatch.setattr(app, "request_refute", lambda rid=None: asked.append(("refute", rid)))
    monkeypatch.setattr(app, "request_forget", lambda rid=None: asked.append(("forget", rid)))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # -- a quick search never shows the loading indicator
        await pilot.press("slash")  # the Search tab, built when first shown
        await settle(pilot)
        results = app.query_one(ResultList)
        app.watch(results, "loading", lambda value: loading_seen.append(value), init=False)
        await run_query(pilot, QUERY)
        await pilot.pause(search_view.LOADING_AFTER_SECONDS + 0.1)
        pane = app.query_one(SearchPane)
        assert pane.base is not None, "the quick search ended"
        assert loading_seen == [] and not results.loading, (
            "a quick search shows no loading indicator"
        )
        # -- enter in the query box ran the search and focused the results
        assert app.focused is results, "enter focuses the results"
        expected = hybrid_search(store, QUERY, limit=RESULT_LIMIT)
        assert shown_ids(results) == native_ids(expected), "the results are the search's"
        assert results.highlighted == 0
        assert results.current_id() == str(expected.results[0].record_id)
        # Results and records are keyed by the source's string id.
        assert [r.id for r in pane.response.results] == native_ids(expected)
        assert set(native_ids(expected)) <= set(pane.records)
        text = screen_text(app)
        assert score_text(expected.results[0].score) in text
        assert f"#{expected.results[0].record_id}" in text
        # -- enter on the top result expands a breakdown that adds up
        top = expected.results[0]
        await pilot.press("enter")
        await settle(pilot)
        assert pane.expanded == {str(top.record_id)}, "enter expands the top result"
        # The digits of `memtui search --explain`: raw scores with the decimals that every
        # merged candidate needs, however many results are shown.
        places = lane_places(expected.candidates, expected.trace.pools)
        numbers = arithmetic(top, expected.trace, places)
        # The arithmetic shown recomputes the response's score exactly.
        assert numbers.keyword.weight == expected.trace.weights["keyword"]
        assert numbers.vector.weight == expected.trace.weights["vector"]
        assert numbers.keyword.raw == top.trace.keyword.raw
        assert abs(numbers.total - top.score) < 1e-12
        assert numbers.adds_up, "the breakdown adds up"
        text = screen_text(app)
        assert "✓ adds up" in text
        shown = numbers.printed
        keyword, vector = shown.steps
        for step in shown.steps:
            assert f"raw {step.raw} → norm {step.normalized} × {step.weight} = {step.part}" in text
        # The printed norms are the true ones to six places; each part is the exact
        # product of the printed norm and weight, and the parts' exact sum rounds to
        # the score listed.
        for step, lane in zip(shown.steps, (numbers.keyword, numbers.vector), strict=True):
            assert abs(float(step.normalized) - lane.normalized) <= 5e-7
        assert shown.listed == score_text(top.score)
        assert f"{keyword.part} + {vector.part} = {shown.total} ≈ {shown.listed}" in text
        assert redo_breakdown(breakdown_text(pane, top.record_id), score_text(top.score)) >= 8
        pools = expected.trace.pools
        assert f"pool {pools['keyword'].size} candidates" in text
        assert f"min {vector.low}" in text
        assert "scores 0 in the other" in text
        # Per-term BM25 contributions add up to the keyword lane's raw score.
        explanation = pane.explanations[str(top.record_id)]
        assert abs(explanation["total"] - top.trace.keyword.raw) < 1e-6
        for term in explanation["terms"]:
            assert term["term"] in text
        total = bm25_digits(explanation).total
        assert f"Σ {total} = raw {total} ✓" in text
        # enter again collapses it.
        await pilot.press("enter")
        await settle(pilot)
        assert pane.expanded == set(), "enter again collapses it"
        assert "✓ adds up" not in screen_text(app)
        # -- r and f on a result ask the app with its string id
        kinds = [pane.records[r.id].record_type for r in pane.response.results]
        results.highlighted = kinds.index("tactic")  # r applies to a live tactic
        await settle(pilot)
        target = results.current_id()
        assert isinstance(target, str) and target.isdigit(), target
        text = screen_text(app)
        assert "Refute" in text and "Forget" in text, "offered by a memtui database"
        await pilot.press("r")
        await pilot.press("f")
        await settle(pilot)
        assert asked == [("refute", target), ("forget", target)], "r and f ask the app"


async def test_slash_selects_the_query_and_escape_leaves_the_box_so_the_digits_switch_tabs(
    store: MemoryStore,
):
    """One app, each check on its own: "/" in the query box selects the query instead of
    typing; escape leaves the box for the results, so the digits switch tabs."""
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # -- "/" in the query box selects the query
        await pilot.press("2")  # the Search tab focuses the query box
        await settle(pilot)
        query = app.query_one("#query", Input)
        assert app.focused is query
        await pilot.press("slash")  # "/" means the query box here too: no slash typed
        for char in "sql":
            await pilot.press(char)
        assert query.value == "sql"
        await pilot.press("slash", "x", "s", "s")  # selected, so the typing replaces it
        assert query.value == "xss", "typing replaces the selected query"
        # -- escape leaves the query box (emptied: as if new) so the digits switch tabs
        query.value = ""
        await pilot.press("slash")
        await settle(pilot)
        assert app.focused is query
        assert "esc Leave box" in screen_text(app).splitlines()[-1]
        await pilot.press("3")  # types into the box
        assert query.value == "3" and app.active_tab == "search"
        await pilot.press("escape")
        await settle(pilot)
        assert app.focused is app.query_one(ResultList)
        await pilot.press("3")
        await settle(pilot)
        assert app.active_tab == "lanes"
        # After a search too: escape leaves the box for the results.
        await pilot.press("slash")
        await settle(pilot)
        query.value = QUERY
        await pilot.press("enter")
        await settle(pilot)
        query.focus()
        await pilot.press("escape")
        await settle(pilot)
        assert app.focused is app.query_one(ResultList)
        assert query.value == QUERY


async def test_vector_only_result_says_keyword_scores_zero_and_an_empty_query_says_why(
    store: MemoryStore, monkeypatch
):
    """One app, each check on its own: a vector-only result's breakdown says the keyword
    lane scores it 0; a query empty after sanitizing says so and keeps the query box; a
    search that fails says so."""
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # -- a result found by the vector lane only
        await run_query(pilot, "sqlmap")
        await pilot.press("enter")
        await settle(pilot)
        text = screen_text(app)
        assert "found by the vector lane only, so it scores 0 in the keyword lane" in text
        assert "✓ adds up" in text, "the vector-only breakdown adds up"
        # -- an empty query after sanitizing
        await run_query(pilot, "()")
        assert "empty query" in screen_text(app), "an empty query says why"
        assert app.focused is app.query_one("#query", Input), "the query box keeps the focus"

        # -- a search that fails says why
        def broken(*args, **kwargs):
            raise RuntimeError("the index is on fire")

        monkeypatch.setattr(app.source, "search", broken)
        app.query_one("#query", Input).value = ""
        await run_query(pilot, QUERY)
        assert any("the index is on fire" in n.message for n in app._notifications), "notified"
        assert "search failed" in screen_text(app), "the status line says the search failed"
        assert not app.query_one(ResultList).loading


class BeaconEmbedder:
    """Points a text with "beacon" in it, and the test's queries, one way; the rest another.

    So a record can top the vector lane whatever its BM25 is.
    """

    name = "beacon-8"
    dim = 8
    QUERIES = ("zebra", "zebra stripes")

    def __call__(self, texts):
        near, far = [1.0] + [0.0] * 7, [0.0, 1.0] + [0.0] * 6
        return [near if "beacon" in t or t in self.QUERIES else far for t in texts]


async def test_a_record_the_keyword_lane_left_out_says_why(tmp_path: Path):
    """Not "no query term occurs" for every such record: which terms occur, and a match
    outside the keyword pool is called that."""
    embedder = BeaconEmbedder()
    with MemoryStore(tmp_path / "pool.db", clock=fixed_clock, embedder=embedder) as store:
        for i in range(150):
            store.add_record(tier="knowledge", record_type="note", content=f"filler note {i}")
        for i in range(106):
            store.add_record(tier="knowledge", record_type="note", content=f"zebra {i}")
        filler = " ".join(f"word{i}" for i in range(60))
        target = store.add_record(
            tier="knowledge", record_type="note", content=f"zebra beacon {filler}"
        )
        app = make_app(store, embedder=embedder, check_on_start=False)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await run_query(pilot, "zebra")
            pane = app.query_one(SearchPane)
            assert pane.response.trace.pools["keyword"].size == 100
            assert pane.results.current_id() == str(target)
            await pilot.press("enter")
            await settle(pilot)
            text = plain(pane._prompt(pane.response.results[0]), width=200)
            assert "no query term occurs" not in text
            assert (
                "every query term occurs here: a keyword match, but outside the keyword pool of 100"
                in text
            )
            assert "the lane keeps the top 100 of 107 matches by BM25" in text
            assert redo_breakdown(text, score_text(pane.response.results[0].score)) >= 4
            # A term missing: every term is required.
            app.query_one("#query", Input).value = ""
            await run_query(pilot, "zebra stripes")
            assert pane.results.current_id() == str(target)
            await pilot.press("enter")
            await settle(pilot)
            text = plain(pane._prompt(pane.response.results[0]), width=200)
            assert "occurs: zebra · missing: stripes" in text
            assert "every term is required, so it is not a keyword match" in text


async def test_what_if_weights_rerank_and_show_rank_changes_and_stop_at_the_ends(
    store: MemoryStore,
):
    """[ and ] move weight and re-rank, = restores the defaults; ] held at the end of the
    range stops there and says so once."""
    app = make_app(store, check_on_start=False)
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
        assert shown_ids(results) == native_ids(expected)
        assert shown_ids(results) != native_ids(base)
        text = screen_text(app)
        assert "keyword 0.6" in text and "vector 0.4" in text and "what-if" in text
        moved = next(r for r in expected.results if r.trace.previous_rank != r.rank)
        delta = moved.trace.previous_rank - moved.rank
        assert (f"↑{delta}" if delta > 0 else f"↓{-delta}") in text
        # An expanded breakdown follows the what-if weights and still adds up.
        await pilot.press("enter")
        await settle(pilot)
        text = screen_text(app)
        assert "× 0.6 = " in text and "× 0.4 = " in text and "✓ adds up" in text
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert pane.keyword_tenths == 5
        await pilot.press("equals_sign")
        await settle(pilot)
        assert pane.keyword_tenths == 3
        assert shown_ids(results) == native_ids(base)
        assert "(default)" in screen_text(app)
        # The weights stop at the ends; a held ] at the end of the range does not stack
        # identical toasts (none said so before: the range's end was not reached above).
        assert not [n for n in app._notifications if "end of their range" in n.message]
        for _ in range(12):
            await pilot.press("right_square_bracket")
        await settle(pilot)
        assert pane.keyword_tenths == 0, "the weights stop at the vector end"
        assert "keyword 0.0" in screen_text(app), "the weights stop at the vector end"
        notes = [n for n in app._notifications if "end of their range" in n.message]
        assert len(notes) == 1, "the end of the weight range says so once"


async def test_native_scope_selects_keep_their_ids_and_values_and_filter_results(
    store: MemoryStore,
):
    """One app, each check on its own: the filters a memtui database offers, the profile
    filter wide enough to tell fingerprints apart, an engagement then a tier filter
    restricting the results; a new scope written by another process shows up in the
    filters and marks the results stale."""
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash")
        await settle(pilot)
        bar = [w.id for w in app.query("#search-bar > *")]
        assert bar == ["query", "filter-tier", "filter-engagement", "filter-profile"]
        engagement = app.query_one("#filter-engagement", Select)
        profile = app.query_one("#filter-profile", Select)
        assert select_values(engagement) == store.engagements(), "engagement choices"
        assert select_values(profile) == store.profiles(), "profile choices"
        # -- the profile filter is wide enough to tell fingerprints apart
        assert profile.size.width >= 40, "profile filter width"
        labels = [str(prompt) for prompt, value in profile._options if isinstance(value, str)]
        values = select_values(profile)
        assert len(values) >= 5
        for label, value in zip(labels, values, strict=True):
            assert len(label) >= min(len(value), 32), label
        # Each label keeps both ends of its fingerprint (they differ at either end).
        for label, value in zip(labels, values, strict=True):
            head, _, tail = label.partition("…")
            assert value.startswith(head) and value.endswith(tail), (label, value)
        # -- an engagement filter restricts the results
        pane = app.query_one(SearchPane)
        pane.query_one("#query", Input).value = QUERY
        await pilot.press("enter")
        await settle(pilot)
        target = store.engagements()[0]
        engagement.value = target
        await settle(pilot)
        assert pane.filters == {"engagement": target}, "the engagement filter"
        expected = hybrid_search(store, QUERY, limit=RESULT_LIMIT, filters={"engagement": target})
        assert [r.id for r in pane.response.results] == native_ids(expected)
        assert {pane.records[r.id].scope["engagement"] for r in pane.response.results} == {target}
        # -- a tier filter restricts the results (the engagement filter cleared first)
        engagement.clear()
        await settle(pilot)
        assert pane.filters == {}, "no filter"
        app.query_one("#filter-tier", Select).value = "longterm"
        await settle(pilot)
        assert pane.filters == {"tier": "longterm"}, "the tier filter"
        assert pane.response is not None and pane.response.results, "tier filter results"
        assert {pane.records[r.id].tier for r in pane.response.results} == {"longterm"}
        expected = hybrid_search(store, QUERY, limit=RESULT_LIMIT, filters={"tier": "longterm"})
        assert [r.id for r in pane.response.results] == native_ids(expected), "tier filter"
        # -- another process adds a new scope: it shows up in the filters, and the results
        # stay, marked stale (the search unfiltered again first, as if new)
        app.query_one("#filter-tier", Select).clear()
        await settle(pilot)
        assert pane.filters == {} and not pane.results_stale, "no filter"
        before = list(pane.response.results)
        script = (
            "import sys\nfrom memtui.core.store import MemoryStore\n"
            "with MemoryStore(sys.argv[1], operator='agent') as s:\n"
            "    s.add_record(tier='working', record_type='note', content='sql injection again',"
            " engagement='brand-new-engagement')\n"
        )
        subprocess.run([sys.executable, "-c", script, str(store.path)], check=True, timeout=60)
        pane.database_changed(True)
        await settle(pilot)
        select = app.query_one("#filter-engagement", Select)
        assert "brand-new-engagement" in select_values(select), "a new scope is offered"
        assert "brand-new-engagement" in pane.choices["engagement"]
        assert pane.results_stale, "the results are marked stale"
        assert [r.id for r in pane.response.results] == [r.id for r in before]
        assert "database changed — F5 re-runs the search" in screen_text(app)


async def test_running_search_shows_it_is_working(store: MemoryStore, monkeypatch):
    """The status line says "searching…" at once; the loading indicator waits for its
    timer (``LOADING_AFTER_SECONDS``). The timer is held and fired by the test, so a busy
    machine cannot fire it before the screen is read."""
    release = threading.Event()
    app = make_app(store, check_on_start=False)
    real = app.source.search

    def slow(*args, **kwargs):
        release.wait(5)
        return real(*args, **kwargs)

    monkeypatch.setattr(app.source, "search", slow)
    held: list = []
    schedule = SearchPane.set_timer

    def hold(self, delay, callback=None, **kwargs):
        if delay == search_view.LOADING_AFTER_SECONDS:
            held.append(callback)
            return None
        return schedule(self, delay, callback, **kwargs)

    monkeypatch.setattr(SearchPane, "set_timer", hold)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await start_query(pilot, QUERY)
        await pilot.pause()
        results = app.query_one(ResultList)
        assert "searching…" in screen_text(app)
        assert len(held) == 1
        assert not results.loading  # the indicator waits: most searches end sooner
        held[0]()  # the search is still running when its timer fires
        await pilot.pause()
        assert results.loading
        # The native keyword index is always ready: nothing to build.
        assert "building the keyword index" not in screen_text(app)
        release.set()
        await settle(pilot)
        assert not results.loading
        assert "searching…" not in screen_text(app)
        held[0]()  # a timer firing after its search ended shows nothing
        await pilot.pause()
        assert not results.loading


def lane_that_waits_for_cancel(seen: list[str], release: threading.Event):
    """A keyword lane as slow as a common word at a million rows: it runs until cancelled."""

    def lane(store, match, filters, pool_size, cancelled=None):
        seen.append(match)
        deadline = time.monotonic() + 10
        while not (cancelled and cancelled()) and not release.is_set():
            assert time.monotonic() < deadline, "the search was never cancelled"
            time.sleep(0.005)
        seen.append("cancelled")
        raise sqlite3.OperationalError("interrupted")

    return lane


async def test_escape_stops_a_running_search(store: MemoryStore, monkeypatch):
    seen: list[str] = []
    release = threading.Event()
    real_lane = search_engine.keyword_lane
    monkeypatch.setattr(search_engine, "keyword_lane", lane_that_waits_for_cancel(seen, release))
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await start_query(pilot, QUERY)
        await wait_for(pilot, lambda: bool(seen))
        pane = app.query_one(SearchPane)
        assert pane.searching and "(esc stops it)" in screen_text(app)
        await pilot.press("escape")
        await settle(pilot)  # the worker ends: the lane saw the cancel
        assert seen[-1] == "cancelled" and not pane.searching and pane.stopped
        text = screen_text(app)
        assert "search stopped" in text and "Search stopped. Press enter" in text
        assert not app.query_one(ResultList).loading and pane.base is None
        # escape means nothing once nothing runs; enter runs the search again, whole
        monkeypatch.setattr(search_engine, "keyword_lane", real_lane)
        await pilot.press("escape")
        app.query_one("#query", Input).focus()
        await pilot.press("enter")
        await settle(pilot)
        assert pane.base is not None and pane.response.results and not pane.stopped
        assert "search stopped" not in screen_text(app)
    release.set()


async def test_a_new_search_cancels_the_one_still_running(store: MemoryStore, monkeypatch):
    seen: list[str] = []
    release = threading.Event()
    real_lane = search_engine.keyword_lane
    slow = lane_that_waits_for_cancel(seen, release)

    def first_slow(store, match, *args, **kwargs):
        if not seen:
            return slow(store, match, *args, **kwargs)
        seen.append(match)
        return real_lane(store, match, *args, **kwargs)

    monkeypatch.setattr(search_engine, "keyword_lane", first_slow)
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await start_query(pilot, "never finishes")
        await wait_for(pilot, lambda: bool(seen))
        app.query_one("#query", Input).value = QUERY
        await pilot.press("enter")
        await settle(pilot)
        pane = app.query_one(SearchPane)
        assert "cancelled" in seen and len(seen) == 3 and pane.query_text == QUERY
        assert "search failed" not in screen_text(app)
        assert pane.response is not None and pane.response.results
        assert pane.response.trace.input == QUERY
    release.set()


async def test_the_first_vector_search_shows_the_vector_cache_build(store, monkeypatch):
    """The matrix build a first vector search waits for is on the status line, stoppable."""
    monkeypatch.setattr(vector_cache, "BUILD_CHUNK", 16)
    monkeypatch.setattr(search_view, "QUIET_BUILD_SECONDS", 0.0)  # as if it took long
    held = HeldProgress()
    seen, paused, release = held.seen, held.paused, held.release
    app = make_app(store, check_on_start=False)
    real = app.source.search

    def search(request, **options):
        request = SearchRequest.of(request, **options)
        return real(request.but(vector_progress=held.wrap(request.vector_progress)))

    monkeypatch.setattr(app.source, "search", search)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await start_query(pilot, QUERY)
        try:
            await wait_for(pilot, paused.is_set)
            await pilot.pause()
            done, total = seen[0]
            assert 0 < done < total
            text = screen_text(app)
            assert f"building the vector cache: {done:,}/{total:,} (esc stops it)" in text
        finally:
            release.set()
        await settle(pilot)
        assert seen[-1][0] == seen[-1][1]
        pane = app.query_one(SearchPane)
        assert pane.response.results and pane.build_progress is None
        assert "building the vector cache" not in screen_text(app)


SCREEN_QUERIES = ("sql injection", "time-based blind sql", "idor")
"""Queries whose breakdowns are also rendered as the results list renders them: with the
response's raw-score places and the list's width (``LIST_WIDTH``)."""
LIST_WIDTH = 112
"""The room a breakdown has in the results list at 120 columns (the Pilot test below
reads it from the list)."""


def parts_add_up(result, trace) -> bool:
    """The lanes' weight × normalized score add up to the result's score, in floats (what
    the breakdown's ✓ claims besides its printed digits, which ``redo_breakdown`` redoes)."""
    weights = result.trace.weights or trace.weights
    keyword, vector = (
        float(weights.get(lane, 0.0)) * float(result.trace.lane(lane).normalized or 0.0)
        for lane in ("keyword", "vector")
    )
    return abs(keyword + vector - float(result.score)) <= 1e-9


def app_places(response) -> dict[str, int]:
    """The raw-score places the results list gives the breakdowns of ``response``."""
    return lane_places(response.candidates or response.results, response.trace.pools)


@pytest.mark.starts_first
def test_every_breakdown_redoes_from_its_printed_digits(store: MemoryStore):
    """Every sample-corpus query, every what-if weight, every result: each printed line's
    arithmetic redone from the printed digits (``redo_breakdown``); the queries in
    ``SCREEN_QUERIES`` also with the app's raw-score places and the list's width, the
    breakdown the results list shows (the Pilot test below checks it is that one)."""
    source = NativeSource(store)
    queries = corpus_queries()
    assert len(queries) > 100
    assert set(SCREEN_QUERIES) <= set(queries)
    lines = breakdowns = 0
    for query in queries:
        base = source.search(query, limit=RESULT_LIMIT)
        explanations: dict[str, dict] = {}
        places = lane_places(base.candidates, base.trace.pools)
        for tenths in range(11):
            response = source.rerank(base, {"keyword": tenths / 10, "vector": 1 - tenths / 10})
            for result in response.results:
                if result.id not in explanations:
                    explanations[result.id] = source.explain(query, result.id)
                explanation = explanations[result.id]
                where = (query, tenths, result.id)
                assert parts_add_up(result, response.trace), where
                text = render_breakdown(result, response.trace, explanation).plain
                # The ✓ is printed when ``arithmetic(result, trace).adds_up``.
                assert "✓ adds up" in text, (where, text)
                lines += redo_breakdown(text, score_text(result.score))
                breakdowns += 1
                if query in SCREEN_QUERIES:
                    # The search's places, and the list's: the places of the response shown.
                    for digits, width in ((places, None), (app_places(response), LIST_WIDTH)):
                        shown = render_breakdown(
                            result, response.trace, explanation, digits, width
                        ).plain
                        assert redo_breakdown(shown, score_text(result.score)) >= 4, shown
    assert breakdowns > 10_000 and lines > 5 * breakdowns


@pytest.mark.starts_first
async def test_breakdowns_on_screen_redo_at_every_weight(store: MemoryStore):
    """Through the keys: ``]`` to the vector end then ``[`` to the keyword end, every
    weight reached. At each the list re-ranks as the source does, and each expanded
    breakdown (the top result's and the last's) is the renderer's for the response shown,
    its explanation, the response's raw-score places and the list's width, and redoes
    from its digits. That renderer at every weight, for every result, with those places
    and that width: ``test_every_breakdown_redoes_from_its_printed_digits`` above."""
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await run_query(pilot, SCREEN_QUERIES[0])
        pane = app.query_one(SearchPane)
        results = app.query_one(ResultList)
        base = pane.response
        for index in (0, results.option_count - 1):
            results.highlighted = index
            await pilot.press("enter")
        await settle(pilot)
        assert pane.expanded == {base.results[0].id, base.results[-1].id}
        seen = set()
        for key in ["right_square_bracket"] * 3 + ["left_square_bracket"] * 10:
            await pilot.press(key)
            await settle(pilot)
            seen.add(pane.keyword_tenths)
            weights = {"keyword": pane.keyword_tenths / 10}
            weights["vector"] = 1 - weights["keyword"]
            assert pane.response.trace.weights == pytest.approx(weights)
            assert [r.id for r in pane.response.results] == [
                r.id for r in app.source.rerank(base, weights).results
            ]
            expanded = [r for r in pane.response.results if r.id in pane.expanded]
            assert expanded, pane.keyword_tenths
            # The option's padding takes a cell either side of the list's width.
            assert results.scrollable_content_region.width - 2 == LIST_WIDTH
            places = app_places(pane.response)
            for result in expanded:
                prompt = pane._prompt(result)
                breakdown = render_breakdown(
                    result, pane.response.trace, pane.explanations[result.id], places, LIST_WIDTH
                )
                assert prompt.renderables[1].plain == breakdown.plain, pane.keyword_tenths
                text = breakdown_text(pane, result.id)
                assert redo_breakdown(text, score_text(result.score)) >= 4, text
        assert seen == set(range(11))


# ---------------------------------------------------------------- a foreign source


async def test_foreign_source_builds_its_index_with_progress_then_results_add_up(
    langgraph, monkeypatch
):
    assert langgraph.index_status()["ready"] is False
    real_build = langgraph.build_index
    held = HeldProgress()
    seen, paused, release = held.seen, held.paused, held.release

    def build(progress=None):
        return real_build(held.wrap(progress))

    monkeypatch.setattr(langgraph, "build_index", build)
    app = make_app(langgraph, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await start_query(pilot, "paris trip")
        try:
            await wait_for(pilot, paused.is_set)
            await pilot.pause()
            done, total = seen[0]
            assert total > 0
            text = screen_text(app)
            assert f"building the keyword index: {done}/{total}" in text
            await pilot.pause(search_view.LOADING_AFTER_SECONDS + 0.1)
            assert app.query_one(ResultList).loading
        finally:
            release.set()
        await settle(pilot)
        assert langgraph.index_status()["ready"] is True
        text = screen_text(app)
        assert "building the keyword index" not in text
        pane = app.query_one(SearchPane)
        expected = langgraph.search("paris trip", limit=RESULT_LIMIT)
        assert expected.results
        assert [r.id for r in pane.response.results] == [r.id for r in expected.results]
        assert shown_ids(app.query_one(ResultList)) == [r.id for r in expected.results]
        assert pane.response.results[0].id == PARIS
        assert pane.records[PARIS].content.startswith("Planning a trip to Paris")
        for result in pane.response.results:
            assert arithmetic(result, pane.response.trace).adds_up
        # The foreign id is on screen as is (cut in the middle to fit its column).
        assert fit(PARIS, pane.id_width).plain in text
        assert "#" + PARIS not in text
        # The breakdown adds up, and the per-term BM25 split sums to the keyword raw.
        await pilot.press("enter")
        await settle(pilot)
        assert pane.expanded == {PARIS}
        text = screen_text(app)
        assert "✓ adds up" in text
        explanation = pane.explanations[PARIS]
        top = pane.response.results[0]
        assert {t["term"] for t in explanation["terms"]} == {"paris", "trip"}
        assert abs(explanation["total"] - top.trace.keyword.raw) < 1e-6
        assert f"Σ {bm25_digits(explanation).total} = raw " in text
        # No stored vectors: the fallback reason is shown, the weights cannot move.
        assert "(fallback: keyword only)" in text
        assert "has no stored vectors" in text
        await pilot.press("left_square_bracket")
        await settle(pilot)
        assert pane.keyword_tenths == 3
        assert any("cannot move" in str(n.message) for n in app._notifications)


async def test_escape_during_a_foreign_index_build_says_the_build_goes_on(langgraph, monkeypatch):
    real_build = langgraph.build_index
    held = HeldProgress()
    monkeypatch.setattr(
        langgraph, "build_index", lambda progress=None: real_build(held.wrap(progress))
    )
    app = make_app(langgraph, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await start_query(pilot, "paris trip")
        try:
            await wait_for(pilot, held.paused.is_set)
            await pilot.pause()
            assert "(esc stops waiting)" in screen_text(app)
            await pilot.press("escape")
            await pilot.pause()
            text = screen_text(app)
            assert "search stopped · the keyword index goes on building, for the next" in text
        finally:
            held.release.set()
        await settle(pilot)  # the build finished in the stopped worker; nothing was shown
        assert langgraph.index_status()["ready"] is True
        pane = app.query_one(SearchPane)
        assert pane.stopped and pane.base is None
        app.query_one("#query", Input).focus()
        await pilot.press("enter")
        await settle(pilot)
        assert pane.response.results and pane.response.results[0].id == PARIS
        assert "search stopped" not in screen_text(app)


async def test_foreign_vectors_without_an_embedder_fall_back_with_the_reason(tmp_path):
    source = open_source(copy_fixture(LANGGRAPH_VECTORS, tmp_path / "lgv"), now=LG_NOW)
    try:
        app = make_app(source, check_on_start=False)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await run_query(pilot, "paris trip")
            pane = app.query_one(SearchPane)
            assert pane.response is not None and pane.response.results
            reason = pane.response.trace.fallback
            assert reason.startswith("no embedder for these 8-dim vectors")
            await pilot.press("enter")
            await settle(pilot)
            text = screen_text(app)
            assert "(fallback: keyword only)" in text
            assert "fallback: no embedder for these 8-dim vectors" in text
            assert "✓ adds up" in text
    finally:
        source.close()


async def test_foreign_results_offer_only_what_the_source_can_do_and_filter_by_its_scopes(
    langgraph, monkeypatch
):
    """One app, each check on its own: a LangGraph result offers forget, not refute; the
    filters come from the source's scope keys and its data."""
    app = make_app(langgraph, check_on_start=False)
    asked: list[object] = []
    monkeypatch.setattr(app, "request_refute", lambda rid=None: asked.append(rid))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # -- the results offer only what the source can do
        await run_query(pilot, "paris trip")
        results = app.query_one(ResultList)
        assert app.focused is results and results.current_id() == PARIS
        assert not app.offers("refute") and app.offers("forget")
        assert results.check_action("refute", ()) is False
        assert results.check_action("forget", ()) is True
        text = screen_text(app)
        assert "Refute" not in text and "Forget" in text
        await pilot.press("r")
        await settle(pilot)
        assert asked == [], "r is not offered"
        # -- the filters come from the source's scope keys and data
        bar = [w.id for w in app.query("#search-bar > *")]
        assert bar == ["query", "filter-tier", "filter-namespace"]
        assert not app.query("#filter-profile") and not app.query("#filter-engagement")
        namespace = app.query_one("#filter-namespace", Select)
        assert select_values(namespace) == langgraph.scope_values("namespace")
        # LangGraph declares no tiers: the tier choices come from its data.
        tier = app.query_one("#filter-tier", Select)
        assert select_values(tier) == ["memories", "profile", "scratch"]
        pane = app.query_one(SearchPane)
        pane.query_one("#query", Input).value = "a"
        pane.query_one("#query", Input).focus()  # the results had it
        await pilot.press("enter")
        await settle(pilot)
        everywhere = {r.id for r in pane.response.results}
        assert {pane.records[i].tier for i in everywhere} == {"memories", "scratch"}
        tier.value = "scratch"
        await settle(pilot)
        assert pane.filters == {"tier": "scratch"}
        assert [r.id for r in pane.response.results] == ["lg:scratch/later"]
        tier.clear()
        await settle(pilot)
        pane.query_one("#query", Input).value = "user"
        pane.query_one("#query", Input).focus()
        await pilot.press("enter")
        await settle(pilot)
        assert len(pane.response.results) == 2
        namespace.value = "memories.user-2"
        await settle(pilot)
        assert pane.filters == {"namespace": "memories.user-2"}
        expected = langgraph.search(
            "user", limit=RESULT_LIMIT, filters={"namespace": "memories.user-2"}
        )
        assert [r.id for r in pane.response.results] == [r.id for r in expected.results]
        assert [pane.records[r.id].scope["namespace"] for r in pane.response.results] == [
            "memories.user-2"
        ]


def status_line(app) -> str:
    lines = screen_text(app).splitlines()
    at = next(i for i, line in enumerate(lines) if "keyword" in line and "vector" in line)
    assert lines[at + 1].lstrip().startswith("╭─ results")  # nothing wrapped below it
    return lines[at].strip()


def add_zebrafish(store: MemoryStore) -> None:
    """A refuted tactic and a note with "zebrafish": a search that leaves one out."""
    tactic = store.record_success(
        profile_hash="a:b:c", tool="t", endpoint="/zebra", param="q", content="zebrafish probe"
    )
    store.refute(tactic, reason="wrong", operator="tester")
    store.add_record(tier="knowledge", record_type="note", content="zebrafish notes")


def big_store_numbers(trace) -> None:
    """A 50k database's numbers in ``trace``."""
    trace.truncated = True
    trace.candidates = 1_625
    trace.pools = {"keyword": LanePool(size=100), "vector": LanePool(size=100)}
    trace.excluded = {"refuted": 412, "expired": 213, "out_of_scope": 0}


def check_fits(status: str, width: int) -> None:
    """A status line fits a terminal ``width`` columns wide, nothing cut."""
    assert not status.endswith("…") and len(status) <= width - 2, (width, status)


@pytest.mark.parametrize("width", [80, 120, 160])
def test_the_status_line_fits_and_says_what_it_left_out(store: MemoryStore, width: int):
    """The weights, the count and what was left out (only the reasons that are not zero)
    fit at 120 columns with the pools; at 80 the wording shortens, nothing is cut. The
    line ``status_line`` draws for the Search tab's state after each search (the Pilot
    test below: the app shows it, at 80 columns; its room is the width less 2)."""
    add_zebrafish(store)
    source = NativeSource(store)

    def line(base, tenths: int = DEFAULT_KEYWORD_TENTHS) -> str:
        response = base
        if tenths != DEFAULT_KEYWORD_TENTHS:
            response = source.rerank(base, weights_from_tenths(tenths))
        found = Found.of(base, response)
        state = SearchState(phase=SearchPhase.DONE, keyword_tenths=tenths, found=found)
        return search_status.status_line(state, width - 2).plain

    base = source.search("zebrafish", limit=RESULT_LIMIT)
    status = line(base)
    check_fits(status, width)
    assert "keyword 0.3 · vector 0.7" in status
    excluded = {k: v for k, v in base.trace.excluded.items() if v}
    total = sum(excluded.values())
    assert excluded and plural(len(base.results), "result") in status
    if width >= 120:
        reasons = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in excluded.items())
        vectors = base.trace.pools["vector"].size
        assert f"{total} left out: {reasons} · pools: keyword 1, vector {vectors}" in status
    else:
        assert f"{total} left out" in status
    # A tier filter: most matches are out of scope.
    base = source.search(QUERY, limit=RESULT_LIMIT, filters={"tier": "longterm"})
    status = line(base)
    check_fits(status, width)
    excluded = {k: v for k, v in base.trace.excluded.items() if v}
    assert "out_of_scope" in excluded
    if width >= 120:
        assert f"{excluded['out_of_scope']} out of scope" in status and "pools:" in status
    # A big store's numbers (a 50k database's): still one line that fits.
    big_store_numbers(base.trace)
    status = line(base, 6)  # what-if weights say so
    check_fits(status, width)
    assert "keyword 0.6 · vector 0.4" in status and "what-if" in status
    assert "of 1,625 results" in status and "625 left out" in status
    if width >= 120:
        assert "625 left out: 412 refuted, 213 expired" in status
        assert "out of scope" not in status  # a zero reason is not listed


async def test_the_app_shows_the_status_line_for_its_state_in_its_width(store: MemoryStore):
    """At 80 columns, after a search that left a record out, a filtered search and the
    re-ranking of a big store's numbers: the line on screen is ``status_line`` of the
    tab's state in the width less 2, the state of the search the source runs, nothing
    wrapped under it; what it says at each width: the test above."""
    width = 80
    add_zebrafish(store)
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=(width, 40)) as pilot:
        await settle(pilot)
        await run_query(pilot, "zebrafish")
        pane = app.query_one(SearchPane)
        expected = app.source.search("zebrafish", limit=RESULT_LIMIT)
        assert [r.id for r in pane.base.results] == [r.id for r in expected.results]
        assert pane.state.found == Found.of(expected, expected)
        assert pane.state.phase is SearchPhase.DONE
        assert pane.keyword_tenths == DEFAULT_KEYWORD_TENTHS
        status = status_line(app)
        assert status == search_status.status_line(pane.state, width - 2).plain
        check_fits(status, width)
        assert "keyword 0.3 · vector 0.7" in status
        assert plural(len(pane.response.results), "result") in status
        assert f"{sum(pane.base.trace.excluded.values())} left out" in status
        # A tier filter: most matches are out of scope.
        app.query_one("#filter-tier", Select).value = "longterm"
        app.query_one("#query", Input).value = ""
        await run_query(pilot, QUERY)
        expected = app.source.search(QUERY, limit=RESULT_LIMIT, filters={"tier": "longterm"})
        assert pane.state.found == Found.of(expected, expected)
        status = status_line(app)
        assert status == search_status.status_line(pane.state, width - 2).plain
        check_fits(status, width)
        # A big store's numbers (a 50k database's): still one line that fits.
        big_store_numbers(pane.base.trace)
        pane.keyword_tenths = 6  # what-if weights say so
        pane._rerank()
        await settle(pilot)
        assert pane.state.found == Found.of(pane.base, pane.response)
        status = status_line(app)
        assert status == search_status.status_line(pane.state, width - 2).plain
        check_fits(status, width)
        assert "keyword 0.6 · vector 0.4" in status and "what-if" in status
        assert "of 1,625 results" in status and "625 left out" in status


async def test_the_tier_column_fits_the_sources_longest_tier_name(tmp_path: Path):
    """A preferences store's "preference" tier is shown whole, not cut to "preferenc"."""
    from fixtures.sources_support import PREFERENCES

    source = open_source(copy_fixture(PREFERENCES, tmp_path / "prefs"))
    try:
        app = make_app(source, check_on_start=False)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await run_query(pilot, "qwphlumbix")
            pane = app.query_one(SearchPane)
            tiers = {pane.records[r.id].tier for r in pane.response.results}
            assert "preference" in tiers
            assert pane.tier_width == len("preference")
            text = screen_text(app).splitlines()
            header = next(i for i, line in enumerate(text) if "score KV tier" in line)
            lines = [line for line in text[header + 1 :] if " preference " in line]
            assert lines and not any("preferenc " in line for line in text[header + 1 :])
            assert text[header].index("tier") == lines[0].index("preference")  # aligned
    finally:
        source.close()


async def test_plus_shows_more_results_and_a_new_query_starts_at_the_first_page(
    store: MemoryStore,
):
    from memtui.tui.search_view import RESULT_LIMIT

    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await run_query(pilot, "items api injection")
        pane = app.query_one(SearchPane)
        first = [r.id for r in pane.response.results]
        assert len(first) == RESULT_LIMIT and pane.response.trace.truncated
        results = app.query_one(ResultList)
        assert app.focused is results
        results.highlighted = 3
        kept = results.current_id()
        await pilot.press("plus")
        await settle(pilot)
        more = [r.id for r in pane.response.results]
        assert more[:RESULT_LIMIT] == first and len(more) > RESULT_LIMIT
        assert results.current_id() == kept  # the place is kept
        assert f"{len(more)} of" in screen_text(app) or not pane.response.trace.truncated
        assert "+ More" in screen_text(app).splitlines()[-1] or len(more) < 2 * RESULT_LIMIT
        await run_query(pilot, "sql injection")
        assert len(pane.response.results) <= RESULT_LIMIT
        await run_query(pilot, "commix")  # every result shown: the key is not offered
        assert not pane.response.trace.truncated
        assert "+ More" not in screen_text(app).splitlines()[-1]


# ---------------------------------------------------------------- the CLI's digits

CLI_LANE = re.compile(r"^  (keyword|vector)\s+(.*)$")
APP_LANE = re.compile(r"^  (keyword|vector)\s+(.*)$")
APP_FORMULA = re.compile(r"^\s+norm = (.*)$")
DIGITS = re.compile(r"-?\d+\.\d+")
SCORE_SUM = re.compile(r"^  score\s+(\S+) \+ (\S+) = (\S+) ≈ ")
CLI_TERM = re.compile(r"^  │ (\S+)\s+│\s+(\d+) │\s+(\S+) │\s+(\d+) │\s+\d+/\S+ │\s+(\S+) │$")
APP_TERM = re.compile(r"^\s+(\S+)\s+df\s+(\d+)\s+idf (\S+)\s+tf\s+(\d+)\s+→ (\S+)$")
CLI_EXTRA = re.compile(r"^  │ (\(rounding\)|sum)\s+│.*│\s+(\S+) │$")
APP_EXTRA = re.compile(r"^\s+(?:\(rounding\)\s+→ (\S+)|Σ (\S+) = raw)")


def cli_digits(block: list[str]) -> dict[str, list]:
    """The numbers of one result's `memtui search --explain` block, by kind."""
    found: dict[str, list] = {"keyword": [], "vector": [], "score": [], "terms": [], "sums": []}
    for line in block:
        if m := CLI_LANE.match(line):
            found[m.group(1)] = sorted(set(DIGITS.findall(m.group(2))))
        elif m := SCORE_SUM.match(line):
            found["score"] = list(m.groups())  # the parts and their sum
        elif m := CLI_TERM.match(line):
            found["terms"].append(m.groups())
        elif m := CLI_EXTRA.match(line):
            found["sums"].append(m.group(2))
    return found


def app_digits(text: str) -> dict[str, list]:
    """The same numbers of the app's breakdown of that result."""
    found: dict[str, list] = {"keyword": [], "vector": [], "score": [], "terms": [], "sums": []}
    lane = None
    for line in text.splitlines():
        if m := APP_LANE.match(line):
            lane = m.group(1)
            found[lane] = sorted(set(DIGITS.findall(m.group(2))))
        elif (m := APP_FORMULA.match(line)) and lane:
            found[lane] = sorted(set(found[lane]) | set(DIGITS.findall(m.group(1))))
        elif m := SCORE_SUM.match(line):
            found["score"] = list(m.groups())
        elif m := APP_TERM.match(line):
            found["terms"].append(m.groups())
        elif m := APP_EXTRA.match(line):
            found["sums"].append(m.group(1) or m.group(2))
    return found


def cli_blocks(out: str) -> list[list[str]]:
    blocks: list[list[str]] = []
    for line in out.splitlines():
        if re.match(r"^#\d+  record ", line):
            blocks.append([])
        elif blocks:
            blocks[-1].append(line)
    return blocks


@pytest.mark.parametrize("query", ["sql injection items api", "blind sql injection", "idor"])
def test_the_app_and_the_cli_print_the_same_digits(store: MemoryStore, query: str):
    """A result's breakdown has the same digits in the app as in `memtui search --explain`
    (they once differed: 0.28675 against 0.286746, 0.280431 against 0.280432), whatever
    number of results each shows."""
    source = NativeSource(store)
    response = source.search(query, limit=RESULT_LIMIT)
    places = lane_places(response.candidates, response.trace.pools)
    env = {"COLUMNS": "400", "MEMTUI_NOW": "2026-11-30T12:00:00Z"}
    out = CliRunner().invoke(
        main, ["search", str(store.path), query, "--explain", "--limit", "8"], env=env
    )
    assert out.exit_code == 0, out.output
    blocks = cli_blocks(out.stdout)
    assert len(blocks) == min(8, len(response.results))
    assert any(cli_digits(block)["terms"] for block in blocks)
    for result, block in zip(response.results, blocks, strict=False):
        explanation = source.explain(query, result.id) if result.trace.keyword.raw else None
        text = plain(render_breakdown(result, response.trace, explanation, places), width=400)
        cli, app = cli_digits(block), app_digits(text)
        assert cli["keyword"] and cli["vector"] and len(cli["score"]) == 3, block
        assert app == cli, (text, block)


def test_equal_terms_print_equal_contributions_in_the_breakdown(tmp_path: Path):
    """Two terms with the same df and tf print the same contribution (largest-remainder
    rounding once printed 2.1203 and 2.1202); what rounding each to the nearest leaves over
    is a line of its own, and the lines still add up exactly."""
    path = tmp_path / "equal.db"
    rows = [{"tier": "working", "record_type": "note", "content": "puffin gannet filler"}]
    rows += [
        {"tier": "working", "record_type": "note", "content": f"tern number {k}"} for k in range(12)
    ]
    with MemoryStore(path) as opened:
        opened.ingest(rows)
        source = NativeSource(opened)
        response = source.search("puffin gannet")
        top = response.results[0]
        text = plain(render_breakdown(top, response.trace, source.explain("puffin gannet", top.id)))
    terms = [m.groups() for line in text.splitlines() if (m := TERM_LINE.match(line))]
    assert terms == [("2.120264",), ("2.120264",)]
    assert re.search(r"^\s+\(rounding\)\s+→ -0\.000001$", text, re.M), text
    assert "Σ 4.240527 = raw 4.240527 ✓" in text
    assert redo_breakdown(text, score_text(top.score)) >= 6


@pytest.mark.parametrize("width", [60, 76, 116])
def test_a_narrow_breakdown_breaks_its_normalization_and_still_redoes(
    store: MemoryStore, width: int
):
    """Where a normalization does not fit, it breaks before its ``/``, indented under the
    number it continues; every line fits and the arithmetic still redoes."""
    source = NativeSource(store)
    query = "sql injection items api"
    response = source.search(query, limit=RESULT_LIMIT)
    places = lane_places(response.candidates, response.trace.pools)
    for result in response.results:
        explanation = source.explain(query, result.id) if result.trace.keyword.raw else None
        text = render_breakdown(result, response.trace, explanation, places, width).plain
        for line in text.splitlines():
            if "norm = (" in line or line.lstrip().startswith("/ ("):
                assert len(line) <= width, line
        broken = re.search(r"^ {11}norm = \(\S+ − \S+\)\n {16}/ \(", text, re.M)
        assert bool(broken) == (width < 84), text
        assert redo_breakdown(text, score_text(result.score)) >= 4
