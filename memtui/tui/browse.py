"""The Browse tab: tiers and scopes with counts, a paged record table, the record's detail.

Everything comes from the app's ``MemorySource``: the tree from ``facets`` (live and
with hidden records), the table from keyset ``page`` calls, the detail from the
record itself plus ``notes`` and ``detail`` (loaded in a worker). A memtui database
and every foreign store are browsed the same way; the table keeps the columns a
source can fill.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Tree
from textual.worker import Worker, get_current_worker

from memtui.sources.base import MemorySource, TierFacet
from memtui.sources.capabilities import Refutable
from memtui.tui.base import Pane, offers
from memtui.tui.format import hidden_words, plural, scope_label
from memtui.tui.messages import TiersCounted
from memtui.tui.record_detail import RecordDetail
from memtui.tui.record_table import RecordTable
from memtui.tui.scope_tree import MORE, TIER, ScopeNode, ScopeTree, forget_noun, scope_nodes

FIRST_PAGE_WAIT = 2.0
"""Seconds the scope counts wait at most for the first page to be shown."""
LIFTED = ("signature",)
"""Native metadata shown with the scope in the detail pane (it was a column of the record)."""


class BrowsePane(Pane):
    """Tiers and scopes on the left; the records and the highlighted one's detail on the right."""

    BINDINGS = [
        Binding(
            "t",
            "show_hidden",
            "Show hidden",
            tooltip="Show refuted and expired records",
            id="browse.show_hidden",
        ),
        Binding(
            "t",
            "hide_hidden",
            "Hide hidden",
            tooltip="Hide refuted and expired records",
            id="browse.hide_hidden",
        ),
        Binding("F", "pick_scope", "Forget scope", show=False, id="browse.pick_scope"),
    ]

    def __init__(
        self,
        source: MemorySource,
        first_tier_counts: Future[tuple[dict[str, int], dict[str, int]]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(source, **kwargs)
        self.first_tier_counts = first_tier_counts
        """The tier counts the app started before the screen was built (live, with
        hidden), taken by the first count; None after that, or when none were started."""
        self.show_hidden = False
        self._initial = True
        self._scopes_follow = False
        self._first_page = threading.Event()
        """Set when the table has shown its first page (the scope counts wait for it)."""
        """The tree shows the tiers alone; their scopes are being counted."""
        self._counting = False
        self.tier_totals: dict[str, tuple[int, int]] = {}
        self.revealed: dict[str, dict[str, Any]] = {}
        """Values the operator revealed this session, by record id then field (each audited)."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="browse-body"):
            tree = ScopeTree(self.source, id="scope-tree")
            tree.border_title = "tiers & scopes"
            yield tree
            with Vertical(id="browse-right"):
                table = RecordTable(self.source, id="records")
                table.border_title = "records"
                yield table
                detail = RecordDetail(self.source, id="detail")
                detail.border_title = "detail"
                yield detail

    def source_changed(self, source: MemorySource) -> None:
        self.tree.source = self.table.source = source
        self.query_one(RecordDetail).source = source

    @property
    def tree(self) -> ScopeTree:
        return self.query_one(ScopeTree)

    @property
    def table(self) -> RecordTable:
        return self.query_one(RecordTable)

    def on_mount(self) -> None:
        source = self.source
        self.tree.name_the_scope(forget_noun(source))
        self.tree.show_keys = not isinstance(source, Refutable) and len(source.facet_keys) > 1
        # Each value then carries its key: the tree takes more of the width.
        self.tree.set_class(self.tree.show_keys, "-keys")
        self.reload()

    def main_widget(self) -> RecordTable:
        return self.table

    @property
    def hidden_label(self) -> str:
        """What this source hides: ``refuted and expired`` (memtui), ``deleted and expired``..."""
        return hidden_words(self.source.hidden_state)

    def action_pick_scope(self) -> None:
        """F away from a scope node: say what to pick instead of doing nothing."""
        keys = self.source.forget_scope_keys
        noun = forget_noun(self.source)
        which = f" ({', '.join(scope_label(k) for k in keys)})" if len(keys) > 1 else ""
        article = "an" if noun[:1] in "aeiou" else "a"
        self.notify(
            f"Pick {article} {noun}{which} in the tree first: F forgets every record of one "
            f"{noun}.",
            title=f"Pick {article} {noun}",
            severity="warning",
            timeout=5,
            markup=False,
        )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "pick_scope":
            return bool(self.source.forget_scope_keys) and offers(self.source, "forget_scope")
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
        words = self.hidden_label
        self.notify(
            f"showing {words} records (dimmed)" if self.show_hidden else f"{words} records hidden",
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
        """Recount the tree (in the source) and reload the table, keeping the place."""
        self._counting = True
        self._count(self.show_hidden)

    def worker_failed(self, worker: Worker) -> None:
        if worker.group == "counts":
            self._counting = False

    @work(thread=True, exclusive=True, group="counts", exit_on_error=False, name="Counting records")
    def _count(self, show_hidden: bool) -> None:
        source = self.source
        if self._initial and source.quick_tier_counts:
            # The first screen needs the tiers' counts and a page of records; the scopes
            # (two index scans at a million records) follow when they are counted.
            early, self.first_tier_counts = self.first_tier_counts, None
            if early is not None:  # counted while the screen was being built
                live_tiers, every_tiers = early.result()
            else:
                live_tiers = source.tier_counts()
                every_tiers = source.tier_counts(include_hidden=True)
            tiers_only = scope_nodes(
                source,
                [TierFacet(tier=t, count=n) for t, n in live_tiers.items()],
                [TierFacet(tier=t, count=n) for t, n in every_tiers.items()],
                show_hidden,
            )
            self.app.call_from_thread(self._apply_counts, tiers_only, show_hidden, False)
            # The scope scans would hold the database while the first page is read.
            self._first_page.wait(FIRST_PAGE_WAIT)
        live = source.facets()
        if get_current_worker().is_cancelled:
            return
        every = source.facets(include_hidden=True)
        if get_current_worker().is_cancelled:
            return
        nodes = scope_nodes(source, live, every, show_hidden)
        self.app.call_from_thread(self._apply_counts, nodes, show_hidden)

    def _apply_counts(
        self, nodes: list[tuple[ScopeNode, list[ScopeNode]]], hidden: bool, final: bool = True
    ) -> None:
        """Show the counted tree; ``final`` False: the tiers alone, their scopes to follow."""
        self._counting = not final
        scopes_follow, self._scopes_follow = self._scopes_follow, not final
        tree, table = self.tree, self.table
        previous = table.scope
        keep_row = table.cursor_row if previous is not None and table.records else None
        current = table.current
        keep_id = current.id if current is not None else None
        if hidden != table.show_hidden:
            # `t`: the rows above it change, so its row number means nothing; the
            # highlighted record stays highlighted when it is still listed.
            keep_row = None
        self.tier_totals = {n.tier: (n.live, n.hidden) for n, _ in nodes}
        self.post_message(TiersCounted(self.tier_totals))
        if not self._initial and previous is not None and tree.update_counts(nodes):
            # Same tiers and scopes: the tree keeps its cursor and scroll.
            node = tree.find(previous.kind, previous.tier, previous.value)
            if node is not None and node.data is not None:
                table.load(node.data, hidden, keep_row, keep_id)
            return
        tree.populate(nodes)
        if not nodes:  # a store with no tier at all: nothing to list
            self._initial = False
            return
        if self._initial or previous is None:
            self._initial = False
            target = next((n for n, _ in nodes if n.live), nodes[0][0])
            node = tree.find(TIER, target.tier, target.tier)
        else:
            node = tree.find(previous.kind, previous.tier, previous.value)
            if node is not None and node.data is not None and node.data.kind != previous.kind:
                keep_row = None
        if node is None or node.data is None:
            return
        if scopes_follow and node.data == previous and hidden == table.show_hidden:
            table.scope = node.data  # the scopes arrived; the table already shows this tier
        else:
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
        if data.kind == MORE:
            return  # the values not listed: the table keeps what it shows
        if table.scope == data and table.show_hidden == self.show_hidden:
            return
        table.load(data, self.show_hidden)
        self.app.refresh_bindings()

    @on(Tree.NodeSelected, "#scope-tree")
    def _scope_selected(self, event: Tree.NodeSelected[ScopeNode]) -> None:
        if event.node.data is not None and event.node.data.kind == MORE:
            self.notify(
                "Too many values to list them all here: search with a scope filter.", timeout=4
            )
            return
        self.table.focus()

    @on(DataTable.RowHighlighted, "#records")
    def _record_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()
        self.app.refresh_bindings()  # v applies to records with masked fields only

    @on(RecordTable.PageLoaded)
    def _page_loaded(self) -> None:
        self._first_page.set()
        table = self.table
        scope = table.scope
        if scope is None:
            return
        table.border_title = scope.title()
        total = scope.live + (scope.hidden if table.show_hidden else 0)
        loaded = len(table.records)
        status = plural(total, "record")
        if table.show_hidden and scope.hidden:
            status += f" incl. {scope.hidden:,} {self.hidden_label.replace(' and ', '/')}"
        elif scope.hidden:
            status += f" (+{scope.hidden:,} hidden: t)"
        if not table.exhausted:
            status = f"{loaded:,} of {status} loaded · more on scroll"
        table.border_subtitle = status
        self._show_detail()

    def _show_detail(self) -> None:
        record = self.table.current
        revealed = self.revealed.get(record.id) if record is not None else None
        lift = LIFTED if isinstance(self.source, Refutable) else ()
        self.query_one(RecordDetail).show(record, self.now(), revealed, lift=lift)

    def show_revealed(self, record_id: str, field: str, value: Any) -> None:
        self.revealed.setdefault(str(record_id), {})[field] = value
        self._show_detail()
