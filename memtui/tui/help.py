"""The help screen: every key, built from the bindings the widgets declare."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.keys import format_key
from textual.screen import ModalScreen
from textual.widgets import Static

from memtui.tui.format import DETAIL_CONTENT_CHARS

KEY_NAMES = {
    "question_mark": "?",
    "slash": "/",
    "left_square_bracket": "[",
    "right_square_bracket": "]",
    "equals_sign": "=",
    "enter": "enter",
}


def key_label(binding: Binding) -> str:
    if binding.key_display:
        return binding.key_display
    return KEY_NAMES.get(binding.key, format_key(binding.key))


def _rows(bindings: list[Binding]) -> list[tuple[str, str]]:
    merged: dict[str, list[str]] = {}
    for binding in bindings:
        if not isinstance(binding, Binding):
            binding = Binding(*binding)
        descriptions = merged.setdefault(key_label(binding), [])
        what = binding.tooltip or binding.description
        if what not in descriptions:
            descriptions.append(what)
    return [(key, " / ".join(descriptions)) for key, descriptions in merged.items()]


def key_sections() -> list[tuple[str, list[tuple[str, str]]]]:
    """(where, [(key, what)]) for every key of the app, from the widgets' bindings."""
    from memtui.tui.app import MemtuiApp
    from memtui.tui.audit_view import AuditPane
    from memtui.tui.browse import BrowsePane, RecordDetail, RecordTable, ScopeTree
    from memtui.tui.dialogs import ConfirmDialog
    from memtui.tui.search_view import ResultList, SearchPane

    app_rows = _rows(list(MemtuiApp.BINDINGS))
    switch = [(k, f"{d} tab") for k, d in app_rows if k in "1234"]
    others = [(k, d) for k, d in app_rows if k not in "1234"]
    return [
        (
            "Anywhere",
            [
                *switch,
                *[(k, "Search: focus the query box" if k == "/" else d) for k, d in others],
                ("ctrl+p", "Command palette"),
            ],
        ),
        (
            "Browse: tree",
            [
                ("↑ ↓", "Move; the table follows the highlighted tier or scope"),
                ("enter", "Go to the records table"),
                ("space", "Expand / collapse a tier"),
                *_rows(list(ScopeTree.BINDINGS)),
            ],
        ),
        (
            "Browse: records",
            [
                ("↑ ↓ pgup pgdn", "Move (more rows load near the end)"),
                *_rows(list(RecordTable.BINDINGS)),
                *[
                    (k, "Show / hide refuted and expired (dimmed)")
                    for k, _ in _rows(list(BrowsePane.BINDINGS))
                ],
            ],
        ),
        (
            "Browse: detail",
            [
                (
                    "↑ ↓ pgup pgdn",
                    f"Scroll the record (content: the first {DETAIL_CONTENT_CHARS:,} characters)",
                ),
                *_rows(list(RecordDetail.BINDINGS)),
            ],
        ),
        (
            "Search",
            [
                ("enter", "In the query box: run the search, focus the results"),
                ("↓", "In the query box: go to the results"),
                *[
                    (k, d + (" (expand / collapse)" if k == "enter" else ""))
                    for k, d in _rows(list(ResultList.BINDINGS))
                ],
                *_rows(list(SearchPane.BINDINGS)),
            ],
        ),
        ("Audit", _rows(list(AuditPane.BINDINGS))),
        (
            "Dialogs",
            [
                ("enter", "In a text box: next field (never confirms); on a button: press it"),
                ("tab / shift+tab", "Reason → Cancel → action button"),
                *_rows(list(ConfirmDialog.BINDINGS)),
            ],
        ),
        (
            "Moving around",
            [
                ("tab / shift+tab", "Next / previous widget"),
                ("digits, / and q", "Type into a text box while it has focus"),
            ],
        ),
    ]


def help_table() -> Table:
    table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 0), expand=True)
    table.add_column("key", style="bold", no_wrap=True, min_width=14)
    table.add_column("what", ratio=1)
    for index, (section, rows) in enumerate(key_sections()):
        if index:
            table.add_row("", "")
        table.add_row(Text(section, style="bold underline"), "")
        for key, what in rows:
            table.add_row(Text(key, style="bold cyan"), Text(what))
    return table


class HelpScreen(ModalScreen[None]):
    """Every key memtui answers to."""

    BINDINGS = [
        Binding("escape,q,question_mark", "close", "Close help", key_display="esc"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body", classes="dialog") as body:
            body.border_title = "memtui keys"
            body.border_subtitle = "esc closes"
            yield Static(help_table())

    def on_mount(self) -> None:
        self.query_one("#help-body").focus()

    def action_close(self) -> None:
        self.dismiss(None)
