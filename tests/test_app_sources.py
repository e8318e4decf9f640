"""The app on every foreign source: opens it, browses tiers/scopes, searches, forgets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import fixed_clock
from fixtures.qdrant_support import copy_mem0_store, make_cyber_folder
from fixtures.sources_support import (
    LANGGRAPH,
    LANGGRAPH_VECTORS,
    LETTA,
    PREFERENCES,
    TENANT,
    copy_fixture,
)
from textual.widgets import DataTable, Input

from memtui.core.embed import HashEmbedder
from memtui.sources import open_source
from memtui.tui.breakdown import arithmetic
from memtui.tui.launch import app_for_source
from memtui.tui.source_app import ConfirmSourceForget, SourceApp
from memtui.tui.testing import screen_text, settle

LG_NOW = "2026-11-30T12:00:30Z"

# name, how to make it, now, query, a tier the Browse tree shows, a scope key shown
CASES: list[tuple[str, Any, Any, str, str]] = [
    ("langgraph", LANGGRAPH, LG_NOW, "paris trip", "namespace"),
    ("preferences", PREFERENCES, None, "qwphlumbix", "session"),
    ("tenant", TENANT, 50, "queue", "tenant"),
    ("letta", LETTA, None, "bullet points", "archive"),
    ("cyber-autoagent", "cyber", None, "staging credential", "target"),
    ("mem0", "mem0", None, "passport", "user_id"),
]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("MEMTUI_CACHE_DIR", raising=False)


def make(kind: Any, folder: Path) -> Path:
    if kind == "cyber":
        return make_cyber_folder(folder / "qdrant")
    if kind == "mem0":
        return copy_mem0_store(folder)
    return copy_fixture(kind, folder)


def opened(case: tuple, folder: Path, **kwargs: Any):
    name, kind, now, _query, _scope = case
    return open_source(make(kind, folder), now=now, clock=fixed_clock, **kwargs)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
async def test_app_opens_browses_and_searches_each_source(case, tmp_path):
    source = opened(case, tmp_path / "store")
    try:
        app = app_for_source(source, embedder=HashEmbedder(8))
        assert isinstance(app, SourceApp)
        async with app.run_test(size=(140, 50)) as pilot:
            await settle(pilot)
            text = screen_text(app)
            assert source.kind_label in text
            facets = source.facets()
            for facet in facets:
                assert f"{facet.tier} ({facet.count})" in text
            scope_key = case[4]
            if scope_key in source.scope_keys and any(f.scopes.get(scope_key) for f in facets):
                assert f"{scope_key}=" in text
            table = app.query_one("#source-records", DataTable)
            first = source.page(limit=200)
            assert table.row_count == len(first.records) > 0
            # Search: results, each breakdown adds up.
            await pilot.press("slash")
            app.query_one("#source-query", Input).value = case[3]
            await pilot.press("enter")
            await settle(pilot)
            response = app.response
            assert response is not None and response.results
            for result in response.results:
                assert arithmetic(result, response.trace).adds_up
                assert result.id  # type: ignore[attr-defined]
            assert "adds up" in screen_text(app)
            # Read-only by default: forget is refused with the reason.
            app.query_one("#source-results", DataTable).focus()
            await pilot.press("f")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmSourceForget)
            assert "read-only" in " ".join(str(n.message) for n in app._notifications)
    finally:
        source.close()


@pytest.mark.parametrize(
    ("kind", "now", "query"),
    [(TENANT, 50, "queue"), (LANGGRAPH, LG_NOW, "paris trip")],
    ids=["tenant", "langgraph"],
)
async def test_forget_through_the_dialog_removes_the_record_and_audits(kind, now, query, tmp_path):
    path = make(kind, tmp_path / "store")
    source = open_source(path, now=now, clock=fixed_clock, allow_writes=True, operator="tester")
    try:
        app = app_for_source(source, operator="tester")
        async with app.run_test(size=(140, 50)) as pilot:
            await settle(pilot)
            await pilot.press("slash")
            app.query_one("#source-query", Input).value = query
            await pilot.press("enter")
            await settle(pilot)
            assert app.response is not None and app.response.results
            target = app.response.results[0].id  # type: ignore[attr-defined]
            app.query_one("#source-results", DataTable).focus()
            await pilot.press("f")
            await settle(pilot)
            assert isinstance(app.screen, ConfirmSourceForget)
            rule = source.forget_preview(target)["rule"]
            assert rule in screen_text(app)
            app.screen.query_one("#reason", Input).value = "subject asked"
            await pilot.click("#confirm")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmSourceForget)
            assert source.get(target) is None or source.get(target).state == "deleted"
            events = source.audit_events()
            assert any(target in [str(i) for i in e["record_ids"]] for e in events)
            messages = " ".join(str(n.message) for n in app._notifications)
            assert "audit event #" in messages
            app.action_switch_tab("audit")
            await settle(pilot)
            assert "forget" in screen_text(app)
    finally:
        source.close()


async def test_lanes_tab_says_it_needs_a_memtui_database(tmp_path):
    source = open_source(copy_fixture(TENANT, tmp_path), now=50)
    try:
        app = app_for_source(source)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            await pilot.press("3")
            await settle(pilot)
            assert "need a memtui database" in screen_text(app)
    finally:
        source.close()


def test_cli_open_refuses_nothing_given():
    from click.testing import CliRunner

    from memtui.cli import main

    result = CliRunner().invoke(main, ["open"])
    assert result.exit_code != 0
    assert "--qdrant-url" in result.output


def test_run_app_opens_a_foreign_store_in_the_source_app(tmp_path, monkeypatch):
    from memtui.tui import launch

    seen: dict[str, Any] = {}

    def fake_run(self: SourceApp) -> None:
        seen["kind"] = self.source.kind
        seen["read_only"] = self.source.read_only

    monkeypatch.setattr(SourceApp, "run", fake_run)
    path = copy_fixture(TENANT, tmp_path)
    launch.run_app(path, now="50")
    assert seen == {"kind": "tenant-evidence", "read_only": True}
    launch.run_app(path, now="50", allow_writes=True)
    assert seen["read_only"] is False


# ---------------------------------------------------------------- layout, keys, live, embedder


def _content_header_visible(app: SourceApp) -> bool:
    table = app.query_one("#source-records", DataTable)
    labels = [str(column.label) for column in table.columns.values()]
    if "content" not in labels:
        return False
    widths = [column.get_render_width(table) for column in table.columns.values()]
    right = sum(widths[: labels.index("content") + 1])
    return right <= table.scrollable_content_region.width


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
async def test_browse_table_fits_the_width(size, tmp_path):
    source = open_source(copy_fixture(LANGGRAPH_VECTORS, tmp_path), now=LG_NOW)
    try:
        app = app_for_source(source, poll_interval=None)
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            assert _content_header_visible(app)
            table = app.query_one("#source-records", DataTable)
            assert table.virtual_size.width <= table.scrollable_content_region.width
            # The start of a record's content is on screen.
            assert "the vault code word" in screen_text(app) or "dark mode" in screen_text(app)
            await pilot.resize_terminal(80, 24)
            await settle(pilot)
            assert _content_header_visible(app)
    finally:
        source.close()


async def test_tab_keys_work_from_a_focused_table_and_focus_the_tab(tmp_path):
    source = open_source(copy_fixture(TENANT, tmp_path), now=50)
    try:
        app = app_for_source(source, poll_interval=None)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            tabs = app.query_one("#tabs")
            records = app.query_one("#source-records", DataTable)
            records.focus()
            await pilot.press("4")
            await settle(pilot)
            assert tabs.active == "audit"
            assert app.focused is app.query_one("#source-audit", DataTable)
            await pilot.press("1")
            await settle(pilot)
            assert tabs.active == "browse"
            assert app.focused is records
            await pilot.press("2")
            await settle(pilot)
            assert tabs.active == "search"
            query = app.query_one("#source-query", Input)
            assert app.focused is query
            # In the query box digits and "/" type.
            await pilot.press("3", "slash", "q")
            await settle(pilot)
            assert tabs.active == "search"
            assert query.value == "3/q"
            app.query_one("#source-results", DataTable).focus()
            await pilot.press("1")
            await settle(pilot)
            assert tabs.active == "browse"
            await pilot.press("slash")
            await settle(pilot)
            assert tabs.active == "search" and app.focused is query
    finally:
        source.close()


async def test_help_lists_every_key_and_the_footer_shows_them(tmp_path):
    from memtui.tui.source_app import SourceHelpScreen

    source = open_source(copy_fixture(TENANT, tmp_path), now=50)
    try:
        app = app_for_source(source, poll_interval=None)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            footer = screen_text(app).splitlines()[-1]
            assert "? Help" in footer and "q Quit" in footer
            await pilot.press("question_mark")
            await settle(pilot)
            assert isinstance(app.screen, SourceHelpScreen)
            text = screen_text(app)
            for binding in SourceApp.BINDINGS:
                assert binding.description in text  # type: ignore[union-attr]
            for key in ("1", "2", "3", "4", "/", "?", "f", "h", "n", "v", "q"):
                assert f"\n{key} " in "\n" + "\n".join(
                    line.strip(" │┃█▌▐") for line in text.splitlines()
                ), key
            await pilot.press("escape")
            await settle(pilot)
            assert not isinstance(app.screen, SourceHelpScreen)
    finally:
        source.close()


async def test_live_change_refreshes_counts_and_keeps_the_highlighted_record(tmp_path):
    import sqlite3

    path = copy_fixture(LANGGRAPH, tmp_path)
    source = open_source(path, now=LG_NOW)
    try:
        app = app_for_source(source, poll_interval=None)
        async with app.run_test(size=(140, 50)) as pilot:
            await settle(pilot)
            table = app.query_one("#source-records", DataTable)
            before = table.row_count
            table.move_cursor(row=2)
            await settle(pilot)
            kept = app.current_record_id()
            assert kept is not None
            app.poll_changes()
            await settle(pilot)
            assert "live: changed" not in screen_text(app)
            with sqlite3.connect(path) as db:
                row = db.execute("SELECT * FROM store LIMIT 1").fetchone()
                cols = [d[0] for d in db.execute("SELECT * FROM store LIMIT 1").description]
                values = dict(zip(cols, row, strict=True))
                values["prefix"] = "aaa-new"
                values["key"] = "fresh"
                values["expires_at"] = None
                values["ttl_minutes"] = None
                marks = ",".join("?" for _ in cols)
                db.execute(
                    f"INSERT INTO store ({','.join(cols)}) VALUES ({marks})", list(values.values())
                )
            app.poll_changes()
            await settle(pilot)
            assert table.row_count == before + 1
            assert app.current_record_id() == kept
            text = screen_text(app)
            assert "live: changed" in text
            assert f"all ({before + 1})" in text
    finally:
        source.close()


async def test_embedder_runs_the_vector_lane_on_foreign_vectors(tmp_path):
    source = open_source(copy_fixture(LANGGRAPH_VECTORS, tmp_path), now=LG_NOW)
    try:
        app = app_for_source(source, embedder=HashEmbedder(8), poll_interval=None)
        async with app.run_test(size=(140, 50)) as pilot:
            await settle(pilot)
            await pilot.press("slash")
            app.query_one("#source-query", Input).value = "paris trip"
            await pilot.press("enter")
            await settle(pilot)
            response = app.response
            assert response is not None and response.results
            assert not (response.trace.get("fallback") or response.trace.get("vector_fallback"))
            assert any(r.vector_score for r in response.results)
            assert "fallback" not in app.query_one("#source-index").render().plain  # type: ignore[union-attr]
    finally:
        source.close()


def test_cli_open_passes_the_embedder_to_the_source_app(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from memtui.cli import main

    seen: dict[str, Any] = {}

    def fake_run(self: SourceApp) -> None:
        seen["embedder"] = self.embedder

    monkeypatch.setattr(SourceApp, "run", fake_run)
    path = copy_fixture(LANGGRAPH_VECTORS, tmp_path)
    result = CliRunner().invoke(main, ["open", str(path), "--embedder", "hash-8"])
    assert result.exit_code == 0, result.output
    assert isinstance(seen["embedder"], HashEmbedder) and seen["embedder"].dim == 8
    result = CliRunner().invoke(main, ["open", str(path), "--embedder", "nosuchmodule:x"])
    assert result.exit_code != 0
    assert "nosuchmodule" in result.output
