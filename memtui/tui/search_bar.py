"""The Search tab's bar: the query box, then a filter for the tier and each scope key."""

from __future__ import annotations

import re
from typing import Any

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Input, Select

from memtui.render import escape_controls
from memtui.sources.base import MemorySource
from memtui.tui.base import fill_select
from memtui.tui.search_results import ResultList

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


class QueryInput(Input):
    """The query box: ``enter`` runs the search; ``down`` goes to the results; ``escape``
    leaves the box (while a search runs, escape stops it instead: the pane's binding)."""

    BINDINGS = [
        Binding(
            "enter",
            "submit",
            "Run search",
            tooltip="Run the search, focus the results",
            id="search.run",
        ),
        Binding(
            "down",
            "results",
            "Results",
            show=False,
            tooltip="Go to the results",
            id="search.query.results",
        ),
        Binding(
            "escape",
            "leave",
            "Leave box",
            key_display="esc",
            tooltip="Leave the query box for the results (the digit keys switch tabs again)",
            id="search.query.leave",
        ),
    ]

    search_running = False
    """Set by the Search tab: while a search runs, escape stops it instead (its binding)."""

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
            return not self.search_running  # escape then stops the search (SearchPane)
        return True

    def action_results(self) -> None:
        results = self.screen.query_one(ResultList)
        if results.option_count and results.get_option_at_index(0).id:
            results.focus()

    def action_leave(self) -> None:
        self.screen.query_one(ResultList).focus()


class SearchBar(Horizontal):
    """The query box and the filters; the Search tab reads the filters chosen here."""

    def __init__(self, source: MemorySource, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source = source

    def compose(self) -> ComposeResult:
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

    def fill(self, choices: dict[str, list[str]]) -> None:
        """Each filter's values (``tier`` and each scope key's), keeping what is chosen."""
        for key, values in choices.items():
            if key == "tier":
                if values == list(self.source.tiers):
                    continue  # the options composed with the bar: leave them as they are
                select_id = "#filter-tier"
            else:
                select_id = "#" + filter_select_id(key)
            select = self.query_one(select_id, Select)
            current = select.value if isinstance(select.value, str) else None
            fill_select(select, values, current)

    def set_compact(self, compact: bool) -> None:
        """Borderless boxes on a short terminal (one line, not three)."""
        for widget in self.children:
            widget.compact = compact  # type: ignore[attr-defined]

    def current_filters(self) -> dict[str, str]:
        """The scope each filter narrows the search to (none: no key)."""
        filters: dict[str, str] = {}
        selects = [("#filter-tier", "tier")] + [
            ("#" + filter_select_id(key), key) for key in filter_keys_in_order(self.source)
        ]
        for select_id, key in selects:
            value = self.query_one(select_id, Select).value
            if isinstance(value, str):
                filters[key] = value
        return filters


def tier_choices(source: MemorySource) -> list[str]:
    """The source's tiers in its order, then any more its data has (a foreign store)."""
    tiers = list(source.tiers)
    if source.can("lanes"):
        return tiers  # a memtui database: its tiers are exactly ``source.tiers``
    found = [f.tier for f in source.facets(include_hidden=True)]
    return tiers + [t for t in found if t not in tiers]
