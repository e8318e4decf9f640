"""What the Search tab is doing, as one value, and its status line drawn from it.

``SearchState`` replaces a handful of flags (running, stopped, failed, stale...) that
could contradict each other; ``status_line(state, width)`` is a pure function of it,
tested without an app. ``throttled`` paces the build progress the line follows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from rich.text import Text

from memtui.core.search import DEFAULT_WEIGHTS
from memtui.render import safe_text
from memtui.tui.breakdown import KEYWORD_STYLE, VECTOR_STYLE
from memtui.tui.format import plural

KEYWORD_INDEX = "the keyword index"
DEFAULT_KEYWORD_TENTHS = round(DEFAULT_WEIGHTS["keyword"] * 10)


def weights_from_tenths(keyword_tenths: int) -> dict[str, float]:
    return {"keyword": keyword_tenths / 10, "vector": (10 - keyword_tenths) / 10}


class SearchPhase(Enum):
    IDLE = "idle"
    """No search has run yet."""
    SEARCHING = "searching"
    STOPPED = "stopped"
    """Stopped with escape before it finished: nothing of it is shown."""
    FAILED = "failed"
    DONE = "done"


@dataclass(frozen=True)
class Build:
    """Something the search worker builds before it can search, and how far it got."""

    what: str
    """``the keyword index`` (a foreign store's) or ``the vector cache``."""
    done: int
    total: int
    """0 while the total is not known yet."""
    verb: str = "building"
    """``refreshing`` when an index is brought up to date rather than built."""


@dataclass(frozen=True)
class Found:
    """What the results on screen came from, as the status line tells it."""

    shown: int
    candidates: int = 0
    truncated: bool = False
    """The search left results out (``+`` shows more)."""
    fallback: bool = False
    """The vector lane did not run: keyword only, the weights cannot move."""
    keyword_failed: bool = False
    no_full_match: bool = False
    """The query had terms but no record has every one of them."""
    excluded: tuple[tuple[str, int], ...] = ()
    """Why matches were left out (refuted, expired, out of scope...), the non-zero ones."""
    keyword_pool: int = 0
    vector_pool: int = 0

    @classmethod
    def of(cls, base: Any, response: Any) -> Found:
        """From the search's response (``base``) and the ranking shown (``response``)."""
        trace = base.trace
        pools = trace.pools
        keyword_pool = pools["keyword"].size
        excluded = tuple((k, int(v)) for k, v in trace.excluded.items() if v)
        return cls(
            shown=len(response.results) if response else 0,
            candidates=trace.candidates,
            truncated=bool(trace.truncated),
            fallback=bool(trace.fallback),
            keyword_failed=bool(trace.keyword_lane_error),
            no_full_match=not keyword_pool and bool(trace.terms),
            excluded=excluded,
            keyword_pool=keyword_pool or 0,
            vector_pool=pools["vector"].size,
        )


@dataclass(frozen=True)
class SearchState:
    """The Search tab's state: one value, replaced whole (``dataclasses.replace``)."""

    phase: SearchPhase = SearchPhase.IDLE
    building: Build | None = None
    """While searching: what is built first (None: searching itself)."""
    note: str | None = None
    """FAILED: why; STOPPED: what goes on after the stop (an index build finishes)."""
    stale: bool = False
    """The database changed since the results were computed (F5 re-runs)."""
    keyword_tenths: int = DEFAULT_KEYWORD_TENTHS
    """The keyword lane's weight in tenths (the vector lane has the rest)."""
    found: Found | None = None
    """The results shown (None: none, before the first search or after a stop)."""


def status_line(state: SearchState, width: int) -> Text:
    """The status line for ``state`` within ``width`` cells.

    A failure is all it says. Else the weights and the result count always show; then
    what was left out and why, then the pools. On a narrow terminal the wording
    shortens, then the pools go, then the reasons, before anything is cut.
    """
    if state.phase is SearchPhase.FAILED:
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append("search failed: ", style="bold red")
        out.append_text(safe_text(state.note or "", style="red"))
        return out
    return fit_status(status_variants(state), width)


def status_variants(state: SearchState) -> list[list[list[Text]]]:
    """The status line's groups of parts, fullest first; each next variant is shorter."""
    stale = Text()
    if state.stale and state.phase is not SearchPhase.SEARCHING:
        stale.append("database changed — F5 re-runs the search", style="bold yellow")
    stale_short = Text("changed: F5 re-runs", style="bold yellow") if stale else Text()
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
        groups += [
            [weights_part(state, label, note == "long")],
            state_parts(state, hidden_long, pools),
        ]
        variants.append(groups)
    return variants


def weights_part(state: SearchState, label: bool, long: bool) -> Text:
    """The lanes' weights: default, what-if, or the keyword-only fallback."""
    out = Text()
    if label:
        out.append("weights ", style="dim")
    if state.found is not None and state.found.fallback:
        out.append("keyword 1.0 · vector 0.0 ", style="bold yellow")
        out.append("(fallback: keyword only)" if long else "fallback", style="yellow")
        return out
    weights = weights_from_tenths(state.keyword_tenths)
    out.append(f"keyword {weights['keyword']:.1f}", style=f"bold {KEYWORD_STYLE}")
    out.append(" · ", style="dim")
    out.append(f"vector {weights['vector']:.1f}", style=f"bold {VECTOR_STYLE}")
    default = state.keyword_tenths == DEFAULT_KEYWORD_TENTHS
    if default and long:
        out.append(" (default)", style="dim")
    elif not default:
        out.append(" (what-if; = restores)" if long else " what-if", style="bold yellow")
    return out


def state_parts(state: SearchState, hidden_long: bool, pools_shown: bool) -> list[Text]:
    """What the search is doing or found, as parts (the long or short wording)."""
    if state.phase is SearchPhase.SEARCHING and state.building is not None:
        build = state.building
        out = Text(f"{build.verb} {build.what}", style="bold yellow")
        total = build.total
        out.append(f": {build.done:,}/{total:,} " if total else "… ", style="bold yellow")
        # escape stops the vector cache build; an index build goes on for the next
        out.append(
            "(esc stops waiting)" if build.what == KEYWORD_INDEX else "(esc stops it)",
            style="dim",
        )
        return [out]
    if state.phase is SearchPhase.SEARCHING:
        out = Text("searching… ", style="bold yellow")
        out.append("(esc stops it)", style="dim")
        return [out]
    if state.phase is SearchPhase.STOPPED:
        out = Text("search stopped", style="bold yellow")
        if state.note:
            out.append(f" · {state.note}", style="dim")
        return [out]
    if state.found is None:
        return [Text("no search yet", style="dim")]
    return found_parts(state.found, hidden_long, pools_shown)


def found_parts(found: Found, hidden_long: bool, pools_shown: bool) -> list[Text]:
    """How many results, what was left out (and why, ``hidden_long``), the pools."""
    count = Text(style="bold")
    if found.truncated:
        count.append(f"{found.shown:,} of {found.candidates:,} results")
    else:
        count.append(plural(found.shown, "result"))
    out = [count]
    if found.keyword_failed:
        out.append(Text("keyword lane FAILED", style="bold red"))
    elif found.no_full_match:
        out.append(Text("no record has every term", style="dim"))
    if found.excluded:
        total = sum(n for _, n in found.excluded)
        left = Text(f"{total:,} left out", style="dim")
        if hidden_long:
            reasons = ", ".join(f"{n:,} {reason.replace('_', ' ')}" for reason, n in found.excluded)
            left.append(f": {reasons}", style="dim")
        out.append(left)
    if pools_shown:
        out.append(
            Text(
                f"pools: keyword {found.keyword_pool:,}, vector {found.vector_pool:,}",
                style="dim",
            )
        )
    return out


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


def throttled(
    show: Callable[[int, int], None], cancelled: Callable[[], bool], quiet: float = 0.0
) -> Callable[[int, int], None]:
    """A build's progress callback that passes ``(done, total)`` on to ``show``: nothing
    for ``quiet`` seconds; then at most ten steps a second (each waits for the screen to
    take it), the start (total 0) and the end; nothing once ``cancelled``."""
    started: float | None = None
    shown = 0.0

    def progress(done: int, total: int) -> None:
        nonlocal started, shown
        now = time.monotonic()
        if started is None:
            started = now
        if cancelled() or now - started < quiet:
            return
        if 0 < total and done < total and now - shown < 0.1:
            return
        if total:
            shown = now
        show(done, total)

    return progress
