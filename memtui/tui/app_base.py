"""What every part of the app shares: the source and the state of its file, the tabs'
panes, the source banner, the top bar's counts, and another process's writes seen live.

``AppBase`` is the bottom layer of ``MemtuiApp``; ``ChangeFlow`` (the changes) sits on
it, the app (layout, keys, the file check, reopening) on both.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any, cast

from rich.text import Text
from textual import work
from textual.app import App
from textual.css.query import NoMatches
from textual.widgets import Static, TabbedContent

from memtui.core.store import MemoryStoreError
from memtui.render import escape_controls
from memtui.sources.base import MemorySource
from memtui.sources.capabilities import Refutable
from memtui.tui.banners import SourceBanner
from memtui.tui.base import Pane, offers
from memtui.tui.browse import BrowsePane
from memtui.tui.format import hidden_words, plural

if TYPE_CHECKING:  # imported when first used: not needed for the first screen
    from memtui.tui.audit_view import AuditPane
    from memtui.tui.lanes_view import LanesPane
    from memtui.tui.search_view import SearchPane

TABS: tuple[tuple[str, str], ...] = (
    ("browse", "Browse"),
    ("search", "Search"),
    ("lanes", "Lanes"),
    ("audit", "Audit"),
    ("eval", "Eval"),
)


class AppBase(App[None]):
    """The source, its tabs and what is known about its file (set up by ``MemtuiApp``)."""

    source: MemorySource
    moved: str | None
    """What happened to the store's file since it was opened (replaced, deleted), if
    anything: every change is refused until the operator reopens it."""
    # Live: what another process (the agent) changed since the app opened.
    seen_version: int | None
    external_changes: int
    records_at_open: int | None
    records_now: int | None
    forgotten_here: int
    _polling: bool

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
        return offers(self.source, capability)

    # ------------------------------------------------------------ source banner

    @work(thread=True, exclusive=True, group="banner", exit_on_error=False, name="Reading notes")
    def _load_banner(self) -> None:
        notes = self.source.header_notes()
        interrupted = len(self.source.interrupted_forgets()) if self.source.can("audit") else 0
        self.call_from_thread(self._show_banner, notes, interrupted)

    def _show_banner(self, notes: list[str], interrupted: int) -> None:
        """The source's kind and what an operator must know about it (its expiry rule,
        erasure gaps, a live agent, interrupted forgets): one line, more when it matters."""
        self.query_one(SourceBanner).notes = (list(notes), interrupted)
        self._render_banner()

    def _render_banner(self, terminal_width: int | None = None) -> None:
        """Lay the banner out for the terminal's width (again after a resize)."""
        banner = self.query_one(SourceBanner)
        banner.kind_label = self.source.kind_label
        banner.writes_refused = self.read_only and not self.native
        banner.moved = self.moved
        banner.lay_out(terminal_width or self.size.width)

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
        """The tab's pane, or None while it waits for Browse's first page to mount.

        ``query_one`` by id, not ``query``: a poll and a key ask for each tab, and a query
        walks the whole screen (twice: to test it, then for the first match)."""
        try:
            return self.query_one(f"#{tab}-pane", Pane)
        except NoMatches:
            return None

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
        for tab in ("search", "lanes", "audit", "eval"):
            pane = self.mounted_pane(tab)
            if pane is not None:  # a tab still mounting reads the database when it is
                pane.database_changed(shown=active == tab)
        self._load_banner()

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

    def refresh_views(self) -> None:
        """After a change: recount and reload every tab, re-run the search, and read the
        source's notes again (a foreign store's counts and erasure gaps are in them)."""
        self.source.reread()
        for tab, _ in TABS:
            pane = self.mounted_pane(tab)
            if pane is not None:
                pane.reload()
        self._load_banner()
