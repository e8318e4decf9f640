"""The app on a foreign memory store, through the ``MemorySource`` interface only.

A memtui database opens in ``MemtuiApp`` (every native feature); any other store
(LangGraph, Letta, preference, tenant evidence, Qdrant collections) opens here:
Browse (tiers and scopes from ``facets``, records from ``page``, detail from
``get`` + ``detail``), Search (``search`` with the native breakdown, the
keyword index built in a worker with progress when needed), Audit (memtui's
audit database of the store, interrupted forgets shown) and a forget action
gated by ``can("forget")`` under the store's own rule (``forget_preview``).
"""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text
from textual import events, on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import (
    Button,
    DataTable,
    Footer,
    Input,
    Label,
    Static,
    TabbedContent,
    TabPane,
    Tree,
)

from memtui.core.search import SearchResponse
from memtui.render import one_line, safe_text
from memtui.sources.base import MemorySource, SourceError, SourceRecord
from memtui.tui.base import ReportsWorkerErrors
from memtui.tui.breakdown import render_breakdown
from memtui.tui.help import key_label

PAGE_SIZE = 200
TABS = ("browse", "search", "lanes", "audit")
POLL_INTERVAL = 1.0
"""Seconds between two ``source.data_version()`` checks (cheap; refreshes on change)."""

# Browse table: (column, natural width); id and content are sized to the terminal.
OPTIONAL_COLUMNS = (("state", 8), ("tier", 12), ("created", 19), ("type", 12))
COLUMN_ORDER = ("id", "tier", "type", "state", "created", "content")
CELL_PADDING = 2  # DataTable's cell padding, both sides


def tree_width(width: int) -> int:
    """The Browse tree's width for a terminal ``width`` columns wide."""
    return max(20, min(36, width // 4))


def record_columns(width: int) -> list[tuple[str, int]]:
    """The Browse table's columns and their widths for a terminal ``width`` columns wide.

    The id and the content always show; state, tier, created and type follow while
    the content keeps at least 40% of the table, so nothing runs off the right edge.
    """
    available = max(30, width - tree_width(width) - 4)  # borders and the scrollbar
    id_width = max(12, min(40, available // 4))
    content_min = max(16, available * 2 // 5)
    left = available - (id_width + CELL_PADDING) - (content_min + CELL_PADDING)
    chosen = {"id": id_width}
    for name, natural in OPTIONAL_COLUMNS:
        if left >= natural + CELL_PADDING:
            chosen[name] = natural
            left -= natural + CELL_PADDING
    chosen["content"] = max(
        content_min, available - sum(w + CELL_PADDING for w in chosen.values()) - CELL_PADDING
    )
    return [(name, chosen[name]) for name in COLUMN_ORDER if name in chosen]


class ConfirmSourceForget(ModalScreen[str | None]):
    """Forget one record of a foreign store: its rule shown, a reason required."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, record: SourceRecord, rule: str, removes: list[str]) -> None:
        super().__init__(classes="dialog-forget")
        self.record = record
        self.rule = rule
        self.removes = removes

    def compose(self) -> ComposeResult:
        record = self.record
        with Vertical(classes="dialog") as box:
            box.border_title = "Forget record?"
            summary = Text()
            summary.append_text(one_line(record.id, 80))
            summary.append("  tier ", style="dim")
            summary.append_text(one_line(record.tier, 30))
            summary.append("  type ", style="dim")
            summary.append_text(one_line(record.record_type, 30))
            yield Static(summary, classes="dialog-summary")
            yield Static(safe_text(record.content, limit=400), classes="dialog-preview")
            warning = Text("Rule: ", style="bold")
            warning.append_text(safe_text(self.rule))
            if len(self.removes) > 1:
                warning.append(f"\nremoves {len(self.removes)} records")
            warning.append("\nThis cannot be undone; it is written to memtui's audit log.")
            yield Static(warning, classes="dialog-warning")
            yield Label("Reason (written to the audit log)")
            yield Input(placeholder="why?", id="reason")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel", variant="primary")
                yield Button("Forget", id="confirm", variant="error")

    def on_mount(self) -> None:
        self.query_one("#reason", Input).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#cancel")
    def _cancel(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(None)

    @on(Button.Pressed, "#confirm")
    def _confirm(self, event: Button.Pressed) -> None:
        event.stop()
        reason = self.query_one("#reason", Input).value.strip()
        if not reason:
            self.notify("A reason is required: say why, it goes into the audit log.")
            return
        self.dismiss(reason)

    @on(Input.Submitted)
    def _next(self, event: Input.Submitted) -> None:
        event.stop()
        self.focus_next()


class SourceHelpScreen(ModalScreen[None]):
    """Every key of the source app, from its bindings."""

    BINDINGS = [Binding("escape,q,question_mark", "close", "Close help", key_display="esc")]

    def __init__(self, bindings: list[Binding]) -> None:
        super().__init__()
        self.bindings = bindings

    def compose(self) -> ComposeResult:
        from rich.table import Table

        table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 0))
        table.add_column("key", style="bold", no_wrap=True, min_width=8)
        table.add_column("what", ratio=1)
        table.add_row(
            Text("Anywhere (a text box types these keys instead)", style="bold underline"), ""
        )
        for binding in self.bindings:
            table.add_row(Text(key_label(binding), style="bold cyan"), Text(binding.description))
        table.add_row("", "")
        table.add_row(Text("Moving around", style="bold underline"), "")
        for key, what in (
            ("tab", "Next / previous widget (shift+tab)"),
            ("↑ ↓", "Move in a tree or table; the detail follows"),
            ("enter", "Tree: show that tier or scope; query box: search"),
            ("ctrl+p", "Command palette"),
        ):
            table.add_row(Text(key, style="bold cyan"), Text(what))
        with VerticalScroll(id="help-body", classes="dialog") as body:
            body.border_title = "memtui keys"
            body.border_subtitle = "esc closes"
            yield Static(table)

    def on_mount(self) -> None:
        self.query_one("#help-body").focus()

    def action_close(self) -> None:
        self.dismiss(None)


class SourceApp(ReportsWorkerErrors, App[None]):
    """Browse, search, audit and forget on any ``MemorySource``."""

    CSS_PATH = "app.tcss"
    TITLE = "memtui"

    BINDINGS = [
        Binding("1", "switch_tab('browse')", "Browse tab", show=False),
        Binding("2", "switch_tab('search')", "Search tab", show=False),
        Binding("3", "switch_tab('lanes')", "Lanes tab", show=False),
        Binding("4", "switch_tab('audit')", "Audit tab", show=False),
        Binding("slash", "search", "Search", key_display="/"),
        Binding("f", "forget", "Forget"),
        Binding("h", "toggle_hidden", "Hidden"),
        Binding("n", "next_page", "More"),
        Binding("v", "verify_audit", "Verify audit"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        source: MemorySource,
        *,
        operator: str | None = None,
        db_label: str | None = None,
        embedder: Any = None,
        poll_interval: float | None = POLL_INTERVAL,
    ) -> None:
        super().__init__()
        self.poll_interval = poll_interval
        self.version: Any = None
        self.changed = False
        self.columns: list[tuple[str, int]] = []
        self.source = source
        self.operator = operator
        self.db_label = db_label or source.label
        self.embedder = embedder
        self.include_hidden = False
        self.filters: dict[str, Any] = {}
        self.cursor: str | None = None
        self.rows: dict[str, SourceRecord] = {}
        self.response: SearchResponse | None = None
        self.last_query = ""

    @property
    def read_only(self) -> bool:
        return self.source.read_only

    # ------------------------------------------------------------ layout

    def _title(self) -> Text:
        mode = "read-only" if self.source.read_only else "writable"
        head = Text()
        head.append("memtui ", style="bold")
        head.append_text(one_line(self.db_label, 60))
        head.append(f"  {self.source.kind_label} · {mode}", style="dim")
        if self.changed:
            head.append("  live: changed", style="bold green")
        return head

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="source-title")
        yield Static("", id="source-banner")
        with TabbedContent(initial="browse", id="tabs"):
            with TabPane("Browse", id="browse"):
                with Horizontal():
                    yield Tree("tiers", id="source-tree")
                    with Vertical():
                        yield DataTable(id="source-records", cursor_type="row")
                        yield Static("", id="source-page")
                        with VerticalScroll():
                            yield Static("", id="source-detail")
            with TabPane("Search", id="search"):
                yield Input(placeholder="search…", id="source-query")
                yield Static("", id="source-index")
                yield DataTable(id="source-results", cursor_type="row")
                with VerticalScroll():
                    yield Static("", id="source-breakdown")
            with TabPane("Lanes", id="lanes"):
                yield Static(self._lanes_text(), id="source-lanes")
            with TabPane("Audit", id="audit"):
                yield Static("", id="source-audit-status")
                yield DataTable(id="source-audit", cursor_type="row")
        yield Footer()

    def _lanes_text(self) -> Text:
        return Text(
            "Lanes (priors, tactics, history) need a memtui database: "
            f"this is a {self.source.kind_label}."
        )

    def on_mount(self) -> None:
        table = self.query_one("#source-records", DataTable)
        self._layout(self.size.width)
        results = self.query_one("#source-results", DataTable)
        results.add_columns("#", "id", "score", "keyword", "vector", "content")
        audit = self.query_one("#source-audit", DataTable)
        audit.add_columns("#", "time", "action", "status", "record", "reason")
        table.focus()
        self.reload()
        if self.poll_interval:
            self.set_interval(self.poll_interval, self.poll_changes)

    def on_resize(self, event: events.Resize) -> None:
        if self.is_mounted and self.screen.query("#source-records"):
            self._layout(event.size.width)

    def _layout(self, width: int) -> None:
        """Size the tree and the records table to the terminal (the content stays on screen)."""
        self.query_one("#source-tree", Tree).styles.width = tree_width(width)
        columns = record_columns(width)
        if columns == self.columns:
            return
        self.columns = columns
        table = self.query_one("#source-records", DataTable)
        keep = self._highlighted(table)
        table.clear(columns=True)
        for name, size in columns:
            table.add_column(name, width=size, key=name)
        for record in self.rows.values():
            self._add_record(table, record)
        self._restore(table, keep)

    @staticmethod
    def _highlighted(table: DataTable) -> str | None:
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return None if key is None else str(key)

    @staticmethod
    def _restore(table: DataTable, record_id: str | None) -> None:
        if record_id is None:
            return
        try:
            row = table.get_row_index(record_id)
        except Exception:  # the record is gone
            return
        table.move_cursor(row=row, animate=False)

    def _add_record(self, table: DataTable, record: SourceRecord) -> None:
        style = "" if record.live else "dim"
        cells = {
            "id": lambda w: one_line(record.id, w),
            "tier": lambda w: one_line(record.tier, w),
            "type": lambda w: one_line(record.record_type, w),
            "state": lambda w: Text(record.state[:w], style=style),
            "created": lambda w: one_line((record.created_at or "")[:w], w),
            "content": lambda w: safe_text(record.content, limit=w, style=style),
        }
        table.add_row(*(cells[name](size) for name, size in self.columns), key=record.id)

    # ------------------------------------------------------------ live changes

    def poll_changes(self) -> None:
        """Check ``source.data_version()``; on a change refresh counts, table and audit."""
        self._poll()

    @work(thread=True, exclusive=True, group="poll", name="poll")
    def _poll(self) -> None:
        version = self.source.data_version()
        self.call_from_thread(self._polled, version)

    def _polled(self, version: Any) -> None:
        if self.version is None:
            self.version = version
            return
        if version == self.version:
            return
        self.version = version
        self.changed = True
        self.query_one("#source-title", Static).update(self._title())
        self._load_summary()
        self._load_tree()
        self._refresh_page()
        self._load_audit()

    # ------------------------------------------------------------ loading

    def reload(self) -> None:
        self._load_summary()
        self._load_tree()
        self._load_page(reset=True)
        self._load_audit()

    @work(thread=True, exclusive=True, group="summary", name="summary")
    def _load_summary(self) -> None:
        summary = self.source.summary()
        notes = list(summary.notes)
        interrupted = self.source.interrupted_forgets() if self.source.can("audit") else []
        self.call_from_thread(self._show_summary, summary.counts, notes, len(interrupted))

    def _show_summary(self, counts: dict[str, int], notes: list[str], interrupted: int) -> None:
        text = Text()
        text.append(", ".join(f"{k} {v}" for k, v in counts.items()), style="bold")
        for note in notes:
            text.append("\n· ")
            text.append_text(safe_text(note, limit=300))
        if interrupted:
            text.append(
                f"\n· {interrupted} interrupted forget(s): see the Audit tab",
                style="bold red",
            )
        if self.source.read_only:
            text.append("\n· read-only: forget needs --allow-writes", style="dim")
        self.query_one("#source-banner", Static).update(text)

    @work(thread=True, exclusive=True, group="tree", name="facets")
    def _load_tree(self) -> None:
        facets = self.source.facets(include_hidden=self.include_hidden)
        self.call_from_thread(self._show_tree, facets)

    def _show_tree(self, facets: list[Any]) -> None:
        tree = self.query_one("#source-tree", Tree)
        tree.clear()
        tree.root.data = {}
        tree.root.set_label(f"all ({sum(f.count for f in facets)})")
        for facet in facets:
            node = tree.root.add(
                Text(f"{facet.tier} ({facet.count})"), data={"tier": facet.tier}, expand=True
            )
            for key, values in facet.scopes.items():
                for value, count in values.items():
                    label = Text(f"{key}=")
                    label.append_text(one_line(value, 40))
                    label.append(f" ({count})")
                    node.add_leaf(label, data={"tier": facet.tier, key: value})
        tree.root.expand()

    @on(Tree.NodeSelected, "#source-tree")
    def _node_selected(self, event: Tree.NodeSelected) -> None:
        self.filters = dict(event.node.data or {})
        self._load_page(reset=True)

    def _load_page(self, *, reset: bool) -> None:
        if reset:
            self.cursor = None
            self.rows = {}
            self.query_one("#source-records", DataTable).clear()
        self._fetch_page(dict(self.filters), self.cursor, PAGE_SIZE, None)

    def _refresh_page(self) -> None:
        """Re-read the rows shown so far, keeping the highlighted record."""
        table = self.query_one("#source-records", DataTable)
        keep = self._highlighted(table)
        limit = max(PAGE_SIZE, len(self.rows))
        self._fetch_page(dict(self.filters), None, limit, keep or "")

    @work(thread=True, exclusive=True, group="page", name="records")
    def _fetch_page(
        self, filters: dict[str, Any], cursor: str | None, limit: int, keep: str | None
    ) -> None:
        page = self.source.page(
            filters, after=cursor, limit=limit, include_hidden=self.include_hidden
        )
        self.call_from_thread(self._show_page, page, keep)

    def _show_page(self, page: Any, keep: str | None = None) -> None:
        table = self.query_one("#source-records", DataTable)
        if keep is not None:  # a refresh: replace the rows, keep the highlight
            self.rows = {}
            table.clear()
        for record in page.records:
            if record.id in self.rows:
                continue
            self.rows[record.id] = record
            self._add_record(table, record)
        if keep:
            self._restore(table, keep)
        self.cursor = page.next_cursor
        more = " · n loads more" if page.next_cursor else ""
        self.query_one("#source-page", Static).update(
            Text(f"{len(self.rows)} records shown{more}", style="dim")
        )
        if table.row_count and not table.cursor_row:
            self._show_record_of(table)

    def action_next_page(self) -> None:
        if self.cursor is not None:
            self._load_page(reset=False)

    def _show_record_of(self, table: DataTable) -> None:
        if not table.row_count:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        if key is not None:
            self._load_detail(str(key))

    @on(DataTable.RowHighlighted, "#source-records")
    def _record_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self._load_detail(str(event.row_key.value))

    @work(thread=True, exclusive=True, group="detail", name="detail")
    def _load_detail(self, record_id: str) -> None:
        record = self.source.get(record_id)
        sections = self.source.detail(record_id) if record is not None else []
        notes = self.source.notes(record) if record is not None else ""
        self.call_from_thread(self._show_detail, record_id, record, sections, notes)

    def _show_detail(self, record_id: str, record: Any, sections: list[Any], notes: str) -> None:
        out = Text()
        if record is None:
            out.append_text(safe_text(f"record {record_id} is gone"))
        else:
            data = record.to_json(mask=True)
            for key in ("id", "tier", "record_type", "state", "created_at", "expires_at"):
                out.append(f"{key:<12}", style="bold")
                out.append_text(safe_text(data[key]))
                out.append("\n")
            for key, value in data["scope"].items():
                out.append(f"{key:<12}", style="bold")
                out.append_text(safe_text(value))
                out.append("\n")
            if notes:
                out.append("notes       ", style="bold")
                out.append_text(safe_text(notes))
                out.append("\n")
            out.append("\ncontent\n", style="bold underline")
            out.append_text(safe_text(record.content, keep_lines=True))
            out.append("\n\nmetadata\n", style="bold underline")
            out.append_text(
                safe_text(
                    json.dumps(data["metadata"], indent=2, ensure_ascii=False, default=str),
                    keep_lines=True,
                )
            )
            for section in sections:
                out.append(f"\n\n{section.title}\n", style="bold underline")
                if section.columns:
                    out.append(" | ".join(section.columns) + "\n", style="dim")
                for row in section.rows:
                    out.append_text(safe_text(" | ".join(str(c) for c in row), limit=400))
                    out.append("\n")
                if section.note:
                    out.append_text(safe_text(section.note, style="dim"))
        self.query_one("#source-detail", Static).update(out)

    # ------------------------------------------------------------ search

    def action_search(self) -> None:
        self.action_switch_tab("search")

    @on(Input.Submitted, "#source-query")
    def _query(self, event: Input.Submitted) -> None:
        query = event.value.strip()
        if query:
            self.last_query = query
            self._run_search(query)

    @work(thread=True, exclusive=True, group="search", name="search")
    def _run_search(self, query: str) -> None:
        status = self.source.index_status()
        if not status.get("ready", True):
            self.call_from_thread(self._index_progress, 0, 0)

            def progress(done: int, total: int) -> None:
                self.call_from_thread(self._index_progress, done, total)

            self.source.build_index(progress)
            self.call_from_thread(self._index_done)
        response = self.source.search(query, embedder=self.embedder, limit=20)
        records = self.source.get_many(r.id for r in response.results)
        self.call_from_thread(self._show_results, response, records)

    def _index_progress(self, done: int, total: int) -> None:
        text = f"building the keyword index: {done}/{total}" if total else "building the index…"
        self.query_one("#source-index", Static).update(Text(text, style="yellow"))

    def _index_done(self) -> None:
        self.query_one("#source-index", Static).update(Text("keyword index ready", style="dim"))

    def _show_results(self, response: SearchResponse, records: dict[str, SourceRecord]) -> None:
        self.response = response
        table = self.query_one("#source-results", DataTable)
        table.clear()
        for result in response.results:
            record = records.get(result.id)  # type: ignore[attr-defined]
            table.add_row(
                str(result.rank),
                one_line(result.id, 40),  # type: ignore[attr-defined]
                f"{result.score:.4f}",
                f"{result.keyword_score:.4f}",
                f"{result.vector_score:.4f}",
                safe_text(record.content if record else "", limit=80),
                key=result.id,  # type: ignore[attr-defined]
            )
        fallback = response.trace.get("fallback") or response.trace.get("vector_fallback")
        line = f"{len(response.results)} results"
        if fallback:
            line += f" · {fallback}"
        self.query_one("#source-index", Static).update(Text(line, style="dim"))
        if response.results:
            self._explain(response.results[0].id)  # type: ignore[attr-defined]
        else:
            self.query_one("#source-breakdown", Static).update(Text("no results"))

    @on(DataTable.RowHighlighted, "#source-results")
    def _result_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None and self.response is not None:
            self._explain(str(event.row_key.value))

    @work(thread=True, exclusive=True, group="explain", name="explain")
    def _explain(self, record_id: str) -> None:
        response = self.response
        if response is None:
            return
        result = next((r for r in response.results if r.id == record_id), None)  # type: ignore[attr-defined]
        if result is None:
            return
        explanation = None
        if result.keyword_score:
            try:
                explanation = self.source.explain(self.last_query, record_id)
            except SourceError:
                explanation = None
        text = render_breakdown(result, response.trace, explanation)
        self.call_from_thread(self.query_one("#source-breakdown", Static).update, text)

    # ------------------------------------------------------------ audit

    @work(thread=True, exclusive=True, group="audit", name="audit")
    def _load_audit(self, verify: bool = False) -> None:
        if not self.source.can("audit"):
            self.call_from_thread(self._show_audit, [], "no audit log for this source", [])
            return
        events = self.source.audit_events(limit=200)
        broken = self.source.verify_audit() if verify else None
        status = (
            ("audit chain BROKEN: " + broken if broken else "audit chain verified")
            if verify
            else f"{len(events)} events (v verifies the hash chain)"
        )
        interrupted = self.source.interrupted_forgets()
        self.call_from_thread(self._show_audit, events, status, interrupted)

    def _show_audit(self, events: list[dict[str, Any]], status: str, interrupted: list) -> None:
        text = Text(status)
        if interrupted:
            text.append(f"\n{len(interrupted)} interrupted forget(s)", style="bold red")
        self.query_one("#source-audit-status", Static).update(text)
        table = self.query_one("#source-audit", DataTable)
        table.clear()
        for event in events:
            table.add_row(
                str(event.get("id")),
                one_line(str(event.get("created_at") or event.get("at") or "")[:19], 19),
                one_line(event.get("action", ""), 20),
                one_line(event.get("status") or "", 12),
                one_line(
                    ",".join(str(i) for i in event.get("record_ids") or [])
                    or event.get("record_id")
                    or "",
                    40,
                ),
                one_line(event.get("reason") or "", 60),
            )

    def action_verify_audit(self) -> None:
        self.action_switch_tab("audit")
        self._load_audit(verify=True)

    # ------------------------------------------------------------ actions

    MAIN_WIDGETS = {
        "browse": "#source-records",
        "search": "#source-query",
        "lanes": None,
        "audit": "#source-audit",
    }

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("search", "switch_tab") and isinstance(self.focused, Input):
            return False  # digits and "/" type into a text box; do not advertise them there
        return True

    def action_switch_tab(self, tab: str) -> None:
        tabs = self.query_one("#tabs", TabbedContent)
        selector = self.MAIN_WIDGETS.get(tab)
        if tabs.active != tab:
            # Focus leaves the old tab first, so hiding it cannot pull focus back.
            self.set_focus(None)
            tabs.active = tab
        if selector is not None:
            widget = self.query_one(selector)
            self.call_after_refresh(widget.focus)

    def action_help(self) -> None:
        if not isinstance(self.screen, SourceHelpScreen):
            self.push_screen(SourceHelpScreen([b for b in self.BINDINGS if isinstance(b, Binding)]))

    def action_toggle_hidden(self) -> None:
        self.include_hidden = not self.include_hidden
        shown = "shown" if self.include_hidden else "hidden"
        self.notify(f"{self.source.hidden_state} and expired records {shown}")
        self._load_tree()
        self._load_page(reset=True)

    def current_record_id(self) -> str | None:
        tab = self.query_one("#tabs", TabbedContent).active
        table_id = "#source-results" if tab == "search" else "#source-records"
        table = self.query_one(table_id, DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return None if key is None else str(key)

    def action_forget(self) -> None:
        record_id = self.current_record_id()
        if record_id is None:
            self.notify("No record selected.", severity="warning")
            return
        self.request_forget(record_id)

    def request_forget(self, record_id: str) -> None:
        try:
            self.source.require("forget")
        except SourceError as exc:
            self.notify(str(exc), title="Cannot forget", severity="warning", markup=False)
            return
        self._prepare_forget(record_id)

    @work(thread=True, exclusive=True, group="change", name="forget")
    def _prepare_forget(self, record_id: str) -> None:
        record = self.source.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        preview = self.source.forget_preview(record_id)
        self.call_from_thread(self._ask_forget, record, preview)

    def _ask_forget(self, record: SourceRecord, preview: dict[str, Any]) -> None:
        dialog = ConfirmSourceForget(
            record, str(preview.get("rule", "")), [str(r) for r in preview.get("records", [])]
        )

        def confirmed(reason: str | None) -> None:
            if reason:
                self._forget(record.id, reason)

        self.push_screen(dialog, confirmed)

    @work(thread=True, exclusive=True, group="change", name="forget")
    def _forget(self, record_id: str, reason: str) -> None:
        outcome = self.source.forget(record_id, reason=reason, operator=self.operator)
        version = self.source.data_version()  # our own change is not "live: changed"
        self.call_from_thread(setattr, self, "version", version)
        self.call_from_thread(self._forgotten, outcome)

    def _forgotten(self, outcome: Any) -> None:
        verified = "erasure verified" if outcome.verified else "erasure NOT verified"
        message = f"forgot {outcome.record_id} (audit event #{outcome.event_id}; {verified})"
        if outcome.problem:
            message += f": {outcome.problem}"
        self.notify(
            message,
            title="Forgotten",
            severity="information" if outcome.verified else "error",
            markup=False,
        )
        self.response = None
        self.query_one("#source-results", DataTable).clear()
        self.query_one("#source-breakdown", Static).update("")
        if self.last_query:
            self._run_search(self.last_query)
        self.reload()


def make_source_app(
    source: MemorySource,
    *,
    operator: str | None = None,
    db_label: str | None = None,
    embedder: Any = None,
    poll_interval: float | None = POLL_INTERVAL,
) -> SourceApp:
    return SourceApp(
        source,
        operator=operator,
        db_label=db_label,
        embedder=embedder,
        poll_interval=poll_interval,
    )
