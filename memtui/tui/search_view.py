"""The Search tab: query, scope filters, ranked results with expandable score breakdowns.

Everything goes through the app's ``MemorySource``: the native database and every
foreign store are searched, explained and re-ranked the same way. A foreign store's
keyword index lives in memtui's cache; when it is missing or stale the search worker
builds it first, with its progress on the status line.

What-if weights re-merge the lane scores already in hand (``source.rerank``), so moving
weight between the lanes re-ranks at once, without querying again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Input, OptionList, Select, Static
from textual.worker import Worker, get_current_worker

from memtui.core.arithmetic import lane_places
from memtui.core.cancel import Cancelled
from memtui.core.search import SearchRequest, SearchResponse
from memtui.render import escape_controls, safe_text
from memtui.sources.base import MemorySource, SourceRecord
from memtui.tui.base import Pane
from memtui.tui.breakdown import render_breakdown
from memtui.tui.search_bar import QueryInput, SearchBar, filter_keys_in_order, tier_choices
from memtui.tui.search_results import (
    ID_WIDTH,
    ResultList,
    id_width,
    result_line,
    result_prompt,
    tier_width,
)
from memtui.tui.search_status import (
    DEFAULT_KEYWORD_TENTHS,
    KEYWORD_INDEX,
    Build,
    Found,
    SearchPhase,
    SearchState,
    status_line,
    throttled,
    weights_from_tenths,
)

RESULT_LIMIT = 20
QUIET_BUILD_SECONDS = 0.3
"""A vector cache build shorter than this is not on the status line (a small store's
takes milliseconds; a million vectors take seconds)."""
LOADING_AFTER_SECONDS = 0.25
"""The results show a loading indicator once a search has run this long: most searches
end sooner, and mounting the indicator and taking it away again costs them frames
(about a third of what a search takes on screen); the status line says "searching…"
from the start."""
COMPACT_BELOW_HEIGHT = 32
"""On shorter terminals the query box and filters lose their borders (one line, not three)."""
STEP = 1  # tenths of weight moved by [ and ]


class SearchPane(Pane):
    """Query box and filters on top, the ranked results below."""

    BINDINGS = [
        Binding(
            "left_square_bracket",
            "shift_weight(1)",
            "+keyword",
            key_display="[",
            tooltip="Move 0.1 of weight from the vector lane to the keyword lane",
            id="search.weight.keyword",
        ),
        Binding(
            "right_square_bracket",
            "shift_weight(-1)",
            "+vector",
            key_display="]",
            tooltip="Move 0.1 of weight from the keyword lane to the vector lane",
            id="search.weight.vector",
        ),
        Binding(
            "equals_sign",
            "reset_weights",
            "Defaults",
            key_display="=",
            tooltip="Restore the default weights",
            id="search.weight.defaults",
        ),
        Binding(
            "plus",
            "more_results",
            "More",
            key_display="+",
            tooltip=f"Show {RESULT_LIMIT} more results (the search runs again with a higher limit)",
            id="search.more",
        ),
        Binding(
            "escape",
            "stop_search",
            "Stop search",
            tooltip="Stop the search that is running (a big store's common words take a while)",
            id="search.stop",
        ),
    ]

    def __init__(self, source: MemorySource, *, embedder: Any = None, **kwargs: Any) -> None:
        super().__init__(source, **kwargs)
        self.embedder = embedder
        """The query embedder for the vector lane on a store's own vectors (None: none)."""
        self.state = SearchState()
        self.query_text = ""
        self.result_limit = RESULT_LIMIT
        """How many results the search asks for: ``+`` raises it, a new query resets it."""
        self.filters: dict[str, str] = {}
        self.base: SearchResponse | None = None
        self.response: SearchResponse | None = None
        self._places_of: tuple[SearchResponse, dict[str, int]] | None = None
        self.records: dict[str, SourceRecord] = {}
        self.expanded: set[str] = set()
        self.explanations: dict[str, dict[str, Any]] = {}
        self._generation = 0
        self._focus_results_on_arrival = False
        self.choices: dict[str, list[str]] = {}
        """The filter choices shown: ``tier`` and each scope key, to their values."""
        self.choices_requested = False
        self.id_width = ID_WIDTH
        self.tier_width = tier_width(list(self.source.tiers))

    @property
    def state(self) -> SearchState:
        """What the tab is doing (searching, stopped...); its status line is drawn from it."""
        return self._state

    @state.setter
    def state(self, state: SearchState) -> None:
        self._state = state
        for box in self.query(QueryInput):  # escape there stops a running search
            box.search_running = state.phase is SearchPhase.SEARCHING

    @property
    def searching(self) -> bool:
        return self.state.phase is SearchPhase.SEARCHING

    @property
    def stopped(self) -> bool:
        """The last search was stopped with escape before it finished."""
        return self.state.phase is SearchPhase.STOPPED

    @property
    def results_stale(self) -> bool:
        """The database changed since these results were computed (F5 / ctrl+r re-runs)."""
        return self.state.stale

    @property
    def build_progress(self) -> Build | None:
        """While the search worker builds something first: what, and how far."""
        return self.state.building if self.searching else None

    @property
    def keyword_tenths(self) -> int:
        """The what-if weights: the keyword lane's share in tenths."""
        return self.state.keyword_tenths

    @keyword_tenths.setter
    def keyword_tenths(self, tenths: int) -> None:
        self.state = replace(self.state, keyword_tenths=tenths)

    def source_changed(self, source: MemorySource) -> None:
        self.results.source = self.query_one(SearchBar).source = source

    def compose(self) -> ComposeResult:
        yield SearchBar(self.source, id="search-bar")
        yield Static(id="search-status")
        with Vertical(id="results-box") as box:
            box.border_title = "results"
            box.border_subtitle = Text("enter: breakdown · [ ] move weight · = defaults")
            yield Static(self._header(), id="results-header")
            yield ResultList(self.source, id="results")

    def _header(self) -> Text:
        cells = [Text(label) for label in ("", "#", "Δ", "score", "KV", "tier", "id")]
        content = Text("type · content   (K/V: found by the keyword/vector lane)")
        return result_line(cells, self.id_width, content, style="bold", tiers=self.tier_width)

    @property
    def results(self) -> ResultList:
        return self.query_one(ResultList)

    def on_mount(self) -> None:
        if not self.query(ResultList):
            return  # the app closed while this (lazily mounted) tab was mounting
        self._show_status()
        self.results.show_note(Text("Type a query above and press enter.", style="dim"))

    def tab_shown(self) -> None:
        super().tab_shown()
        # The filter choices are read when the tab is first shown, not at start:
        # at a million records, filling them would hold up Browse's first screen.
        if not self.choices_requested:
            self.choices_requested = True
            self._load_filters()

    def main_widget(self) -> Widget:
        """The results when there are some to move through (and no search is running:
        the list cannot take focus while it loads), else the query box."""
        if self.response is not None and self.response.results and not self.searching:
            return self.results
        return self.query_box

    @property
    def query_box(self) -> QueryInput:
        return self.query_one("#query", QueryInput)

    def reload(self) -> None:
        self._load_filters()
        self.rerun()

    def database_changed(self, shown: bool) -> None:
        """Another process wrote: the filter choices follow; results wait for the operator.

        Re-ranking under the operator's cursor while they read a breakdown would move
        what they are reading, so the results stay and the status line says they are
        out of date; F5 (or ctrl+r) re-runs the search.
        """
        self._load_filters()
        if self.query_text and not self.results_stale:
            self.state = replace(self.state, stale=True)
            self._show_status()

    # -- filters

    @work(
        thread=True,
        exclusive=True,
        group="search-filters",
        exit_on_error=False,
        name="Reading scopes",
    )
    def _load_filters(self) -> None:
        source = self.source
        choices: dict[str, list[str]] = {"tier": tier_choices(source)}
        for key in filter_keys_in_order(source):
            choices[key] = [str(v) for v in source.scope_values(key)]
        if get_current_worker().is_cancelled:
            return
        self.app.call_from_thread(self._apply_filters, choices)

    def _apply_filters(self, choices: dict[str, list[str]]) -> None:
        if choices == self.choices:
            return  # a live refresh with the same scopes: leave the filters alone
        self.choices = choices
        self.query_one(SearchBar).fill(choices)

    def on_resize(self) -> None:
        self.call_after_refresh(self._show_status)  # the line re-fits its new width
        compact = self.app.size.height < COMPACT_BELOW_HEIGHT
        bar = self.query_one(SearchBar)
        bar.set_compact(compact)
        self.set_class(compact, "-compact")
        if self.choices:
            bar.fill(self.choices)
        for record_id in list(self.expanded):  # a breakdown re-breaks its lines to the width
            self._refresh_option(record_id)

    @on(Select.Changed)
    def _filter_changed(self, event: Select.Changed) -> None:
        event.stop()
        self.filters = self.current_filters()
        if self.query_text:
            self.run_search(self.query_text)

    def current_filters(self) -> dict[str, str]:
        return self.query_one(SearchBar).current_filters()

    # -- searching

    @on(Input.Submitted, "#query")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            self.notify("Type something to search for.", severity="warning", timeout=3)
            return
        self.expanded.clear()
        self._focus_results_on_arrival = True
        self.run_search(text)

    def run_search(self, text: str, *, keep_place: bool = False) -> None:
        if text != self.query_text:
            self.result_limit = RESULT_LIMIT
        self.query_text = text
        self.filters = self.current_filters()
        self._generation += 1
        self.state = replace(
            self.state, phase=SearchPhase.SEARCHING, building=None, note=None, stale=False
        )
        generation = self._generation
        self.set_timer(LOADING_AFTER_SECONDS, lambda: self._show_loading(generation))
        self.refresh_bindings()
        self._show_status()
        self._search(self._generation, text, dict(self.filters), keep_place)

    def _show_loading(self, generation: int) -> None:
        if self.searching and generation == self._generation:
            self.results.loading = True

    def rerun(self) -> None:
        """Run the current query again (after a mutation), keeping expansions and place."""
        if self.query_text:
            self.run_search(self.query_text, keep_place=True)

    @work(thread=True, exclusive=True, group="search", exit_on_error=False, name="Search")
    def _search(
        self, generation: int, text: str, filters: dict[str, str], keep_place: bool
    ) -> None:
        source = self.source
        worker = get_current_worker()

        def reporter(
            what: str, quiet: float = 0.0, verb: str = "building"
        ) -> Callable[[int, int], None]:
            def show(done: int, total: int) -> None:
                build = Build(what, done, total, verb)
                self.app.call_from_thread(self._show_build_progress, generation, build)

            return throttled(show, lambda: worker.is_cancelled, quiet)

        index_status = source.index_status()
        if not index_status.get("ready", True):
            # A foreign store without its keyword index yet (or a Postgres store's index
            # behind the store): build or refresh it first, visibly.
            verb = "refreshing" if index_status.get("refreshes") else "building"
            index_progress = reporter(KEYWORD_INDEX, verb=verb)
            index_progress(0, 0)
            source.build_index(index_progress)
            self.app.call_from_thread(self._show_build_progress, generation, None)
        try:
            response = source.search(
                SearchRequest(
                    text,
                    embedder=self.embedder,
                    limit=self.result_limit,
                    filters=filters,
                    progress=reporter(KEYWORD_INDEX),
                    cancelled=lambda: worker.is_cancelled,
                    vector_progress=reporter("the vector cache", QUIET_BUILD_SECONDS),
                )
            )
        except Cancelled:
            return  # a newer search, or escape: nothing of this one is shown
        records = source.get_many([c.id for c in response.candidates])  # type: ignore[attr-defined]
        if worker.is_cancelled:
            return
        self.app.call_from_thread(self._apply_search, generation, response, records, keep_place)

    def _show_build_progress(self, generation: int, progress: Build | None) -> None:
        """The status line follows a build the search waits for; None: built, now searching."""
        if generation != self._generation or not self.searching:
            return
        self.state = replace(self.state, building=progress)
        self._show_status()

    def action_stop_search(self) -> None:
        """Stop the running search: its statement is interrupted, nothing of it is shown."""
        if not self.searching:
            return
        self.workers.cancel_group(self, "search")
        self._generation += 1  # whatever the stopped worker still sends is dropped
        # A foreign store's keyword index build cannot be interrupted: it finishes in the
        # background, and the next search uses it.
        building = self.state.building
        indexing = building is not None and building.what == KEYWORD_INDEX
        note = "the keyword index goes on building, for the next search" if indexing else None
        self.state = replace(
            self.state, phase=SearchPhase.STOPPED, building=None, note=note, found=None
        )
        self.results.loading = False
        self.base = self.response = None
        self.records = self.results.records = {}
        self.expanded.clear()
        self.results.show_note(
            Text("Search stopped. Press enter in the query box to run it again.", style="dim")
        )
        self.refresh_bindings()
        self._show_status()

    def worker_failed(self, worker: Worker) -> None:
        if worker.group == "search":
            note = str(worker.error)
            self.state = replace(self.state, phase=SearchPhase.FAILED, building=None, note=note)
            self.results.loading = False
            self.refresh_bindings()
            self._show_status()

    def _apply_search(
        self,
        generation: int,
        response: SearchResponse,
        records: dict[str, SourceRecord],
        keep_place: bool,
    ) -> None:
        if generation != self._generation:
            return
        self.state = replace(self.state, phase=SearchPhase.DONE, building=None)
        self.results.loading = False
        self.refresh_bindings()
        self.base = response
        self.records = self.results.records = records
        self.explanations.clear()
        if not keep_place:
            self.expanded.clear()
        else:
            self.expanded &= set(records)
        self._rerank(keep_place=keep_place)
        if self._focus_results_on_arrival:
            self._focus_results_on_arrival = False
            query = self.query_one("#query", Input)
            if response.results and (query.has_focus or self.app.focused is None):
                self.results.focus()

    def _rerank(self, *, keep_place: bool = True) -> None:
        if self.base is None:
            return
        weights = weights_from_tenths(self.keyword_tenths)
        if weights == weights_from_tenths(DEFAULT_KEYWORD_TENTHS):
            self.response = self.base
        else:
            self.response = self.source.rerank(self.base, weights)
        self.state = replace(self.state, found=Found.of(self.base, self.response))
        self._render_results(keep_place=keep_place)
        self._show_status()
        for record_id in self.expanded:
            self._ensure_explanation(record_id)

    # -- what-if weights

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("shift_weight", "reset_weights"):
            return True if self.base is not None else None
        if action == "stop_search":
            return self.searching  # escape means nothing here otherwise
        if action == "more_results":  # only when the search left results out
            if self.base is None or not self.base.trace.truncated:
                return False
            return None if self.searching else True
        return True

    def action_more_results(self) -> None:
        if self.base is None or not self.base.trace.truncated or self.searching:
            return
        self.result_limit += RESULT_LIMIT
        self.run_search(self.query_text, keep_place=True)

    def action_shift_weight(self, tenths: int) -> None:
        if self.base is None:
            return
        if self.base.trace.fallback:
            self.notify_once(
                "The vector lane did not run for this search, so weights cannot move: "
                + escape_controls(str(self.base.trace.fallback)),
                title="Keyword only",
                severity="warning",
                markup=False,
                timeout=5,
            )
            return
        new = min(10, max(0, self.keyword_tenths + tenths * STEP))
        if new == self.keyword_tenths:
            self.notify_once("The weights are already at the end of their range.", timeout=2)
            return
        self.keyword_tenths = new
        self._rerank()

    def action_reset_weights(self) -> None:
        self.keyword_tenths = DEFAULT_KEYWORD_TENTHS
        self._rerank()

    # -- rendering

    def _render_results(self, *, keep_place: bool) -> None:
        results = self.results
        response = self.response
        if response is None:
            results.clear_options()
            return
        if not response.results:
            note = response.trace.note or "No live record matches this query in this scope."
            results.show_note(safe_text(note, style="dim"))
            return
        width = id_width([result.id for result in response.results])
        tiers = [r.tier for r in self.records.values()] + list(self.choices.get("tier", []))
        tiers_width = tier_width([*self.source.tiers, *tiers])
        if (width, tiers_width) != (self.id_width, self.tier_width):
            self.id_width, self.tier_width = width, tiers_width
            self.query_one("#results-header", Static).update(self._header())
        prompts = [(result.id, self._prompt(result)) for result in response.results]
        results.show(prompts, keep_place=keep_place)

    def _prompt(self, result: Any) -> Any:
        assert self.response is not None
        breakdown = None
        if result.id in self.expanded:
            explanation = self.explanations.get(result.id)
            places = self._lane_places(self.response)
            # The option's padding takes a cell either side of the list's width.
            width = max(self.results.scrollable_content_region.width - 2, 0) or None
            breakdown = render_breakdown(result, self.response.trace, explanation, places, width)
        return result_prompt(
            result,
            self.records.get(result.id),
            id_width=self.id_width,
            tier_width=self.tier_width,
            breakdown=breakdown,
        )

    def _lane_places(self, response: SearchResponse) -> dict[str, int]:
        """The response's raw-score decimals (as ``memtui search --explain`` prints them),
        worked out once per response."""
        if self._places_of is None or self._places_of[0] is not response:
            candidates = response.candidates or response.results
            self._places_of = (response, lane_places(candidates, response.trace.pools))
        return self._places_of[1]

    def _refresh_option(self, record_id: str) -> None:
        if self.response is None:
            return
        for index, result in enumerate(self.response.results):
            if result.id == record_id:
                self.results.replace_option_prompt_at_index(index, self._prompt(result))
                return

    @on(OptionList.OptionHighlighted, "#results")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self.app.refresh_bindings()  # r applies to live tactics only

    @on(OptionList.OptionSelected, "#results")
    def _toggle(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if not event.option.id:
            return
        record_id = event.option.id
        if record_id in self.expanded:
            self.expanded.discard(record_id)
        else:
            self.expanded.add(record_id)
            self._ensure_explanation(record_id)
        self._refresh_option(record_id)
        if record_id in self.expanded:
            self.call_after_refresh(self.results.scroll_to_highlighted)

    def _ensure_explanation(self, record_id: str) -> None:
        if record_id in self.explanations or self.response is None:
            return
        result = next((r for r in self.response.results if r.id == record_id), None)
        trace = self.response.trace
        if result is None or trace.keyword_lane_error or not trace.terms:
            return
        # A record the keyword lane did not return is explained too: which query terms
        # occur in it says why (a term missing, or a match outside the lane's pool).
        self._explain(self._generation, self.query_text, record_id)

    @work(thread=True, group="explain", exit_on_error=False, name="Explaining BM25")
    def _explain(self, generation: int, text: str, record_id: str) -> None:
        try:
            explanation = self.source.explain(text, record_id)
        except Exception as exc:  # shown in the breakdown, and as a notification
            explanation = {"error": str(exc)}
            self.app.call_from_thread(
                self.notify,
                f"BM25 explanation failed: {escape_controls(str(exc))}",
                severity="error",
                markup=False,
            )
        self.app.call_from_thread(self._apply_explanation, generation, record_id, explanation)

    def _apply_explanation(
        self, generation: int, record_id: str, explanation: dict[str, Any]
    ) -> None:
        if generation != self._generation:
            return
        self.explanations[record_id] = explanation
        self._refresh_option(record_id)

    def _status_width(self) -> int:
        """The status line's room (its padding off); the app's width before layout."""
        status = self.query_one("#search-status", Static)
        width = status.content_region.width or (self.app.size.width - 2)
        return max(width, 20)

    def _show_status(self) -> None:
        status = self.query_one("#search-status", Static)
        status.update(status_line(self.state, self._status_width()))
