"""The one app on every foreign source: opens it, browses tiers/scopes, searches, forgets."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
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
from textual.widgets import Input, Static

from memtui.core.embed import HashEmbedder
from memtui.core.search import SearchResponse
from memtui.sources import open_source
from memtui.tui.app import MemtuiApp, make_app
from memtui.tui.breakdown import arithmetic
from memtui.tui.browse import RecordTable, ScopeTree
from memtui.tui.collection_picker import CollectionPicker
from memtui.tui.dialogs import ConfirmRecordAction
from memtui.tui.search_view import ResultList, SearchPane
from memtui.tui.testing import screen_text, settle

LG_NOW = "2026-11-30T12:00:30Z"

# name, how to make it, now, query, a scope key shown. The app runs on langgraph and
# letta below; tests/app/test_app_sources_direct.py checks what every one of them gives it.
CASES: list[tuple[str, Any, Any, str, str]] = [
    ("langgraph", LANGGRAPH, LG_NOW, "paris trip", "namespace"),
    ("preferences", PREFERENCES, None, "qwphlumbix", "session"),
    ("tenant", TENANT, 50, "queue", "tenant"),
    ("letta", LETTA, None, "bullet points", "archive"),
    ("cyber-autoagent", "cyber", None, "staging credential", "target"),
    ("mem0", "mem0", None, "passport", "user_id"),
    ("tenant-no-now", TENANT, None, "queue", "tenant"),  # no logical now given
]


def make(kind: Any, folder: Path) -> Path:
    if kind == "cyber":
        return make_cyber_folder(folder / "qdrant")
    if kind == "mem0":
        return copy_mem0_store(folder)
    return copy_fixture(kind, folder)


def opened(case: tuple, folder: Path, **kwargs: Any):
    name, kind, now, _query, _scope = case
    return open_source(make(kind, folder), now=now, clock=fixed_clock, **kwargs)


async def run_query(pilot, text: str) -> SearchPane:
    await pilot.press("slash")
    await settle(pilot)
    pilot.app.query_one("#query", Input).value = text
    await pilot.press("enter")
    await settle(pilot)
    return pilot.app.query_one(SearchPane)


def case_named(name: str) -> tuple:
    return next(case for case in CASES if case[0] == name)


def check_browse(app: MemtuiApp, source: Any) -> None:
    """The first screen: the banner, the tree with the source's counts, the first page."""
    text = screen_text(app)
    assert source.kind_label in text  # the banner says what kind of store this is
    assert "read-only: forget needs --allow-writes" in text
    # The tree has every tier with the source's own counts.
    tree = app.query_one(ScopeTree)
    # Values that carry their key get the room to be read whole.
    assert tree.has_class("-keys") == (len(source.facet_keys) > 1)
    for facet in source.facets():
        node = tree.find("tier", facet.tier, facet.tier)
        assert node is not None and node.data is not None
        assert node.data.live == facet.count
    # The table shows the first tier's first page, from the source's pages.
    table = app.query_one(RecordTable)
    first_tier = next(f.tier for f in source.facets() if f.count)
    page = source.page({"tier": first_tier}, limit=200)
    assert [r.id for r in table.records] == [r.id for r in page.records]


async def check_search_and_refused_forget(pilot, source: Any, query: str) -> SearchResponse:
    """Search: results with the source's ids; the expanded breakdown adds up. Read-only
    by default: forget is refused with the reason, no dialog."""
    app = pilot.app
    pane = await run_query(pilot, query)
    response = pane.response
    assert response is not None and response.results
    for result in response.results:
        assert arithmetic(result, response.trace).adds_up
        assert source.get(result.id) is not None  # type: ignore[attr-defined]
    await pilot.press("enter")
    await settle(pilot)
    assert "✓ adds up" in screen_text(app)
    app.query_one(ResultList).focus()
    await pilot.press("f")
    await settle(pilot)
    assert not isinstance(app.screen, ConfirmRecordAction)
    assert "--allow-writes" in " ".join(str(n.message) for n in app._notifications)
    return response


# The app's code is the same for every source: it runs here on two (one facet key, and
# several with a list-valued one); what each source gives it (counts, results, their
# breakdowns, the read-only refusal) is checked for every source, without the app, in
# tests/app/test_app_sources_direct.py.


@contextlib.asynccontextmanager
async def browsing(source: Any) -> AsyncIterator[tuple[MemtuiApp, Any]]:
    """The app on ``source`` at 140x50 with a hash embedder, its first screen checked."""
    app = make_app(source, embedder=HashEmbedder(8), poll_interval=None, check_on_start=False)
    assert isinstance(app, MemtuiApp) and app.source is source
    async with app.run_test(size=(140, 50)) as pilot:
        await settle(pilot)
        check_browse(app, source)
        yield app, pilot


async def test_the_one_app_opens_browses_and_searches_langgraph_and_nests_namespaces(tmp_path):
    """Also: a change by another process refreshes the counts and keeps the highlighted
    record; memories.user-2.notes hangs under memories.user-2, shown by the rest of its
    name; selecting it lists its records, and a refresh keeps the nesting."""
    case = case_named("langgraph")
    path = make(LANGGRAPH, tmp_path / "store")
    source = open_source(path, now=LG_NOW, clock=fixed_clock)
    try:
        async with browsing(source) as (app, pilot):
            # A live change refreshes the counts and keeps the highlighted record.
            table = app.query_one(RecordTable)
            tier = table.scope.tier if table.scope else None
            before = len(table.records)
            table.move_cursor(row=1)
            await settle(pilot)
            kept = app.current_record_id()
            assert kept is not None
            app._poll()
            await settle(pilot)
            assert app.external_changes == 0, "no change yet"
            with sqlite3.connect(path) as db:
                cursor = db.execute("SELECT * FROM store LIMIT 1")
                cols = [d[0] for d in cursor.description]
                values = dict(zip(cols, cursor.fetchone(), strict=True))
                values.update(
                    prefix="memories.aaa-new", key="fresh", expires_at=None, ttl_minutes=None
                )
                marks = ",".join("?" for _ in cols)
                db.execute(
                    f"INSERT INTO store ({','.join(cols)}) VALUES ({marks})", list(values.values())
                )
            app._poll()
            await settle(pilot)
            assert app.external_changes == 1, "the change is seen"
            assert "new since open" in screen_text(app)
            assert len(table.records) == before + 1, "the table has the new record"
            assert table.scope is not None and table.scope.tier == tier, "on the same tier"
            assert app.current_record_id() == kept, "the highlighted record stays"
            # The namespaces nest in the scope tree.
            tree = app.query_one(ScopeTree)
            notes = tree.find("namespace", "memories", "memories.user-2.notes")
            assert notes is not None and notes.data is not None
            assert notes.data.kind == "namespace"
            assert notes.parent is not None and notes.parent.data is not None
            assert notes.parent.data.value == "memories.user-2"
            assert notes.parent.parent is not None and notes.parent.parent.data is not None
            assert notes.parent.parent.data.kind == "tier"
            assert "….notes" in notes.label.plain
            assert tree.find("namespace", "memories", "memories.user-1").parent.data.kind == "tier"
            tree.focus()
            tree.move_cursor(notes)
            await settle(pilot)
            table = app.query_one(RecordTable)
            assert table.records and all(
                r.scope["namespace"] == "memories.user-2.notes" for r in table.records
            ), "selecting the nested namespace lists its records"
            app._poll()  # a refresh with the same shape keeps the nested nodes
            await settle(pilot)
            again = tree.find("namespace", "memories", "memories.user-2.notes")
            assert again is not None and again.parent.data.value == "memories.user-2"
            # Search and the read-only refusal.
            await check_search_and_refused_forget(pilot, source, case[3])
    finally:
        source.close()


async def test_the_one_app_opens_browses_and_searches_letta_with_its_vectors(tmp_path):
    """Also: the app's embedder runs the vector lane on the store's own vectors, and the
    keys only a memtui database has are not offered."""
    case = case_named("letta")
    source = opened(case, tmp_path / "store")
    try:
        async with browsing(source) as (app, pilot):
            # Native-only keys are not offered on a foreign store: no refute, and r does
            # nothing; forget is offered (read-only says why).
            footer = screen_text(app).splitlines()[-1]
            assert "f Forget" in footer
            assert "r Refute" not in footer
            await pilot.press("r")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmRecordAction)
            response = await check_search_and_refused_forget(pilot, source, case[3])
            assert not response.trace.fallback, "the vector lane ran on the store's vectors"
            assert any(r.vector_score for r in response.results), "and scored a result"
            # Native-only keys are not offered on a foreign store: 3's tab says why.
            await pilot.press("3")
            await settle(pilot)
            assert "need a memtui database" in screen_text(app)
    finally:
        source.close()


async def test_forget_through_the_dialog_removes_the_record_and_audits(tmp_path):
    """On a tenant store; the same steps on a LangGraph store, without the app, in
    tests/app/test_app_sources_direct.py."""
    kind, now, query = TENANT, 50, "queue"
    path = make(kind, tmp_path / "store")
    source = open_source(path, now=now, clock=fixed_clock, allow_writes=True, operator="tester")
    try:
        app = make_app(source, operator="tester", poll_interval=None, check_on_start=False)
        async with app.run_test(size=(140, 50)) as pilot:
            await settle(pilot)
            pane = await run_query(pilot, query)
            assert pane.response is not None and pane.response.results
            target = pane.response.results[0].id  # type: ignore[attr-defined]
            app.query_one(ResultList).focus()
            await pilot.press("f")
            await settle(pilot)
            assert isinstance(app.screen, ConfirmRecordAction)
            # A foreign id is shown as it is (only a memtui database's numbers get "#").
            assert f"#{target}" not in screen_text(app)
            # The dialog states the store's own forget rule.
            rule = source.forget_preview(target)["rule"]
            assert " ".join(rule.split()[:6]) in " ".join(screen_text(app).split())
            app.screen.query_one("#reason", Input).value = "subject asked"
            await pilot.click("#confirm")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmRecordAction)
            assert source.get(target) is None or source.get(target).state == "deleted"
            events = source.audit_events()
            assert any(target in [str(i) for i in e["record_ids"]] for e in events)
            messages = " ".join(str(n.message) for n in app._notifications)
            assert "audit event #" in messages and "erasure verified" in messages
            assert target not in [r.id for r in app.query_one(RecordTable).records]
            await app.action_switch_tab("audit")
            await settle(pilot)
            assert "forget" in screen_text(app)
    finally:
        source.close()


LETTA_PARIS = "archival:passage-00000000-0000-4000-8000-000000000002"


def store_rows(path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("kind", "target", "also"),
    [(PREFERENCES, "pref:4", ["pref:3"]), (LETTA, LETTA_PARIS, [])],
    ids=["preferences", "letta"],
)
async def test_forget_from_the_browse_table_follows_the_stores_rule(kind, target, also, tmp_path):
    path = make(kind, tmp_path / "store")
    source = open_source(path, clock=fixed_clock, allow_writes=True, operator="tester")
    try:
        app = make_app(source, operator="tester", poll_interval=None, check_on_start=False)
        async with app.run_test(size=(140, 50)) as pilot:
            await settle(pilot)
            table = app.query_one(RecordTable)
            table.focus()
            table.move_cursor(row=[r.id for r in table.records].index(target))
            await settle(pilot)
            assert app.current_record_id() == target
            await pilot.press("f")
            await settle(pilot)
            dialog = app.screen
            assert isinstance(dialog, ConfirmRecordAction) and dialog.record.id == target
            assert app.focused is dialog.query_one("#reason", Input)
            # The store's rule, as a sentence, then what it removes.
            warning = dialog.what_happens().plain
            rule = source.forget_preview(target)["rule"]
            assert warning.startswith(f"This cannot be undone. {rule}")
            if also:
                assert warning.endswith(f"without the value. Removes {1 + len(also)} records.")
            summary = dialog.query_one(".dialog-summary", Static).render()
            assert "[" not in str(summary)  # a list scope (Letta's tags) reads as text
            dialog.query_one("#reason", Input).value = "subject asked"
            await pilot.click("#confirm")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmRecordAction)
            # Gone from the table and the store, with what the store's rule removes too.
            assert target not in [r.id for r in table.records]
            for record_id in [target, *also]:
                assert source.get(record_id) is None
            messages = " ".join(str(n.message) for n in app._notifications)
            assert "erasure verified" in messages and "NOT" not in messages
            noun = "preference" if kind == PREFERENCES else "archival passage"
            assert f"Forgot {noun} {target}" in messages  # the tier once, when it is the type
        outcomes = [e for e in source.audit_events() if e["action"] == "forget"]
        assert len(outcomes) == 1  # one forget, its intent before it
        assert outcomes[0]["reason"] == "subject asked"
        assert outcomes[0]["record_ids"] == [target]
        assert outcomes[0]["details"]["verified"] is True
        assert outcomes[0]["details"]["removed"] == sorted([target, *also])
        assert [e["status"] for e in source.audit_events() if e["action"] == "forget-intent"] == [
            "completed"
        ]
    finally:
        source.close()
    if kind == PREFERENCES:
        assert store_rows(
            path, "SELECT revision FROM assistant_memory_revisions WHERE session = 's-alpha'"
        ) == [(4,)]  # advanced from 3
        assert store_rows(path, "SELECT id FROM assistant_preferences WHERE name = 'allergy'") == []
    else:
        assert store_rows(
            path,
            "SELECT count(*) FROM passage_tags WHERE passage_id = ?",
            (target.split(":", 1)[1],),
        ) == [(0,)]
        assert store_rows(path, "SELECT count(*) FROM archival_passages") == [(4,)]


async def test_the_app_says_which_work_still_quotes_a_forgotten_preference(tmp_path):
    path = make(PREFERENCES, tmp_path / "store")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "INSERT INTO assistant_work (origin, session, prompt, result, status, created, "
            "context_revision) VALUES ('chat', 's-beta', 'plan the picnic', "
            "'Noted: allergic to qwphlumbix pollen', 'done', 1796040900, 1)"
        )
    conn.close()
    source = open_source(path, clock=fixed_clock, allow_writes=True, operator="tester")
    try:
        app = make_app(source, operator="tester", poll_interval=None, check_on_start=False)
        async with app.run_test(size=(140, 50)) as pilot:
            await settle(pilot)
            table = app.query_one(RecordTable)
            table.focus()
            table.move_cursor(row=[r.id for r in table.records].index("pref:4"))
            await settle(pilot)
            await pilot.press("f")
            await settle(pilot)
            assert isinstance(app.screen, ConfirmRecordAction)
            app.screen.query_one("#reason", Input).value = "asked"
            await pilot.click("#confirm")
            await settle(pilot)
            messages = " ".join(str(n.message) for n in app._notifications)
            assert "erasure NOT verified" in messages and "erasure verified" not in messages
            assert "work:5 (session 's-beta', still eligible for future context)" in messages
            assert "the store's rule keeps work results" in messages
            assert "allergic" not in messages
    finally:
        source.close()


def test_cli_open_refuses_nothing_given():
    from click.testing import CliRunner

    from memtui.cli import main

    result = CliRunner().invoke(main, ["open"])
    assert result.exit_code != 0
    assert "--qdrant-url" in result.output


def test_run_app_opens_every_store_in_the_one_app(tmp_path, sample_db, monkeypatch):
    from memtui.tui import launch

    seen: dict[str, Any] = {}

    def fake_run(self: MemtuiApp) -> None:
        seen["kind"] = self.source.kind
        seen["read_only"] = self.source.read_only

    monkeypatch.setattr(MemtuiApp, "run", fake_run)
    path = copy_fixture(TENANT, tmp_path)
    launch.run_app(path, now="50")
    assert seen == {"kind": "tenant-evidence", "read_only": True}
    launch.run_app(path, now="50", allow_writes=True)
    assert seen["read_only"] is False
    launch.run_app(sample_db, clock=fixed_clock)
    assert seen == {"kind": "memtui", "read_only": False}


def _two_collections(path: Path) -> Path:
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(path))
    for name, size in (("alpha", 4), ("beta", 8)):
        client.create_collection(
            name, vectors_config=models.VectorParams(size=size, distance=models.Distance.COSINE)
        )
    client.upsert(
        "beta",
        [
            models.PointStruct(id=n, vector=[float(n + 1)] * 8, payload={"text": f"beta {n}"})
            for n in range(3)
        ],
    )
    client.close()
    return path


async def test_collection_picker_lists_points_and_dims_and_returns_the_choice(tmp_path):
    from memtui.sources import CollectionChoiceError

    path = _two_collections(tmp_path / "qdrant")
    with pytest.raises(CollectionChoiceError) as several:
        open_source(path)
    picker = CollectionPicker(several.value.where, several.value.collections)
    async with picker.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        text = screen_text(picker)
        assert "holds 2 Qdrant collections" in text
        rows = {
            parts[0]: parts
            for parts in (line.split() for line in text.splitlines())
            if parts and parts[0] in ("alpha", "beta")
        }
        assert rows["alpha"][1:4] == ["0", "4", "Cosine"]
        assert rows["beta"][1:4] == ["3", "8", "Cosine"]
        await pilot.press("down", "enter")
        await pilot.pause()
    assert picker.return_value == "beta"


def test_run_app_asks_which_collection_then_opens_it(tmp_path, monkeypatch):
    from memtui.tui import launch

    path = _two_collections(tmp_path / "qdrant")
    seen: dict[str, Any] = {}
    monkeypatch.setattr(CollectionPicker, "run", lambda self: "beta")
    monkeypatch.setattr(MemtuiApp, "run", lambda self: seen.update(label=self.source.label))
    launch.run_app(path)
    assert "beta" in seen["label"]
    # Quitting the picker opens nothing.
    seen.clear()
    monkeypatch.setattr(CollectionPicker, "run", lambda self: None)
    launch.run_app(path)
    assert seen == {}


def test_cli_open_passes_the_embedder_to_the_app(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from memtui.cli import main

    seen: dict[str, Any] = {}

    def fake_run(self: MemtuiApp) -> None:
        seen["embedder"] = self.embedder

    monkeypatch.setattr(MemtuiApp, "run", fake_run)
    path = copy_fixture(LANGGRAPH_VECTORS, tmp_path)
    result = CliRunner().invoke(main, ["open", str(path), "--embedder", "hash-8"])
    assert result.exit_code == 0, result.output
    assert isinstance(seen["embedder"], HashEmbedder) and seen["embedder"].dim == 8
    result = CliRunner().invoke(main, ["open", str(path), "--embedder", "nosuchmodule:x"])
    assert result.exit_code != 0
    assert "nosuchmodule" in result.output


async def test_scope_values_with_their_key_are_read_whole_at_100_columns(tmp_path):
    source = opened(CASES[4], tmp_path / "store")  # Cyber-AutoAgent: target, operation, category
    try:
        app = make_app(source, poll_interval=None, check_on_start=False)
        async with app.run_test(size=(100, 40)) as pilot:
            await settle(pilot)
            text = screen_text(app)
            assert "target https://shop.example" in text
            assert "operation OP_20261129_090000 2" in text
    finally:
        source.close()


@pytest.mark.parametrize(
    ("kind", "now", "key", "tier", "value"),
    [
        (LANGGRAPH, LG_NOW, "namespace", "memories", "memories.user-2"),
        (LETTA, None, "archive", "archival", "ops-runbooks"),
    ],
    ids=["langgraph", "letta"],
)
async def test_F_forgets_a_foreign_scope_from_the_tree(kind, now, key, tier, value, tmp_path):
    """F on a namespace or a Letta archive: the blast radius and the store's rule, the
    typed name, then every record of it gone, the tree recounted, one intent and one
    outcome event named in the notice. (A mem0 user, the same steps without the app:
    tests/app/test_app_sources_direct.py.)"""
    from memtui.tui.dialogs import ForgetEngagementDialog

    path = make(kind, tmp_path / "store")
    source = open_source(path, now=now, clock=fixed_clock, allow_writes=True, operator="tester")
    try:
        doomed = [r.id for r in source.iter_records({key: value}, include_hidden=True)]
        assert doomed
        app = make_app(source, operator="tester", poll_interval=None, check_on_start=False)
        async with app.run_test(size=(140, 50)) as pilot:
            await settle(pilot)
            tree = app.query_one(ScopeTree)
            tree.focus()
            tree.move_cursor(tree.find(key, tier, value))
            await settle(pilot)
            noun = "namespace" if kind == LANGGRAPH else "scope"  # mem0, Letta: several keys
            assert f"F Forget {noun}" in screen_text(app).splitlines()[-1]
            await pilot.press("F")
            await settle(pilot)
            dialog = app.screen
            assert isinstance(dialog, ForgetEngagementDialog)
            text = " ".join(screen_text(app).split())
            assert f"{len(doomed)} records will be erased" in text
            assert " ".join(source.forget_scope_rule(key).split()[:6]) in text
            dialog.query_one("#reason", Input).value = "subject asked"
            dialog.query_one("#confirm-name", Input).value = value
            await settle(pilot)
            await pilot.click("#confirm")
            await settle(pilot)
            assert not isinstance(app.screen, ForgetEngagementDialog)
            assert source.get_many(doomed) == {}
            events = source.audit_events()
            assert [e["action"] for e in events] == ["forget", "forget-intent"]
            assert events[0]["details"]["scope"] == {key: value}
            messages = " ".join(str(n.message) for n in app._notifications)
            assert f"Forgot {len(doomed)} records of {key} {value}" in messages
            assert f"audit event #{events[0]['id']}" in messages
            node = tree.find(key, tier, value)
            assert node is None or node.data is None or node.data.kind == "tier"
    finally:
        source.close()


async def test_a_foreign_banner_fits_80_columns_with_its_fix_it_command(tmp_path):
    """At 80 columns the erasure-gap line keeps its fix-it command whole (the explanation
    is cut instead)."""
    source = open_source(copy_mem0_store(tmp_path / "store"), clock=fixed_clock)
    try:
        app = make_app(source, poll_interval=None, check_on_start=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            banner = screen_text(app).splitlines()[1:7]
            gap = next(line for line in banner if line.strip().startswith("erasure gap"))
            assert gap.rstrip().endswith("`memtui forget-gaps PATH --allow-writes`")
            assert all(len(line.rstrip()) <= 80 for line in banner)
    finally:
        source.close()


async def test_a_foreign_banner_recounts_after_a_forget(tmp_path):
    """The banner's counts (points, erasure gaps) are read again after a forget in the app."""
    source = open_source(copy_mem0_store(tmp_path / "store"), clock=fixed_clock, allow_writes=True)
    try:
        app = make_app(source, operator="tester", poll_interval=None, check_on_start=False)
        async with app.run_test(size=(140, 40)) as pilot:
            await settle(pilot)
            assert "collection mem0: 6 points" in screen_text(app)
            app.query_one(RecordTable).focus()
            await pilot.press("f")
            await settle(pilot)
            assert isinstance(app.screen, ConfirmRecordAction)
            app.screen.query_one("#reason", Input).value = "subject asked"
            await pilot.click("#confirm")
            await settle(pilot)
            text = screen_text(app)
            assert "5 live records" in text.splitlines()[0]
            assert "collection mem0: 5 points" in text and "6 points" not in text
    finally:
        source.close()


async def test_the_picker_lists_a_lancedb_databases_tables(tmp_path):
    lancedb = pytest.importorskip("lancedb")
    from memtui.sources.lancedb import TableChoiceError

    db = lancedb.connect(str(tmp_path / "lance"))
    db.create_table("notes", [{"text": "alpha note", "vector": [1.0, 0.0]}])
    db.create_table("facts", [{"text": "beta fact"}])
    with pytest.raises(TableChoiceError) as several:
        open_source(tmp_path / "lance")
    picker = CollectionPicker(several.value.where, several.value.collections)
    async with picker.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        text = screen_text(picker)
        assert "holds 2 LanceDB tables" in text
        assert text.count("LanceDB table") == 3  # the title and each row's label
        header = next(line.split() for line in text.splitlines() if "table" in line.split())
        assert header == ["table", "rows", "dims", "holds"]  # no distance: a query names it
        await pilot.press("down", "enter")
        await pilot.pause()
    assert picker.return_value == "notes"


async def test_a_chroma_folder_with_two_collections_asks_which_then_opens_it(tmp_path, monkeypatch):
    from fixtures.chroma_support import make_chroma_folder

    from memtui.sources import CollectionChoiceError
    from memtui.tui import launch

    path = make_chroma_folder(tmp_path / "chroma", second=True)
    with pytest.raises(CollectionChoiceError) as several:
        open_source(path)
    picker = CollectionPicker(several.value.where, several.value.collections)
    async with picker.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        text = screen_text(picker)
        assert "holds 2 Chroma collections" in text
        header = next(line.split() for line in text.splitlines() if "collection" in line.split())
        assert header == ["collection", "documents", "dims", "space", "holds"]
        rows = {
            parts[0]: parts
            for parts in (line.split() for line in text.splitlines())
            if parts and parts[0] in ("agent_memory", "notes")
        }
        assert rows["agent_memory"][1:4] == ["9", "8", "cosine"]  # its embedding's space
        assert rows["notes"][1:4] == ["1", "8", "cosine"]
        await pilot.press("down", "enter")
        await pilot.pause()
    assert picker.return_value == "notes"
    seen: dict[str, Any] = {}
    monkeypatch.setattr(CollectionPicker, "run", lambda self: "notes")
    monkeypatch.setattr(MemtuiApp, "run", lambda self: seen.update(label=self.source.label))
    launch.run_app(path)
    assert seen["label"] == "chroma/notes (Chroma collection)"
