"""The app shell and the Browse tab, driven with Pilot on the sample database."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, Select, TabbedContent

from memtui.core.store import MemoryStore
from memtui.sources.capabilities import with_article
from memtui.tui import record_table, scope_tree
from memtui.tui.app import make_app
from memtui.tui.audit_view import AuditTable
from memtui.tui.browse import RecordDetail, RecordTable, ScopeTree
from memtui.tui.format import fit
from memtui.tui.lanes_view import LanesPane
from memtui.tui.search_view import ResultList
from memtui.tui.testing import build_sample_db, fixed_clock, screen_text, settle

SIZE = (120, 40)


@pytest.fixture(scope="module")
def built_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_sample_db(tmp_path_factory.mktemp("browse") / "sample.db")


@pytest.fixture
def sample_path(built_sample: Path, tmp_path: Path) -> Path:
    """The sample database, built once for the module, copied for each test."""
    return Path(shutil.copy(built_sample, tmp_path / "sample.db"))


@pytest.fixture
def store(sample_path: Path):
    with MemoryStore(sample_path, clock=fixed_clock) as opened:
        yield opened


async def test_startup_the_tree_the_tactics_tier_and_the_actions_offered(
    store: MemoryStore, monkeypatch
):
    """One app run, four checks in turn: the first screen (fresh), the tree driving the
    table, the tactics tier (the detail's source notes and sections, a tool name cut to
    its column, every field of a hypothesis tactic, t showing and hiding the refuted and
    expired records while keeping the highlighted one), then the keys offered only where
    the source offers them (which patches the source's capabilities, so it comes last)."""
    hidden = [
        str(r.id)
        for r in store.fetch(include_refuted=True, include_expired=True, tier="longterm")
        if r.refuted or r.is_expired(fixed_clock())
    ]
    assert hidden, "the sample corpus has a refuted or expired tactic"
    app = make_app(store, db_label="sample.db", check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # -- startup: the first non-empty tier, focus in its table.
        table = app.query_one(RecordTable)
        assert app.focused is table, "startup: focus in the table"
        assert table.scope is not None and table.scope.kind == "tier"
        assert table.scope.tier == "working", "startup: the first non-empty tier"
        assert table.cursor_row == 0
        expected = store.fetch(tier="working")
        assert [r.id for r in table.records] == [str(r.id) for r in expected]
        assert table.current is not None and table.current.id == str(expected[0].id)
        tree = app.query_one(ScopeTree)
        assert tree.cursor_node is not None and tree.cursor_node.data.tier == "working"
        detail = screen_text(app)
        assert f"record #{expected[0].id}" in detail, "startup: the first record's detail"

        # -- the tree's selection changes the table.
        tree.focus()
        node = tree.find("engagement", "episodic", "globex-retest")
        assert node is not None
        tree.move_cursor(node)
        await settle(pilot)
        expected = store.fetch(tier="episodic", engagement="globex-retest")
        assert [r.id for r in table.records] == [str(r.id) for r in expected], "tree: table"
        assert {r.scope["engagement"] for r in table.records} == {"globex-retest"}
        assert table.scope is not None and table.scope.kind == "engagement"
        assert table.scope.filters == {"tier": "episodic", "engagement": "globex-retest"}
        # Keyboard only: down to the next node follows too, enter moves to the table.
        await pilot.press("down")
        await settle(pilot)
        assert table.scope is not None and table.scope.value == "vandelay-soap", "tree: down"
        await pilot.press("enter")
        assert app.focused is table, "tree: enter moves to the table"
        # Tree counts come from SQL counts.
        profiles = store.scope_counts("longterm")["profile_hash"]
        longterm = tree.find("tier", "longterm", "longterm")
        assert longterm is not None
        shown = {c.data.value: c.data.live for c in longterm.children}
        assert shown == profiles, "tree: counts"

        # -- the tactics tier: detail, columns and t.
        table = await show_tier(pilot, "longterm")
        # -- the detail appends the source's notes and sections.
        detail = app.query_one(RecordDetail)
        record = table.current
        assert record is not None
        assert detail.sections is not None, "notes: sections"
        assert [s.title for s in detail.sections] == [s.title for s in app.source.detail(record.id)]
        text = detail.text()
        assert "vector" in text and "hash-256" in text, "notes: vector section"
        assert "history (audit events naming this record)" in text
        assert "no audited action has touched this record" in text
        notes = app.source.notes(record)
        assert notes and detail.notes == notes, "notes: the source's notes"
        assert f"notes\n  {notes}" in text

        # -- xxeinjector in an 8-cell column: cut with an ellipsis, never silently.
        assert not set(hidden) & {r.id for r in table.records}, "t: hidden at first"
        row = next(i for i, r in enumerate(table.records) if r.scope["tool_name"] == "xxeinjector")
        cell = table.get_row_at(row)[column_labels(table).index("tool")].plain
        assert "…" in cell and cell.startswith("xxe") and cell.endswith("or"), "tool cut"
        assert len(cell) <= 8

        # -- the detail shows every field and state of a hypothesis tactic.
        tactic = next(r for r in table.records if r.metadata.get("evidence_grade") == "hypothesis")
        table.move_cursor(row=table.records.index(tactic))
        await settle(pilot)
        text = app.query_one("#detail-body").render().plain  # type: ignore[attr-defined]
        assert f"#{tactic.id}" in text, "fields: the id"
        assert "HYPOTHESIS" in text
        for label in ("profile", "engagement", "run", "tool", "signature", "created", "metadata"):
            assert label in text, f"fields: {label}"
        assert tactic.metadata["signature"] in text
        # The scope names the native keys as before; the signature shows with them.
        scope = text.split("\nscope\n", 1)[1].split("\n\n", 1)[0]
        assert "tool " in scope and "signature " in scope, "fields: the scope's keys"
        assert tactic.scope["profile_hash"] in scope

        # -- t shows the refuted and expired records (dimmed) and hides them again,
        # keeping the highlighted record both times.
        await pilot.press("end")
        await settle(pilot)
        last = app.current_record_id()
        assert last is not None and last != table.records[0].id
        await pilot.press("t")
        await settle(pilot)
        assert set(hidden) <= {r.id for r in table.records}, "t: shown"
        assert "showing refuted and expired records (dimmed)" in notifications(app)
        assert app.current_record_id() == last, "t: keeps the highlighted record (shown)"
        # The hidden rows are dimmed, their state word shown.
        row = table.records.index(next(r for r in table.records if r.id == hidden[0]))
        cells = table.get_row_at(row)
        assert any("dim" in str(span.style) for span in cells[0].spans), "t: dimmed"
        assert {"REFUTED", "expired"} & {cell.plain for cell in cells}
        await pilot.press("t")
        await settle(pilot)
        assert not set(hidden) & {r.id for r in table.records}, "t: hidden again"
        assert "refuted and expired records hidden" in notifications(app)
        assert app.current_record_id() == last, "t: keeps the highlighted record (hidden)"

        # -- actions show only where the source offers them.
        tree.move_cursor(tree.find("tier", "longterm", "longterm"))  # tactics: r applies
        table.move_cursor(row=0)  # its first record, as when the tier is first shown
        await settle(pilot)
        assert table.current.record_type == "tactic"
        assert table.check_action("refute", ()) is True, "actions: refute on a tactic"
        assert table.check_action("forget", ()) is True
        offered = {"forget"}
        source = app.source  # the widgets ask the source they were given what it offers
        monkeypatch.setattr(type(source), "capabilities", property(lambda _: frozenset(offered)))
        monkeypatch.setattr(source, "write_capabilities", frozenset())
        assert table.check_action("refute", ()) is False, "actions: refute not offered"
        assert table.check_action("forget", ()) is True
        tree.move_cursor(tree.find("engagement", "episodic", "globex-retest"))
        await settle(pilot)
        assert tree.check_action("forget_scope", ()) is False, "actions: forget_scope"
        offered.add("forget_scope")
        assert tree.check_action("forget_scope", ()) is True
        tree.move_cursor(tree.find("tier", "longterm", "longterm"))
        await settle(pilot)
        requested: list[str] = []
        app.request_refute = requested.append  # type: ignore[method-assign]
        table.focus()
        await pilot.press("r")
        assert requested == [], "actions: r does nothing when refute is not offered"
        offered.add("refute")
        app.refresh_bindings()
        await pilot.press("r")
        assert requested == [table.current.id], "actions: r refutes once offered"


async def test_digits_and_slash_switch_tabs_and_move_focus(store: MemoryStore):
    """The digits from each tab, then / from Browse, Lanes and Audit: one app run, every
    switch the two checks made before."""
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tabs = app.query_one(TabbedContent)
        await pilot.press("2")
        await settle(pilot)
        query = app.query_one("#query", Input)
        assert tabs.active == "search", "2 from Browse"
        assert app.focused is query
        # Digits type into the query box instead of switching tabs.
        await pilot.press("3", "4")
        assert tabs.active == "search", "digits in the query box type"
        assert query.value == "34"
        await pilot.press("escape")  # nothing special: focus stays, no crash
        app.query_one(ResultList).focus()
        await pilot.press("3")
        await settle(pilot)
        assert tabs.active == "lanes", "3 from the results"
        assert app.focused is app.query_one("#lanes-profile", Select)
        await pilot.press("4")
        await settle(pilot)
        assert tabs.active == "audit", "4 from Lanes"
        assert app.focused is app.query_one(AuditTable)
        await pilot.press("1")
        await settle(pilot)
        assert tabs.active == "browse", "1 from Audit"
        assert app.focused is app.query_one(RecordTable)
        # / from any tab (Browse is shown): the Search tab, focus in the query box.
        for tab in ("1", "3", "4"):
            if tab != "1":
                await pilot.press(tab)  # the tab is shown once the key is handled
            assert tabs.active == {"1": "browse", "3": "lanes", "4": "audit"}[tab]
            await pilot.press("slash")
            await settle(pilot)
            assert tabs.active == "search", f"/ from tab {tab}"
            assert app.focused is query, f"/ from tab {tab} focuses the query"
            app.query_one(ResultList).focus()


async def show_tier(pilot, tier: str) -> RecordTable:
    """Select a tier in the tree; its table, focused, once its records are listed."""
    tree = pilot.app.query_one(ScopeTree)
    tree.move_cursor(tree.find("tier", tier, tier))
    await settle(pilot)
    table = pilot.app.query_one(RecordTable)
    table.focus()
    return table


async def test_first_non_empty_tier_skips_empty_ones(tmp_path: Path):
    with MemoryStore(tmp_path / "k.db", clock=fixed_clock) as store:
        store.add_record(tier="knowledge", record_type="reference", content="only knowledge")
        app = make_app(store, check_on_start=False)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            table = app.query_one(RecordTable)
            assert table.scope is not None and table.scope.tier == "knowledge"
            assert [r.content for r in table.records] == ["only knowledge"]


async def test_empty_database_opens(tmp_path: Path):
    with MemoryStore(tmp_path / "empty.db", clock=fixed_clock) as store:
        app = make_app(store, check_on_start=False)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert app.query_one(RecordTable).records == []
            assert "0 live records" in screen_text(app)


async def test_the_table_pages_from_the_source_and_the_tree_lists_the_largest_values(
    store: MemoryStore, monkeypatch
):
    """Small pages and two values a scope, in one app run: the table reads page by page
    as the cursor nears the end; the tree lists the largest values, then a more leaf."""
    monkeypatch.setattr(record_table, "PAGE_SIZE", 5)
    monkeypatch.setattr(record_table, "PAGE_MARGIN", 2)
    monkeypatch.setattr(scope_tree, "TREE_VALUES", 2)
    app = make_app(store, check_on_start=False)
    calls: list[dict] = []
    original = app.source.page

    def spy(filters=None, **kwargs):
        calls.append({"filters": dict(filters or {}), **kwargs})
        return original(filters, **kwargs)

    monkeypatch.setattr(app.source, "page", spy)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # -- the table pages from the source.
        table = app.query_one(RecordTable)
        assert len(table.records) == 5, "pages: the first page"
        assert calls[-1]["limit"] == 5 and calls[-1]["after"] is None
        assert calls[-1]["filters"] == {"tier": "working"}
        await pilot.press("down", "down", "down")
        await settle(pilot)
        assert len(table.records) == 10, "pages: the next page near the end"
        assert calls[-1]["after"] == table.records[4].id
        await pilot.press("end")
        await settle(pilot)
        await pilot.press("end")
        await settle(pilot)
        expected = [str(r.id) for r in store.fetch(tier="working")]
        assert [r.id for r in table.records] == expected, "pages: every record at the end"
        assert all(call["limit"] <= 5 for call in calls)
        assert table.exhausted

        # -- the tree lists the largest values, then a more leaf.
        tree = app.query_one(ScopeTree)
        episodic = tree.find("tier", "episodic", "episodic")
        assert episodic is not None
        counts = store.scope_counts("episodic")["engagement"]
        largest = sorted(counts, key=lambda v: -counts[v])[:2]
        listed = [c.data for c in episodic.children]
        assert [d.value for d in listed[:-1]] == [v for v in counts if v in largest], "tree"
        more = episodic.children[-1]
        assert more.data.kind == scope_tree.MORE and more.data.live == len(counts) - 2
        assert str(more.label) == f"… {len(counts) - 2} more engagement (search to filter)"
        # The leaf is not a scope: highlighting it leaves the table as it is.
        tree.move_cursor(episodic)
        await settle(pilot)
        before = (table.scope, [r.id for r in table.records])
        tree.move_cursor(more)
        await settle(pilot)
        assert (table.scope, [r.id for r in table.records]) == before, "tree: the more leaf"


# ---------------------------------------------------------------- the source contract


def notifications(app) -> str:
    return " | ".join(str(n.message) for n in app._notifications)


def column_labels(table: RecordTable) -> list[str]:
    return [str(column.label) for column in table.columns.values()]


def state_word(table: RecordTable, row: int) -> str:
    """The state word a hidden row shows: in its expires cell, else before its content."""
    labels = column_labels(table)
    cells = table.get_row_at(row)
    if "expires" in labels:
        return cells[labels.index("expires")].plain
    return cells[labels.index("content")].plain.split(" · ", 1)[0]


async def test_a_refresh_rereads_in_bounded_pages(store: MemoryStore, monkeypatch):
    monkeypatch.setattr(record_table, "PAGE_SIZE", 5)
    monkeypatch.setattr(record_table, "PAGE_MARGIN", 2)
    monkeypatch.setattr(record_table, "MAX_PAGE_SIZE", 3)
    app = make_app(store, check_on_start=False)
    calls: list[dict] = []
    original = app.source.page

    def spy(filters=None, **kwargs):
        calls.append(kwargs)
        return original(filters, **kwargs)

    monkeypatch.setattr(app.source, "page", spy)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one(RecordTable)
        working = [str(r.id) for r in store.fetch(tier="working")]
        # One page of 5 rows, read as 3 + 2: never more than the source's page limit.
        assert [r.id for r in table.records] == working[:5]
        assert [c["limit"] for c in calls] == [3, 2]
        assert calls[1]["after"] == working[2]
        await pilot.press("down", "down", "down")
        await settle(pilot)
        assert len(table.records) == 10
        table.move_cursor(row=8)
        await settle(pilot)
        calls.clear()
        app.browse.reload()  # a refresh re-reads every row shown, keeping the place
        await settle(pilot)
        assert calls and all(c["limit"] <= 3 for c in calls)
        assert [r.id for r in table.records][:10] == working[:10]
        assert table.current is not None and table.current.id == working[8]


async def test_a_late_detail_for_another_record_is_dropped(sample_path: Path):
    from memtui.sources.base import DetailSection
    from memtui.sources.native import NativeSource

    class Gated(NativeSource):
        def __init__(self, store):
            super().__init__(store)
            self.slow: set[str] = set()
            self.gate = threading.Event()
            self.gate.set()
            self.asked: list[str] = []

        def detail(self, record_id):
            self.asked.append(record_id)
            if record_id in self.slow:
                self.gate.wait(10)
            return [DetailSection(title=f"section of {record_id}")]

    with MemoryStore(sample_path, clock=fixed_clock) as opened:
        source = Gated(opened)
        app = make_app(source, check_on_start=False)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            table = app.query_one(RecordTable)
            detail = app.query_one(RecordDetail)
            first, second, third = (r.id for r in table.records[:3])
            assert f"section of {first}" in detail.text()
            source.slow = {second}
            source.gate.clear()
            await pilot.press("down")  # its sections are slow to come
            await pilot.pause()
            await pilot.press("down")  # the operator has moved on
            await pilot.pause()
            source.gate.set()
            await settle(pilot)
            assert second in source.asked
            assert table.current is not None and table.current.id == third
            text = detail.text()
            assert f"section of {third}" in text
            assert f"section of {second}" not in text and f"section of {first}" not in text
            # Arrivals for an older request, or another record, change nothing.
            generation = detail._generation
            detail._extra_arrived(generation - 1, third, "", [DetailSection(title="STALE one")])
            detail._extra_arrived(generation, second, "", [DetailSection(title="STALE two")])
            assert "STALE" not in detail.text()
            detail._extra_arrived(generation, third, "late note", [DetailSection(title="FRESH")])
            assert "FRESH" in detail.text() and "late note" in detail.text()


# ---------------------------------------------------------------- foreign sources


def open_fixture(name: str, folder: Path, now=None):
    from conftest import fixed_clock as clock
    from fixtures.sources_support import LANGGRAPH, LETTA, copy_fixture

    from memtui.sources import open_source

    fixture = {"langgraph": LANGGRAPH, "letta": LETTA}[name]
    return open_source(copy_fixture(fixture, folder), now=now, clock=clock)


def refusing(name: str):
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"{name} was called")

    return refuse


async def test_a_langgraph_store_browses_by_namespace_and_its_lanes_say_why_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Browse by namespace; then the Lanes tab says in one line why it has nothing, and
    lanes are never even asked for (any call, from the start of the app, fails)."""
    source = open_fixture("langgraph", tmp_path / "store", now="2026-11-30T12:00:30Z")
    try:
        assert not source.can("lanes")
        monkeypatch.setattr(source, "lane_choices", refusing("lane_choices"), raising=False)
        monkeypatch.setattr(source, "lanes", refusing("lanes"), raising=False)
        app = make_app(source, check_on_start=False)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            tree = app.query_one(ScopeTree)
            table = app.query_one(RecordTable)
            facets = {f.tier: f for f in source.facets()}
            assert [n.data.tier for n in tree.root.children] == list(facets)
            node = tree.find("namespace", "memories", "memories.user-1")
            assert node is not None and node.data.kind == "namespace"
            assert node.data.live == facets["memories"].scopes["namespace"]["memories.user-1"]
            assert node.data.filters == {"tier": "memories", "namespace": "memories.user-1"}
            # The columns it can fill: a scope column, no tool, grade or s/a.
            labels = column_labels(table)
            assert "scope" in labels and "id" in labels and "content" in labels
            assert not {"tool", "grade", "s/a"} & set(labels)
            record = table.current
            assert record is not None
            # The namespace, cut in the middle to the column: its distinctive end stays.
            width = next(c.width for c in record_table.COLUMNS if c.key == "scope")
            scope_cell = table.get_row_at(0)[labels.index("scope")].plain
            assert scope_cell == fit(record.scope["namespace"], width).plain
            assert scope_cell.endswith(record.scope["namespace"][-4:])
            assert table.records == source.page({"tier": "memories"}, limit=200).records
            # Refute and forget-engagement are not keys here at all; forget is.
            assert table.check_action("refute", ()) is False
            assert table.check_action("forget", ()) is True
            assert tree.check_action("forget_scope", ()) is False
            # The detail: its id, the scope, the source's own sections.
            text = app.query_one(RecordDetail).text()
            assert record.id in text and "namespace" in text
            assert "value (full JSON, secrets masked)" in text
            assert app.query_one(RecordDetail).border_title == f"record {record.id}"
            # Hidden records are the expired ones.
            table.focus()
            await pilot.press("t")
            await settle(pilot)
            assert "showing expired records (dimmed)" in notifications(app)
            tree.move_cursor(tree.find("tier", "scratch", "scratch"))
            await settle(pilot)
            expired = [i for i, r in enumerate(table.records) if r.state == "expired"]
            assert expired and len(table.records) == facets["scratch"].count + len(expired)
            cells = table.get_row_at(expired[0])
            assert state_word(table, expired[0]) == "expired"
            assert any("dim" in str(span.style) for span in cells[0].spans)

            # -- Lanes on a foreign store: why, in one line, and no work started.
            await pilot.press("3")
            await settle(pilot)
            pane = app.query_one(LanesPane)
            text = screen_text(app)
            expected = (
                "Lanes (priors, tactics, host history) need a memtui database: "
                f"this is {with_article(source.kind_label)}."
            )
            assert expected in text, "lanes: why not"
            assert text.count("need a memtui database") == 1, "lanes: one line"
            # No profile or engagement to choose, no lane boxes waiting for data.
            assert not pane.query(Select)
            assert not pane.query(".lane")
            assert "choose a profile" not in text
            assert pane.data == {}
            assert not [w for w in app.workers if w.node is pane], "lanes: no worker"
            # A refresh (F5 or a change in the store) still starts nothing.
            pane.reload()
            pane.database_changed(shown=True)
            await settle(pilot)
            assert pane.data == {}, "lanes: a refresh reads nothing"
            assert not any(n.severity == "error" for n in app._notifications)
    finally:
        source.close()


async def test_a_letta_store_names_its_keys_and_dims_deleted_records(tmp_path: Path):
    source = open_fixture("letta", tmp_path / "store")
    try:
        app = make_app(source, check_on_start=False)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            tree = app.query_one(ScopeTree)
            table = app.query_one(RecordTable)
            assert tree.show_keys
            node = tree.find("archive", "archival", "research-notes")
            assert node is not None and str(node.label).startswith("archive research-notes")
            tag = tree.find("tag", "archival", "project")
            assert tag is not None and tag.data.kind == "tag"
            assert tree.find("tag", "archival", "secrets").data.kind == "tier"  # hidden only
            tree.move_cursor(tree.find("tier", "archival", "archival"))
            await settle(pilot)
            live = len(table.records)
            table.focus()
            await pilot.press("t")
            await settle(pilot)
            assert "showing deleted and expired records (dimmed)" in notifications(app)
            assert tree.find("tag", "archival", "secrets").data.hidden == 1
            deleted = [i for i, r in enumerate(table.records) if r.state == "deleted"]
            assert len(deleted) == 1 and len(table.records) == live + 1
            assert state_word(table, deleted[0]) == "deleted"
            assert "incl. 1 deleted/expired" in str(table.border_subtitle)
            await pilot.press("t")
            await settle(pilot)
            assert "deleted and expired records hidden" in notifications(app)
            assert len(table.records) == live
    finally:
        source.close()


async def test_the_tiers_and_a_page_show_before_the_scopes_are_counted(
    store: MemoryStore, monkeypatch
):
    """At a million records the scope counts take two index scans: the first screen
    (tiers with counts, a page of records) must not wait for them."""
    app = make_app(store, poll_interval=None, check_on_start=False)
    release = threading.Event()
    original = app.source.facets

    def slow_facets(*args, **kwargs):
        release.wait(10)
        return original(*args, **kwargs)

    monkeypatch.setattr(app.source, "facets", slow_facets)
    pages: list[dict] = []
    page = app.source.page
    monkeypatch.setattr(app.source, "page", lambda f=None, **k: pages.append(k) or page(f, **k))
    async with app.run_test(size=SIZE) as pilot:
        tree = app.query_one(ScopeTree)
        table = app.query_one(RecordTable)
        for _ in range(200):
            await pilot.pause(0.01)
            if table.records:
                break
        live = store.tier_counts()
        every = store.tier_counts(include_refuted=True, include_expired=True)
        for tier, count in live.items():
            node = tree.find("tier", tier, tier)
            assert node is not None and node.data is not None
            assert (node.data.live, node.data.hidden) == (count, every[tier] - count)
            assert not node.children  # the scopes are still being counted
        working = [str(r.id) for r in store.fetch(tier="working", limit=200)]
        assert [r.id for r in table.records] == working
        assert "working" in screen_text(app) and app.browse.refreshing
        release.set()
        await settle(pilot)
        node = tree.find("tier", "working", "working")
        engagements = store.scope_counts("working")["engagement"]
        assert [c.data.value for c in node.children] == list(engagements)
        assert not app.browse.refreshing
        assert len(pages) == 1  # the table was not read again when the scopes came


async def test_the_scope_counts_wait_for_the_first_page(store: MemoryStore, monkeypatch):
    """The scope scans would hold the database while the first page is read: they start
    once the table has shown it."""
    app = make_app(store, poll_interval=None, check_on_start=False)
    order: list[str] = []
    page, facets = app.source.page, app.source.facets

    def slow_page(filters=None, **kwargs):
        time.sleep(0.2)  # a first page that takes a while to read must still come first
        order.append("page")
        return page(filters, **kwargs)

    monkeypatch.setattr(app.source, "page", slow_page)
    monkeypatch.setattr(
        app.source, "facets", lambda *a, **k: order.append("facets") or facets(*a, **k)
    )
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "page" in order and "facets" in order
        assert order.index("page") < order.index("facets")
        assert app.query_one(ScopeTree).find("tier", "working", "working").children
