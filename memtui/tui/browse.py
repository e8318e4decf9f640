"""The Browse tab: tiers and scopes with counts, a paged record table, the record's detail.

Everything comes from the app's ``MemorySource``: the tree from ``facets`` (live and
with hidden records), the table from keyset ``page`` calls, the detail from the
record itself plus ``notes`` and ``detail`` (loaded in a worker). A memtui database
and every foreign store are browsed the same way; the table keeps the columns a
source can fill.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.events import Resize
from textual.message import Message
from textual.widgets import DataTable, Static, Tree
from textual.widgets.tree import TreeNode
from textual.worker import Worker, get_current_worker

from memtui.core.secrets import secret_paths
from memtui.render import one_line, safe_text
from memtui.sources.base import (
    MAX_PAGE_SIZE,
    DetailSection,
    MemorySource,
    SourceError,
    SourceRecord,
    TierFacet,
)
from memtui.sources.capabilities import Refutable
from memtui.tui.base import Pane, ReportsWorkerErrors
from memtui.tui.format import (
    DETAIL_CONTENT_CHARS,
    Column,
    detail_sections,
    fit,
    has_evidence,
    hidden_words,
    layout_columns,
    plural,
    record_detail,
    record_label,
    record_row,
    refutable,
    scope_label,
)

PAGE_SIZE = 200
"""Rows fetched per page (keyset paging: ``after`` is the id of the last row shown)."""
PAGE_MARGIN = 20
"""Fetch the next page when the cursor comes this close to the last loaded row."""
MIN_CONTENT_WIDTH = 24
FIRST_PAGE_WAIT = 2.0
"""Seconds the scope counts wait at most for the first page to be shown."""
TREE_VALUES = 200
"""Values listed per scope key and tier (the largest); the rest behind one "… N more" leaf."""
ID_MAX_WIDTH = 20
"""A long (foreign) id is cut in the middle to this many cells; the detail shows it whole."""

TIER = "tier"
MORE = "…"
"""``ScopeNode.kind`` of the leaf that stands for the values not listed."""

COLUMNS: tuple[Column, ...] = (
    Column("id", "id", 4, None),  # widened to the longest id loaded
    Column("type", "type", 11, None),
    Column("tool", "tool", 8, 3),
    Column("scope", "scope", 14, 3),
    Column("grade", "grade", 10, None),
    Column("sa", "s/a", 5, 4),
    Column("created", "created", 10, 2),
    Column("expires", "expires", 10, 1),
)
CELL_PADDING = 1
LIFTED = ("signature",)
FULL_TEXT_BINDING = Binding(
    "m",
    "full_text",
    "Full text",
    tooltip=f"Show all of a long content (the detail pane stops at {DETAIL_CONTENT_CHARS:,} "
    "characters)",
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


"""Native metadata shown with the scope in the detail pane (it was a column of the record)."""


@dataclass(frozen=True)
class ScopeNode:
    """What a tree node stands for: a tier, or one scope value within a tier.

    ``kind`` is ``"tier"``, the scope key (``profile_hash``, ``engagement``, a foreign
    source's ``namespace``...) or ``MORE`` (then ``value`` is the key and ``live`` the
    number of its values not listed). ``parent`` is the listed value of the same key
    it nests under (a LangGraph namespace under its parent namespace), ``depth`` how
    many such parents it has; a value that hangs from its tier has neither.
    """

    kind: str
    tier: str
    value: Any
    live: int
    hidden: int
    parent: Any = None
    depth: int = 0

    @property
    def filters(self) -> dict[str, Any]:
        if self.kind in (TIER, MORE):
            return {"tier": self.tier}
        return {"tier": self.tier, self.kind: self.value}

    @property
    def label(self) -> str:
        return scope_label(self.kind)

    def title(self) -> Text:
        out = safe_text(self.tier, limit=40, style="bold")
        if self.kind not in (TIER, MORE):
            out.append(" › ", style="dim")
            out.append_text(safe_text(self.label, limit=40, style="dim"))
            out.append(" ", style="dim")
            out.append_text(fit(self.value, 80))
        return out


def forget_noun(source: MemorySource) -> str:
    """What F forgets in this source: its one scope key's name, else ``scope``."""
    keys = source.forget_scope_keys
    return scope_label(keys[0]) if len(keys) == 1 else "scope"


# ---------------------------------------------------------------- tree


class ScopeTree(Tree[ScopeNode]):
    """Tiers, and under each the values of the source's facet keys, with record counts."""

    BINDINGS = [
        Binding(
            "F",
            "forget_scope",
            "Forget scope",
            tooltip="On a scope (an engagement, a namespace...): forget all its records "
            "(blast radius first)",
        ),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("memory", **kwargs)
        self.show_root = False
        self.auto_expand = False
        self.guide_depth = 3
        self.show_keys = False
        """Prefix each value with its key (a foreign source with several facet keys)."""

    def name_the_scope(self, noun: str) -> None:
        """Label F by what it forgets here: ``Forget engagement``, ``Forget namespace``."""
        bindings = self._bindings.key_to_bindings
        for key, listed in bindings.items():
            bindings[key] = [
                replace(b, description=f"Forget {noun}") if b.action == "forget_scope" else b
                for b in listed
            ]

    def forgettable(self, data: ScopeNode | None) -> bool:
        """Whether a node is a scope ``forget_scope`` erases whole (an engagement...)."""
        source = self.app.source  # type: ignore[attr-defined]
        return data is not None and data.kind in source.forget_scope_keys

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "forget_scope":
            # Elsewhere F is not offered; pressed there, the pane says what to pick.
            node = self.cursor_node
            return self.app.offers("forget_scope") and self.forgettable(  # type: ignore[attr-defined]
                node.data if node else None
            )
        return True

    def action_forget_scope(self) -> None:
        node = self.cursor_node
        if node is None or not self.forgettable(node.data):
            return
        data = node.data
        assert data is not None
        self.app.request_forget_scope(data.kind, str(data.value))  # type: ignore[attr-defined]

    def label_for(self, data: ScopeNode) -> Text:
        width = max(self.scrollable_content_region.width, 20)
        if data.kind == MORE:
            more = Text(f"… {data.live:,} more ", style="dim")
            more.append_text(safe_text(scope_label(str(data.value)), limit=40, style="dim"))
            more.append(" (search to filter)", style="dim")
            return more
        count = Text(f" {data.live:,}", style="bold" if data.kind == TIER else "")
        if data.hidden:
            suffix = " hidden" if data.kind == TIER else ""
            count.append(f" +{data.hidden:,}{suffix}", style="dim")
        if data.kind == TIER:
            label = fit(data.tier, max(width - count.cell_len - 2, 12))
            label.stylize("bold")
            label.append_text(count)
            return label
        prefix = Text()
        if self.show_keys:
            prefix = fit(data.label, 16)
            prefix.append(" ")
            prefix.stylize("dim")
        room = width - self.guide_depth * (1 + data.depth) - 1 - count.cell_len - prefix.cell_len
        shown = str(data.value)
        if data.parent is not None and shown.startswith(f"{data.parent}."):
            shown = "…" + shown[len(str(data.parent)) :]  # the rest of the name, under its parent
        label = fit(shown, max(room, 8))
        if data.kind == "profile_hash":
            label.stylize("italic")
        prefix.append_text(label)
        prefix.append_text(count)
        return prefix

    def populate(self, nodes: list[tuple[ScopeNode, list[ScopeNode]]]) -> None:
        self.clear()
        for tier_node, children in nodes:
            branch = self.root.add(self.label_for(tier_node), data=tier_node, expand=True)
            parents = {(c.kind, c.parent) for c in children if c.parent is not None}
            placed: dict[tuple[str, Any], TreeNode[ScopeNode]] = {}
            # Parents first (fewer parents above them), each level in the listed order.
            for child in sorted(children, key=lambda c: c.depth):
                under = placed.get((child.kind, child.parent), branch)
                label = self.label_for(child)
                if (child.kind, child.value) in parents:
                    placed[(child.kind, child.value)] = under.add(label, data=child, expand=True)
                else:
                    under.add_leaf(label, data=child)

    def scope_nodes(self, tier_node: TreeNode[ScopeNode]) -> list[TreeNode[ScopeNode]]:
        """Every node under a tier's node, nested ones included, top to bottom."""
        out: list[TreeNode[ScopeNode]] = []
        for child in tier_node.children:
            out.append(child)
            out.extend(self.scope_nodes(child))
        return out

    def update_counts(self, nodes: list[tuple[ScopeNode, list[ScopeNode]]]) -> bool:
        """New counts in place when the same tiers and scopes are listed (cursor and
        scroll stay); False when the shape changed and the tree must be rebuilt."""

        def key(data: ScopeNode) -> tuple[str, str, str]:
            return (data.kind, repr(data.value), repr(data.parent))

        shape = [(t.tier, sorted(key(c) for c in children)) for t, children in nodes]
        current = [
            (
                t.data.tier if t.data else None,
                sorted(key(c.data) for c in self.scope_nodes(t) if c.data is not None),
            )
            for t in self.root.children
        ]
        if shape != current:
            return False
        for (tier_data, children), tier_node in zip(nodes, self.root.children, strict=True):
            if tier_node.data != tier_data:
                tier_node.data = tier_data
                tier_node.set_label(self.label_for(tier_data))
            by_key = {key(c.data): c for c in self.scope_nodes(tier_node) if c.data is not None}
            for data in children:
                child = by_key[key(data)]
                if child.data != data:
                    child.data = data
                    child.set_label(self.label_for(data))
        return True

    def relabel(self) -> None:
        def walk(node: TreeNode[ScopeNode]) -> None:
            for child in node.children:
                if child.data is not None:
                    child.set_label(self.label_for(child.data))
                walk(child)

        walk(self.root)

    def find(self, kind: str, tier: str, value: Any) -> TreeNode[ScopeNode] | None:
        """The node of ``value`` of scope key ``kind`` (or its label: ``profile``) in
        ``tier``; the tier's node when that value is not listed; None for no such tier."""
        for tier_node in self.root.children:
            if tier_node.data is None or tier_node.data.tier != tier:
                continue
            if kind == TIER:
                return tier_node
            for child in self.scope_nodes(tier_node):
                data = child.data
                if (
                    data is not None
                    and data.kind not in (TIER, MORE)
                    and kind in (data.kind, data.label)
                    and data.value == value
                ):
                    return child
            return tier_node
        return None

    def on_resize(self, event: Resize) -> None:
        self.relabel()


# ---------------------------------------------------------------- table


class RecordTable(ReportsWorkerErrors, DataTable):
    """The selected scope's records, fetched a page at a time (keyset paging by id)."""

    BINDINGS = [
        Binding("r", "refute", "Refute", tooltip="Refute the highlighted tactic"),
        Binding("f", "forget", "Forget", tooltip="Forget the highlighted record"),
        Binding("v", "reveal", "Reveal", tooltip="Reveal one masked metadata field (audited)"),
        Binding("R", "reveal", "Reveal", show=False, tooltip="Reveal a masked field (as v)"),
        FULL_TEXT_BINDING,
        Binding("home", "scroll_top", "First row", show=False),
        Binding("end", "scroll_bottom", "Last loaded row", show=False),
    ]

    class PageLoaded(Message):
        """A page of records arrived (the table's subtitle and detail may change)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", cell_padding=CELL_PADDING, **kwargs)
        self.records: list[SourceRecord] = []
        self.scope: ScopeNode | None = None
        self.show_hidden = False
        self.exhausted = True
        self.loading_page = False
        self._generation = 0
        self._rows_key: tuple[str, str, Any, bool] | None = None
        self._ids: set[str] = set()
        self._layout_width = 0
        self._columns: list[Column] = []
        self._wanted: tuple[str, ...] = ()
        self._evidence_seen = False
        self._id_width = 4  # grows with the ids shown
        self._content_width = MIN_CONTENT_WIDTH

    @property
    def source(self) -> MemorySource:
        return self.app.source  # type: ignore[attr-defined]

    # -- state

    @property
    def current(self) -> SourceRecord | None:
        if not self.records or self.cursor_row < 0 or self.cursor_row >= len(self.records):
            return None
        return self.records[self.cursor_row]

    def _offers(self, capability: str) -> bool:
        return bool(self.app.offers(capability))  # type: ignore[attr-defined]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("refute", "forget"):
            if not self._offers(action):
                return False  # this source cannot: the key is not shown at all
            if action == "refute" and self.current is not None:
                return refutable(self.current)  # a live tactic only: no key on a note
            return True if self.current is not None else None
        if action == "reveal":
            # Shown only where it applies: a record with masked fields.
            return (
                self.current is not None
                and bool(secret_paths(self.current.metadata))
                and self._offers("reveal")
            )
        if action == "full_text":
            return content_cut(self.current)  # only where the detail pane stops short
        return True

    def action_reveal(self) -> None:
        if self.check_action("reveal", ()) and self.current is not None:
            self.app.request_reveal(self.current.id)  # type: ignore[attr-defined]

    def action_full_text(self) -> None:
        show_full_text(self, self.current)

    def action_refute(self) -> None:
        if refutable(self.current) and self._offers("refute"):
            self.app.request_refute(self.current.id)  # type: ignore[attr-defined]

    def action_forget(self) -> None:
        if self.current is not None and self._offers("forget"):
            self.app.request_forget(self.current.id)  # type: ignore[attr-defined]

    # -- columns

    @property
    def scope_keys(self) -> tuple[str, ...]:
        """Where a foreign source's scope column comes from (none for a memtui database)."""
        source = self.source
        if isinstance(source, Refutable):
            return ()
        return tuple(source.facet_keys) or tuple(source.scope_keys)

    def wanted_columns(self) -> tuple[str, ...]:
        """The columns this source can fill: no tool column without a ``tool_name`` scope,
        no grade or s/a where no record shown has evidence metadata (a scope without
        tactics), a scope column for a foreign source."""
        source = self.source
        keys = ["id", "type"]
        if "tool_name" in source.scope_keys:
            keys.append("tool")
        if self.scope_keys:
            keys.append("scope")
        if self._evidence_seen:  # tactics in this scope: their grade and successes/attempts
            keys += ["grade", "sa"]
        keys += ["created", "expires"]
        return tuple(keys)

    # -- loading

    def load(
        self,
        scope: ScopeNode,
        show_hidden: bool,
        keep_row: int | None = None,
        keep_id: str | None = None,
    ) -> None:
        """Show ``scope`` from its first record, or (a refresh) keep the place.

        A refresh keeps the highlighted record (``keep_id``) when it is still listed,
        else the row number (``keep_row``); rows already shown stay put when only
        new ones arrived, so a live agent's writes do not move the operator's cursor.
        """
        self.scope = scope
        self.show_hidden = show_hidden
        self._generation += 1
        self.loading_page = True
        limit = PAGE_SIZE
        if keep_row is not None:
            limit = max(PAGE_SIZE, keep_row + PAGE_MARGIN + 1, len(self.records))
        elif keep_id is not None:  # reach as far as the rows shown now, and a page more
            limit = max(PAGE_SIZE, len(self.records) + PAGE_SIZE)
        key = (scope.kind, scope.tier, scope.value, show_hidden)
        self._fetch(
            self._generation, key, scope.filters, show_hidden, None, limit, keep_row, keep_id
        )

    def load_more(self) -> None:
        if self.exhausted or self.loading_page or self.scope is None or not self.records:
            return
        self.loading_page = True
        self._fetch(
            self._generation,
            self._rows_key,
            self.scope.filters,
            self.show_hidden,
            self.records[-1].id,
            PAGE_SIZE,
            None,
            None,
        )

    @work(thread=True, exclusive=True, group="records", exit_on_error=False, name="Loading records")
    def _fetch(
        self,
        generation: int,
        key: tuple[str, str, Any, bool] | None,
        filters: dict[str, Any],
        show_hidden: bool,
        after: str | None,
        limit: int,
        keep_row: int | None,
        keep_id: str | None,
    ) -> None:
        source = self.source
        worker = get_current_worker()
        rows: list[SourceRecord] = []
        cursor = after
        more = False
        # A refresh may re-read more rows than one call returns: bounded pages, in turn.
        while True:
            want = min(limit - len(rows), MAX_PAGE_SIZE)
            page = source.page(filters, after=cursor, limit=want, include_hidden=show_hidden)
            if worker.is_cancelled:
                return
            rows.extend(page.records)
            cursor = page.next_cursor
            more = cursor is not None
            if not more or not page.records or len(rows) >= limit:
                break
        self.app.call_from_thread(
            self._apply_page, generation, key, rows, more, after is not None, keep_row, keep_id
        )

    def worker_failed(self, worker: Worker) -> None:
        self.loading_page = False

    def _apply_page(
        self,
        generation: int,
        key: tuple[str, str, Any, bool] | None,
        rows: list[SourceRecord],
        more: bool,
        append: bool,
        keep_row: int | None,
        keep_id: str | None,
    ) -> None:
        if generation != self._generation:
            return
        self.loading_page = False
        self.exhausted = not more
        now = self.source.now()
        # Grade and s/a only for a scope whose records carry evidence (tactics): a scope of
        # notes and findings gives their room to the dates.
        evidence = any(has_evidence(r) for r in rows)
        self._evidence_seen = evidence or (append and self._evidence_seen)
        id_width = min(max([len(r.id) for r in rows] + [self._id_width]), ID_MAX_WIDTH)
        relayout = id_width > self._id_width or self.wanted_columns() != self._wanted
        shown = len(self.records)
        if not append and key == self._rows_key and shown and rows[:shown] == self.records:
            # A refresh in which nothing shown changed: only new rows arrived (or none).
            append, rows = True, rows[shown:]
        if append:
            fresh: list[SourceRecord] = []
            for record in rows:  # a row key is shown once, whatever a source returns
                if record.id not in self._ids:
                    self._ids.add(record.id)
                    fresh.append(record)
            self.records.extend(fresh)
            if relayout:
                self._id_width = id_width
                self._ensure_columns(force=True)
            else:
                self._add_rows(fresh, now)
        else:
            self._id_width = id_width
            old_row, old_scroll = self.cursor_row, self.scroll_y
            self.records = []
            self._ids = set()
            self.clear()
            unique: list[SourceRecord] = []
            for record in rows:
                if record.id not in self._ids:
                    self._ids.add(record.id)
                    unique.append(record)
            self._ensure_columns(force=relayout)
            self.records = unique
            self._add_rows(unique, now)
            if self.records:
                ids = [r.id for r in self.records]
                target = ids.index(keep_id) if keep_id in ids else keep_row or 0
                target = min(target, len(self.records) - 1)
                self.move_cursor(row=target, animate=False, scroll=keep_row is None)
                if keep_row is not None:
                    # The highlighted row stays where it was on screen.
                    scroll = max(0, old_scroll + target - old_row)
                    self.call_after_refresh(self._restore_scroll, scroll, target)
        self._rows_key = key
        self.post_message(self.PageLoaded())
        self.app.refresh_bindings()

    def _restore_scroll(self, scroll: float, row: int) -> None:
        self.scroll_to(y=scroll, animate=False, immediate=True)
        if row < len(self.records):
            self.move_cursor(row=row, animate=False)

    def _add_rows(self, rows: list[SourceRecord], now: Any) -> None:
        keys = [c.key for c in self._columns]
        shown = frozenset(keys)
        scope_keys = self.scope_keys
        scope_width = next((c.width for c in self._columns if c.key == "scope"), 14)
        tool_width = next((c.width for c in self._columns if c.key == "tool"), 8)
        for record in rows:
            cells = record_row(
                record,
                now,
                self._content_width,
                scope_keys=scope_keys,
                id_width=self._id_width,
                scope_width=scope_width,
                tool_width=tool_width,
                columns=shown,
            )
            self.add_row(*[cells[k] for k in keys], cells["content"], key=record.id)

    def _ensure_columns(self, *, force: bool) -> None:
        width = self.scrollable_content_region.width or self.size.width or 80
        if not force and self._columns and width == self._layout_width:
            return
        self._layout_width = width
        self._wanted = self.wanted_columns()
        columns = tuple(
            Column(c.key, c.label, self._id_width, c.drop_order) if c.key == "id" else c
            for c in COLUMNS
            if c.key in self._wanted
        )
        self._columns, self._content_width = layout_columns(
            columns, width, MIN_CONTENT_WIDTH, CELL_PADDING
        )
        row = self.cursor_row
        self.clear(columns=True)
        for column in self._columns:
            self.add_column(column.label, width=column.width, key=column.key)
        self.add_column("content", width=self._content_width, key="content")
        if self.records:
            self._add_rows(self.records, self.source.now())
            self.move_cursor(row=min(max(row, 0), len(self.records) - 1), animate=False)

    def on_resize(self, event: Resize) -> None:
        if self._columns:
            self._ensure_columns(force=False)

    @on(DataTable.RowHighlighted)
    def _maybe_load_more(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row >= len(self.records) - PAGE_MARGIN:
            self.load_more()


class RecordDetail(ReportsWorkerErrors, VerticalScroll):
    """Every field of the highlighted record; focusable so it scrolls from the keyboard.

    The record shows at once; the source's notes and detail sections (vector, history,
    versions...) are read in a worker and appended when they arrive. An arrival for a
    record no longer shown is dropped.
    """

    BINDINGS = [
        Binding("v", "reveal", "Reveal", tooltip="Reveal one masked metadata field (audited)"),
        Binding("R", "reveal", "Reveal", show=False, tooltip="Reveal a masked field (as v)"),
        FULL_TEXT_BINDING,
    ]

    can_focus = True
    _shown: str | None = None

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
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
                and bool(self.app.offers("reveal"))  # type: ignore[attr-defined]
            )
        if action == "full_text":
            return content_cut(self.record)
        return True

    def action_full_text(self) -> None:
        show_full_text(self, self.record)

    def action_reveal(self) -> None:
        if self.check_action("reveal", ()) and self.record is not None:
            self.app.request_reveal(self.record.id)  # type: ignore[attr-defined]

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
        source: MemorySource = self.app.source  # type: ignore[attr-defined]
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


# ---------------------------------------------------------------- pane


def scope_nodes(
    source: MemorySource,
    live: list[TierFacet],
    every: list[TierFacet],
    show_hidden: bool,
    limit: int | None = None,
) -> list[tuple[ScopeNode, list[ScopeNode]]]:
    """The tree's nodes from the live facets and those with hidden records included.

    Each tier lists, per facet key, its values with live records (and, when hidden
    records are shown, those with hidden ones only); at most ``limit`` (``TREE_VALUES``)
    values per key, the largest, in the source's order, then one ``MORE`` leaf counting the rest.
    """
    limit = TREE_VALUES if limit is None else limit
    live_by = {f.tier: f for f in live}
    every_by = {f.tier: f for f in every}
    tiers = list(source.tiers)
    for facet in [*every, *live]:
        if facet.tier not in tiers:
            tiers.append(facet.tier)
    nodes: list[tuple[ScopeNode, list[ScopeNode]]] = []
    for tier in tiers:
        live_facet, every_facet = live_by.get(tier), every_by.get(tier)
        live_count = live_facet.count if live_facet else 0
        total = every_facet.count if every_facet else live_count
        children: list[ScopeNode] = []
        for key in source.facet_keys:
            live_values = live_facet.scopes.get(key, {}) if live_facet else {}
            all_values = dict(every_facet.scopes.get(key, {}) if every_facet else {})
            for value, count in live_values.items():
                all_values.setdefault(value, count)
            entries: list[ScopeNode] = []
            for value, value_total in all_values.items():
                count = live_values.get(value, 0)
                if count or show_hidden:
                    entries.append(ScopeNode(key, tier, value, count, max(value_total - count, 0)))
            if len(entries) > limit:
                ranked = sorted(
                    range(len(entries)),
                    key=lambda i: -(entries[i].live + (entries[i].hidden if show_hidden else 0)),
                )
                keep = set(ranked[:limit])
                children += [n for i, n in enumerate(entries) if i in keep]
                children.append(ScopeNode(MORE, tier, key, len(entries) - limit, 0))
            else:
                children += entries
        nodes.append(
            (
                ScopeNode(TIER, tier, tier, live_count, max(total - live_count, 0)),
                _nested(source, children),
            )
        )
    return nodes


def _nested(source: Any, children: list[ScopeNode]) -> list[ScopeNode]:
    """``children`` with each value's nearest listed parent (``source.scope_parent``,
    then its parent's, ...) and its depth; the same list for a flat source."""
    listed = {(c.kind, c.value) for c in children if c.kind not in (TIER, MORE)}

    def parent_of(kind: str, value: Any) -> Any:
        seen = {value}
        parent = source.scope_parent(kind, value)
        while parent is not None and (kind, parent) not in listed and parent not in seen:
            seen.add(parent)
            parent = source.scope_parent(kind, parent)
        return None if parent is None or (kind, parent) not in listed else parent

    parents = {
        (c.kind, c.value): parent_of(c.kind, c.value)
        for c in children
        if c.kind not in (TIER, MORE)
    }

    def depth_of(kind: str, value: Any) -> int:
        depth, parent, seen = 0, parents.get((kind, value)), {value}
        while parent is not None and parent not in seen:
            seen.add(parent)
            depth += 1
            parent = parents.get((kind, parent))
        return depth

    out = []
    for child in children:
        parent = parents.get((child.kind, child.value))
        if parent is not None:
            child = replace(child, parent=parent, depth=depth_of(child.kind, child.value))
        out.append(child)
    return out


class BrowsePane(Pane):
    """Tiers and scopes on the left; the records and the highlighted one's detail on the right."""

    BINDINGS = [
        Binding("t", "show_hidden", "Show hidden", tooltip="Show refuted and expired records"),
        Binding("t", "hide_hidden", "Hide hidden", tooltip="Hide refuted and expired records"),
        Binding("F", "pick_scope", "Forget scope", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.show_hidden = False
        self._initial = True
        self._scopes_follow = False
        self._first_page = threading.Event()
        """Set when the table has shown its first page (the scope counts wait for it)."""
        """The tree shows the tiers alone; their scopes are being counted."""
        self._counting = False
        self.tier_totals: dict[str, tuple[int, int]] = {}
        self.revealed: dict[str, dict[str, Any]] = {}
        """Values the operator revealed this session, by record id then field (each audited)."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="browse-body"):
            tree = ScopeTree(id="scope-tree")
            tree.border_title = "tiers & scopes"
            yield tree
            with Vertical(id="browse-right"):
                table = RecordTable(id="records")
                table.border_title = "records"
                yield table
                detail = RecordDetail(id="detail")
                detail.border_title = "detail"
                yield detail

    @property
    def tree(self) -> ScopeTree:
        return self.query_one(ScopeTree)

    @property
    def table(self) -> RecordTable:
        return self.query_one(RecordTable)

    def on_mount(self) -> None:
        source = self.source
        self.tree.name_the_scope(forget_noun(source))
        self.tree.show_keys = not isinstance(source, Refutable) and len(source.facet_keys) > 1
        # Each value then carries its key: the tree takes more of the width.
        self.tree.set_class(self.tree.show_keys, "-keys")
        self.reload()

    def main_widget(self) -> RecordTable:
        return self.table

    @property
    def hidden_label(self) -> str:
        """What this source hides: ``refuted and expired`` (memtui), ``deleted and expired``..."""
        return hidden_words(self.source.hidden_state)

    def action_pick_scope(self) -> None:
        """F away from a scope node: say what to pick instead of doing nothing."""
        keys = self.source.forget_scope_keys
        noun = forget_noun(self.source)
        which = f" ({', '.join(scope_label(k) for k in keys)})" if len(keys) > 1 else ""
        article = "an" if noun[:1] in "aeiou" else "a"
        self.notify(
            f"Pick {article} {noun}{which} in the tree first: F forgets every record of one "
            f"{noun}.",
            title=f"Pick {article} {noun}",
            severity="warning",
            timeout=5,
            markup=False,
        )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "pick_scope":
            return bool(self.source.forget_scope_keys) and self.app.offers("forget_scope")  # type: ignore[attr-defined]
        # Two bindings share `t`; only the one that says what `t` will do applies.
        if action == "show_hidden":
            return not self.show_hidden
        if action == "hide_hidden":
            return self.show_hidden
        return True

    def action_show_hidden(self) -> None:
        self.action_toggle_hidden()

    def action_hide_hidden(self) -> None:
        self.action_toggle_hidden()

    def action_toggle_hidden(self) -> None:
        self.show_hidden = not self.show_hidden
        words = self.hidden_label
        self.notify(
            f"showing {words} records (dimmed)" if self.show_hidden else f"{words} records hidden",
            timeout=3,
        )
        self.refresh_bindings()
        self.reload()

    # -- loading

    @property
    def refreshing(self) -> bool:
        """Whether a recount or a page load is still on its way."""
        return self._counting or self.table.loading_page

    def reload(self) -> None:
        """Recount the tree (in the source) and reload the table, keeping the place."""
        self._counting = True
        self._count(self.show_hidden)

    def worker_failed(self, worker: Worker) -> None:
        if worker.group == "counts":
            self._counting = False

    @work(thread=True, exclusive=True, group="counts", exit_on_error=False, name="Counting records")
    def _count(self, show_hidden: bool) -> None:
        source = self.source
        if self._initial and source.quick_tier_counts:
            # The first screen needs the tiers' counts and a page of records; the scopes
            # (two index scans at a million records) follow when they are counted.
            early = self.memtui.take_first_tier_counts()
            if early is not None:  # counted while the screen was being built
                live_tiers, every_tiers = early.result()
            else:
                live_tiers = source.tier_counts()
                every_tiers = source.tier_counts(include_hidden=True)
            tiers_only = scope_nodes(
                source,
                [TierFacet(tier=t, count=n) for t, n in live_tiers.items()],
                [TierFacet(tier=t, count=n) for t, n in every_tiers.items()],
                show_hidden,
            )
            self.app.call_from_thread(self._apply_counts, tiers_only, show_hidden, False)
            # The scope scans would hold the database while the first page is read.
            self._first_page.wait(FIRST_PAGE_WAIT)
        live = source.facets()
        if get_current_worker().is_cancelled:
            return
        every = source.facets(include_hidden=True)
        if get_current_worker().is_cancelled:
            return
        nodes = scope_nodes(source, live, every, show_hidden)
        self.app.call_from_thread(self._apply_counts, nodes, show_hidden)

    def _apply_counts(
        self, nodes: list[tuple[ScopeNode, list[ScopeNode]]], hidden: bool, final: bool = True
    ) -> None:
        """Show the counted tree; ``final`` False: the tiers alone, their scopes to follow."""
        self._counting = not final
        scopes_follow, self._scopes_follow = self._scopes_follow, not final
        tree, table = self.tree, self.table
        previous = table.scope
        keep_row = table.cursor_row if previous is not None and table.records else None
        current = table.current
        keep_id = current.id if current is not None else None
        if hidden != table.show_hidden:
            # `t`: the rows above it change, so its row number means nothing; the
            # highlighted record stays highlighted when it is still listed.
            keep_row = None
        self.tier_totals = {n.tier: (n.live, n.hidden) for n, _ in nodes}
        self.memtui.update_summary(self.tier_totals)
        if not self._initial and previous is not None and tree.update_counts(nodes):
            # Same tiers and scopes: the tree keeps its cursor and scroll.
            node = tree.find(previous.kind, previous.tier, previous.value)
            if node is not None and node.data is not None:
                table.load(node.data, hidden, keep_row, keep_id)
            return
        tree.populate(nodes)
        if not nodes:  # a store with no tier at all: nothing to list
            self._initial = False
            return
        if self._initial or previous is None:
            self._initial = False
            target = next((n for n, _ in nodes if n.live), nodes[0][0])
            node = tree.find(TIER, target.tier, target.tier)
        else:
            node = tree.find(previous.kind, previous.tier, previous.value)
            if node is not None and node.data is not None and node.data.kind != previous.kind:
                keep_row = None
        if node is None or node.data is None:
            return
        if scopes_follow and node.data == previous and hidden == table.show_hidden:
            table.scope = node.data  # the scopes arrived; the table already shows this tier
        else:
            table.load(node.data, hidden, keep_row, keep_id)
        tree.get_node_at_line(0)  # builds the new tree's lines, so the node knows its line
        tree.move_cursor(node, animate=False)

    # -- events

    @on(Tree.NodeHighlighted, "#scope-tree")
    def _scope_highlighted(self, event: Tree.NodeHighlighted[ScopeNode]) -> None:
        self.app.refresh_bindings()  # F applies on engagement nodes only
        data = event.node.data
        table = self.table
        if data is None or event.node is not self.tree.cursor_node:
            return  # stale: the cursor has moved on (or the tree was rebuilt) since
        if data.kind == MORE:
            return  # the values not listed: the table keeps what it shows
        if table.scope == data and table.show_hidden == self.show_hidden:
            return
        table.load(data, self.show_hidden)
        self.app.refresh_bindings()

    @on(Tree.NodeSelected, "#scope-tree")
    def _scope_selected(self, event: Tree.NodeSelected[ScopeNode]) -> None:
        if event.node.data is not None and event.node.data.kind == MORE:
            self.notify(
                "Too many values to list them all here: search with a scope filter.", timeout=4
            )
            return
        self.table.focus()

    @on(DataTable.RowHighlighted, "#records")
    def _record_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()
        self.app.refresh_bindings()  # v applies to records with masked fields only

    @on(RecordTable.PageLoaded)
    def _page_loaded(self) -> None:
        self._first_page.set()
        table = self.table
        scope = table.scope
        if scope is None:
            return
        table.border_title = scope.title()
        total = scope.live + (scope.hidden if table.show_hidden else 0)
        loaded = len(table.records)
        status = plural(total, "record")
        if table.show_hidden and scope.hidden:
            status += f" incl. {scope.hidden:,} {self.hidden_label.replace(' and ', '/')}"
        elif scope.hidden:
            status += f" (+{scope.hidden:,} hidden: t)"
        if not table.exhausted:
            status = f"{loaded:,} of {status} loaded · more on scroll"
        table.border_subtitle = status
        self._show_detail()

    def _show_detail(self) -> None:
        record = self.table.current
        revealed = self.revealed.get(record.id) if record is not None else None
        lift = LIFTED if isinstance(self.source, Refutable) else ()
        self.query_one(RecordDetail).show(record, self.now(), revealed, lift=lift)

    def show_revealed(self, record_id: str, field: str, value: Any) -> None:
        self.revealed.setdefault(str(record_id), {})[field] = value
        self._show_detail()
