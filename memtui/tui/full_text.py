"""A record's whole content, however long: the detail pane stops at ``DETAIL_CONTENT_CHARS``.

The text is wrapped to the view's width in a worker (a megabyte takes a moment) into
display lines, and only the lines on screen are rendered (Textual's line API), so a
1 MB record scrolls as freely as a short one. Control characters are shown as
visible escapes, as everywhere else (``memtui.render.safe_text``); an escape is
never split across two lines.
"""

from __future__ import annotations

import re
from typing import Any

from rich.segment import Segment
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.screen import ModalScreen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Footer, Static
from textual.worker import get_current_worker

from memtui.render import one_line, safe_text
from memtui.sources.base import SourceRecord
from memtui.tui.format import record_label

TAB = "    "
_PLAIN = re.compile(r"[ -~]*")
"""Printable ASCII: one cell a character, nothing to escape (the fast path)."""


def _cells(char: str, known: dict[str, int]) -> int:
    """A character's width as ``safe_text`` shows it (an escape's, for a control)."""
    cells = known.get(char)
    if cells is None:
        cells = known[char] = safe_text(char).cell_len
    return cells


def wrap_lines(text: str, width: int, cancelled: Any = None) -> list[str]:
    """``text`` cut into display lines at most ``width`` cells wide once escaped.

    Newlines end lines; tabs become four spaces; a control character counts the width
    of its escape and stays whole on one line. ``cancelled()`` is polled between lines.
    """
    width = max(width, 12)  # the widest escape (\\U000e0001) fits a line
    out: list[str] = []
    known: dict[str, int] = {}
    for number, line in enumerate(text.split("\n")):
        if cancelled is not None and number % 256 == 0 and cancelled():
            return out
        line = line.replace("\t", TAB)
        if _PLAIN.fullmatch(line):
            out.extend(line[i : i + width] for i in range(0, max(len(line), 1), width))
            continue
        start, used = 0, 0
        for index, char in enumerate(line):
            cells = _cells(char, known)
            if used + cells > width and index > start:
                out.append(line[start:index])
                start, used = index, 0
            used += cells
        out.append(line[start:])
    return out


class FullText(ScrollView, can_focus=True):
    """The wrapped lines, drawn a screen at a time."""

    def __init__(self, content: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.content = content
        self.lines: list[str] = []
        self.wrapped_width = 0
        self._cache: LRUCache[tuple[int, int], Strip] = LRUCache(1024)

    def on_resize(self) -> None:
        width = self.scrollable_content_region.width
        if width and width != self.wrapped_width:
            self._wrap(width)

    @work(thread=True, exclusive=True, group="wrap", exit_on_error=False, name="Wrapping text")
    def _wrap(self, width: int) -> None:
        worker = get_current_worker()
        lines = wrap_lines(self.content, width, lambda: worker.is_cancelled)
        if not worker.is_cancelled:
            self.app.call_from_thread(self._wrapped, width, lines)

    def _wrapped(self, width: int, lines: list[str]) -> None:
        top = self.scroll_y / max(len(self.lines), 1)  # keep the place, in proportion
        self.lines, self.wrapped_width = lines, width
        self._cache.clear()
        self.virtual_size = Size(width, len(lines))
        self.scroll_to(y=round(top * len(lines)), animate=False)
        self.refresh()
        if self.screen.focused is None:
            self.focus()

    def render_line(self, y: int) -> Strip:
        index = y + round(self.scroll_offset.y)
        width = self.scrollable_content_region.width
        if index >= len(self.lines):
            if index == 0 and not self.wrapped_width:  # a megabyte takes a moment
                note = Text("wrapping the text…", style="dim").render(self.app.console)
                return Strip(list(note)).crop_extend(0, width, self.rich_style)
            return Strip.blank(width, self.rich_style)
        key = (index, width)
        strip = self._cache.get(key)
        if strip is None:
            text = safe_text(self.lines[index])
            segments = [s for s in text.render(self.app.console) if s.text != "\n"]
            strip = Strip(Segment.apply_style(segments, self.rich_style)).crop_extend(
                0, width, self.rich_style
            )
            self._cache[key] = strip
        return strip

    def visible_text(self) -> str:
        """The lines on screen, as they read (for tests)."""
        top = round(self.scroll_offset.y)
        shown = self.lines[top : top + self.scrollable_content_region.height]
        return "\n".join(safe_text(line).plain for line in shown)


class FullTextScreen(ModalScreen[None]):
    """One record's whole content, over the whole terminal; escape goes back to where it
    was opened (modal: the tab keys do not reach the tabs underneath)."""

    BINDINGS = [
        Binding(
            "escape,q,m",
            "close",
            "Back",
            key_display="esc",
            tooltip="Close the full text (esc, q or m)",
            id="full_text.close",
        ),
    ]

    def __init__(self, record: SourceRecord) -> None:
        super().__init__()
        self.record = record

    def compose(self) -> ComposeResult:
        title = Text("record ", style="bold")
        title.append_text(one_line(record_label(self.record.id), 60))
        title.append(f" · content · {len(self.record.content):,} characters", style="dim")
        title.append("   ↑ ↓ pgup pgdn home end scroll · esc back", style="dim")
        yield Static(title, id="full-text-title")
        yield FullText(self.record.content, id="full-text")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(FullText).focus()

    def action_close(self) -> None:
        self.dismiss(None)
