"""The help screen: every key, built from the bindings the widgets declare."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

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


def key_label(binding: Binding, overrides: Mapping[str, str] | None = None) -> str:
    """How help names a binding's key: the keys a keymap gave its id (``overrides``),
    else its ``key_display``, else each key it binds."""
    rebound = (overrides or {}).get(binding.id or "")
    if rebound is None and binding.key_display:
        return binding.key_display
    keys = [key.strip() for key in (rebound or binding.key).split(",")]
    return " / ".join(KEY_NAMES.get(key, format_key(key)) for key in keys)


def binding_text(binding: Binding) -> str:
    """What help says a binding does: its tooltip, else its description."""
    return binding.tooltip or binding.description


def _rows(
    bindings: list[Binding], overrides: Mapping[str, str] | None = None
) -> list[tuple[str, str]]:
    merged: dict[str, list[str]] = {}
    for binding in bindings:
        if not isinstance(binding, Binding):
            binding = Binding(*binding)
        if not binding.description:
            continue
        descriptions = merged.setdefault(key_label(binding, overrides), [])
        what = binding_text(binding)
        if what not in descriptions:
            descriptions.append(what)
    return [(key, " / ".join(descriptions)) for key, descriptions in merged.items()]


# Keys no binding of memtui's declares (Textual's own widgets answer them), by section.
TREE_ROWS = [
    ("↑ ↓", "Move; the table follows the highlighted tier or scope"),
    ("enter", "Go to the records table"),
    ("space", "Expand / collapse a tier"),
]
DETAIL_ROWS = [
    (
        "↑ ↓ pgup pgdn",
        f"Scroll the record (content: the first {DETAIL_CONTENT_CHARS:,} characters; m shows all)",
    )
]
FILTER_ROWS = [
    ("tab / shift+tab", "Query box → tier, engagement, profile… filters → results"),
    ("enter / space / ↑ ↓", "Open the filter's values"),
    ("↑ ↓ then enter", 'Pick one (the first, "any …", clears it); a search shown runs again'),
    ("esc", "Close the values, the filter unchanged"),
    ("[ ] = +", "As on the results (below): weights, defaults, more results"),
]
LANES_ROWS = [
    ("tab / shift+tab", "Profile → engagement → the lanes"),
    ("enter / space / ↑ ↓", "On a select: open its values"),
    ("↑ ↓ then enter", "Pick a profile or an engagement; the lanes follow"),
    ("esc", "Close the values, the choice unchanged"),
    ("↑ ↓ pgup pgdn home end", "In the lanes: scroll"),
]
AUDIT_ROWS = [
    ("↑ ↓ pgup pgdn", "Move; the event's detail follows"),
    ("tab / shift+tab", "Table ↔ the event's detail (↑ ↓ pgup pgdn scroll it)"),
]
EVAL_ROWS = [
    ("tab / shift+tab", "Path box → the questions → a question's results"),
    ("↑ ↓ pgup pgdn", "Move through the questions; in the results: scroll"),
]
DIALOG_ROWS = [
    ("enter", "In a text box: next field (never confirms); on a button: press it"),
    ("tab / shift+tab", "Reason → Cancel → action button"),
]
MOVING_ROWS = [
    ("tab / shift+tab", "Next / previous widget"),
    ("← →", "On the tab bar (shift+tab from the first widget): previous / next tab"),
    ("digits, / q [ ] = +", "Type into a text box while it has focus"),
]


def help_classes(
    app_class: type,
) -> list[tuple[str, list[tuple[str, str]], list[type], list[tuple[str, str]]]]:
    """(section, rows before, classes whose bindings it lists, rows after), in order.

    ``app_class`` is the app's own class (its bindings are the "Anywhere" keys): passed
    in, so that help does not import the app that imports it.

    Every widget and screen of the app that declares bindings is here: the help test
    finds each class with ``BINDINGS`` in the app's modules and checks that it is.
    """
    from memtui.tui.audit_view import AuditPane, AuditTable
    from memtui.tui.browse import BrowsePane
    from memtui.tui.dialogs import ConfirmDialog
    from memtui.tui.eval_view import EvalPane, PathInput, QuestionTable
    from memtui.tui.full_text import FullTextScreen
    from memtui.tui.record_detail import RecordDetail
    from memtui.tui.record_table import RecordTable
    from memtui.tui.scope_tree import ScopeTree
    from memtui.tui.search_bar import QueryInput
    from memtui.tui.search_results import ResultList
    from memtui.tui.search_view import SearchPane

    moves = [("↑ ↓ pgup pgdn home end", "Move")]
    return [
        ("Anywhere", [], [app_class], [("ctrl+p", "Command palette")]),
        ("Browse: tree", TREE_ROWS, [ScopeTree], []),
        (
            "Browse: records",
            [("↑ ↓ pgup pgdn", "Move (more rows load near the end)")],
            [RecordTable, BrowsePane],
            [],
        ),
        ("Browse: detail", DETAIL_ROWS, [RecordDetail], []),
        (
            "Full text (m)",
            [("↑ ↓ pgup pgdn home end", "Scroll the whole content")],
            [FullTextScreen],
            [],
        ),
        ("Search: query box", [], [QueryInput], []),
        ("Search: filters", FILTER_ROWS, [], []),
        ("Search: results", moves, [ResultList, SearchPane], []),
        ("Lanes", LANES_ROWS, [], []),
        ("Audit", AUDIT_ROWS, [AuditTable, AuditPane], []),
        ("Eval: path box", [], [PathInput], []),
        ("Eval", EVAL_ROWS, [QuestionTable, EvalPane], []),
        ("Dialogs", DIALOG_ROWS, [ConfirmDialog], []),
        ("Help", [], [HelpScreen], []),
        ("Moving around", MOVING_ROWS, [], []),
    ]


def _class_rows(cls: type, overrides: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    declared = cls.__dict__.get("BINDINGS", [])
    bindings = [b if isinstance(b, Binding) else Binding(*b) for b in declared]
    return _rows([_said_anywhere(b) for b in bindings], overrides)


def _said_anywhere(binding: Binding) -> Binding:
    """The app's own keys say what they do from anywhere: the tab keys switch tabs, and
    the search key focuses the query box (keyed on the binding's id, whatever its keys)."""
    if (binding.id or "").startswith("tab-"):
        return replace(binding, description=f"{binding.description} tab")
    if binding.id == "search":
        return replace(binding, description="Search: focus the query box")
    return binding


def key_sections(
    app_class: type, overrides: Mapping[str, str] | None = None
) -> list[tuple[str, list[tuple[str, str]]]]:
    """(where, [(key, what)]) for every key of the app, from the widgets' bindings and
    the keymap applied (``overrides``: binding id → keys)."""
    return [
        (
            section,
            [*before, *[row for cls in classes for row in _class_rows(cls, overrides)], *after],
        )
        for section, before, classes, after in help_classes(app_class)
    ]


def help_table(app_class: type, overrides: Mapping[str, str] | None = None) -> Table:
    table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 0), expand=True)
    table.add_column("key", style="bold", no_wrap=True, min_width=14)
    table.add_column("what", ratio=1)
    for index, (section, rows) in enumerate(key_sections(app_class, overrides)):
        if index:
            table.add_row("", "")
        table.add_row(Text(section, style="bold underline"), "")
        for key, what in rows:
            table.add_row(Text(key, style="bold cyan"), Text(what))
    return table


class HelpScreen(ModalScreen[None]):
    """Every key memtui answers to."""

    BINDINGS = [
        Binding(
            "escape,q,question_mark",
            "close",
            "Close help",
            key_display="esc",
            tooltip="Close help (esc, q or ?)",
            id="help.close",
        ),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body", classes="dialog") as body:
            body.border_title = "memtui keys"
            body.border_subtitle = "esc closes"
            yield Static(help_table(type(self.app), getattr(self.app, "key_overrides", None)))

    def on_mount(self) -> None:
        self.query_one("#help-body").focus()

    def action_close(self) -> None:
        self.dismiss(None)
