"""The Search tab: query, scope filters, ranked results with expandable score breakdowns.

Everything goes through the app's ``MemorySource``: the native database and every
foreign store are searched, explained and re-ranked the same way. A foreign store's
keyword index lives in memtui's cache; when it is missing or stale the search worker
builds it first, with its progress on the status line.

What-if weights re-merge the lane scores already in hand (``source.rerank``), so moving
weight between the lanes re-ranks at once, without querying again.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from rich.console import Group
from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Input, OptionList, Select, Static
from textual.widgets.option_list import Option
from textual.worker import Worker, get_current_worker

from memtui.core.arithmetic import lane_places
from memtui.core.cancel import Cancelled
from memtui.core.search import DEFAULT_WEIGHTS, SearchRequest, SearchResponse
from memtui.render import escape_controls, one_line, safe_text
from memtui.sources.base import MemorySource, SourceRecord
from memtui.tui.base import Pane, fill_select
from memtui.tui.breakdown import KEYWORD_STYLE, VECTOR_STYLE, render_breakdown, score_text
from memtui.tui.format import DAMAGE_STYLE, fit, plural, refutable

RESULT_LIMIT = 20
KEYWORD_INDEX = "the keyword index"
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
DEFAULT_KEYWORD_TENTHS = round(DEFAULT_WEIGHTS["keyword"] * 10)
ID_WIDTH = 7
"""The id column's width: ``#12345``. A foreign store's longer ids widen it, up to
``MAX_ID_WIDTH`` (then they are cut in the middle)."""
MAX_ID_WIDTH = 24
COLUMNS = ((1, "left"), (3, "right"), (4, "left"), (6, "right"), (2, "left"))
"""The result lines' first columns: marker, rank, rank change, score, lanes (then the tier,
as wide as the source's longest tier name, and the id)."""
TIER_WIDTH = 10
"""The tier column's width when the source's tier names are all shorter."""
MAX_TIER_WIDTH = 20


def tier_width(tiers: list[str]) -> int:
    """Room for the longest tier name (a foreign store's ``preference``), 10 at least."""
    return min(max([TIER_WIDTH, *(len(t) for t in tiers)]), MAX_TIER_WIDTH)


# The native scope keys keep their established widgets: ids, prompts and order
# (engagement first; the profile fingerprints, long, get the widest box last).
NATIVE_FILTERS: dict[str, tuple[str, str]] = {
    "engagement": ("filter-engagement", "any engagement"),
    "profile_hash": ("filter-profile", "any profile"),
}


def filter_keys_in_order(source: MemorySource) -> list[str]:
    """The scope keys the search bar offers a Select for, in display order."""
    keys = list(dict.fromkeys(source.facet_keys))
    return sorted(keys, key=lambda k: k == "profile_hash")  # stable: only moves the profile last


def filter_select_id(key: str) -> str:
    """``filter-profile`` / ``filter-engagement`` for the native keys, else ``filter-<key>``."""
    if key in NATIVE_FILTERS:
        return NATIVE_FILTERS[key][0]
    return "filter-" + re.sub(r"[^A-Za-z0-9-]", "-", key.replace("_", "-"))


def filter_prompt(key: str) -> str:
    if key in NATIVE_FILTERS:
        return NATIVE_FILTERS[key][1]
    return "any " + escape_controls(key.replace("_", " "))


def display_id(record_id: str, width: int) -> Text:
    """``#12`` for a native id; a foreign id as is (inert, cut in the middle to fit)."""
    if record_id.isdigit():
        return Text(f"#{record_id}")
    return fit(record_id, width)


def id_width(ids: list[str]) -> int:
    widest = max((len(i) + 1 if i.isdigit() else len(i) for i in ids), default=0)
    return min(max(ID_WIDTH, widest), MAX_ID_WIDTH)


def result_line(
    cells: list[Text], id_width: int, content: Text, style: str = "", tiers: int = TIER_WIDTH
) -> Text:
    """One line of the results: ``COLUMNS`` and the id, one space apart, then the content
    cut with an ellipsis at the list's edge.

    A ``Text``, not a table row: the list renders its lines several times a frame (to
    measure them, then to draw them), and a table row costs about five times as much.
    """
    line = Text(no_wrap=True, overflow="ellipsis", style=style)
    columns = (*COLUMNS, (tiers, "left"), (id_width, "right"))
    for cell, (width, justify) in zip(cells, columns, strict=True):
        cell = cell.copy()
        cell.align(justify, width)  # type: ignore[arg-type]
        line.append_text(cell)
        line.append(" ")
    line.append_text(content)
    return line


def weights_from_tenths(keyword_tenths: int) -> dict[str, float]:
    return {"keyword": keyword_tenths / 10, "vector": (10 - keyword_tenths) / 10}


def rank_change(result: Any) -> Text:
    previous = result.trace.previous_rank
    if previous is None:
        previous = result.rank
    if previous is None:
        return Text("new", style="bold cyan")
    moved = previous - result.rank
    if moved > 0:
        return Text(f"↑{moved}", style="bold green")
    if moved < 0:
        return Text(f"↓{-moved}", style="bold red")
    return Text("=", style="dim")


class QueryInput(Input):
    """The query box: ``enter`` runs the search; ``down`` goes to the results; ``escape``
    leaves the box (while a search runs, escape stops it instead: the pane's binding)."""

    BINDINGS = [
        Binding("enter", "submit", "Run search", tooltip="Run the search, focus the results"),
        Binding("down", "results", "Results", show=False, tooltip="Go to the results"),
        Binding(
            "escape",
            "leave",
            "Leave box",
            key_display="esc",
            tooltip="Leave the query box for the results (the digit keys switch tabs again)",
        ),
    ]

    async def _on_key(self, event: events.Key) -> None:
        # "/" cannot stand in a query (the sanitizer makes it a space): here, as on
        # every other tab, it means "the query box", so it selects what is typed
        # (what comes next replaces it) instead of typing a slash.
        if event.character == "/":
            event.stop()
            event.prevent_default()
            self.select_all()
            return
        await super()._on_key(event)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "leave":
            pane = self.screen.query_one(SearchPane)
            return not pane.searching  # escape then stops the search (SearchPane)
        return True

    def action_results(self) -> None:
        results = self.screen.query_one(ResultList)
        if results.option_count and results.get_option_at_index(0).id:
            results.focus()

    def action_leave(self) -> None:
        self.screen.query_one(ResultList).focus()


class ResultList(OptionList):
    """Results best first; ``enter`` expands or collapses a result's breakdown."""

    BINDINGS = [
        Binding("enter", "select", "Breakdown", tooltip="Expand or collapse the score breakdown"),
        Binding("r", "refute", "Refute", tooltip="Refute the highlighted tactic"),
        Binding("f", "forget", "Forget", tooltip="Forget the highlighted record"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pane: SearchPane | None = None

    def current_id(self) -> str | None:
        """The highlighted result's record id (a string, as the source spells it)."""
        if self.highlighted is None or self.option_count == 0:
            return None
        option = self.get_option_at_index(self.highlighted)
        return option.id or None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("refute", "forget") and not self.app.offers(action):  # type: ignore[attr-defined]
            return False  # this source cannot do it even when writable: no key at all
        if action == "refute" and self.current_id() is not None:
            return refutable(self.current_record())  # a live tactic only
        if action in ("refute", "forget", "select"):
            return True if self.current_id() is not None else None
        return True

    def current_record(self) -> SourceRecord | None:
        """The highlighted result's record as the search read it (None: not on file)."""
        record_id = self.current_id()
        if record_id is None or self.pane is None:
            return None
        return self.pane.records.get(record_id)

    def action_refute(self) -> None:
        record_id = self.current_id()
        if record_id is not None and refutable(self.current_record()):
            self.app.request_refute(record_id)  # type: ignore[attr-defined]

    def action_forget(self) -> None:
        record_id = self.current_id()
        if record_id is not None:
            self.app.request_forget(record_id)  # type: ignore[attr-defined]


class SearchPane(Pane):
    """Query box and filters on top, the ranked results below."""

    BINDINGS = [
        Binding(
            "left_square_bracket",
            "shift_weight(1)",
            "+keyword",
            key_display="[",
            tooltip="Move 0.1 of weight from the vector lane to the keyword lane",
        ),
        Binding(
            "right_square_bracket",
            "shift_weight(-1)",
            "+vector",
            key_display="]",
            tooltip="Move 0.1 of weight from the keyword lane to the vector lane",
        ),
        Binding(
            "equals_sign",
            "reset_weights",
            "Defaults",
            key_display="=",
            tooltip="Restore the default weights",
        ),
        Binding(
            "plus",
            "more_results",
            "More",
            key_display="+",
            tooltip=f"Show {RESULT_LIMIT} more results (the search runs again with a higher limit)",
        ),
        Binding(
            "escape",
            "stop_search",
            "Stop search",
            tooltip="Stop the search that is running (a big store's common words take a while)",
        ),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.keyword_tenths = DEFAULT_KEYWORD_TENTHS
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
        self.searching = False
        self.build_progress: tuple[str, int, int] | None = None
        """While the search worker builds something first: (what, done, total); else None.
        What: "the keyword index" (a foreign store's) or "the vector cache"."""
        self._generation = 0
        self._focus_results_on_arrival = False
        self.choices: dict[str, list[str]] = {}
        """The filter choices shown: ``tier`` and each scope key, to their values."""
        self.choices_requested = False
        self.id_width = ID_WIDTH
        self.tier_width = tier_width(list(self.source.tiers))
        self.results_stale = False
        """The database changed since these results were computed (F5 / ctrl+r re-runs)."""
        self.stopped = False
        """The last search was stopped with escape before it finished."""
        self.status_error: str | None = None
        """The last search's failure, shown on the status line until the next search."""
        self.stopped_note: str | None = None
        """What goes on after the stop: a foreign store's keyword index build cannot be
        interrupted, so it finishes in the background (and the next search uses it)."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="search-bar"):
            yield QueryInput(placeholder="search memory (enter runs)", id="query")
            yield Select[str](
                [(t, t) for t in self.source.tiers],
                prompt="any tier",
                id="filter-tier",
                type_to_search=False,
            )
            for key in filter_keys_in_order(self.source):
                yield Select[str](
                    [], prompt=filter_prompt(key), id=filter_select_id(key), type_to_search=False
                )
        yield Static(id="search-status")
        with Vertical(id="results-box") as box:
            box.border_title = "results"
            box.border_subtitle = Text("enter: breakdown · [ ] move weight · = defaults")
            yield Static(self._header(), id="results-header")
            results = ResultList(id="results")
            results.pane = self
            yield results

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
        self.results.add_option(
            Option(Text("Type a query above and press enter.", style="dim"), disabled=True)
        )

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
            self.results_stale = True
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
        choices: dict[str, list[str]] = {"tier": self._tier_choices(source)}
        for key in filter_keys_in_order(source):
            choices[key] = [str(v) for v in source.scope_values(key)]
        if get_current_worker().is_cancelled:
            return
        self.app.call_from_thread(self._apply_filters, choices)

    @staticmethod
    def _tier_choices(source: MemorySource) -> list[str]:
        """The source's tiers in its order, then any more its data has (a foreign store)."""
        tiers = list(source.tiers)
        if source.can("lanes"):
            return tiers  # a memtui database: its tiers are exactly ``source.tiers``
        found = [f.tier for f in source.facets(include_hidden=True)]
        return tiers + [t for t in found if t not in tiers]

    def _apply_filters(self, choices: dict[str, list[str]]) -> None:
        if choices == self.choices:
            return  # a live refresh with the same scopes: leave the filters alone
        self.choices = choices
        self._fill_selects()

    def _fill_selects(self) -> None:
        for key, values in self.choices.items():
            if key == "tier":
                if values == list(self.source.tiers):
                    continue  # the options composed with the bar: leave them as they are
                select_id = "#filter-tier"
            else:
                select_id = "#" + filter_select_id(key)
            select = self.query_one(select_id, Select)
            current = select.value if isinstance(select.value, str) else None
            fill_select(select, values, current)

    def on_resize(self) -> None:
        self.call_after_refresh(self._show_status)  # the line re-fits its new width
        compact = self.app.size.height < COMPACT_BELOW_HEIGHT
        for widget in self.query("#search-bar > *"):
            widget.compact = compact  # type: ignore[attr-defined]
        self.set_class(compact, "-compact")
        if self.choices:
            self._fill_selects()
        for record_id in list(self.expanded):  # a breakdown re-breaks its lines to the width
            self._refresh_option(record_id)

    @on(Select.Changed)
    def _filter_changed(self, event: Select.Changed) -> None:
        event.stop()
        self.filters = self.current_filters()
        if self.query_text:
            self.run_search(self.query_text)

    def current_filters(self) -> dict[str, str]:
        filters: dict[str, str] = {}
        selects = [("#filter-tier", "tier")] + [
            ("#" + filter_select_id(key), key) for key in filter_keys_in_order(self.source)
        ]
        for select_id, key in selects:
            value = self.query_one(select_id, Select).value
            if isinstance(value, str):
                filters[key] = value
        return filters

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
        self.status_error = None
        self.query_text = text
        self.results_stale = False
        self.filters = self.current_filters()
        self._generation += 1
        self.searching = True
        self.stopped = False
        self.build_progress = None
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

        def reporter(what: str, quiet: float = 0.0) -> Callable[[int, int], None]:
            started: float | None = None
            shown = 0.0

            def progress(done: int, total: int) -> None:
                # Nothing for ``quiet`` seconds; then at most ten steps a second (each
                # waits for the screen to take it), the start (total 0) and the end.
                nonlocal started, shown
                now = time.monotonic()
                if started is None:
                    started = now
                if worker.is_cancelled or now - started < quiet:
                    return
                if 0 < total and done < total and now - shown < 0.1:
                    return
                if total:
                    shown = now
                self.app.call_from_thread(
                    self._show_build_progress, generation, (what, done, total)
                )

            return progress

        if not source.index_status().get("ready", True):
            # A foreign store without its keyword index yet: build it first, visibly.
            index_progress = reporter(KEYWORD_INDEX)
            index_progress(0, 0)
            source.build_index(index_progress)
            self.app.call_from_thread(self._show_build_progress, generation, None)
        try:
            response = source.search(
                SearchRequest(
                    text,
                    embedder=self.memtui.embedder,
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

    def _show_build_progress(self, generation: int, progress: tuple[str, int, int] | None) -> None:
        """The status line follows a build the search waits for; None: built, now searching."""
        if generation != self._generation or not self.searching:
            return
        self.build_progress = progress
        self._show_status()

    def action_stop_search(self) -> None:
        """Stop the running search: its statement is interrupted, nothing of it is shown."""
        if not self.searching:
            return
        self.workers.cancel_group(self, "search")
        self._generation += 1  # whatever the stopped worker still sends is dropped
        indexing = self.build_progress is not None and self.build_progress[0] == KEYWORD_INDEX
        self.stopped_note = (
            "the keyword index goes on building, for the next search" if indexing else None
        )
        self.searching = False
        self.stopped = True
        self.build_progress = None
        self.results.loading = False
        self.base = self.response = None
        self.records = {}
        self.expanded.clear()
        self.results.clear_options()
        self.results.add_option(
            Option(
                Text("Search stopped. Press enter in the query box to run it again.", style="dim"),
                disabled=True,
            )
        )
        self.refresh_bindings()
        self._show_status()

    def worker_failed(self, worker: Worker) -> None:
        if worker.group == "search":
            self.searching = False
            self.build_progress = None
            self.results.loading = False
            self.refresh_bindings()
            self._show_status(error=str(worker.error))

    def _apply_search(
        self,
        generation: int,
        response: SearchResponse,
        records: dict[str, SourceRecord],
        keep_place: bool,
    ) -> None:
        if generation != self._generation:
            return
        self.searching = False
        self.build_progress = None
        self.results.loading = False
        self.refresh_bindings()
        self.base = response
        self.records = records
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
        previous = results.current_id() if keep_place else None
        response = self.response
        results.clear_options()
        if response is None:
            return
        if not response.results:
            note = response.trace.note or "No live record matches this query in this scope."
            results.add_option(Option(safe_text(note, style="dim"), disabled=True))
            return
        width = id_width([result.id for result in response.results])
        tiers = [r.tier for r in self.records.values()] + list(self.choices.get("tier", []))
        tiers_width = tier_width([*self.source.tiers, *tiers])
        if (width, tiers_width) != (self.id_width, self.tier_width):
            self.id_width, self.tier_width = width, tiers_width
            self.query_one("#results-header", Static).update(self._header())
        results.add_options(
            [Option(self._prompt(result), id=result.id) for result in response.results]
        )
        index = 0
        if previous is not None:
            for i, result in enumerate(response.results):
                if result.id == previous:
                    index = i
                    break
        results.highlighted = index

    def _prompt(self, result: Any) -> Any:
        assert self.response is not None
        record = self.records.get(result.id)
        expanded = result.id in self.expanded
        marker = "▼" if expanded else "▶"
        kind = Text()
        if record is not None:
            kind.append_text(one_line(record.tier, self.tier_width))
        content = Text()
        if record is not None:
            content.append_text(one_line(record.record_type, 12))
            content.append("  ")
            if record.damage:
                content.append("damaged · ", style=DAMAGE_STYLE)
            content.append_text(one_line(record.content, 300))
            if not record.live:  # refuted, expired... since the search ran
                content.stylize("dim")
        else:
            content.append("(record no longer on file)", style="dim")
        lanes = Text()
        lanes.append("K" if result.trace.keyword.raw is not None else "·", KEYWORD_STYLE)
        lanes.append("V" if result.trace.vector.raw is not None else "·", VECTOR_STYLE)
        cells = [
            Text(marker, style="dim"),
            Text(str(result.rank)),
            rank_change(result),
            Text(score_text(result.score), style="bold"),
            lanes,
            kind,
            display_id(result.id, self.id_width),
        ]
        line = result_line(cells, self.id_width, content, tiers=self.tier_width)
        if not expanded:
            return line
        explanation = self.explanations.get(result.id)
        places = self._lane_places(self.response)
        # The option's padding takes a cell either side of the list's width.
        width = max(self.results.scrollable_content_region.width - 2, 0) or None
        breakdown = render_breakdown(result, self.response.trace, explanation, places, width)
        return Group(line, breakdown)

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
            self.call_after_refresh(self._scroll_to_expanded)

    def _scroll_to_expanded(self) -> None:
        results = self.results
        if results.highlighted is not None:
            results.scroll_to_highlight(top=True)

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

    def _show_status(self, error: str | None = None) -> None:
        status = self.query_one("#search-status", Static)
        if error is not None:
            self.status_error = error
        error = self.status_error
        if error:
            out = Text(no_wrap=True, overflow="ellipsis")
            out.append("search failed: ", style="bold red")
            out.append_text(safe_text(error, style="red"))
            status.update(out)
            return
        status.update(fit_status(self._status_variants(), self._status_width()))

    def _status_variants(self) -> list[list[list[Text]]]:
        """The status line's parts, fullest first; each next variant is shorter.

        The weights and the result count always show; then what was left out and why
        (only the reasons that are not zero), then the pools. On a narrow terminal the
        wording shortens, then the pools go, then the reasons, before anything is cut.
        """
        weights = weights_from_tenths(self.keyword_tenths)
        fallback = self.base.trace.fallback if self.base is not None else None
        default = self.keyword_tenths == DEFAULT_KEYWORD_TENTHS

        def weight_part(label: bool, note: str) -> Text:
            out = Text()
            if label:
                out.append("weights ", style="dim")
            if fallback:
                out.append("keyword 1.0 · vector 0.0 ", style="bold yellow")
                out.append(
                    "(fallback: keyword only)" if note == "long" else "fallback", style="yellow"
                )
                return out
            out.append(f"keyword {weights['keyword']:.1f}", style=f"bold {KEYWORD_STYLE}")
            out.append(" · ", style="dim")
            out.append(f"vector {weights['vector']:.1f}", style=f"bold {VECTOR_STYLE}")
            if default and note == "long":
                out.append(" (default)", style="dim")
            elif not default:
                out.append(
                    " (what-if; = restores)" if note == "long" else " what-if", style="bold yellow"
                )
            return out

        stale = Text()
        if self.results_stale and not self.searching:
            stale.append("database changed — F5 re-runs the search", style="bold yellow")
        stale_short = Text("changed: F5 re-runs", style="bold yellow") if stale else Text()

        state = self._state_parts()
        variants: list[list[list[Text]]] = []
        for label, note, hidden_long, pools, stale_part in (
            (True, "long", True, True, stale),
            (True, "short", True, True, stale),
            (False, "short", True, True, stale),
            (False, "short", True, False, stale),
            (False, "short", True, False, stale_short),
            (False, "short", False, False, stale_short),
        ):
            groups = [[stale_part]] if stale_part else []
            groups += [[weight_part(label, note)], state(hidden_long, pools)]
            variants.append(groups)
        return variants

    def _state_parts(self) -> Callable[[bool, bool], list[Text]]:
        """What the search is doing or found, as parts (the long or short wording)."""

        def parts(hidden_long: bool, pools_shown: bool) -> list[Text]:
            if self.searching and self.build_progress is not None:
                what, done, total = self.build_progress
                out = Text(f"building {what}", style="bold yellow")
                out.append(f": {done:,}/{total:,} " if total else "… ", style="bold yellow")
                # escape stops the vector cache build; an index build goes on for the next
                out.append(
                    "(esc stops waiting)" if what == KEYWORD_INDEX else "(esc stops it)",
                    style="dim",
                )
                return [out]
            if self.searching:
                out = Text("searching… ", style="bold yellow")
                out.append("(esc stops it)", style="dim")
                return [out]
            if self.stopped:
                out = Text("search stopped", style="bold yellow")
                if self.stopped_note:
                    out.append(f" · {self.stopped_note}", style="dim")
                return [out]
            if self.base is None:
                return [Text("no search yet", style="dim")]
            trace = self.base.trace
            shown = len(self.response.results) if self.response else 0
            found = Text(style="bold")
            if trace.truncated:
                found.append(f"{shown:,} of {trace.candidates:,} results")
            else:
                found.append(plural(shown, "result"))
            out = [found]
            pools = trace.pools
            if trace.keyword_lane_error:
                out.append(Text("keyword lane FAILED", style="bold red"))
            elif not pools["keyword"].size and trace.terms:
                out.append(Text("no record has every term", style="dim"))
            excluded = {k: int(v) for k, v in trace.excluded.items() if v}
            if excluded:
                total = sum(excluded.values())
                left = Text(f"{total:,} left out", style="dim")
                if hidden_long:
                    reasons = ", ".join(
                        f"{n:,} {reason.replace('_', ' ')}" for reason, n in excluded.items()
                    )
                    left.append(f": {reasons}", style="dim")
                out.append(left)
            if pools_shown:
                out.append(
                    Text(
                        f"pools: keyword {pools['keyword'].size:,}, "
                        f"vector {pools['vector'].size:,}",
                        style="dim",
                    )
                )
            return out

        return parts


def fit_status(variants: list[list[list[Text]]], width: int) -> Text:
    """The first variant that fits ``width`` (groups three spaces apart, their parts
    joined with " · "); else the last, cut with an ellipsis."""
    line = Text()
    for groups in variants:
        line = Text(no_wrap=True, overflow="ellipsis")
        for number, group in enumerate(groups):
            if number:
                line.append("   ")
            for index, part in enumerate(group):
                if index:
                    line.append(" · ", style="dim")
                line.append_text(part)
        if line.cell_len <= width:
            return line
    return line
