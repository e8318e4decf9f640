"""The Browse tab: tiers and scopes with counts, a paged record table, the record's detail."""

from __future__ import annotations

from dataclasses import dataclass
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

from memtui.core.records import TIERS, MemoryRecord
from memtui.core.secrets import secret_paths
from memtui.tui.base import Pane, ReportsWorkerErrors
from memtui.tui.format import (
    Column,
    fit,
    layout_columns,
    plural,
    record_detail,
    record_row,
)

PAGE_SIZE = 200
"""Rows fetched per page (keyset paging: ``after_id`` of the last row shown)."""
PAGE_MARGIN = 20
"""Fetch the next page when the cursor comes this close to the last loaded row."""
MIN_CONTENT_WIDTH = 24


COLUMNS: tuple[Column, ...] = (
    Column("id", "id", 4, None),  # widened to the longest id loaded
    Column("type", "type", 11, None),
    Column("tool", "tool", 8, 3),
    Column("grade", "grade", 10, None),
    Column("sa", "s/a", 5, 4),
    Column("created", "created", 10, 1),
    Column("expires", "expires", 10, 2),
)
CELL_PADDING = 1


@dataclass(frozen=True)
class ScopeNode:
    """What a tree node stands for: a tier, or one scope value within a tier."""

    kind: str  # "tier" | "profile" | "engagement"
    tier: str
    value: str
    live: int
    hidden: int

    @property
    def filters(self) -> dict[str, str]:
        if self.kind == "profile":
            return {"tier": self.tier, "profile_hash": self.value}
        if self.kind == "engagement":
            return {"tier": self.tier, "engagement": self.value}
        return {"tier": self.tier}

    def title(self) -> Text:
        out = Text(self.tier, style="bold")
        if self.kind != "tier":
            out.append(f" › {self.kind} ", style="dim")
            out.append_text(fit(self.value, 80))
        return out


# ---------------------------------------------------------------- tree


class ScopeTree(Tree[ScopeNode]):
    """Tiers, and under each the profiles and engagements it holds, with record counts."""

    BINDINGS = [
        Binding(
            "F",
            "forget_engagement",
            "Forget engagement",
            tooltip="On an engagement: forget all its records (blast radius first)",
        ),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("memory", **kwargs)
        self.show_root = False
        self.auto_expand = False
        self.guide_depth = 3

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "forget_engagement":
            node = self.cursor_node
            return True if node and node.data and node.data.kind == "engagement" else None
        return True

    def action_forget_engagement(self) -> None:
        node = self.cursor_node
        if node is not None and node.data is not None and node.data.kind == "engagement":
            self.app.request_forget_engagement(node.data.value)  # type: ignore[attr-defined]

    def label_for(self, data: ScopeNode) -> Text:
        width = max(self.scrollable_content_region.width, 20)
        count = Text(f" {data.live}", style="bold" if data.kind == "tier" else "")
        if data.hidden:
            suffix = " hidden" if data.kind == "tier" else ""
            count.append(f" +{data.hidden}{suffix}", style="dim")
        if data.kind == "tier":
            label = Text(data.tier, style="bold")
            label.append_text(count)
            return label
        room = width - self.guide_depth - 1 - count.cell_len
        label = fit(data.value, max(room, 8))
        if data.kind == "profile":
            label.stylize("italic")
        label.append_text(count)
        return label

    def populate(self, nodes: list[tuple[ScopeNode, list[ScopeNode]]]) -> None:
        self.clear()
        for tier_node, children in nodes:
            branch = self.root.add(self.label_for(tier_node), data=tier_node, expand=True)
            for child in children:
                branch.add_leaf(self.label_for(child), data=child)

    def update_counts(self, nodes: list[tuple[ScopeNode, list[ScopeNode]]]) -> bool:
        """New counts in place when the same tiers and scopes are listed (cursor and
        scroll stay); False when the shape changed and the tree must be rebuilt."""
        shape = [(t.tier, [(c.kind, c.value) for c in children]) for t, children in nodes]
        current = [
            (
                t.data.tier if t.data else None,
                [(c.data.kind, c.data.value) if c.data else None for c in t.children],
            )
            for t in self.root.children
        ]
        if shape != current:
            return False
        for (tier_data, children), tier_node in zip(nodes, self.root.children, strict=True):
            if tier_node.data != tier_data:
                tier_node.data = tier_data
                tier_node.set_label(self.label_for(tier_data))
            for data, child in zip(children, tier_node.children, strict=True):
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

    def find(self, kind: str, tier: str, value: str) -> TreeNode[ScopeNode] | None:
        for tier_node in self.root.children:
            if tier_node.data is None or tier_node.data.tier != tier:
                continue
            if kind == "tier":
                return tier_node
            for child in tier_node.children:
                if child.data and child.data.kind == kind and child.data.value == value:
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
        Binding("home", "scroll_top", "First row", show=False),
        Binding("end", "scroll_bottom", "Last loaded row", show=False),
    ]

    class PageLoaded(Message):
        """A page of records arrived (the table's subtitle and detail may change)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", cell_padding=CELL_PADDING, **kwargs)
        self.records: list[MemoryRecord] = []
        self.scope: ScopeNode | None = None
        self.show_hidden = False
        self.exhausted = True
        self.loading_page = False
        self._generation = 0
        self._rows_key: tuple[str, str, str, bool] | None = None
        self._layout_width = 0
        self._columns: list[Column] = []
        self._id_width = 4  # grows with the ids shown
        self._content_width = MIN_CONTENT_WIDTH

    # -- state

    @property
    def current(self) -> MemoryRecord | None:
        if not self.records or self.cursor_row < 0 or self.cursor_row >= len(self.records):
            return None
        return self.records[self.cursor_row]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("refute", "forget"):
            return True if self.current is not None else None
        if action == "reveal":
            # Shown only where it applies: a record with masked fields.
            return self.current is not None and bool(secret_paths(self.current.metadata))
        return True

    def action_reveal(self) -> None:
        if self.current is not None:
            self.app.request_reveal(self.current.id)  # type: ignore[attr-defined]

    def action_refute(self) -> None:
        if self.current is not None:
            self.app.request_refute(self.current.id)  # type: ignore[attr-defined]

    def action_forget(self) -> None:
        if self.current is not None:
            self.app.request_forget(self.current.id)  # type: ignore[attr-defined]

    # -- loading

    def load(
        self,
        scope: ScopeNode,
        show_hidden: bool,
        keep_row: int | None = None,
        keep_id: int | None = None,
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
        key: tuple[str, str, str, bool] | None,
        filters: dict[str, str],
        show_hidden: bool,
        after_id: int | None,
        limit: int,
        keep_row: int | None,
        keep_id: int | None,
    ) -> None:
        store = self.app.store  # type: ignore[attr-defined]
        rows = store.fetch(
            include_refuted=show_hidden,
            include_expired=show_hidden,
            limit=limit + 1,
            after_id=after_id,
            **filters,
        )
        if get_current_worker().is_cancelled:
            return
        more = len(rows) > limit
        self.app.call_from_thread(
            self._apply_page,
            generation,
            key,
            rows[:limit],
            more,
            after_id is not None,
            keep_row,
            keep_id,
        )

    def worker_failed(self, worker: Worker) -> None:
        self.loading_page = False

    def _apply_page(
        self,
        generation: int,
        key: tuple[str, str, str, bool] | None,
        rows: list[MemoryRecord],
        more: bool,
        append: bool,
        keep_row: int | None,
        keep_id: int | None,
    ) -> None:
        if generation != self._generation:
            return
        self.loading_page = False
        self.exhausted = not more
        now = self.app.store.now()  # type: ignore[attr-defined]
        id_width = max([len(str(r.id)) for r in rows] + [self._id_width])
        shown = len(self.records)
        if not append and key == self._rows_key and shown and rows[:shown] == self.records:
            # A refresh in which nothing shown changed: only new rows arrived (or none).
            append, rows = True, rows[shown:]
        if append and id_width > self._id_width:
            self._id_width = id_width
            self.records.extend(rows)
            self._ensure_columns(force=True)
        elif append:
            self.records.extend(rows)
            self._add_rows(rows, now)
        else:
            force = id_width > self._id_width
            self._id_width = id_width
            old_row, old_scroll = self.cursor_row, self.scroll_y
            self.records = []
            self.clear()
            self._ensure_columns(force=force)
            self.records = list(rows)
            self._add_rows(rows, now)
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

    def _add_rows(self, rows: list[MemoryRecord], now: Any) -> None:
        keys = [c.key for c in self._columns]
        for record in rows:
            cells = record_row(record, now, self._content_width)
            by_key = dict(zip([c.key for c in COLUMNS] + ["content"], cells, strict=True))
            self.add_row(*[by_key[k] for k in keys], by_key["content"], key=str(record.id))

    def _ensure_columns(self, *, force: bool) -> None:
        width = self.scrollable_content_region.width or self.size.width or 80
        if not force and self._columns and width == self._layout_width:
            return
        self._layout_width = width
        columns = tuple(
            Column(c.key, c.label, self._id_width, c.drop_order) if c.key == "id" else c
            for c in COLUMNS
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
            self._add_rows(self.records, self.app.store.now())  # type: ignore[attr-defined]
            self.move_cursor(row=min(max(row, 0), len(self.records) - 1), animate=False)

    def on_resize(self, event: Resize) -> None:
        if self._columns:
            self._ensure_columns(force=False)

    @on(DataTable.RowHighlighted)
    def _maybe_load_more(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row >= len(self.records) - PAGE_MARGIN:
            self.load_more()


class RecordDetail(VerticalScroll):
    """Every field of the highlighted record; focusable so it scrolls from the keyboard."""

    BINDINGS = [
        Binding("v", "reveal", "Reveal", tooltip="Reveal one masked metadata field (audited)"),
        Binding("R", "reveal", "Reveal", show=False, tooltip="Reveal a masked field (as v)"),
    ]

    can_focus = True
    _shown: int | None = None

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.record: MemoryRecord | None = None
        self._rendered: tuple[Any, ...] | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text("No record selected.", style="dim"), id="detail-body")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "reveal":
            return self.record is not None and bool(secret_paths(self.record.metadata))
        return True

    def action_reveal(self) -> None:
        if self.record is not None:
            self.app.request_reveal(self.record.id)  # type: ignore[attr-defined]

    def show(
        self, record: MemoryRecord | None, now: Any, revealed: dict[str, Any] | None = None
    ) -> None:
        # A live refresh re-shows the same record every time the agent writes: render
        # only when something on screen would change (a 100 kB detail is not free).
        # "in 3d" and the expiry state move with the clock, a minute is fine enough.
        state = (record, now.replace(second=0, microsecond=0), dict(revealed or {}))
        if state == self._rendered:
            return
        self._rendered = state
        self.record = record
        body = self.query_one("#detail-body", Static)
        if record is None:
            self.border_title = "detail"
            body.update(Text("No record selected.", style="dim"))
            return
        self.border_title = f"record #{record.id}"
        body.update(record_detail(record, now, revealed))
        if record.id != self._shown:
            self.scroll_home(animate=False)
        self._shown = record.id


# ---------------------------------------------------------------- pane


class BrowsePane(Pane):
    """Tiers and scopes on the left; the records and the highlighted one's detail on the right."""

    BINDINGS = [
        Binding("t", "show_hidden", "Show hidden", tooltip="Show refuted and expired records"),
        Binding("t", "hide_hidden", "Hide hidden", tooltip="Hide refuted and expired records"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.show_hidden = False
        self._initial = True
        self._counting = False
        self.tier_totals: dict[str, tuple[int, int]] = {}
        self.revealed: dict[int, dict[str, Any]] = {}
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
        self.reload()

    def focus_main(self) -> None:
        self.table.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
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
        self.notify(
            "showing refuted and expired records (dimmed)"
            if self.show_hidden
            else "refuted and expired records hidden",
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
        """Recount the tree (in SQL) and reload the table, keeping the place."""
        self._counting = True
        self._count(self.show_hidden)

    def worker_failed(self, worker: Worker) -> None:
        if worker.group == "counts":
            self._counting = False

    @work(thread=True, exclusive=True, group="counts", exit_on_error=False, name="Counting records")
    def _count(self, show_hidden: bool) -> None:
        store = self.store
        live = store.tier_counts()
        every = store.tier_counts(include_refuted=True, include_expired=True)
        nodes: list[tuple[ScopeNode, list[ScopeNode]]] = []
        for tier in TIERS:
            scopes_live = store.scope_counts(tier)
            scopes_all = store.scope_counts(tier, include_refuted=True, include_expired=True)
            children: list[ScopeNode] = []
            for key, kind in (("profile_hash", "profile"), ("engagement", "engagement")):
                for value, total in scopes_all.get(key, {}).items():
                    count = scopes_live.get(key, {}).get(value, 0)
                    if count or show_hidden:
                        children.append(ScopeNode(kind, tier, value, count, total - count))
            tier_node = ScopeNode("tier", tier, tier, live.get(tier, 0), every[tier] - live[tier])
            nodes.append((tier_node, children))
        if get_current_worker().is_cancelled:
            return
        self.app.call_from_thread(self._apply_counts, nodes, show_hidden)

    def _apply_counts(self, nodes: list[tuple[ScopeNode, list[ScopeNode]]], hidden: bool) -> None:
        self._counting = False
        tree, table = self.tree, self.table
        previous = table.scope
        keep_row = table.cursor_row if previous is not None and table.records else None
        current = table.current
        keep_id = current.id if current is not None else None
        if hidden != table.show_hidden:
            keep_row = keep_id = None
        self.tier_totals = {n.tier: (n.live, n.hidden) for n, _ in nodes}
        self.memtui.update_summary(self.tier_totals)
        if not self._initial and previous is not None and tree.update_counts(nodes):
            # Same tiers and scopes: the tree keeps its cursor and scroll.
            node = tree.find(previous.kind, previous.tier, previous.value)
            if node is not None and node.data is not None:
                table.load(node.data, hidden, keep_row, keep_id)
            return
        tree.populate(nodes)
        if self._initial or previous is None:
            self._initial = False
            target = next((n for n, _ in nodes if n.live), nodes[0][0])
            node = tree.find("tier", target.tier, target.tier)
        else:
            node = tree.find(previous.kind, previous.tier, previous.value)
            if node is not None and node.data is not None and node.data.kind != previous.kind:
                keep_row = None
        if node is None or node.data is None:
            return
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
        if table.scope == data and table.show_hidden == self.show_hidden:
            return
        table.load(data, self.show_hidden)
        self.app.refresh_bindings()

    @on(Tree.NodeSelected, "#scope-tree")
    def _scope_selected(self, event: Tree.NodeSelected[ScopeNode]) -> None:
        self.table.focus()

    @on(DataTable.RowHighlighted, "#records")
    def _record_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()
        self.app.refresh_bindings()  # R applies to records with masked fields only

    @on(RecordTable.PageLoaded)
    def _page_loaded(self) -> None:
        table = self.table
        scope = table.scope
        if scope is None:
            return
        table.border_title = scope.title()
        total = scope.live + (scope.hidden if table.show_hidden else 0)
        loaded = len(table.records)
        status = plural(total, "record")
        if table.show_hidden and scope.hidden:
            status += f" incl. {scope.hidden} refuted/expired"
        elif scope.hidden:
            status += f" (+{scope.hidden} hidden: t)"
        if not table.exhausted:
            status = f"{loaded} of {status} loaded · more on scroll"
        table.border_subtitle = status
        self._show_detail()

    def _show_detail(self) -> None:
        record = self.table.current
        revealed = self.revealed.get(record.id) if record is not None else None
        self.query_one(RecordDetail).show(record, self.now(), revealed)

    def show_revealed(self, record_id: int, field: str, value: Any) -> None:
        self.revealed.setdefault(record_id, {})[field] = value
        self._show_detail()
