"""The Search tab's results list, and how a result's line is laid out (fixed columns,
then the content cut at the list's edge)."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text
from textual.binding import Binding
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from memtui.render import one_line
from memtui.sources.base import MemorySource, SourceRecord
from memtui.tui.base import offers
from memtui.tui.breakdown import KEYWORD_STYLE, VECTOR_STYLE, score_text
from memtui.tui.format import DAMAGE_STYLE, fit, refutable
from memtui.tui.messages import ForgetRequested, RefuteRequested

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


class ResultList(OptionList):
    """Results best first; ``enter`` expands or collapses a result's breakdown."""

    BINDINGS = [
        Binding(
            "enter",
            "select",
            "Breakdown",
            tooltip="Expand or collapse the score breakdown",
            id="search.results.breakdown",
        ),
        Binding(
            "r",
            "refute",
            "Refute",
            tooltip="Refute the highlighted tactic",
            id="search.results.refute",
        ),
        Binding(
            "f",
            "forget",
            "Forget",
            tooltip="Forget the highlighted record",
            id="search.results.forget",
        ),
    ]

    def __init__(self, source: MemorySource, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source = source
        self.records: dict[str, SourceRecord] = {}
        """The results' records as the search read them (set by the Search tab)."""

    def current_id(self) -> str | None:
        """The highlighted result's record id (a string, as the source spells it)."""
        if self.highlighted is None or self.option_count == 0:
            return None
        option = self.get_option_at_index(self.highlighted)
        return option.id or None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("refute", "forget") and not offers(self.source, action):
            return False  # this source cannot do it even when writable: no key at all
        if action == "refute" and self.current_id() is not None:
            return refutable(self.current_record())  # a live tactic only
        if action in ("refute", "forget", "select"):
            return True if self.current_id() is not None else None
        return True

    def show(self, prompts: list[tuple[str, Any]], *, keep_place: bool) -> None:
        """The ranked results as (record id, prompt), best first; the highlighted record
        stays highlighted when ``keep_place`` and it is still listed."""
        previous = self.current_id() if keep_place else None
        self.clear_options()
        self.add_options([Option(prompt, id=record_id) for record_id, prompt in prompts])
        ids = [record_id for record_id, _ in prompts]
        self.highlighted = ids.index(previous) if previous in ids else 0

    def show_note(self, note: Text) -> None:
        """One dim line instead of results (none yet, none found, stopped)."""
        self.clear_options()
        self.add_option(Option(note, disabled=True))

    def scroll_to_highlighted(self) -> None:
        if self.highlighted is not None:
            self.scroll_to_highlight(top=True)

    def current_record(self) -> SourceRecord | None:
        """The highlighted result's record as the search read it (None: not on file)."""
        record_id = self.current_id()
        if record_id is None:
            return None
        return self.records.get(record_id)

    def action_refute(self) -> None:
        record_id = self.current_id()
        if record_id is not None and refutable(self.current_record()):
            self.post_message(RefuteRequested(record_id))

    def action_forget(self) -> None:
        record_id = self.current_id()
        if record_id is not None:
            self.post_message(ForgetRequested(record_id))


def result_prompt(
    result: Any,
    record: SourceRecord | None,
    *,
    id_width: int,
    tier_width: int,
    breakdown: Any = None,
) -> Any:
    """A result's line in the list (its tier, type and content from ``record``), with
    its score ``breakdown`` below when expanded."""
    kind = Text()
    if record is not None:
        kind.append_text(one_line(record.tier, tier_width))
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
        Text("▼" if breakdown is not None else "▶", style="dim"),
        Text(str(result.rank)),
        rank_change(result),
        Text(score_text(result.score), style="bold"),
        lanes,
        kind,
        display_id(result.id, id_width),
    ]
    line = result_line(cells, id_width, content, tiers=tier_width)
    return line if breakdown is None else Group(line, breakdown)
