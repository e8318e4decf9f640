"""The Browse tab's records table: the selected scope's records, a page at a time."""

from __future__ import annotations

from typing import Any

from textual import on, work
from textual.binding import Binding
from textual.events import Resize
from textual.message import Message
from textual.widgets import DataTable
from textual.worker import Worker, get_current_worker

from memtui.core.secrets import secret_paths
from memtui.sources.base import MAX_PAGE_SIZE, MemorySource, SourceRecord
from memtui.sources.capabilities import Refutable
from memtui.tui.base import ReportsWorkerErrors, offers
from memtui.tui.format import Column, has_evidence, layout_columns, record_row, refutable
from memtui.tui.messages import ForgetRequested, RefuteRequested, RevealRequested
from memtui.tui.record_detail import content_cut, full_text_binding, show_full_text
from memtui.tui.scope_tree import ScopeNode

PAGE_SIZE = 200
"""Rows fetched per page (keyset paging: ``after`` is the id of the last row shown)."""
PAGE_MARGIN = 20
"""Fetch the next page when the cursor comes this close to the last loaded row."""
MIN_CONTENT_WIDTH = 24
ID_MAX_WIDTH = 20
"""A long (foreign) id is cut in the middle to this many cells; the detail shows it whole."""

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


class RecordTable(ReportsWorkerErrors, DataTable):
    """The selected scope's records, fetched a page at a time (keyset paging by id)."""

    BINDINGS = [
        Binding(
            "r",
            "refute",
            "Refute",
            tooltip="Refute the highlighted tactic",
            id="browse.records.refute",
        ),
        Binding(
            "f",
            "forget",
            "Forget",
            tooltip="Forget the highlighted record",
            id="browse.records.forget",
        ),
        Binding(
            "v",
            "reveal",
            "Reveal",
            tooltip="Reveal one masked metadata field (audited)",
            id="browse.records.reveal",
        ),
        Binding(
            "R",
            "reveal",
            "Reveal",
            show=False,
            tooltip="Reveal a masked field (as v)",
            id="browse.records.reveal_alt",
        ),
        full_text_binding("browse.records.full_text"),
        Binding("home", "scroll_top", "First row", show=False, id="browse.records.first"),
        Binding("end", "scroll_bottom", "Last loaded row", show=False, id="browse.records.last"),
    ]

    class PageLoaded(Message):
        """A page of records arrived (the table's subtitle and detail may change)."""

    def __init__(self, source: MemorySource, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", cell_padding=CELL_PADDING, **kwargs)
        self.source = source
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

    # -- state

    @property
    def current(self) -> SourceRecord | None:
        if not self.records or self.cursor_row < 0 or self.cursor_row >= len(self.records):
            return None
        return self.records[self.cursor_row]

    def _offers(self, capability: str) -> bool:
        return offers(self.source, capability)

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
            self.post_message(RevealRequested(self.current.id))

    def action_full_text(self) -> None:
        show_full_text(self, self.current)

    def action_refute(self) -> None:
        record = self.current
        if record is not None and refutable(record) and self._offers("refute"):
            self.post_message(RefuteRequested(record.id))

    def action_forget(self) -> None:
        if self.current is not None and self._offers("forget"):
            self.post_message(ForgetRequested(self.current.id))

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
