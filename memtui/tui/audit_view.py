"""The Audit tab: the audit log newest first, and whether its hash chain holds.

Everything comes from the source (``audit_events``, ``verify_audit``, ``audit_head``,
``interrupted_forgets``). A memtui database's events name whole-number record ids; a
foreign store's events (memtui's audit database beside it) name string ids, and a
forget there is two events: an intent and its outcome. An intent without an outcome
carries ``status == "interrupted"``: the tab counts those on a line of their own and
marks each one in the table and the detail."""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import DataTable, Static
from textual.worker import get_current_worker

from memtui.render import escape_controls, one_line, safe_text
from memtui.sources.base import MemorySource
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
    "forget-intent": "red",
    "forget-failed": "yellow",
}
STATUS_STYLES = {"interrupted": "bold red", "completed": "green"}
STATUS_NOTES = {
    "interrupted": "INTERRUPTED: an intent with no outcome; check whether the record is "
    "gone and forget it again",
    "completed": "completed: its outcome event follows it",
}


def chain_status(broken: str | None, count: int) -> Text:
    if broken is None:
        out = Text("✓ chain verified", style="bold green")
        out.append(f"  {plural(count, 'event')}, each hash chained over the one before", "dim")
        return out
    out = Text("✗ chain BROKEN: ", style="bold red")
    out.append_text(safe_text(broken, style="red"))
    return out


def interrupted_status(count: int) -> Text:
    """The line that counts forgets stopped half way (empty when there are none)."""
    if not count:
        return Text()
    out = Text(f"{count} interrupted forget(s)", style="bold red")
    out.append(
        ": an intent in the audit log has no outcome; check those records and forget them again",
        style="red",
    )
    return out


def _action_cell(action: Any) -> Text:
    text = "" if action is None else str(action)
    out = one_line(text, 20)
    out.stylize(ACTION_STYLES.get(text, ""))
    return out


def _status_cell(status: Any) -> Text:
    text = "" if status is None else str(status)
    return cell(text, 20, style=STATUS_STYLES.get(text, ""))


def _ids(ids: list[Any] | None) -> Text:
    ids = list(ids or [])
    if len(ids) <= 2:
        return cell(", ".join(str(i) for i in ids), 200)
    return cell(f"{len(ids)} records", 40)


def event_detail(event: dict[str, Any]) -> Text:
    """One event in full, whichever shape: missing fields show as a dash."""
    out = Text()
    header = one_line(f"audit event #{event.get('id')}", 60)
    header.stylize("bold")
    out.append_text(header)
    out.append("  ")
    out.append_text(one_line(event.get("action") or DASH, 40))
    status = event.get("status")
    if status:
        out.append("  ")
        badge = one_line(str(status).upper(), 20)
        badge.stylize(STATUS_STYLES.get(str(status), ""))
        out.append_text(badge)
    out.append("\n")
    record_ids = event.get("record_ids") or []
    rows: list[tuple[str, Any]] = [
        ("at", long_time(event.get("at"))),
        ("operator", event.get("operator")),
        ("records", ", ".join(str(i) for i in record_ids) or DASH),
        ("tier", event.get("tier")),
        ("type", event.get("record_type")),
        ("signature", event.get("signature")),
        ("reason", event.get("reason")),
    ]
    if status:
        rows.insert(0, ("status", STATUS_NOTES.get(str(status), status)))
    details = event.get("details")
    if isinstance(details, dict) and details.get("intent_event") is not None:
        # A foreign store's forget outcome names the intent written before the change.
        rows.insert(0, ("intent", f"event #{details['intent_event']}"))
    for label, value in rows:
        out.append(f"  {label:<10} ", style="dim")
        out.append_text(
            capped(
                value if value not in (None, "") else DASH,
                DETAIL_VALUE_CHARS,
                keep_lines=False,
                style=STATUS_STYLES.get(str(status), "") if label == "status" else "",
            )
        )
        out.append("\n")
    out.append("  details\n", style="dim")
    dumped = json.dumps(details, indent=2, ensure_ascii=False, default=str)
    out.append_text(
        capped("\n".join("    " + line for line in dumped.splitlines()), DETAIL_VALUE_CHARS)
    )
    out.append("\n")
    out.append("  hash       ", style="dim")
    out.append_text(one_line(event.get("hash") or DASH, 200))
    out.append("\n  prev hash  ", style="dim")
    out.append_text(one_line(event.get("prev_hash") or DASH, 200))
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
# Shown after ``action`` only when some event carries a status (a foreign store's forget
# intents): a memtui database's log keeps its columns.
STATUS_COLUMN = Column("status", "status", 11)
# A foreign store's record ids are strings (``lg:namespace/key``): a wider records column.
WIDE_RECORDS = Column("records", "records", 28, 4)
MIN_REASON_WIDTH = 20


class AuditTable(DataTable):
    """Audit events, newest first; the reason column takes the width that is left."""

    BINDINGS = [
        Binding("home", "scroll_top", "Newest", show=False, id="audit.newest"),
        Binding("end", "scroll_bottom", "Oldest shown", show=False, id="audit.oldest"),
    ]


class AuditPane(Pane):
    BINDINGS = [
        Binding(
            "v",
            "verify",
            "Verify chain",
            tooltip="Re-check the audit hash chain",
            id="audit.verify",
        )
    ]

    def __init__(self, source: MemorySource, **kwargs: Any) -> None:
        super().__init__(source, **kwargs)
        self.events: list[dict[str, Any]] = []
        self.broken: str | None = None
        self.verified = False
        self.head: dict[str, Any] | None = None
        self.interrupted: list[dict[str, Any]] = []

    @property
    def available(self) -> bool:
        """Whether the source keeps an audit log at all."""
        return self.source.can("audit")

    def compose(self) -> ComposeResult:
        if not self.available:
            yield Static(Text("no audit log for this source", style="dim"), id="chain-status")
            return
        yield Static(Text("checking the chain…", style="dim"), id="chain-status")
        yield Static(id="audit-interrupted")  # shown when a forget was interrupted
        table = AuditTable(id="audit-table", cursor_type="row")
        table.border_title = "audit log (newest first)"
        yield table
        with VerticalScroll(id="audit-detail") as detail:
            detail.can_focus = True
            detail.border_title = "event"
            yield Static(id="audit-detail-body")

    def on_mount(self) -> None:
        if not self.query("#chain-status"):
            return  # the app closed while this (lazily mounted) tab was mounting
        self.reload()

    def on_resize(self) -> None:
        if self.verified:
            self._fill_table()

    def main_widget(self) -> Widget | None:
        return self.query_one(AuditTable) if self.available else None

    def action_verify(self) -> None:
        if not self.available:
            self.notify("no audit log for this source", timeout=4)
            return
        self.reload(announce=True)

    def reload(self, announce: bool = False) -> None:
        if not self.available:  # nothing to read: the tab says so, no worker
            return
        if announce or not self.verified:
            status = self.query_one("#chain-status", Static)
            status.update(Text("checking the chain…", style="dim"))
        self._load(announce)

    @work(thread=True, exclusive=True, group="audit", exit_on_error=False, name="Reading audit log")
    def _load(self, announce: bool) -> None:
        source = self.source
        head = source.audit_head()
        if not announce and self.verified and head == self.head:
            # Nothing was audited since the last look (an agent's routine writes are
            # not): skip re-reading and re-hashing the log. ``v`` always re-checks.
            return
        events = source.audit_events(limit=AUDIT_PAGE)
        broken = source.verify_audit()
        interrupted = source.interrupted_forgets()
        total = source.audit_head()
        if get_current_worker().is_cancelled:
            return
        self.app.call_from_thread(self._apply, events, broken, total, announce, interrupted)

    def _count(self) -> int:
        return int(self.head["id"]) if self.head else 0

    def _apply(
        self,
        events: list[dict[str, Any]],
        broken: str | None,
        head: dict[str, Any] | None,
        announce: bool,
        interrupted: list[dict[str, Any]] | None = None,
    ) -> None:
        self.events = events
        self.broken = broken
        self.verified = True
        self.head = head
        self.interrupted = list(interrupted or [])
        count = self._count()
        self.query_one("#chain-status", Static).update(chain_status(broken, count))
        note = self.query_one("#audit-interrupted", Static)
        note.update(interrupted_status(len(self.interrupted)))
        note.display = bool(self.interrupted)
        table = self.query_one(AuditTable)
        self._fill_table()
        table.border_subtitle = (
            f"{len(events):,} of {count:,} shown" if len(events) < count else plural(count, "event")
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

    def _columns(self) -> tuple[Column, ...]:
        """The native columns; a status column and wider records for a foreign store's log."""
        columns = list(AUDIT_COLUMNS)
        if any(not str(i).isdigit() for e in self.events for i in e.get("record_ids") or []):
            columns = [WIDE_RECORDS if c.key == "records" else c for c in columns]
        if any(event.get("status") for event in self.events):
            at = [c.key for c in columns].index("action") + 1
            columns.insert(at, STATUS_COLUMN)
        return tuple(columns)

    def _fill_table(self) -> None:
        table = self.query_one(AuditTable)
        row = table.cursor_row
        width = table.scrollable_content_region.width or table.size.width or 80
        columns, reason_width = layout_columns(self._columns(), width, MIN_REASON_WIDTH)
        table.clear(columns=True)
        for column in columns:
            table.add_column(column.label, width=column.width, key=column.key)
        table.add_column("reason", width=reason_width, key="reason")
        for event in self.events:
            cells = {
                "id": Text(str(event.get("id")), justify="right"),
                "at": cell(short_time(event.get("at")), 30),
                "operator": cell(event.get("operator") or "", 30),
                "action": _action_cell(event.get("action")),
                "status": _status_cell(event.get("status")),
                "records": _ids(event.get("record_ids")),
                "tier": cell(event.get("tier") or "", 12),
                "type": cell(event.get("record_type") or "", 20),
                "reason": cell(event.get("reason") or "", 200),
            }
            table.add_row(
                *[cells[c.key] for c in columns], cells["reason"], key=str(event.get("id"))
            )
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
