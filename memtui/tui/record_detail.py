"""The Browse tab's detail pane: every field of the highlighted record, then what the
source adds (notes, vector, history, versions...), read in a worker."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static
from textual.worker import get_current_worker

from memtui.core.secrets import secret_paths
from memtui.render import one_line
from memtui.sources.base import DetailSection, MemorySource, SourceError, SourceRecord
from memtui.tui.base import ReportsWorkerErrors, offers
from memtui.tui.detail_format import detail_sections, record_detail
from memtui.tui.format import DETAIL_CONTENT_CHARS, record_label
from memtui.tui.messages import RevealRequested


def full_text_binding(binding_id: str) -> Binding:
    """``m``: the whole content, on the table and on the detail pane alike."""
    return Binding(
        "m",
        "full_text",
        "Full text",
        tooltip=f"Show all of a long content (the detail pane stops at {DETAIL_CONTENT_CHARS:,} "
        "characters)",
        id=binding_id,
    )


def content_cut(record: SourceRecord | None) -> bool:
    """Whether the detail pane shows only the start of the record's content."""
    return record is not None and len(record.content) > DETAIL_CONTENT_CHARS


def show_full_text(widget: Any, record: SourceRecord | None) -> None:
    """The whole content on a screen of its own (wrapped in a worker, drawn line by line)."""
    if record is None:
        return
    from memtui.tui.full_text import FullTextScreen

    widget.app.push_screen(FullTextScreen(record))


class RecordDetail(ReportsWorkerErrors, VerticalScroll):
    """Every field of the highlighted record; focusable so it scrolls from the keyboard.

    The record shows at once; the source's notes and detail sections (vector, history,
    versions...) are read in a worker and appended when they arrive. An arrival for a
    record no longer shown is dropped.
    """

    BINDINGS = [
        Binding(
            "v",
            "reveal",
            "Reveal",
            tooltip="Reveal one masked metadata field (audited)",
            id="browse.detail.reveal",
        ),
        Binding(
            "R",
            "reveal",
            "Reveal",
            show=False,
            tooltip="Reveal a masked field (as v)",
            id="browse.detail.reveal_alt",
        ),
        full_text_binding("browse.detail.full_text"),
    ]

    can_focus = True
    _shown: str | None = None

    def __init__(self, source: MemorySource, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source = source
        self.record: SourceRecord | None = None
        self.notes = ""
        self.sections: list[DetailSection] | None = None
        """The source's notes and sections of the record shown (None until they arrive)."""
        self._rendered: tuple[Any, ...] | None = None
        self._generation = 0

    def compose(self) -> ComposeResult:
        yield Static(Text("No record selected.", style="dim"), id="detail-body")
        # The source's notes and sections, below: their arrival never re-renders the body
        # (a 100 kB content is laid out once).
        yield Static(Text(""), id="detail-extra")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "reveal":
            return (
                self.record is not None
                and bool(secret_paths(self.record.metadata))
                and offers(self.source, "reveal")
            )
        if action == "full_text":
            return content_cut(self.record)
        return True

    def action_full_text(self) -> None:
        show_full_text(self, self.record)

    def action_reveal(self) -> None:
        if self.check_action("reveal", ()) and self.record is not None:
            self.post_message(RevealRequested(self.record.id))

    def text(self) -> str:
        """Everything the pane shows, as plain text (the record, then notes and sections)."""
        body = self.query_one("#detail-body", Static).render()
        extra = self.query_one("#detail-extra", Static).render()
        return "\n".join(str(getattr(part, "plain", part)) for part in (body, extra))

    def show(
        self,
        record: SourceRecord | None,
        now: Any,
        revealed: dict[str, Any] | None = None,
        *,
        lift: tuple[str, ...] = (),
    ) -> None:
        # A live refresh re-shows the same record every time the agent writes: render
        # only when something on screen would change (a 100 kB detail is not free).
        # "in 3d" and the expiry state move with the clock, a minute is fine enough.
        state = (record, now.replace(second=0, microsecond=0), dict(revealed or {}), lift)
        if state == self._rendered:
            return
        self._rendered = state
        self._generation += 1
        body = self.query_one("#detail-body", Static)
        if record is None or self.record is None or record.id != self.record.id:
            # Another record: the last one's notes and sections go (they would mislead).
            self.notes, self.sections = "", None
            self._paint_extra()
        self.record = record
        if record is None:
            self.border_title = "detail"
            body.update(Text("No record selected.", style="dim"))
            return
        title = Text("record ")
        title.append_text(one_line(record_label(record.id), 60))
        self.border_title = title
        body.update(record_detail(record, now, revealed, lift=lift))
        if record.id != self._shown:
            self.scroll_home(animate=False)
        self._shown = record.id
        self._load_extra(self._generation, record)

    def _paint_extra(self) -> None:
        extra = self.query_one("#detail-extra", Static)
        text = detail_sections(self.sections or [], notes=self.notes)
        extra.update(text)
        extra.display = bool(text.plain)

    @work(
        thread=True,
        exclusive=True,
        group="detail",
        exit_on_error=False,
        name="Loading record details",
    )
    def _load_extra(self, generation: int, record: SourceRecord) -> None:
        source = self.source
        try:
            notes = source.notes(record)
            sections = source.detail(record.id)
        except SourceError as exc:  # gone since, say: shown in the pane, not as an error
            notes, sections = "", [DetailSection(title="details", note=str(exc))]
        if get_current_worker().is_cancelled:
            return
        self.app.call_from_thread(self._extra_arrived, generation, record.id, notes, sections)

    def _extra_arrived(
        self, generation: int, record_id: str, notes: str, sections: list[DetailSection]
    ) -> None:
        if generation != self._generation or self.record is None or self.record.id != record_id:
            return  # stale: the pane has moved on since this was asked for
        self.notes, self.sections = notes or "", list(sections)
        self._paint_extra()
