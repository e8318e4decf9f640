"""Pick one Qdrant or Chroma collection (or LanceDB table) when a store holds several.

Shown before the main app: each collection with its count, vector size, distance
and what memtui recognizes it as (Cyber-AutoAgent memories, mem0, a web-search
cache...), in the store's own words: a Qdrant collection's points and distance, a
Chroma collection's documents and space, a LanceDB table's rows (a table has no
distance of its own: a query names it). ``enter`` opens the highlighted one;
``escape`` quits. Collection names come from the store: they are shown as inert text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Static

from memtui.render import one_line

COLUMNS = (("collection", 40), ("points", 10), ("dims", 6), ("distance", 10), ("holds", 30))
CHROMA_COLUMNS = (
    ("collection", 40),
    ("documents", 10),
    ("dims", 6),
    ("space", 10),
    ("holds", 30),
)
LANCE_COLUMNS = (("table", 40), ("rows", 10), ("dims", 6), ("holds", 30))


def columns_of(collections: Sequence[Any]) -> tuple[tuple[str, int], ...]:
    """The picker's columns, named as the store names what its collections hold."""
    kinds = {getattr(c, "plural", None) or getattr(c, "kind", "") for c in collections}
    if kinds == {"chroma"}:
        return CHROMA_COLUMNS
    if kinds == {"LanceDB tables"}:
        return LANCE_COLUMNS
    return COLUMNS


class CollectionPicker(App[str | None]):
    """A table of collections; returns the chosen name (None: the operator quit)."""

    CSS_PATH = "app.tcss"
    TITLE = "memtui"

    BINDINGS = [
        Binding("enter", "choose", "Open collection", priority=True, id="picker.open"),
        Binding("escape,q", "quit_picker", "Quit", key_display="esc", id="picker.quit"),
    ]

    def __init__(self, where: str, collections: Sequence[Any]) -> None:
        super().__init__()
        self.where = where
        self.collections = list(collections)

    def plural(self) -> str:
        """What the store's collections are called (LanceDB's are tables)."""
        named = {getattr(c, "plural", None) for c in self.collections} - {None}
        if len(named) == 1:
            return str(named.pop())
        if self.collections and all(getattr(c, "kind", "") == "chroma" for c in self.collections):
            return "Chroma collections"
        return "Qdrant collections"

    def compose(self) -> ComposeResult:
        head = Text("memtui ", style="bold")
        head.append_text(one_line(self.where, 80))
        head.append(
            f" holds {len(self.collections)} {self.plural()}: pick one "
            "(or name it with --collection NAME)",
            style="",
        )
        yield Static(head, id="picker-title")
        yield DataTable(id="collections", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        from memtui.sources.qdrant import KIND_LABELS

        table = self.query_one("#collections", DataTable)
        columns = columns_of(self.collections)
        for name, width in columns:
            table.add_column(name, width=width, key=name)
        with_distance = len(columns) == len(COLUMNS)
        for info in self.collections:
            cells: list[Text] = [
                one_line(info.name, 40),
                Text("?" if info.points is None else str(info.points), justify="right"),
                Text("?" if info.dim is None else str(info.dim), justify="right"),
            ]
            if with_distance:
                cells.append(one_line(info.distance or "?", 10))
            label = getattr(info, "label", None) or KIND_LABELS.get(info.kind, "Qdrant collection")
            cells.append(one_line(label, 30))
            table.add_row(*cells)
        table.focus()

    def chosen(self) -> str | None:
        table = self.query_one("#collections", DataTable)
        if not self.collections or not 0 <= table.cursor_row < len(self.collections):
            return None
        return self.collections[table.cursor_row].name

    def action_choose(self) -> None:
        name = self.chosen()
        if name is not None:
            self.exit(name)

    @on(DataTable.RowSelected, "#collections")
    def _selected(self, event: DataTable.RowSelected) -> None:
        self.action_choose()

    def action_quit_picker(self) -> None:
        self.exit(None)
