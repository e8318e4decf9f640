"""The Search tab's status line: a pure function of its state and the width (no app)."""

from __future__ import annotations

import io
from dataclasses import replace
from types import SimpleNamespace

import pytest
from rich.console import Console

from memtui.core.search.trace import LanePool
from memtui.tui.search_status import (
    DEFAULT_KEYWORD_TENTHS,
    KEYWORD_INDEX,
    Build,
    Found,
    SearchPhase,
    SearchState,
    status_line,
    throttled,
)

WIDE = 200
NARROW = 64

BIG = Found(
    shown=20,
    candidates=1_625,
    truncated=True,
    excluded=(("refuted", 412), ("expired", 213)),
    keyword_pool=100,
    vector_pool=100,
)
DONE = SearchState(phase=SearchPhase.DONE, found=BIG)


def shown(state: SearchState, width: int) -> str:
    """The line as a terminal of ``width`` cells shows it (cut with an ellipsis)."""
    console = Console(width=width, file=io.StringIO(), color_system=None, legacy_windows=False)
    with console.capture() as capture:
        console.print(status_line(state, width), no_wrap=True, overflow="ellipsis")
    return capture.get().rstrip("\n")


def test_before_any_search():
    assert status_line(SearchState(), WIDE).plain == (
        "weights keyword 0.3 · vector 0.7 (default)   no search yet"
    )
    assert status_line(SearchState(), 40).plain == "keyword 0.3 · vector 0.7   no search yet"


def test_searching():
    state = SearchState(phase=SearchPhase.SEARCHING)
    assert status_line(state, WIDE).plain.endswith("   searching… (esc stops it)")
    assert "weights keyword 0.3 · vector 0.7 (default)" in status_line(state, WIDE).plain


def test_searching_hides_what_it_found_before_and_the_stale_warning():
    state = replace(DONE, phase=SearchPhase.SEARCHING, stale=True)
    line = status_line(state, WIDE).plain
    assert "searching…" in line
    assert "results" not in line and "changed" not in line


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (
            Build("the vector cache", 1_200, 5_000),
            "building the vector cache: 1,200/5,000 (esc stops it)",
        ),
        (Build("the vector cache", 0, 0), "building the vector cache… (esc stops it)"),
        (Build(KEYWORD_INDEX, 10, 40), "building the keyword index: 10/40 (esc stops waiting)"),
        (Build(KEYWORD_INDEX, 0, 0), "building the keyword index… (esc stops waiting)"),
        (
            Build(KEYWORD_INDEX, 0, 0, "refreshing"),
            "refreshing the keyword index… (esc stops waiting)",
        ),
    ],
)
def test_building_before_searching(build: Build, expected: str):
    state = SearchState(phase=SearchPhase.SEARCHING, building=build)
    assert status_line(state, WIDE).plain.endswith("   " + expected)


def test_stopped():
    state = SearchState(phase=SearchPhase.STOPPED)
    assert status_line(state, WIDE).plain.endswith("   search stopped")
    noted = replace(state, note="the keyword index goes on building, for the next search")
    assert status_line(noted, WIDE).plain.endswith(
        "   search stopped · the keyword index goes on building, for the next search"
    )


def test_stopped_and_stale():
    state = SearchState(phase=SearchPhase.STOPPED, stale=True)
    assert status_line(state, WIDE).plain.startswith("database changed — F5 re-runs the search")


@pytest.mark.parametrize("width", [WIDE, NARROW, 20])
def test_failed_says_only_why(width: int):
    state = replace(
        DONE, phase=SearchPhase.FAILED, note="no such table: records\x1b[2J", stale=True
    )
    line = status_line(state, width)
    assert line.plain == "search failed: no such table: records\\x1b[2J"
    assert "\x1b" not in line.plain  # the error is text, never a terminal control


def test_done_wide_says_everything():
    assert status_line(DONE, WIDE).plain == (
        "weights keyword 0.3 · vector 0.7 (default)   20 of 1,625 results · 625 left out: "
        "412 refuted, 213 expired · pools: keyword 100, vector 100"
    )


def test_done_narrower_drops_the_wording_then_the_pools_then_the_reasons():
    assert status_line(DONE, 130).plain == (
        "weights keyword 0.3 · vector 0.7   20 of 1,625 results · 625 left out: "
        "412 refuted, 213 expired · pools: keyword 100, vector 100"
    )
    assert status_line(DONE, 100).plain == (
        "keyword 0.3 · vector 0.7   20 of 1,625 results · 625 left out: 412 refuted, 213 expired"
    )
    assert status_line(DONE, NARROW).plain == (
        "keyword 0.3 · vector 0.7   20 of 1,625 results · 625 left out"
    )


def test_too_narrow_for_the_shortest_is_cut_with_an_ellipsis():
    line = shown(DONE, 30)
    assert line.endswith("…") and len(line) == 30
    assert line.startswith("keyword 0.3 · vector 0.7")


@pytest.mark.parametrize("width", [WIDE, NARROW])
def test_every_variant_that_fits_is_not_cut(width: int):
    for state in (SearchState(), DONE, replace(DONE, phase=SearchPhase.SEARCHING)):
        line = status_line(state, width).plain
        assert len(line) <= width and not shown(state, width).endswith("…"), (state, width)


def test_a_few_results_without_truncation():
    found = Found(shown=1, keyword_pool=1, vector_pool=3)
    state = SearchState(phase=SearchPhase.DONE, found=found)
    assert status_line(state, WIDE).plain.endswith("   1 result · pools: keyword 1, vector 3")
    none = replace(state, found=Found(shown=0))
    assert "0 results" in status_line(none, WIDE).plain


def test_keyword_lane_failed_and_no_record_with_every_term():
    failed = SearchState(phase=SearchPhase.DONE, found=Found(shown=2, keyword_failed=True))
    assert "2 results · keyword lane FAILED" in status_line(failed, WIDE).plain
    missing = SearchState(phase=SearchPhase.DONE, found=Found(shown=2, no_full_match=True))
    assert "2 results · no record has every term" in status_line(missing, WIDE).plain


def test_what_if_weights():
    state = replace(DONE, keyword_tenths=6)
    assert (
        "weights keyword 0.6 · vector 0.4 (what-if; = restores)" in status_line(state, WIDE).plain
    )
    assert status_line(state, NARROW).plain.startswith("keyword 0.6 · vector 0.4 what-if")
    assert DEFAULT_KEYWORD_TENTHS == 3


def test_fallback_to_the_keyword_lane_alone():
    state = replace(DONE, found=replace(BIG, fallback=True), keyword_tenths=6)
    assert status_line(state, WIDE).plain.startswith(
        "weights keyword 1.0 · vector 0.0 (fallback: keyword only)   20 of 1,625"
    )
    assert status_line(state, NARROW).plain.startswith("keyword 1.0 · vector 0.0 fallback")


def test_stale_results_wide_and_narrow():
    state = replace(DONE, stale=True)
    assert status_line(state, WIDE).plain.startswith(
        "database changed — F5 re-runs the search   weights keyword 0.3"
    )
    assert status_line(state, 100).plain == (
        "changed: F5 re-runs   keyword 0.3 · vector 0.7   20 of 1,625 results · 625 left out"
    )
    assert shown(state, NARROW).startswith("changed: F5 re-runs   keyword 0.3")
    assert shown(state, NARROW).endswith("…")  # the warning comes first: it is never cut off


def test_found_from_a_search_response():
    class Response:
        def __init__(self, trace, results):
            self.trace, self.results = trace, results

    trace = SimpleNamespace(
        truncated=True,
        candidates=50,
        pools={"keyword": LanePool(size=0), "vector": LanePool(size=7)},
        excluded={"refuted": 2, "expired": 0},
        terms=["paris"],
        fallback=None,
        keyword_lane_error=False,
    )
    found = Found.of(Response(trace, []), Response(trace, [1, 2, 3]))
    assert found == Found(
        shown=3,
        candidates=50,
        truncated=True,
        no_full_match=True,
        excluded=(("refuted", 2),),
        keyword_pool=0,
        vector_pool=7,
    )


def test_build_progress_is_throttled():
    seen: list[tuple[int, int]] = []
    cancelled = False
    progress = throttled(lambda done, total: seen.append((done, total)), lambda: cancelled)
    progress(0, 0)  # the start
    for done in range(1, 100):
        progress(done, 100)  # within a tenth of a second: the first step only
    progress(100, 100)  # the end
    assert seen[0] == (0, 0) and seen[-1] == (100, 100) and len(seen) <= 3
    cancelled = True
    progress(100, 100)
    assert seen[-1] == (100, 100) and len(seen) <= 3
    quiet = throttled(lambda done, total: seen.append((done, total)), lambda: False, quiet=60)
    before = len(seen)
    quiet(1, 2)
    assert len(seen) == before  # a build shorter than ``quiet`` is never shown
