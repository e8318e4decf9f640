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
from textual import on, work
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

PAGE_SIZE = 200
TABS = ("browse", "search", "lanes", "audit")


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


class SourceApp(ReportsWorkerErrors, App[None]):
    """Browse, search, audit and forget on any ``MemorySource``."""

    CSS_PATH = "app.tcss"
    TITLE = "memtui"

    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("1", "switch_tab('browse')", "Browse", show=False),
        Binding("2", "switch_tab('search')", "Search", show=False),
        Binding("3", "switch_tab('lanes')", "Lanes", show=False),
        Binding("4", "switch_tab('audit')", "Audit", show=False),
        Binding("slash", "search", "Search"),
        Binding("f", "forget", "Forget"),
        Binding("h", "toggle_hidden", "Hidden"),
        Binding("n", "next_page", "More"),
        Binding("v", "verify_audit", "Verify audit"),
    ]

    def __init__(
        self,
        source: MemorySource,
        *,
        operator: str | None = None,
        db_label: str | None = None,
        embedder: Any = None,
    ) -> None:
        super().__init__()
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

    def compose(self) -> ComposeResult:
        mode = "read-only" if self.source.read_only else "writable"
        head = Text()
        head.append("memtui ", style="bold")
        head.append_text(one_line(self.db_label, 60))
        head.append(f"  {self.source.kind_label} · {mode}", style="dim")
        yield Static(head, id="source-title")
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
        table.add_columns("id", "tier", "type", "state", "created", "content")
        results = self.query_one("#source-results", DataTable)
        results.add_columns("#", "id", "score", "keyword", "vector", "content")
        audit = self.query_one("#source-audit", DataTable)
        audit.add_columns("#", "time", "action", "status", "record", "reason")
        table.focus()
        self.reload()

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
        self._fetch_page(dict(self.filters), self.cursor)

    @work(thread=True, exclusive=True, group="page", name="records")
    def _fetch_page(self, filters: dict[str, Any], cursor: str | None) -> None:
        page = self.source.page(
            filters, after=cursor, limit=PAGE_SIZE, include_hidden=self.include_hidden
        )
        self.call_from_thread(self._show_page, page)

    def _show_page(self, page: Any) -> None:
        table = self.query_one("#source-records", DataTable)
        for record in page.records:
            if record.id in self.rows:
                continue
            self.rows[record.id] = record
            style = "" if record.live else "dim"
            table.add_row(
                one_line(record.id, 40),
                one_line(record.tier, 16),
                one_line(record.record_type, 16),
                Text(record.state, style=style),
                one_line((record.created_at or "")[:19], 19),
                safe_text(record.content, limit=80, style=style),
                key=record.id,
            )
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
        self.query_one("#tabs", TabbedContent).active = "search"
        self.query_one("#source-query", Input).focus()

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
        self.query_one("#tabs", TabbedContent).active = "audit"
        self._load_audit(verify=True)

    # ------------------------------------------------------------ actions

    def action_switch_tab(self, tab: str) -> None:
        tabs = self.query_one("#tabs", TabbedContent)
        self.set_focus(None)  # focus inside the shown pane would hold it in view
        tabs.active = tab

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
) -> SourceApp:
    return SourceApp(source, operator=operator, db_label=db_label, embedder=embedder)
