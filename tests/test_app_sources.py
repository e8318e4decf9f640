"""The app on every foreign source: opens it, browses tiers/scopes, searches, forgets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import fixed_clock
from fixtures.qdrant_support import copy_mem0_store, make_cyber_folder
from fixtures.sources_support import LANGGRAPH, LETTA, PREFERENCES, TENANT, copy_fixture
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
