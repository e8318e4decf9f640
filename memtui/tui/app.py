"""The memtui app: four tabs over one store, and the confirm-gated actions that change it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Footer, Input, Static, TabbedContent, TabPane

from memtui.core.records import MemoryRecord
from memtui.core.secrets import secret_paths
from memtui.core.store import MemoryStore
from memtui.render import escape_controls, one_line
from memtui.tui.audit_view import AuditPane
from memtui.tui.base import Pane, ReportsWorkerErrors
from memtui.tui.browse import BrowsePane
from memtui.tui.commands import MemtuiCommands
from memtui.tui.dialogs import ConfirmRecordAction, ForgetEngagementDialog, RevealDialog
from memtui.tui.format import now_label, plural
from memtui.tui.help import HelpScreen
from memtui.tui.lanes_view import LanesPane
from memtui.tui.search_view import SearchPane

TABS: tuple[tuple[str, str], ...] = (
    ("browse", "Browse"),
    ("search", "Search"),
    ("lanes", "Lanes"),
    ("audit", "Audit"),
)

READ_ONLY_REASON = (
    "This database is open read-only (--read-only), so nothing can be refuted or forgotten. "
    "Reopen it without --read-only to make changes."
)


class MemtuiApp(ReportsWorkerErrors, App[None]):
    """Browse, explain and correct one memory database."""

    CSS_PATH = "app.tcss"
    TITLE = "memtui"
    COMMANDS = {MemtuiCommands}

    BINDINGS = [
        *[
            Binding(str(n), f"switch_tab('{tab}')", title, show=False, id=f"tab-{tab}")
            for n, (tab, title) in enumerate(TABS, start=1)
        ],
        Binding("slash", "search", "Search", key_display="/", id="search"),
        Binding("question_mark", "help", "Help", key_display="?", id="help"),
        Binding("q", "quit", "Quit", id="quit"),
    ]

    def __init__(
        self,
        store: MemoryStore,
        *,
        operator: str | None = None,
        db_label: str | None = None,
    ) -> None:
        super().__init__()
        self.store = store
        self.operator = operator
        self.db_label = db_label or (store.path.name if store.path else "in-memory")

    @property
    def read_only(self) -> bool:
        return self.store.read_only

    # ------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        with Horizontal(id="topbar"):
            yield Static(Text("memtui", style="bold"), id="brand")
            yield Static(one_line(self.db_label, 60), id="db-label")
            yield Static(Text("counting…", style="dim"), id="summary")
            if self.read_only:
                yield Static(Text("READ-ONLY"), id="read-only-badge")
            yield Static(Text(f"now {now_label(self.store.now())}"), id="clock")
        with TabbedContent(id="tabs", initial="browse"):
            for number, (tab, title) in enumerate(TABS, start=1):
                with TabPane(f"{number} {title}", id=tab):
                    yield self._pane(tab)
        yield Footer()

    @staticmethod
    def _pane(tab: str) -> Pane:
        panes: dict[str, type[Pane]] = {
            "browse": BrowsePane,
            "search": SearchPane,
            "lanes": LanesPane,
            "audit": AuditPane,
        }
        return panes[tab](id=f"{tab}-pane")

    def on_mount(self) -> None:
        self.browse.table.focus()
        # "now" is the store's clock (fixed by MEMTUI_NOW in demos and tests), never the
        # terminal's; it only matters for expiry, so a coarse refresh is enough.
        self.set_interval(30, self._tick)

    def _tick(self) -> None:
        self.query_one("#clock", Static).update(Text(f"now {now_label(self.store.now())}"))

    @property
    def browse(self) -> BrowsePane:
        return self.query_one(BrowsePane)

    @property
    def search(self) -> SearchPane:
        return self.query_one(SearchPane)

    @property
    def lanes(self) -> LanesPane:
        return self.query_one(LanesPane)

    @property
    def audit(self) -> AuditPane:
        return self.query_one(AuditPane)

    @property
    def active_tab(self) -> str:
        return self.query_one(TabbedContent).active

    def pane(self, tab: str) -> Pane:
        return self.query_one(f"#{tab}-pane", Pane)

    def update_summary(self, tiers: dict[str, tuple[int, int]]) -> None:
        live = sum(n for n, _ in tiers.values())
        hidden = sum(h for _, h in tiers.values())
        out = Text(plural(live, "live record"))
        if hidden:
            out.append(f" · {hidden} refuted/expired", style="dim")
        self.query_one("#summary", Static).update(out)

    # ------------------------------------------------------------ navigation

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "search" and isinstance(self.focused, Input):
            return False  # "/" types into a text box; do not advertise it there
        return True

    def _show_tab(self, tab: str, focus: Callable[[], None]) -> None:
        tabs = self.query_one(TabbedContent)
        if tabs.active == tab:
            focus()
            return
        # Focus leaves the old tab first, so hiding it cannot move focus elsewhere; the
        # new tab takes focus when it is shown.
        self.screen.set_focus(None)
        self.pane(tab).focus_when_shown(focus)
        tabs.active = tab

    def action_switch_tab(self, tab: str) -> None:
        self._show_tab(tab, self.pane(tab).focus_main)

    def action_search(self) -> None:
        self._show_tab("search", self.search.focus_query)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_toggle_hidden(self) -> None:
        self.action_switch_tab("browse")
        self.browse.action_toggle_hidden()

    def action_verify_audit(self) -> None:
        self.action_switch_tab("audit")
        self.audit.action_verify()

    # ------------------------------------------------------------ actions

    def current_record_id(self) -> int | None:
        """The highlighted record of the active tab (Browse table or Search results)."""
        if self.active_tab == "browse":
            record = self.browse.table.current
            return record.id if record else None
        if self.active_tab == "search":
            return self.search.results.current_id()
        return None

    def refuse_if_read_only(self) -> bool:
        if self.read_only:
            self.notify(READ_ONLY_REASON, title="Read-only", severity="warning", timeout=8)
            return True
        return False

    def _record_or_notice(self, record_id: int) -> MemoryRecord | None:
        record = self.store.get(record_id)
        if record is None:
            self.notify(f"Record #{record_id} is no longer on file.", severity="warning")
        return record

    def request_refute(self, record_id: int | None = None) -> None:
        record_id = self.current_record_id() if record_id is None else record_id
        if record_id is None:
            self.notify("Highlight a record in Browse or Search first.", severity="warning")
            return
        if self.refuse_if_read_only():
            return
        record = self._record_or_notice(record_id)
        if record is None:
            return
        if record.record_type != "tactic":
            self.notify(
                f"Only tactics can be refuted; #{record.id} is a "
                f"{escape_controls(record.record_type)}. Forget it instead (f).",
                title="Not a tactic",
                severity="warning",
                markup=False,
            )
            return
        if record.refuted:
            self.notify(f"Tactic #{record.id} is already refuted.", severity="warning")
            return
        self.push_screen(
            ConfirmRecordAction("refute", record),
            callback=lambda reason: self._confirmed("refute", record.id, reason),
        )

    def request_forget(self, record_id: int | None = None) -> None:
        record_id = self.current_record_id() if record_id is None else record_id
        if record_id is None:
            self.notify("Highlight a record in Browse or Search first.", severity="warning")
            return
        if self.refuse_if_read_only():
            return
        record = self._record_or_notice(record_id)
        if record is None:
            return
        self.push_screen(
            ConfirmRecordAction("forget", record),
            callback=lambda reason: self._confirmed("forget", record.id, reason),
        )

    def request_reveal(self, record_id: int | None = None) -> None:
        record_id = self.current_record_id() if record_id is None else record_id
        if record_id is None:
            self.notify("Highlight a record in Browse first.", severity="warning")
            return
        if self.read_only:
            self.notify(
                "This database is open read-only (--read-only), and every reveal writes an audit "
                "event. Reopen it without --read-only to reveal a masked field.",
                title="Read-only",
                severity="warning",
                timeout=8,
            )
            return
        record = self._record_or_notice(record_id)
        if record is None:
            return
        fields = secret_paths(record.metadata)
        if not fields:
            self.notify(f"Record #{record.id} has no masked field.", severity="warning")
            return
        dialog = RevealDialog(record, fields)
        self.push_screen(
            dialog,
            callback=lambda reason: self._confirmed_reveal(record.id, dialog.field, reason),
        )

    def _confirmed_reveal(self, record_id: int, field: str, reason: str | None) -> None:
        if reason is None:
            self.notify("Cancelled: nothing was revealed.", timeout=3)
            return
        self._reveal(record_id, field, reason)

    @work(thread=True, group="mutation", exit_on_error=False, name="Reveal")
    def _reveal(self, record_id: int, field: str, reason: str) -> None:
        value = self.store.reveal(record_id, field, reason=reason, operator=self.operator)
        event = _event_of(self.store, "reveal", [record_id])
        self.call_from_thread(self._revealed, record_id, field, value, event)

    def _revealed(self, record_id: int, field: str, value: Any, event: int | None) -> None:
        self.browse.show_revealed(record_id, field, value)
        self.notify(
            f"Revealed {escape_controls(field)} of record #{record_id} in the detail pane"
            f" · audit event #{event}",
            title="Revealed",
            timeout=8,
            markup=False,
        )
        self.audit.reload()

    def request_forget_engagement(self, engagement: str) -> None:
        if self.refuse_if_read_only():
            return
        self._blast_radius(engagement)

    @work(thread=True, exclusive=True, group="radius", exit_on_error=False, name="Blast radius")
    def _blast_radius(self, engagement: str) -> None:
        radius = self.store.blast_radius(engagement=engagement)
        self.call_from_thread(self._show_forget_engagement, engagement, radius)

    def _show_forget_engagement(self, engagement: str, radius: dict[str, dict[str, int]]) -> None:
        if not radius:
            self.notify(
                f"Engagement {escape_controls(engagement)} has no records to forget.",
                severity="warning",
                markup=False,
            )
            return
        self.push_screen(
            ForgetEngagementDialog(engagement, radius),
            callback=lambda reason: self._confirmed("forget-scope", engagement, reason),
        )

    def _confirmed(self, kind: str, target: Any, reason: str | None) -> None:
        if reason is None:
            self.notify("Cancelled: nothing was changed.", timeout=3)
            return
        self._mutate(kind, target, reason)

    # Not exclusive: a change that started is never "cancelled" (a thread cannot be stopped).
    @work(thread=True, group="mutation", exit_on_error=False, name="Saving")
    def _mutate(self, kind: str, target: Any, reason: str) -> None:
        store = self.store
        if kind == "refute":
            event = store.refute(int(target), reason=reason, operator=self.operator)
            message = f"Refuted tactic #{target}"
        elif kind == "forget":
            record = store.get(int(target))
            verified = store.forget(int(target), reason=reason, operator=self.operator)
            event = _event_of(store, "forget", [int(target)])
            what = f"{record.tier} {record.record_type} #{target}" if record else f"#{target}"
            state = "erasure verified" if verified else "erasure NOT verified (see the audit log)"
            message = f"Forgot {escape_controls(what)}: {state}"
        elif kind == "forget-scope":
            count = store.forget_scope(
                engagement=str(target), reason=reason, operator=self.operator
            )
            event = _event_of(store, "forget-scope", None)
            message = (
                f"Forgot {plural(count, 'record')} of engagement {escape_controls(str(target))}"
            )
        else:  # pragma: no cover - a programming error
            raise ValueError(f"unknown action {kind}")
        self.call_from_thread(self._mutated, kind, target, event, message)

    def _mutated(self, kind: str, target: Any, event: int | None, message: str) -> None:
        self.notify(
            f"{message} · audit event #{event}",
            title="Done",
            timeout=8,
            markup=False,
        )
        self.refresh_views()

    def refresh_views(self) -> None:
        """After a change: recount and reload every tab, re-run the search."""
        for tab, _ in TABS:
            self.pane(tab).reload()


def _event_of(store: MemoryStore, action: str, record_ids: list[int] | None) -> int | None:
    """The id of the audit event a forget just wrote.

    ``store.last_event_id`` names the *last* event, which is an "erasure-incomplete"
    follow-up when the checkpoint could not finish; the notification must name the
    forget itself.
    """
    for event in store.audit_events(limit=3):
        if event["action"] == action and (record_ids is None or event["record_ids"] == record_ids):
            return event["id"]
    return store.last_event_id


def make_app(
    store: MemoryStore,
    *,
    operator: str | None = None,
    db_label: str | None = None,
) -> MemtuiApp:
    """The app on an open store: shared by ``run_app`` and the tests."""
    return MemtuiApp(store, operator=operator, db_label=db_label)
