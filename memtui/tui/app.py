"""The memtui app: four tabs over one memory source, and the confirm-gated actions on it.

Every store memtui opens (its own database or another agent's) comes in as a
``MemorySource``; the app reads and changes it only through that interface, and
offers each action the source can do (``offers``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.events import Resize
from textual.widget import Widget
from textual.widgets import Input, Static, TabbedContent, TabPane
from textual.worker import Worker

from memtui.config import APP_POLL_INTERVAL
from memtui.core.secrets import secret_paths
from memtui.core.store import MemoryStoreError
from memtui.render import escape_controls, safe_text
from memtui.sources.base import ForgetOutcome, MemorySource, SourceRecord
from memtui.sources.capabilities import Refutable
from memtui.sources.changes import Change, NotSaved, Saved, is_busy, save_change, scope_plan
from memtui.tui.base import Pane, ReportsWorkerErrors
from memtui.tui.browse import BrowsePane, RecordTable
from memtui.tui.commands import MemtuiCommands
from memtui.tui.footer import KeysFooter
from memtui.tui.format import fit, hidden_words, now_label, plural, record_label, scope_label

if TYPE_CHECKING:  # imported when first used: not needed for the first screen
    from memtui.tui.audit_view import AuditPane
    from memtui.tui.lanes_view import LanesPane
    from memtui.tui.search_view import SearchPane

TABS: tuple[tuple[str, str], ...] = (
    ("browse", "Browse"),
    ("search", "Search"),
    ("lanes", "Lanes"),
    ("audit", "Audit"),
)

POLL_INTERVAL = APP_POLL_INTERVAL
"""Seconds between two looks at ``PRAGMA data_version`` (another process committed?)."""
BUSY_RETRIES = 5
"""A change that finds the database busy is tried again this many times, then given up."""
RETRY_DELAY = 0.5
"""Seconds before the first retry; each later retry waits twice as long (at most 4 s)."""
BANNER_PROBLEMS = 6
"""At most this many problems are listed in the check banner (then "… and N more")."""

VERBS = {"forget": "forget", "refute": "refute", "forget-scope": "forget", "reveal": "reveal"}
KEYS = {"forget": "f", "refute": "r", "forget-scope": "F", "reveal": "v"}

READ_ONLY_REASON = (
    "This database is open read-only (--read-only), so nothing can be refuted or forgotten. "
    "Reopen it without --read-only to make changes."
)
CAPABILITY_OF = {
    "forget": "forget",
    "refute": "refute",
    "forget-scope": "forget_scope",
    "reveal": "reveal",
}


class MemtuiApp(ReportsWorkerErrors, App[None]):
    """Browse, explain and correct one memory source."""

    CSS_PATH = "app.tcss"
    TITLE = "memtui"
    COMMANDS = {MemtuiCommands}

    BINDINGS = [
        *[
            Binding(str(n), f"switch_tab('{tab}')", title, show=False, id=f"tab-{tab}")
            for n, (tab, title) in enumerate(TABS, start=1)
        ],
        Binding("slash", "search", "Search", key_display="/", id="search"),
        Binding(
            "f5,ctrl+r",
            "refresh",
            "Refresh",
            key_display="F5",
            show=False,
            id="refresh",
            tooltip="Re-read every tab and re-run the search (F5 or ctrl+r)",
        ),
        Binding(
            "o",
            "reopen",
            "Reopen",
            id="reopen",
            tooltip="Open the store again at its path (offered when the file was replaced)",
        ),
        Binding("question_mark", "help", "Help", key_display="?", id="help"),
        Binding("q", "quit", "Quit", id="quit"),
    ]

    def __init__(
        self,
        source: MemorySource,
        *,
        operator: str | None = None,
        db_label: str | None = None,
        embedder: Any = None,
        poll_interval: float | None = POLL_INTERVAL,
        busy_retries: int = BUSY_RETRIES,
        retry_delay: float = RETRY_DELAY,
        check_on_start: bool = True,
        reopen: Callable[[], MemorySource] | None = None,
    ) -> None:
        super().__init__()
        self.source = source
        self.reopen = reopen
        self.moved: str | None = None
        """What happened to the store's file since it was opened (replaced, deleted), if
        anything: every change is refused until the operator reopens it."""
        self.operator = operator
        self.embedder = embedder
        self.db_label = db_label or _short_label(source)
        self.poll_interval = poll_interval
        self.busy_retries = busy_retries
        self.retry_delay = retry_delay
        self.check_on_start = check_on_start
        # Live: what another process (the agent) changed since the app opened.
        self.seen_version: int | None = None
        self.external_changes = 0
        self.records_at_open: int | None = None
        self.records_now: int | None = None
        self.forgotten_here = 0
        self._polling = False
        # A change on its way to the database (one at a time), and the reasons of
        # changes that could not be saved, kept so the operator never types them twice.
        self.saving: str | None = None
        self.busy_attempt: tuple[int, int] | None = None
        self.kept_reasons: dict[tuple[str, str], str] = {}
        self.check_report: dict[str, Any] | None = None
        self._check_problems: list[dict[str, Any]] = []
        self._check_failure: str | None = None
        """Why ``memtui check`` could not complete on this file (it raised), if it did not."""
        self._check_process: subprocess.Popen[str] | None = None
        self._panes_state = "pending"
        self._banner_notes: tuple[list[str], int] | None = None
        """The source banner's notes and interrupted forgets, laid out again on resize."""
        self._first_tier_counts: Future[tuple[dict[str, int], dict[str, int]]] | None = None
        """The hidden tabs: "pending" until Browse's first page, "mounting", "mounted"."""

    @property
    def read_only(self) -> bool:
        return self.source.read_only

    @property
    def native(self) -> bool:
        """A memtui database: its tactics can be refuted, ``memtui check`` applies to its file."""
        return isinstance(self.source, Refutable)

    def offers(self, capability: str) -> bool:
        """Whether an action's key applies here at all: the source can do it, or could
        when opened writable (pressing it then says why not)."""
        source = self.source
        return capability in source.capabilities or capability in source.write_capabilities

    # ------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        with Horizontal(id="topbar"):
            # Most important first: on a narrow terminal the right end is cut off.
            yield Static(Text("memtui", style="bold"), id="brand")
            yield Static(id="busy")
            if self.read_only:
                yield Static(Text("READ-ONLY"), id="read-only-badge")
            yield Static(fit(self.db_label, 60), id="db-label")
            yield Static(id="live")
            yield Static(Text("counting…", style="dim"), id="summary")
            yield Static(self._clock_text(), id="clock")
        yield Static(id="check-banner")
        yield Static(id="source-banner")
        with TabbedContent(id="tabs", initial="browse"):
            for number, (tab, title) in enumerate(TABS, start=1):
                with TabPane(f"{number} {title}", id=tab):
                    if tab == "browse":  # the others mount once Browse shows its first page
                        yield self._pane(tab)
        yield KeysFooter()

    @staticmethod
    def _pane(tab: str) -> Pane:
        if tab == "browse":
            return BrowsePane(id="browse-pane")
        # The other tabs' modules load when their panes are built (after the first page).
        if tab == "search":
            from memtui.tui.search_view import SearchPane

            return SearchPane(id="search-pane")
        if tab == "lanes":
            from memtui.tui.lanes_view import LanesPane

            return LanesPane(id="lanes-pane")
        from memtui.tui.audit_view import AuditPane

        return AuditPane(id="audit-pane")

    def on_load(self) -> None:
        """Start counting the tiers before the screen is even built (the first screen
        waits for those counts; at a million records they take a good 50 ms)."""
        source = self.source
        if not source.quick_tier_counts:
            return
        future: Future[tuple[dict[str, int], dict[str, int]]] = Future()

        def count() -> None:
            try:
                future.set_result((source.tier_counts(), source.tier_counts(include_hidden=True)))
            except BaseException as exc:  # handed to the worker that takes the result
                future.set_exception(exc)

        threading.Thread(target=count, name="memtui-first-counts", daemon=True).start()
        self._first_tier_counts = future

    def take_first_tier_counts(self) -> Future[tuple[dict[str, int], dict[str, int]]] | None:
        """The tier counts started at load (live, with hidden), once; None after that."""
        future, self._first_tier_counts = self._first_tier_counts, None
        return future

    HIDDEN_TABS_AT_THE_LATEST = 1.5
    """Seconds after start at which the hidden tabs mount even if Browse has no page yet."""

    def on_mount(self) -> None:
        self.browse.table.focus()
        self.set_timer(self.HIDDEN_TABS_AT_THE_LATEST, self._first_screen_shown)
        # "now" is the store's clock (fixed by MEMTUI_NOW in demos and tests), never the
        # terminal's; it only matters for expiry, so a coarse refresh is enough.
        self.set_interval(30, self._tick)
        if self.poll_interval:
            self.set_interval(self.poll_interval, self._poll)
        self._load_banner()

    def _when_tabs_mounted(self, action: Callable[..., Any], *args: Any) -> None:
        """Run a key's action once the hidden tabs exist (mounting them now if need be)."""
        if self._panes_state == "pending":
            self.call_later(self._first_screen_shown)
        self.set_timer(0.05, lambda: action(*args))

    @on(RecordTable.PageLoaded)
    def _page_shown(self) -> None:
        if self._panes_state == "pending":
            self.call_after_refresh(self._first_screen_shown)

    async def _first_screen_shown(self) -> None:
        """Browse shows its first page: mount the hidden tabs and start the file check.

        Not before: at a million records their widgets and the check (a child
        process reading the whole file) would compete with the first screen.
        """
        if self._panes_state != "pending":
            return
        self._panes_state = "mounting"
        for tab, _ in TABS[1:]:
            pane = self.query_one(f"#{tab}", TabPane)
            if not pane.is_attached:  # the app is closing (quit as the first page showed)
                return
            await pane.mount(self._pane(tab))
        self._panes_state = "mounted"
        if self.active_tab != "browse":  # switched to with the mouse while it mounted
            self.call_after_refresh(self.pane(self.active_tab).tab_shown)
        if self.check_on_start and self.native and self.source.path.is_file():
            self._run_check()

    def on_resize(self, event: Resize) -> None:
        # The banners are laid out for the width: lay them out again for the new one
        # (this handler runs before the app takes the new size: the event has it).
        self._render_banner(event.size.width)
        self._render_check_banner(event.size.width)

    def _clock_text(self) -> Text:
        """The store's "now": its own label when it keeps logical time (a tenant store's
        ``--now 100``), else its clock (fixed by MEMTUI_NOW in demos and tests)."""
        text = self.source.clock_label() or now_label(self.source.now())
        out = Text("now ")
        out.append_text(fit(text, 44))
        return out

    def _tick(self) -> None:
        self.query_one("#clock", Static).update(self._clock_text())

    # ------------------------------------------------------------ source banner

    @work(thread=True, exclusive=True, group="banner", exit_on_error=False, name="Reading notes")
    def _load_banner(self) -> None:
        notes = self.source.header_notes()
        interrupted = len(self.source.interrupted_forgets()) if self.source.can("audit") else 0
        self.call_from_thread(self._show_banner, notes, interrupted)

    def _show_banner(self, notes: list[str], interrupted: int) -> None:
        """The source's kind and what an operator must know about it (its expiry rule,
        erasure gaps, a live agent, interrupted forgets): one line, more when it matters."""
        self._banner_notes = (list(notes), interrupted)
        self._render_banner()

    def _render_banner(self, terminal_width: int | None = None) -> None:
        """Lay the banner's notes out for the terminal's width (again after a resize)."""
        if self._banner_notes is None and self.moved is None:
            return
        notes, interrupted = self._banner_notes or ([], 0)
        first = Text()
        first.append(self.source.kind_label, style="bold")
        lines = [first]
        if self.read_only and not self.native:
            lines[0].append(" · read-only: forget needs --allow-writes", style="dim")
        width = max((terminal_width or self.size.width) - 4, 40)
        for note in notes:
            text = fitted_note(note, width)
            if lines[-1].cell_len + 3 + text.cell_len <= width:
                lines[-1].append(" · ", style="dim")
                lines[-1].append_text(text)
            else:
                lines.append(text)
        if interrupted and not any("interrupted" in note for note in notes):
            lines.append(
                Text(
                    f"{plural(interrupted, 'interrupted forget')}: see the Audit tab",
                    style="bold red",
                )
            )
        if self.moved is not None:
            moved = Text("✗ ", style="bold red")
            moved.append_text(safe_text(self.moved, limit=width))
            moved.append(": changes are refused · o reopens it", style="bold red")
            lines.insert(0, moved)
        self.query_one("#source-banner", Static).update(Text("\n").join(lines))

    @property
    def browse(self) -> BrowsePane:
        return self.query_one(BrowsePane)

    @property
    def search(self) -> SearchPane:
        return cast("SearchPane", self.query_one("#search-pane", Pane))

    @property
    def lanes(self) -> LanesPane:
        return cast("LanesPane", self.query_one("#lanes-pane", Pane))

    @property
    def audit(self) -> AuditPane:
        return cast("AuditPane", self.query_one("#audit-pane", Pane))

    @property
    def active_tab(self) -> str:
        return self.query_one(TabbedContent).active

    def pane(self, tab: str) -> Pane:
        return self.query_one(f"#{tab}-pane", Pane)

    def mounted_pane(self, tab: str) -> Pane | None:
        """The tab's pane, or None while it waits for Browse's first page to mount."""
        found = self.query(f"#{tab}-pane")
        return found.first(Pane) if found else None

    def update_summary(self, tiers: dict[str, tuple[int, int]]) -> None:
        live = sum(n for n, _ in tiers.values())
        hidden = sum(h for _, h in tiers.values())
        out = Text(plural(live, "live record"))
        if hidden:
            words = hidden_words(self.source.hidden_state).replace(" and ", "/")
            out.append(f" · {hidden:,} {words}", style="dim")
        self.query_one("#summary", Static).update(out)
        self.records_now = live + hidden
        if self.records_at_open is None:
            self.records_at_open = self.records_now
        self._show_live()

    # ------------------------------------------------------------ live

    @property
    def new_since_open(self) -> int:
        """Records on file now that were not when the app opened (the agent's writes).

        Counted from the tier totals the tree already has: every record now, plus the
        ones this operator forgot, less every record at open.
        """
        if self.records_at_open is None or self.records_now is None:
            return 0
        return max(0, self.records_now + self.forgotten_here - self.records_at_open)

    def _show_live(self) -> None:
        live = self.query_one("#live", Static)
        if not self.external_changes:
            live.display = False
            return
        live.display = True
        live.update(Text(f"live: {self.new_since_open} new since open", style="bold"))

    def _poll(self) -> None:
        if self._polling:
            return  # the last look has not come back yet (the store is busy)
        self._polling = True
        self._read_version()

    @work(thread=True, group="poll", exit_on_error=False, name="Watching for changes")
    def _read_version(self) -> None:
        source = self.source
        moved = source.path_changed()
        try:
            version = None if moved else source.data_version()
        except (sqlite3.Error, OSError, MemoryStoreError):
            version = None  # closing, or a transient error: look again next time
        self.call_from_thread(self._polled, version, moved, source)

    def _polled(
        self, version: Any, moved: str | None = None, source: MemorySource | None = None
    ) -> None:
        self._polling = False
        if source is not None and source is not self.source:
            return  # a look at the store the app had before it reopened
        if moved is not None:
            self._source_moved(moved)
            return
        if version is None:
            return
        if self.seen_version is None:
            self.seen_version = version
            return
        if version == self.seen_version:
            return
        if self.browse.refreshing:
            return  # still showing the last change; this one is picked up next time
        self.seen_version = version
        self.database_changed()

    def database_changed(self) -> None:
        """Another process committed: refresh what is on screen, mark the rest stale."""
        self.external_changes += 1
        self._show_live()
        active = self.active_tab
        self.browse.reload()  # the header's counts come from its tree
        for tab in ("search", "lanes", "audit"):
            pane = self.mounted_pane(tab)
            if pane is not None:  # a tab still mounting reads the database when it is
                pane.database_changed(shown=active == tab)
        self._load_banner()

    def action_refresh(self) -> None:
        self.refresh_views()
        self.notify("Re-read the database.", timeout=2)

    # ------------------------------------------------------------ a replaced file

    def _source_moved(self, moved: str) -> None:
        """The store's path no longer names the file the app opened: say so once, show it
        on the banner, and refuse every change until the operator reopens it."""
        if moved == self.moved:
            return
        self.moved = moved
        self.refresh_bindings()
        self._render_banner()
        self.notify(
            f"{escape_controls(moved)}: the app still has the old file open, so every change "
            "is refused. Press o to reopen the store at its path.",
            title="Store file changed",
            severity="error",
            timeout=20,
            markup=False,
        )

    def _refuse_moved(self, moved: str) -> None:
        """Refuse a change (before its dialog, or as it was about to be written)."""
        self._change_done()
        self.moved = moved
        self.refresh_bindings()
        self._render_banner()
        self.notify(
            f"Nothing was changed: {escape_controls(moved)}. Press o to reopen the store "
            "at its path.",
            title="Refused: store file changed",
            severity="error",
            timeout=20,
            markup=False,
        )

    def action_reopen(self) -> None:
        if self.moved is None or self.refuse_if_saving():
            return
        if self.reopen is None:
            self.notify(
                f"Quit (q) and open {escape_controls(str(self.source.path))} again.",
                title="Reopen",
                severity="warning",
                markup=False,
            )
            return
        self._reopen_source()

    @work(thread=True, exclusive=True, group="reopen", exit_on_error=False, name="Reopening")
    def _reopen_source(self) -> None:
        """Open the store at its path again; the old file is closed once the new one is
        open (if opening fails, the app keeps showing the old file, changes still refused).

        Closing a connection to a replaced SQLite file is safe: SQLite sees the file has
        moved and neither checkpoints nor deletes the WAL named after the path.
        """
        assert self.reopen is not None
        if not self.source.path.exists():
            self.call_from_thread(self._reopen_failed, f"nothing is at {self.source.path} now")
            return
        try:
            source = self.reopen()
        except (MemoryStoreError, OSError, sqlite3.Error) as exc:
            self.call_from_thread(self._reopen_failed, str(exc))
            return
        self.call_from_thread(self._reopened, source)

    def _reopen_failed(self, reason: str) -> None:
        self.notify(
            f"Could not reopen the store: {escape_controls(reason)}. Press o to try again, "
            "or q to quit.",
            title="Reopen failed",
            severity="error",
            timeout=20,
            markup=False,
        )

    def _reopened(self, source: MemorySource) -> None:
        """Show the store now at the path: every tab re-read, the live counts restarted."""
        old, self.source = self.source, source
        old.close()
        self.moved = None
        self.seen_version = None
        self.external_changes = 0
        self.records_at_open = self.records_now = None
        self.forgotten_here = 0
        self._check_problems, self._check_failure, self.check_report = [], None, None
        self.refresh_bindings()
        self.query_one("#db-label", Static).update(fit(_short_label(source), 60))
        self._show_live()
        self._render_check_banner()
        self._load_banner()
        self.refresh_views()
        if self.check_on_start and self.native and source.path.is_file():
            self._run_check()
        self.notify(
            f"Reopened {escape_controls(str(source.path))}: showing the file now at that path.",
            title="Reopened",
            timeout=8,
            markup=False,
        )

    # ------------------------------------------------------------ check banner

    @work(thread=True, exclusive=True, group="check", exit_on_error=False, name="Checking")
    def _run_check(self) -> None:
        try:
            report = run_check(self.source.path, self._check_started)
        except Exception as exc:  # the check itself failed: a banner says so, it stays
            self.call_from_thread(self._check_failed, str(exc) or type(exc).__name__)
            return
        self.call_from_thread(self._show_check, report)

    def _check_failed(self, reason: str) -> None:
        self._check_failure = reason
        self._render_check_banner()

    def _check_started(self, process: subprocess.Popen[str]) -> None:
        self._check_process = process

    def on_unmount(self) -> None:
        process = self._check_process
        if process is not None and process.poll() is None:
            process.kill()  # only the check this app started

    def _show_check(self, report: dict[str, Any]) -> None:
        self.check_report = report
        problems = [f for f in report.get("findings", []) if f.get("severity") == "problem"]
        # A check that could not run because another process held the database is
        # not a finding about the file: say so quietly instead of raising the banner.
        busy = [f for f in problems if is_busy(str(f.get("message")))]
        problems = [f for f in problems if f not in busy]
        if busy:
            self.notify(
                "memtui check could not finish while the database was busy: "
                + ", ".join(escape_controls(str(f.get("check"))) for f in busy)
                + ". Run memtui check DB later.",
                title="Check incomplete",
                severity="warning",
                timeout=8,
                markup=False,
            )
        self._check_problems = problems
        self._render_check_banner()

    def _render_check_banner(self, terminal_width: int | None = None) -> None:
        """The check banner, laid out for the terminal's width (again after a resize)."""
        problems = self._check_problems
        banner = self.query_one("#check-banner", Static)
        width = max((terminal_width or self.size.width) - 8, 40)
        if self._check_failure is not None:
            banner.update(self._check_failure_text(width))
            banner.display = True
            return
        if not problems:
            banner.display = False
            return
        out = Text()
        out.append(
            f" ✗ memtui check found {plural(len(problems), 'problem')} in this file ",
            style="bold reverse",
        )
        out.append("\n")
        for finding in problems[:BANNER_PROBLEMS]:
            out.append("  • ")
            out.append_text(fit(f"{finding.get('check')}: {finding.get('message')}", width))
            out.append("\n")
        if len(problems) > BANNER_PROBLEMS:
            out.append(f"  … and {len(problems) - BANNER_PROBLEMS} more\n")
        out.append("  Run ")
        out.append_text(self._check_command(width))
        out.append(" for the full report (--json for scripts).")
        banner.update(out)
        banner.display = True

    def _check_command(self, width: int) -> Text:
        command = Text("memtui check ", style="bold")
        command.append_text(fit(str(self.source.path), max(width - 40, 20)))
        return command

    def _check_failure_text(self, width: int) -> Text:
        """The banner of a check that could not complete: why, in one line, and what to run."""
        out = Text()
        out.append(" ✗ memtui check could not complete on this file ", style="bold reverse")
        out.append("\n  ")
        reason = (self._check_failure or "").strip().splitlines()
        out.append_text(fit(reason[-1] if reason else "no reason given", width))
        out.append("\n  Run ")
        out.append_text(self._check_command(width))
        out.append(" to see more; the file may be damaged.")
        return out

    # ------------------------------------------------------------ navigation

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "search" and isinstance(self.focused, Input):
            return False  # "/" types into a text box; do not advertise it there
        if action == "reopen":
            return self.moved is not None  # offered only when the file was replaced
        return True

    def _show_tab(self, tab: str, widget: Widget | None) -> None:
        """Show a tab with focus on ``widget`` in it, from wherever focus was.

        Focus leaves first (a widget that cannot take focus now leaves none behind in
        the hidden tab); the tab is shown at once, so ``widget`` can take it.
        """
        self.screen.set_focus(None)
        self.query_one(TabbedContent).active = tab
        if widget is not None:
            widget.focus()

    def action_switch_tab(self, tab: str) -> None:
        pane = self.mounted_pane(tab)
        if pane is None or self._panes_state == "mounting":  # a key pressed early: once built
            self._when_tabs_mounted(self.action_switch_tab, tab)
            return
        self._show_tab(tab, pane.main_widget())

    def action_search(self) -> None:
        if self.mounted_pane("search") is None or self._panes_state == "mounting":
            self._when_tabs_mounted(self.action_search)
            return
        self._show_tab("search", self.search.query_box)

    @on(TabbedContent.TabActivated, "#tabs")
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """Whichever way a tab was switched to (key, palette, mouse), it reads what it
        waits for once on screen (a tab switched to while the tabs mount: once built)."""
        tab = event.pane.id or ""
        if tab == "browse" or self._panes_state == "mounted":
            self.call_after_refresh(self.pane(tab).tab_shown)

    async def action_quit(self) -> None:
        if self._panes_state == "mounting":  # quit once the tabs are built, not half way
            self._when_tabs_mounted(self.action_quit)
            return
        self.exit()

    def action_help(self) -> None:
        from memtui.tui.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_toggle_hidden(self) -> None:
        self.action_switch_tab("browse")
        self.browse.action_toggle_hidden()

    def action_verify_audit(self) -> None:
        if self.mounted_pane("audit") is None:
            self._when_tabs_mounted(self.action_verify_audit)
            return
        self.action_switch_tab("audit")
        self.audit.action_verify()

    # ------------------------------------------------------------ actions

    def current_record(self) -> SourceRecord | None:
        """The highlighted record of the active tab as last read (Browse table or Search)."""
        if self.active_tab == "browse":
            return self.browse.table.current
        if self.active_tab == "search" and self.mounted_pane("search") is not None:
            return self.search.results.current_record()
        return None

    def current_record_id(self) -> str | None:
        """The highlighted record of the active tab (Browse table or Search results)."""
        if self.active_tab == "browse":
            record = self.browse.table.current
            return record.id if record else None
        if self.active_tab == "search" and self.mounted_pane("search") is not None:
            return self.search.results.current_id()
        return None

    def refuse_unless_able(self, kind: str) -> bool:
        """Refuse (with the reason) an action this source cannot do now; True if refused."""
        capability = CAPABILITY_OF[kind]
        if capability in self.source.capabilities:
            return self.refuse_if_saving()
        if self.read_only and capability in self.source.write_capabilities:
            message = READ_ONLY_REASON if self.native else self.source.read_only_message()
            self.notify(message, title="Read-only", severity="warning", timeout=8, markup=False)
        else:
            self.notify(
                f"A {self.source.kind_label} cannot {VERBS[kind]} from memtui.",
                title="Not supported",
                severity="warning",
                markup=False,
            )
        return True

    def refuse_if_saving(self) -> bool:
        """One change at a time: the next waits until the last one reached the database."""
        if self.saving is None:
            return False
        self.notify(
            f"The last {self.saving} is still waiting for the database; try again when it is done.",
            title="Busy",
            severity="warning",
            timeout=5,
        )
        return True

    def request_refute(self, record_id: str | None = None) -> None:
        record_id = self.current_record_id() if record_id is None else record_id
        if record_id is None:
            self.notify("Highlight a record in Browse or Search first.", severity="warning")
            return
        if self.refuse_unless_able("refute"):
            return
        self._prepare("refute", str(record_id))

    def request_forget(self, record_id: str | None = None) -> None:
        record_id = self.current_record_id() if record_id is None else record_id
        if record_id is None:
            self.notify("Highlight a record in Browse or Search first.", severity="warning")
            return
        if self.refuse_unless_able("forget"):
            return
        self._prepare("forget", str(record_id))

    def request_reveal(self, record_id: str | None = None) -> None:
        record_id = self.current_record_id() if record_id is None else record_id
        if record_id is None:
            self.notify("Highlight a record in Browse first.", severity="warning")
            return
        if self.read_only and "reveal" in self.source.write_capabilities:
            self.notify(
                "This database is open read-only (--read-only), and every reveal writes an audit "
                "event. Reopen it without --read-only to reveal a masked field.",
                title="Read-only",
                severity="warning",
                timeout=8,
            )
            return
        if self.refuse_unless_able("reveal"):
            return
        self._prepare("reveal", str(record_id))

    @work(thread=True, exclusive=True, group="prepare", exit_on_error=False, name="Reading record")
    def _prepare(self, kind: str, record_id: str) -> None:
        """Read what the dialog shows (the record; a forget's rule) off the UI thread."""
        moved = self.source.path_changed()
        if moved is not None:  # refused before the operator types a reason
            self.call_from_thread(self._refuse_moved, moved)
            return
        record = self.source.get(record_id)
        preview: dict[str, Any] = {}
        if record is not None and kind == "forget":
            preview = self.source.forget_preview(record_id)
        self.call_from_thread(self._ask, kind, record_id, record, preview)

    def _ask(
        self, kind: str, record_id: str, record: SourceRecord | None, preview: dict[str, Any]
    ) -> None:
        from memtui.tui.dialogs import ConfirmRecordAction, RevealDialog

        if record is None:
            self.notify(
                f"Record {escape_controls(record_label(record_id))} is no longer on file.",
                severity="warning",
                markup=False,
            )
            return
        if kind == "refute":
            if record.record_type != "tactic":
                self.notify(
                    f"Only tactics can be refuted; {escape_controls(record_label(record.id))} is a "
                    f"{escape_controls(record.record_type)}. Forget it instead (f).",
                    title="Not a tactic",
                    severity="warning",
                    markup=False,
                )
                return
            if record.state == "refuted":
                self.notify(
                    f"Tactic {escape_controls(record_label(record.id))} is already refuted.",
                    severity="warning",
                    markup=False,
                )
                return
            self.push_screen(
                ConfirmRecordAction("refute", record, reason=self._kept("refute", record.id)),
                callback=lambda reason: self._confirmed("refute", record.id, reason),
            )
            return
        if kind == "forget":
            removes = [str(r) for r in preview.get("records", [record.id])]
            self.push_screen(
                ConfirmRecordAction(
                    "forget",
                    record,
                    reason=self._kept("forget", record.id),
                    rule=str(preview.get("rule") or ""),
                    removes=len(removes),
                ),
                callback=lambda reason: self._confirmed("forget", record.id, reason),
            )
            return
        fields = secret_paths(record.metadata)
        if not fields:
            self.notify(
                f"Record {escape_controls(record_label(record.id))} has no masked field.",
                severity="warning",
                markup=False,
            )
            return
        dialog = RevealDialog(record, fields, reason=self._kept("reveal", record.id))
        self.push_screen(
            dialog,
            callback=lambda reason: self._confirmed_reveal(record.id, dialog.field, reason),
        )

    def _confirmed_reveal(self, record_id: str, field: str, reason: str | None) -> None:
        if reason is None:
            self.notify("Cancelled: nothing was revealed.", timeout=3)
            return
        self._start_change("reveal", (record_id, field), reason)

    def _revealed(self, record_id: str, field: str, value: Any, event: int | None) -> None:
        self.browse.show_revealed(record_id, field, value)
        self.notify(
            f"Revealed {escape_controls(field)} of record "
            f"{escape_controls(record_label(record_id))} in the detail pane · audit event #{event}",
            title="Revealed",
            timeout=8,
            markup=False,
        )
        if self.mounted_pane("audit") is not None:
            self.audit.reload()

    def request_forget_scope(self, key: str, value: str) -> None:
        """Forget one scope (an engagement, a namespace, a mem0 user...): blast radius first."""
        if self.refuse_unless_able("forget-scope"):
            return
        self._blast_radius(key, value)

    @work(thread=True, exclusive=True, group="radius", exit_on_error=False, name="Blast radius")
    def _blast_radius(self, key: str, value: str) -> None:
        moved = self.source.path_changed()
        if moved is not None:
            self.call_from_thread(self._refuse_moved, moved)
            return
        radius, rule = scope_plan(self.source, (key, value))
        self.call_from_thread(self._show_forget_scope, (key, value), radius, rule)

    def _show_forget_scope(
        self, scope: tuple[str, str], radius: dict[str, dict[str, int]], rule: str
    ) -> None:
        from memtui.tui.dialogs import ForgetEngagementDialog

        if not radius:
            self.notify(
                f"{scope_words(scope).capitalize()} has no records to forget.",
                severity="warning",
                markup=False,
            )
            return
        self.push_screen(
            ForgetEngagementDialog(
                scope[1], radius, reason=self._kept("forget-scope", scope), key=scope[0], rule=rule
            ),
            callback=lambda reason: self._confirmed("forget-scope", scope, reason),
        )

    def _confirmed(self, kind: str, target: Any, reason: str | None) -> None:
        if reason is None:
            self.notify("Cancelled: nothing was changed.", timeout=3)
            return
        self._start_change(kind, target, reason)

    # ------------------------------------------------------------ saving a change

    @staticmethod
    def _key(kind: str, target: Any) -> tuple[str, str]:
        record = target[0] if kind == "reveal" else target
        return (kind, str(record))

    def _kept(self, kind: str, target: Any) -> str:
        """The reason of an earlier try that could not be saved (the dialog pre-fills it)."""
        return self.kept_reasons.get((kind, str(target)), "")

    def _start_change(self, kind: str, target: Any, reason: str) -> None:
        # The reason is kept until the change is saved: a busy database never loses it.
        self.kept_reasons[self._key(kind, target)] = reason
        self.saving = VERBS[kind]
        self.busy_attempt = None
        self._show_busy()
        self._mutate(kind, target, reason)

    def _show_busy(self) -> None:
        badge = self.query_one("#busy", Static)
        if self.saving is None:
            badge.display = False
            badge.remove_class("-busy")
            return
        badge.display = True
        if self.busy_attempt is None:
            badge.update(Text(f"saving {self.saving}…"))
            badge.remove_class("-busy")
        else:
            attempt, total = self.busy_attempt
            badge.update(Text(f"database busy — retrying ({attempt}/{total})"))
            badge.add_class("-busy")

    def _busy(self, attempt: int, total: int, delay: float) -> None:
        first = self.busy_attempt is None
        self.busy_attempt = (attempt, total)
        self._show_busy()
        if first:
            self.notify(
                f"The database is busy (another process is writing). Your {self.saving} "
                f"waits its turn: up to {total} more tries.",
                title="Database busy",
                severity="warning",
                timeout=max(4.0, delay * 2),
            )

    def _change_done(self) -> None:
        self.saving = None
        self.busy_attempt = None
        self._show_busy()

    def worker_failed(self, worker: Worker) -> None:
        if worker.group == "mutation":
            self._change_done()

    # Not exclusive: a change that started is never "cancelled" (a thread cannot be stopped).
    @work(thread=True, group="mutation", exit_on_error=False, name="Saving")
    def _mutate(self, kind: str, target: Any, reason: str) -> None:
        """Apply one change through the shared pipeline (``memtui.sources.changes.save_change``),
        each busy retry shown in the header ("database busy — retrying (k/N)"); a change
        given up leaves a notice that keeps the operator's reason."""
        result = save_change(
            self.source,
            Change(kind, target, reason, self.operator),
            retries=self.busy_retries,
            delay=self.retry_delay,
            on_busy=lambda attempt, total, delay: self.call_from_thread(
                self._busy, attempt, total, delay
            ),
        )
        if isinstance(result, NotSaved):
            if result.moved is not None:  # the change would go to a file no longer at the path
                self.call_from_thread(self._refuse_moved, result.moved)
            else:
                self.call_from_thread(self._gave_up, kind, target, reason, result.tries)
            return
        # Our own change is not the agent's: the next poll must not call it "live".
        self.call_from_thread(self._own_change_seen)
        self.call_from_thread(self._mutated, kind, target, *_shown(result))

    def _own_change_seen(self) -> None:
        if not self.native:
            self.seen_version = None  # a foreign store's version: re-read on the next look

    def _gave_up(self, kind: str, target: Any, reason: str, tries: int) -> None:
        self._change_done()
        record = target[0] if kind == "reveal" else target
        what = (
            scope_words(target)
            if kind == "forget-scope"
            else f"record {escape_controls(record_label(str(record)))}"
        )
        self.notify(
            f"The database stayed busy: another process held it through {tries} tries, so "
            f"the {VERBS[kind]} of {what} was not done and nothing changed. Your reason is "
            f"kept: press {KEYS[kind]} on it again and the dialog has it filled in.",
            title="Not saved: database busy",
            severity="error",
            timeout=20,
            markup=False,
        )

    def _mutated(
        self, kind: str, target: Any, event: int | None, message: str, removed: int, value: Any
    ) -> None:
        self.kept_reasons.pop(self._key(kind, target), None)
        self._change_done()
        self.forgotten_here += removed
        if kind == "reveal":
            self._revealed(target[0], target[1], value, event)
            return
        self.notify(
            f"{message} · audit event #{event}",
            title="Done",
            severity="error" if "NOT verified" in message else "information",
            timeout=8,
            markup=False,
        )
        self.refresh_views()

    def refresh_views(self) -> None:
        """After a change: recount and reload every tab, re-run the search, and read the
        source's notes again (a foreign store's counts and erasure gaps are in them)."""
        for tab, _ in TABS:
            pane = self.mounted_pane(tab)
            if pane is not None:
                pane.reload()
        self._load_banner()


CHECK_SCRIPT = """
import json, sys
from memtui.core.check import check_database
def store_kind(path):
    from memtui.sources.detect import recognize
    return recognize(path)[0]
print(json.dumps(check_database(sys.argv[1], store_kind=store_kind).to_dict()))
"""
CHECK_TIMEOUT = 600.0


def run_check(
    path: Path, started: Callable[[subprocess.Popen[str]], None] | None = None
) -> dict[str, Any]:
    """``memtui check`` on ``path`` in a child process; its report as a dict.

    Never in the app's own process: the check opens and closes the database file with
    ordinary file calls, and closing any descriptor of a file cancels every POSIX lock
    the process holds on it, the app's SQLite locks included. Another process closing
    its connection could then delete the WAL and shared-memory files that the app
    still uses, and writes would stop being coordinated.
    """
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    process = subprocess.Popen(
        [sys.executable, "-c", CHECK_SCRIPT, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    if started is not None:
        started(process)
    try:
        out, err = process.communicate(timeout=CHECK_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise MemoryStoreError(
            f"memtui check did not finish in {CHECK_TIMEOUT:.0f} s; run memtui check DB"
        ) from None
    if process.returncode != 0:
        lines = (err or "").strip().splitlines()
        last = lines[-1] if lines else f"exit status {process.returncode}"
        raise MemoryStoreError(f"memtui check could not run: {last}")
    return json.loads(out)


def _short_label(source: MemorySource) -> str:
    """The store's name for the header: the file or folder (and collection); the kind
    of store is on the banner line below."""
    label = source.label
    suffix = f" ({source.kind_label})"
    return label[: -len(suffix)] if label.endswith(suffix) else label


def fitted_note(note: str, width: int) -> Text:
    """A banner note within ``width`` characters: a note that ends with the command that
    fixes it (`` `memtui forget-gaps PATH --allow-writes` ``) is cut before the command,
    so the command stays whole and visible."""
    close = note.rfind("`")
    start = note.rfind("`", 0, close)
    if len(note) <= width or start < 0 or note[close + 1 :].strip(" .;)"):
        return safe_text(note, limit=width)
    command = note[start:]
    room = width - len(command) - 2  # the ellipsis and a space
    if room < 12:
        return safe_text(note, limit=width)
    out = safe_text(note[:start].rstrip(), limit=room)
    out.append(" ")
    out.append_text(safe_text(command))
    return out


def scope_words(scope: tuple[str, str]) -> str:
    """A scope as a notice names it: ``engagement acme-q4``, ``namespace users.alice``."""
    return f"{scope_label(scope[0])} {escape_controls(str(scope[1]))}"


def _shown(saved: Saved) -> tuple[Any, ...]:
    """A saved change as the notice shows it: its event, message, records removed, value."""
    kind, target, outcome = saved.change.kind, saved.change.target, saved.outcome
    if saved.already:
        what = (
            scope_words(target)
            if kind == "forget-scope"
            else record_label(escape_controls(str(target)))
        )
        return saved.event_id, f"Done ({kind} {what}); see the audit log", 0, None
    if kind == "refute":
        return (
            saved.event_id,
            f"Refuted tactic {escape_controls(record_label(str(target)))}",
            0,
            None,
        )
    if kind == "forget" and outcome is not None:
        message = _forget_message(saved.record, outcome)
        return saved.event_id, message, len(outcome.removed), None
    if kind == "forget-scope" and outcome is not None:
        message = f"Forgot {plural(outcome.forgotten, 'record')} of {scope_words(target)}"
        if not outcome.verified:
            problem = outcome.problem or "see the audit log"
            message += f": erasure NOT verified ({escape_controls(str(problem))})"
        return saved.event_id, message, outcome.forgotten, None
    return saved.event_id, "", 0, saved.value


def _forget_message(record: SourceRecord | None, outcome: ForgetOutcome) -> str:
    if record is None:
        what = record_label(str(outcome.record_id))
    else:
        kind = (
            record.tier
            if record.tier == record.record_type
            else f"{record.tier} {record.record_type}"
        )
        what = f"{kind} {record_label(record.id)}"
    problem = (outcome.problem or "").removeprefix("erasure not verified: ")
    state = (
        "erasure verified"
        if outcome.verified
        else "erasure NOT verified" + (f" ({problem})" if problem else " (see the audit log)")
    )
    more = len(outcome.removed) - 1
    extra = f" and {plural(more, 'related record')}" if more > 0 else ""
    return f"Forgot {escape_controls(what)}{extra}: {escape_controls(state)}"


def make_app(
    source: Any,
    *,
    operator: str | None = None,
    db_label: str | None = None,
    embedder: Any = None,
    poll_interval: float | None = POLL_INTERVAL,
    busy_retries: int = BUSY_RETRIES,
    retry_delay: float = RETRY_DELAY,
    check_on_start: bool = True,
    reopen: Callable[[], MemorySource] | None = None,
) -> MemtuiApp:
    """The app on an open ``MemorySource`` (an open ``MemoryStore`` is wrapped in ``NativeSource``).

    ``embedder``: the query embedder for the vector lane on a store's own vectors.
    ``poll_interval``: seconds between looks for another process's writes (None: never).
    ``busy_retries`` / ``retry_delay``: how a change waits out a busy database (each
    try also waits the store's own ``busy_timeout_ms``). ``check_on_start``: run
    ``memtui check`` on a memtui database in the background and show a banner if it fails.
    ``reopen``: opens the store at its path again (``o``, offered when its file was replaced).
    """
    if not isinstance(source, MemorySource):
        from memtui.sources.native import NativeSource

        source = NativeSource(source)
    return MemtuiApp(
        source,
        operator=operator,
        db_label=db_label,
        embedder=embedder,
        poll_interval=poll_interval,
        busy_retries=busy_retries,
        retry_delay=retry_delay,
        check_on_start=check_on_start,
        reopen=reopen,
    )
