"""The memtui app: five tabs over one memory source, and the confirm-gated actions on it.

Every store memtui opens (its own database or another agent's) comes in as a
``MemorySource``; the app reads and changes it only through that interface, and
offers each action the source can do (``offers``).
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from types import MappingProxyType
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.events import Resize
from textual.widget import Widget
from textual.widgets import Input, Static, TabbedContent, TabPane
from textual.worker import Worker

from memtui.config import APP_POLL_INTERVAL
from memtui.core.store import MemoryStoreError
from memtui.render import escape_controls
from memtui.sources.base import MemorySource
from memtui.sources.changes import is_busy
from memtui.tui import check_process
from memtui.tui.app_base import TABS
from memtui.tui.banners import CheckBanner, SourceBanner
from memtui.tui.base import Pane, ReportsWorkerErrors
from memtui.tui.browse import BrowsePane
from memtui.tui.changes import ChangeFlow
from memtui.tui.commands import MemtuiCommands
from memtui.tui.footer import KeysFooter
from memtui.tui.format import fit, now_label
from memtui.tui.messages import (
    ForgetRequested,
    ForgetScopeRequested,
    RefuteRequested,
    RevealRequested,
    TiersCounted,
)
from memtui.tui.record_table import RecordTable

POLL_INTERVAL = APP_POLL_INTERVAL
"""Seconds between two looks at ``PRAGMA data_version`` (another process committed?)."""
BUSY_RETRIES = 5
"""A change that finds the database busy is tried again this many times, then given up."""
RETRY_DELAY = 0.5
"""Seconds before the first retry; each later retry waits twice as long (at most 4 s)."""


class MemtuiApp(ReportsWorkerErrors, ChangeFlow):
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
    key_overrides: Mapping[str, str] = MappingProxyType({})
    """The keymap applied (binding id → keys), for help to name the keys in use."""

    def set_keymap(self, keymap: Mapping[str, str]) -> None:
        super().set_keymap(dict(keymap))
        self.key_overrides = MappingProxyType(dict(keymap))

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
        questions: str | None = None,
    ) -> None:
        super().__init__()
        self.questions = questions
        """A questions file's path for the Eval tab (``--questions``), run when it is shown."""
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
        self._check_process: subprocess.Popen[str] | None = None
        self._first_screen = False
        self._pane_mounts: dict[str, asyncio.Task[None]] = {}
        """The tabs after Browse whose pane is mounting or mounted (each on first show)."""
        self._first_tier_counts: Future[tuple[dict[str, int], dict[str, int]]] | None = None

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
            self._clock = Static(self._clock_text(), id="clock")
            yield self._clock
        yield CheckBanner(id="check-banner")
        yield SourceBanner(id="source-banner")
        with TabbedContent(id="tabs", initial="browse"):
            for number, (tab, title) in enumerate(TABS, start=1):
                with TabPane(f"{number} {title}", id=tab):
                    if tab == "browse":  # the others are built when first shown
                        yield BrowsePane(
                            self.source, self.take_first_tier_counts(), id="browse-pane"
                        )
        yield KeysFooter()

    def _hidden_pane(self, tab: str) -> Pane:
        """The pane of a tab after Browse; its module loads when the pane is built (the
        first time the tab is shown)."""
        if tab == "search":
            from memtui.tui.search_view import SearchPane

            return SearchPane(self.source, embedder=self.embedder, id="search-pane")
        if tab == "lanes":
            from memtui.tui.lanes_view import LanesPane

            return LanesPane(self.source, id="lanes-pane")
        if tab == "eval":
            from memtui.tui.eval_view import EvalPane

            return EvalPane(
                self.source, embedder=self.embedder, questions=self.questions, id="eval-pane"
            )
        from memtui.tui.audit_view import AuditPane

        return AuditPane(self.source, id="audit-pane")

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
        """The tier counts started at load (live, with hidden), once; None after that
        (Browse takes them: the load comes before the screen is built)."""
        future, self._first_tier_counts = self._first_tier_counts, None
        return future

    CHECK_AT_THE_LATEST = 1.5
    """Seconds after start at which the file check starts even if Browse has no page yet."""

    def on_mount(self) -> None:
        self.browse.table.focus()
        self.set_timer(self.CHECK_AT_THE_LATEST, self._first_screen_shown)
        # "now" is the store's clock (fixed by MEMTUI_NOW in demos and tests), never the
        # terminal's; it only matters for expiry, so a coarse refresh is enough.
        self.set_interval(30, self._tick)
        if self.poll_interval:
            self.set_interval(self.poll_interval, self._poll)
        self._load_banner()

    async def shown_pane(self, tab: str) -> Pane | None:
        """The tab's pane, mounted now if the tab was never shown (None: the app is
        closing). A tab nobody opens costs nothing: its widgets are built on first show,
        once (a second key pressed while it mounts waits for the same mount)."""
        pane = self.mounted_pane(tab)
        if pane is not None:
            return pane
        mounting = self._pane_mounts.get(tab)
        if mounting is None:
            container = self.query_one(f"#{tab}", TabPane)
            if not container.is_attached:
                return None
            mounting = asyncio.ensure_future(self._mount_pane(container, tab))
            self._pane_mounts[tab] = mounting
        await mounting
        return self.mounted_pane(tab)

    async def _mount_pane(self, container: TabPane, tab: str) -> None:
        await container.mount(self._hidden_pane(tab))

    @on(RecordTable.PageLoaded)
    def _page_shown(self) -> None:
        if not self._first_screen:
            self.call_after_refresh(self._first_screen_shown)

    async def _first_screen_shown(self) -> None:
        """Browse shows its first page: start the file check.

        Not before: at a million records the check (a child process reading the whole
        file) would compete with the first screen.
        """
        if self._first_screen:
            return
        self._first_screen = True
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
        """The clock, kept by reference: a tick that comes while the app shuts down finds
        no screen to query (seen in a test that ran past 30 s)."""
        self._clock.update(self._clock_text())

    @on(TiersCounted)
    def _tiers_counted(self, message: TiersCounted) -> None:
        self.update_summary(message.tiers)

    def action_refresh(self) -> None:
        self.refresh_views()
        self.notify("Re-read the database.", timeout=2)

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
        for tab, _ in TABS:
            pane = self.mounted_pane(tab)
            if pane is not None:
                pane.source = source
        old.close()
        self.moved = None
        self.seen_version = None
        self.external_changes = 0
        self.records_at_open = self.records_now = None
        self.forgotten_here = 0
        banner = self.query_one(CheckBanner)
        banner.problems, banner.failure, self.check_report = [], None, None
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
            report = check_process.run_check(self.source.path, self._check_started)
        except Exception as exc:  # the check itself failed: a banner says so, it stays
            self.call_from_thread(self._check_failed, str(exc) or type(exc).__name__)
            return
        self.call_from_thread(self._show_check, report)

    def _check_failed(self, reason: str) -> None:
        self.query_one(CheckBanner).failure = reason
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
        self.query_one(CheckBanner).problems = problems
        self._render_check_banner()

    def _render_check_banner(self, terminal_width: int | None = None) -> None:
        """The check banner, laid out for the terminal's width (again after a resize)."""
        banner = self.query_one(CheckBanner)
        banner.path = self.source.path
        banner.lay_out(terminal_width or self.size.width)

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

    async def action_switch_tab(self, tab: str) -> None:
        pane = await self.shown_pane(tab)
        if pane is not None:
            self._show_tab(tab, pane.main_widget())

    async def action_search(self) -> None:
        if await self.shown_pane("search") is not None:
            self._show_tab("search", self.search.query_box)

    @on(TabbedContent.TabActivated, "#tabs")
    async def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """Whichever way a tab was switched to (key, palette, mouse), it reads what it
        waits for once on screen (a tab first shown by the mouse: once built)."""
        pane = await self.shown_pane(event.pane.id or "")
        if pane is not None:
            self.call_after_refresh(pane.tab_shown)

    async def action_quit(self) -> None:
        for mounting in list(self._pane_mounts.values()):  # quit once built, not half way
            await mounting
        self.exit()

    def action_help(self) -> None:
        from memtui.tui.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_toggle_hidden(self) -> None:
        await self.action_switch_tab("browse")
        self.browse.action_toggle_hidden()

    async def action_verify_audit(self) -> None:
        await self.action_switch_tab("audit")
        if self.mounted_pane("audit") is not None:
            self.audit.action_verify()

    # ------------------------------------------------------------ actions

    @on(RefuteRequested)
    def _refute_requested(self, message: RefuteRequested) -> None:
        self.request_refute(message.record_id)

    @on(ForgetRequested)
    def _forget_requested(self, message: ForgetRequested) -> None:
        self.request_forget(message.record_id)

    @on(RevealRequested)
    def _reveal_requested(self, message: RevealRequested) -> None:
        self.request_reveal(message.record_id)

    @on(ForgetScopeRequested)
    def _forget_scope_requested(self, message: ForgetScopeRequested) -> None:
        self.request_forget_scope(message.key, message.value)

    def worker_failed(self, worker: Worker) -> None:
        if worker.group == "mutation":
            self._change_done()


def _short_label(source: MemorySource) -> str:
    """The store's name for the header: the file or folder (and collection); the kind
    of store is on the banner line below."""
    label = source.label
    suffix = f" ({source.kind_label})"
    return label[: -len(suffix)] if label.endswith(suffix) else label


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
    questions: str | None = None,
) -> MemtuiApp:
    """The app on an open ``MemorySource`` (an open ``MemoryStore`` is wrapped in ``NativeSource``).

    ``embedder``: the query embedder for the vector lane on a store's own vectors.
    ``poll_interval``: seconds between looks for another process's writes (None: never).
    ``busy_retries`` / ``retry_delay``: how a change waits out a busy database (each
    try also waits the store's own ``busy_timeout_ms``). ``check_on_start``: run
    ``memtui check`` on a memtui database in the background and show a banner if it fails.
    ``reopen``: opens the store at its path again (``o``, offered when its file was replaced).
    ``questions``: a questions file's path, filled into the Eval tab's path box and run
    when the tab is first shown.
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
        questions=questions,
    )
