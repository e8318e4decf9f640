"""The Audit tab: the audit log newest first, and whether its hash chain holds."""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static
from textual.worker import get_current_worker

from memtui.render import escape_controls, one_line, safe_text
from memtui.tui.base import Pane
from memtui.tui.format import (
    DASH,
    DETAIL_VALUE_CHARS,
    Column,
    capped,
    cell,
    layout_columns,
    long_time,
    plural,
    short_time,
)

AUDIT_PAGE = 500

ACTION_STYLES = {
    "forget": "bold red",
    "forget-scope": "bold red",
    "erasure-incomplete": "reverse red",
    "refute": "bold yellow",
    "agent-refute": "yellow",
    "ingest": "green",
    "reindex": "cyan",
}


def chain_status(broken: str | None, count: int) -> Text:
    if broken is None:
        out = Text("✓ chain verified", style="bold green")
        out.append(f"  {plural(count, 'event')}, each hash chained over the one before", "dim")
        return out
    out = Text("✗ chain BROKEN: ", style="bold red")
    out.append_text(safe_text(broken, style="red"))
    return out


def _action_cell(action: str) -> Text:
    cell = one_line(action, 20)
    cell.stylize(ACTION_STYLES.get(action, ""))
    return cell


def _ids(ids: list[int]) -> str:
    if len(ids) <= 2:
        return ", ".join(str(i) for i in ids)
    return f"{len(ids)} records"


def event_detail(event: dict[str, Any]) -> Text:
    out = Text()
    out.append(f"audit event #{event['id']}", style="bold")
    out.append("  ")
    out.append_text(one_line(event["action"], 40))
    out.append("\n")
    rows: list[tuple[str, Any]] = [
        ("at", long_time(event["at"])),
        ("operator", event["operator"]),
        ("records", ", ".join(str(i) for i in event["record_ids"]) or DASH),
        ("tier", event["tier"]),
        ("type", event["record_type"]),
        ("signature", event["signature"]),
        ("reason", event["reason"]),
    ]
    for label, value in rows:
        out.append(f"  {label:<10} ", style="dim")
        out.append_text(
            capped(value if value not in (None, "") else DASH, DETAIL_VALUE_CHARS, keep_lines=False)
        )
        out.append("\n")
    out.append("  details\n", style="dim")
    details = json.dumps(event["details"], indent=2, ensure_ascii=False)
    out.append_text(
        capped("\n".join("    " + line for line in details.splitlines()), DETAIL_VALUE_CHARS)
    )
    out.append("\n")
    out.append("  hash       ", style="dim")
    out.append(str(event["hash"]))
    out.append("\n  prev hash  ", style="dim")
    out.append(str(event["prev_hash"]))
    return out


AUDIT_COLUMNS: tuple[Column, ...] = (
    Column("id", "#", 4),
    Column("at", "at", 16, 5),
    Column("operator", "operator", 12, 3),
    Column("action", "action", 14),
    Column("records", "records", 12, 4),
    Column("tier", "tier", 9, 1),
    Column("type", "type", 10, 2),
)
MIN_REASON_WIDTH = 20


class AuditTable(DataTable):
    """Audit events, newest first; the reason column takes the width that is left."""

    BINDINGS = [
        Binding("home", "scroll_top", "Newest", show=False),
        Binding("end", "scroll_bottom", "Oldest shown", show=False),
    ]


class AuditPane(Pane):
    BINDINGS = [Binding("v", "verify", "Verify chain", tooltip="Re-check the audit hash chain")]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.events: list[dict[str, Any]] = []
        self.broken: str | None = None
        self.verified = False
        self.head: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text("checking the chain…", style="dim"), id="chain-status")
        table = AuditTable(id="audit-table", cursor_type="row")
        table.border_title = "audit log (newest first)"
        yield table
        with VerticalScroll(id="audit-detail") as detail:
            detail.can_focus = True
            detail.border_title = "event"
            yield Static(id="audit-detail-body")

    def on_mount(self) -> None:
        self.reload()

    def on_resize(self) -> None:
        if self.verified:
            self._fill_table()

    def focus_main(self) -> None:
        self.query_one(AuditTable).focus()

    def action_verify(self) -> None:
        self.reload(announce=True)

    def reload(self, announce: bool = False) -> None:
        if announce or not self.verified:
            status = self.query_one("#chain-status", Static)
            status.update(Text("checking the chain…", style="dim"))
        self._load(announce)

    @work(thread=True, exclusive=True, group="audit", exit_on_error=False, name="Reading audit log")
    def _load(self, announce: bool) -> None:
        store = self.store
        head = store.audit_head()
        if not announce and self.verified and head == self.head:
            # Nothing was audited since the last look (an agent's routine writes are
            # not): skip re-reading and re-hashing the log. ``v`` always re-checks.
            return
        events = store.audit_events(limit=AUDIT_PAGE)
        broken = store.verify_audit()
        total = store.audit_head()
        if get_current_worker().is_cancelled:
            return
        self.app.call_from_thread(self._apply, events, broken, total, announce)

    def _count(self) -> int:
        return self.head["id"] if self.head else 0

    def _apply(
        self,
        events: list[dict[str, Any]],
        broken: str | None,
        head: dict[str, Any] | None,
        announce: bool,
    ) -> None:
        self.events = events
        self.broken = broken
        self.verified = True
        self.head = head
        count = self._count()
        self.query_one("#chain-status", Static).update(chain_status(broken, count))
        table = self.query_one(AuditTable)
        self._fill_table()
        table.border_subtitle = (
            f"{len(events)} of {count} shown" if len(events) < count else plural(count, "event")
        )
        self._show_detail()
        if announce:
            if broken is None:
                self.notify(f"audit chain verified: {plural(count, 'event')}", timeout=4)
            else:
                self.notify(
                    f"audit chain broken: {escape_controls(broken)}",
                    severity="error",
                    markup=False,
                )

    def _fill_table(self) -> None:
        table = self.query_one(AuditTable)
        row = table.cursor_row
        width = table.scrollable_content_region.width or table.size.width or 80
        columns, reason_width = layout_columns(AUDIT_COLUMNS, width, MIN_REASON_WIDTH)
        table.clear(columns=True)
        for column in columns:
            table.add_column(column.label, width=column.width, key=column.key)
        table.add_column("reason", width=reason_width, key="reason")
        for event in self.events:
            cells = {
                "id": Text(str(event["id"]), justify="right"),
                "at": Text(short_time(event["at"])),
                "operator": cell(event["operator"], 30),
                "action": _action_cell(event["action"]),
                "records": Text(_ids(event["record_ids"])),
                "tier": cell(event["tier"] or "", 12),
                "type": cell(event["record_type"] or "", 20),
                "reason": cell(event["reason"] or "", 200),
            }
            table.add_row(*[cells[c.key] for c in columns], cells["reason"], key=str(event["id"]))
        if self.events:
            table.move_cursor(row=min(max(row, 0), len(self.events) - 1), animate=False)

    @on(DataTable.RowHighlighted, "#audit-table")
    def _highlighted(self) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        table = self.query_one(AuditTable)
        body = self.query_one("#audit-detail-body", Static)
        if not self.events or not (0 <= table.cursor_row < len(self.events)):
            body.update(Text("The audit log is empty.", style="dim"))
            return
        body.update(event_detail(self.events[table.cursor_row]))
