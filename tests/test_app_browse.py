"""The app shell and the Browse tab, driven with Pilot on the sample database."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, Select, TabbedContent

from memtui.core.store import MemoryStore
from memtui.tui import browse
from memtui.tui.app import make_app
from memtui.tui.audit_view import AuditTable
from memtui.tui.browse import RecordDetail, RecordTable, ScopeTree
from memtui.tui.search_view import ResultList
from memtui.tui.testing import build_sample_db, fixed_clock, screen_text, settle

SIZE = (120, 40)


@pytest.fixture
def sample_path(tmp_path: Path) -> Path:
    return build_sample_db(tmp_path / "sample.db")


@pytest.fixture
def store(sample_path: Path):
    with MemoryStore(sample_path, clock=fixed_clock) as opened:
        yield opened


async def test_startup_selects_first_non_empty_tier_with_focus_in_table(store: MemoryStore):
    app = make_app(store, db_label="sample.db")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one(RecordTable)
        assert app.focused is table
        assert table.scope is not None and table.scope.kind == "tier"
        assert table.scope.tier == "working"
        assert table.cursor_row == 0
        expected = store.fetch(tier="working")
        assert [r.id for r in table.records] == [r.id for r in expected]
        assert table.current is not None and table.current.id == expected[0].id
        tree = app.query_one(ScopeTree)
        assert tree.cursor_node is not None and tree.cursor_node.data.tier == "working"
        detail = screen_text(app)
        assert f"record #{expected[0].id}" in detail


async def test_first_non_empty_tier_skips_empty_ones(tmp_path: Path):
    with MemoryStore(tmp_path / "k.db", clock=fixed_clock) as store:
        store.add_record(tier="knowledge", record_type="reference", content="only knowledge")
        app = make_app(store)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            table = app.query_one(RecordTable)
            assert table.scope is not None and table.scope.tier == "knowledge"
            assert [r.content for r in table.records] == ["only knowledge"]


async def test_empty_database_opens(tmp_path: Path):
    with MemoryStore(tmp_path / "empty.db", clock=fixed_clock) as store:
        app = make_app(store)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert app.query_one(RecordTable).records == []
            assert "0 live records" in screen_text(app)


async def test_tabs_switch_with_digits_and_move_focus(store: MemoryStore):
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tabs = app.query_one(TabbedContent)
        await pilot.press("2")
        await settle(pilot)
        assert tabs.active == "search"
        assert app.focused is app.query_one("#query", Input)
        # Digits type into the query box instead of switching tabs.
        await pilot.press("3", "4")
        assert tabs.active == "search"
        assert app.query_one("#query", Input).value == "34"
        await pilot.press("escape")  # nothing special: focus stays, no crash
        app.query_one(ResultList).focus()
        await pilot.press("3")
        await settle(pilot)
        assert tabs.active == "lanes"
        assert app.focused is app.query_one("#lanes-profile", Select)
        await pilot.press("4")
        await settle(pilot)
        assert tabs.active == "audit"
        assert app.focused is app.query_one(AuditTable)
        await pilot.press("1")
        await settle(pilot)
        assert tabs.active == "browse"
        assert app.focused is app.query_one(RecordTable)


async def test_slash_from_any_tab_focuses_query(store: MemoryStore):
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for tab in ("1", "3", "4"):
            await pilot.press(tab)
            await settle(pilot)
            await pilot.press("slash")
            await settle(pilot)
            assert app.query_one(TabbedContent).active == "search"
            assert app.focused is app.query_one("#query", Input)
            app.query_one(ResultList).focus()


async def test_tree_selection_changes_table(store: MemoryStore):
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tree = app.query_one(ScopeTree)
        table = app.query_one(RecordTable)
        tree.focus()
        node = tree.find("engagement", "episodic", "globex-retest")
        assert node is not None
        tree.move_cursor(node)
        await settle(pilot)
        expected = store.fetch(tier="episodic", engagement="globex-retest")
        assert [r.id for r in table.records] == [r.id for r in expected]
        assert {r.engagement for r in table.records} == {"globex-retest"}
        # Keyboard only: down to the next node follows too, enter moves to the table.
        await pilot.press("down")
        await settle(pilot)
        assert table.scope is not None and table.scope.value == "vandelay-soap"
        await pilot.press("enter")
        assert app.focused is table
        # Tree counts come from SQL counts.
        profiles = store.scope_counts("longterm")["profile_hash"]
        longterm = tree.find("tier", "longterm", "longterm")
        assert longterm is not None
        shown = {c.data.value: c.data.live for c in longterm.children}
        assert shown == profiles


async def test_detail_shows_every_field_and_state(store: MemoryStore):
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tree = app.query_one(ScopeTree)
        tree.move_cursor(tree.find("tier", "longterm", "longterm"))
        await settle(pilot)
        table = app.query_one(RecordTable)
        tactic = next(r for r in table.records if r.evidence_grade == "hypothesis")
        table.move_cursor(row=table.records.index(tactic))
        await settle(pilot)
        text = app.query_one("#detail-body").render().plain  # type: ignore[attr-defined]
        assert f"#{tactic.id}" in text
        assert "HYPOTHESIS" in text
        for label in ("profile", "engagement", "run", "tool", "signature", "created", "metadata"):
            assert label in text
        assert tactic.signature in text


async def test_t_toggles_refuted_and_expired_records(store: MemoryStore):
    hidden = [
        r
        for r in store.fetch(include_refuted=True, include_expired=True, tier="longterm")
        if r.refuted or r.is_expired(fixed_clock())
    ]
    assert hidden, "the sample corpus has a refuted or expired tactic"
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tree = app.query_one(ScopeTree)
        table = app.query_one(RecordTable)
        tree.move_cursor(tree.find("tier", "longterm", "longterm"))
        await settle(pilot)
        table.focus()
        assert not {r.id for r in hidden} & {r.id for r in table.records}
        await pilot.press("t")
        await settle(pilot)
        assert {r.id for r in hidden} <= {r.id for r in table.records}
        # The hidden rows are dimmed.
        row = table.records.index(next(r for r in table.records if r.id == hidden[0].id))
        cell = table.get_row_at(row)[0]
        assert any("dim" in str(span.style) for span in cell.spans)
        await pilot.press("t")
        await settle(pilot)
        assert not {r.id for r in hidden} & {r.id for r in table.records}


async def test_table_pages_from_the_database(store: MemoryStore, monkeypatch):
    monkeypatch.setattr(browse, "PAGE_SIZE", 5)
    monkeypatch.setattr(browse, "PAGE_MARGIN", 2)
    calls: list[dict] = []
    original = store.fetch

    def spy(**kwargs):
        calls.append(kwargs)
        return original(**kwargs)

    monkeypatch.setattr(store, "fetch", spy)
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one(RecordTable)
        assert len(table.records) == 5
        assert calls[-1]["limit"] == 6 and calls[-1]["after_id"] is None
        await pilot.press("down", "down", "down")
        await settle(pilot)
        assert len(table.records) == 10
        assert calls[-1]["after_id"] == table.records[4].id
        await pilot.press("end")
        await settle(pilot)
        await pilot.press("end")
        await settle(pilot)
        assert [r.id for r in table.records] == [r.id for r in original(tier="working")]
        assert all(call["limit"] <= 6 for call in calls)


async def test_hostile_text_is_inert(tmp_path: Path):
    with MemoryStore(tmp_path / "h.db", clock=fixed_clock) as store:
        store.add_record(
            tier="working",
            record_type="note",
            content="[bold red]not markup[/] \x1b[31mred\x1b[0m \u202eevil",
            engagement="[link=x]eng[/link]",
            metadata={"k": "[b]v[/b]\x07"},
        )
        app = make_app(store)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            text = screen_text(app)
            assert "[bold red]not markup[/]" in text
            assert "\\x1b[31mred" in text
            assert "\\u202e" in text
            assert "[link=x]eng[/link]" in text
            assert "\x1b" not in text
            detail = app.query_one(RecordDetail)
            assert detail.border_title == "record #1"
            # The forget dialog's preview, a search result and the lanes stay literal too.
            await pilot.press("f")
            await settle(pilot)
            text = screen_text(app)
            assert "[bold red]not markup[/]" in text and "\\x1b[31m" in text
            await pilot.press("escape")
            await settle(pilot)
            await pilot.press("slash")
            for char in "markup":
                await pilot.press(char)
            await pilot.press("enter")
            await settle(pilot)
            assert "[bold red]not markup[/]" in screen_text(app)
            await pilot.press("3")
            await settle(pilot)
            text = screen_text(app)
            assert "[link=x]eng[/link]" in text
            assert "\x1b" not in text
