"""Refute, forget and forget-engagement through their dialogs: one test per destructive flow.

Cancel writes nothing; confirm changes exactly what was shown and writes exactly one
audit event with the reason; an empty reason is refused; read-only refuses.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Button, Input

from memtui.core.store import MemoryStore
from memtui.tui.app import make_app
from memtui.tui.audit_view import AuditPane
from memtui.tui.browse import RecordTable, ScopeTree
from memtui.tui.commands import MemtuiCommands
from memtui.tui.dialogs import ConfirmRecordAction, ForgetEngagementDialog, RevealDialog
from memtui.tui.search_view import ResultList, SearchPane
from memtui.tui.testing import build_sample_db, fixed_clock, screen_text, settle

SIZE = (120, 40)


@pytest.fixture
def sample_path(tmp_path: Path) -> Path:
    return build_sample_db(tmp_path / "sample.db")


@pytest.fixture
def store(sample_path: Path):
    with MemoryStore(sample_path, clock=fixed_clock, operator="tester") as opened:
        yield opened


def audit_ids(store: MemoryStore) -> list[int]:
    return [e["id"] for e in store.audit_events()]


async def select_scope(pilot, kind: str, tier: str, value: str) -> None:
    tree = pilot.app.query_one(ScopeTree)
    tree.move_cursor(tree.find(kind, tier, value))
    await settle(pilot)
    pilot.app.query_one(RecordTable).focus()
    await pilot.pause()


async def open_forget_engagement(pilot, tier: str, engagement: str) -> None:
    """Highlight an engagement in the tree and press F (its dialog opens)."""
    tree = pilot.app.query_one(ScopeTree)
    tree.focus()
    tree.move_cursor(tree.find("engagement", tier, engagement))
    await settle(pilot)
    await pilot.press("F")
    await settle(pilot)


async def type_text(pilot, text: str) -> None:
    for char in text:
        await pilot.press("space" if char == " " else char)


# ---------------------------------------------------------------- forget


async def test_forget_dialog_focus_order_and_cancel_changes_nothing(store: MemoryStore):
    before = audit_ids(store)
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        record = app.query_one(RecordTable).current
        assert record is not None
        await pilot.press("f")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, ConfirmRecordAction)
        text = screen_text(app)
        assert f"#{record.id}" in text and record.tier in text and record.record_type in text
        assert record.content[:40] in text
        assert "This cannot be undone" in text
        # Reason first; enter moves to Cancel and never confirms; then the action button.
        assert app.focused is dialog.query_one("#reason", Input)
        await type_text(pilot, "no longer needed")
        await pilot.press("enter")
        assert app.screen is dialog
        assert app.focused is dialog.query_one("#cancel", Button)
        await pilot.press("tab")
        assert app.focused is dialog.query_one("#confirm", Button)
        await pilot.press("shift+tab")
        assert app.focused is dialog.query_one("#cancel", Button)
        await pilot.press("enter")  # Cancel is the default
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmRecordAction)
    assert store.get(int(record.id)) is not None
    assert audit_ids(store) == before


@pytest.mark.parametrize("where", ["reason", "cancel", "confirm"])
async def test_escape_cancels_from_anywhere_in_the_dialog(store: MemoryStore, where: str):
    before = audit_ids(store)
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        record = app.query_one(RecordTable).current
        await pilot.press("f")
        await settle(pilot)
        await type_text(pilot, "reason")
        app.screen.query_one(f"#{where}").focus()
        await pilot.pause()
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmRecordAction)
    assert store.get(int(record.id)) is not None
    assert audit_ids(store) == before


async def test_empty_reason_is_refused(store: MemoryStore):
    before = audit_ids(store)
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        record = app.query_one(RecordTable).current
        await pilot.press("f")
        await settle(pilot)
        await type_text(pilot, "   ")
        await pilot.press("tab", "tab", "enter")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmRecordAction)
        assert any("reason is required" in n.message for n in app._notifications)
        assert app.focused is app.screen.query_one("#reason", Input)
    assert store.get(int(record.id)) is not None
    assert audit_ids(store) == before


async def test_confirm_forget_removes_record_audits_once_and_refreshes(store: MemoryStore):
    before = audit_ids(store)
    live_before = store.tier_counts()["working"]
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one(RecordTable)
        record = table.current
        assert record is not None and record.tier == "working"
        await pilot.press("f")
        await settle(pilot)
        await type_text(pilot, "client asked for erasure")
        await pilot.press("tab", "tab")
        assert app.focused is app.screen.query_one("#confirm", Button)
        await pilot.press("enter")
        await settle(pilot)
        assert store.get(int(record.id)) is None
        events = store.audit_events()
        assert [e["id"] for e in events[1:]] == before
        event = events[0]
        assert event["action"] == "forget"
        assert event["record_ids"] == [int(record.id)]
        assert event["reason"] == "client asked for erasure"
        assert event["operator"] == "tester"
        assert any(f"audit event #{event['id']}" in n.message for n in app._notifications)
        # Every view refreshed: the table, the tree's counts, the audit tab.
        assert record.id not in [r.id for r in table.records]
        assert table.cursor_row == 0
        tree = app.query_one(ScopeTree)
        working = tree.find("tier", "working", "working")
        assert working is not None and working.data.live == live_before - 1
        await pilot.press("4")  # the Audit tab, built when first shown
        await settle(pilot)
        audit = app.query_one(AuditPane)
        assert audit.events[0]["id"] == event["id"]
        text = screen_text(app)
        assert "client asked for erasure" in text and "✓ chain verified" in text


async def test_confirm_by_clicking_the_action_button(store: MemoryStore):
    before = audit_ids(store)
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        record = app.query_one(RecordTable).current
        await pilot.press("f")
        await settle(pilot)
        await type_text(pilot, "duplicate")
        await pilot.click("#confirm")
        await settle(pilot)
        assert store.get(int(record.id)) is None
    assert len(audit_ids(store)) == len(before) + 1


async def test_forget_from_search_results_reruns_the_search(store: MemoryStore):
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash")
        await type_text(pilot, "sql injection")
        await pilot.press("enter")
        await settle(pilot)
        results = app.query_one(ResultList)
        target = results.current_id()
        assert target is not None
        await pilot.press("f")
        await settle(pilot)
        await type_text(pilot, "stale finding")
        await pilot.press("tab", "tab", "enter")
        await settle(pilot)
        assert store.get(int(target)) is None
        pane = app.query_one(SearchPane)
        assert pane.response is not None
        assert target not in [r.id for r in pane.response.results]
        assert store.audit_events()[0]["record_ids"] == [int(target)]


# ---------------------------------------------------------------- refute


async def test_refute_a_tactic(store: MemoryStore):
    before = audit_ids(store)
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_scope(pilot, "tier", "longterm", "longterm")
        table = app.query_one(RecordTable)
        tactic = table.current
        assert tactic is not None and tactic.record_type == "tactic" and tactic.state != "refuted"
        live_before = store.tier_counts()["longterm"]
        await pilot.press("r")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmRecordAction)
        assert app.screen.verb == "refute"
        await type_text(pilot, "payload patched")
        await pilot.press("tab", "tab", "enter")
        await settle(pilot)
        refuted = store.get(int(tactic.id))
        assert refuted is not None and refuted.refuted
        assert refuted.metadata["evidence_grade"] == "hypothesis"
        events = store.audit_events()
        assert [e["id"] for e in events[1:]] == before
        assert events[0]["action"] == "refute" and events[0]["reason"] == "payload patched"
        assert tactic.id not in [r.id for r in table.records]
        tree = app.query_one(ScopeTree)
        assert tree.find("tier", "longterm", "longterm").data.live == live_before - 1


async def test_refute_cancel_changes_nothing(store: MemoryStore):
    before = audit_ids(store)
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_scope(pilot, "tier", "longterm", "longterm")
        tactic = app.query_one(RecordTable).current
        await pilot.press("r")
        await settle(pilot)
        await type_text(pilot, "maybe")
        await pilot.press("escape")
        await settle(pilot)
    assert not store.get(int(tactic.id)).refuted
    assert audit_ids(store) == before


def footer(app) -> str:
    return screen_text(app).splitlines()[-1]


def palette(app) -> list[str]:
    return [name for name, _, _ in MemtuiCommands(app.screen).commands()]


async def test_r_applies_only_to_a_live_tactic(store: MemoryStore):
    """Footer, key and palette: no refute on a note, a finding or a refuted tactic."""
    before = audit_ids(store)
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one(RecordTable)
        assert table.current.record_type != "tactic"
        assert "Refute" not in footer(app) and "Forget" in footer(app)
        assert not any(name.startswith("Refute") for name in palette(app))
        await pilot.press("r")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmRecordAction)
        # A live tactic: the key, the footer and the palette offer it.
        await select_scope(pilot, "tier", "longterm", "longterm")
        tactic = table.current
        assert tactic.record_type == "tactic" and tactic.state == "live"
        await settle(pilot)
        assert "r Refute" in footer(app)
        assert f"Refute tactic #{tactic.id}" in palette(app)
        # A refuted tactic (shown with t): not again.
        await pilot.press("t")
        await settle(pilot)
        row = next(i for i, r in enumerate(table.records) if r.state == "refuted")
        table.move_cursor(row=row)
        await settle(pilot)
        assert table.current.record_type == "tactic" and table.current.state == "refuted"
        assert "Refute" not in footer(app) and "Forget" in footer(app)
        assert not any(name.startswith("Refute") for name in palette(app))
        await pilot.press("r")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmRecordAction)
        # Search results follow the highlighted result's record.
        await pilot.press("slash")
        await settle(pilot)
        app.query_one("#query", Input).value = "sql injection"
        await pilot.press("enter")
        await settle(pilot)
        results = app.query_one(ResultList)
        pane = app.query_one(SearchPane)
        kinds = [pane.records[r.id].record_type for r in pane.response.results]
        results.highlighted = kinds.index("finding")
        await settle(pilot)
        assert "Refute" not in footer(app) and "Forget" in footer(app)
        assert not any(name.startswith("Refute") for name in palette(app))
        results.highlighted = kinds.index("tactic")
        await settle(pilot)
        assert "r Refute" in footer(app)
        assert f"Refute tactic #{results.current_id()}" in palette(app)
    assert audit_ids(store) == before


# ---------------------------------------------------------------- forget an engagement


async def test_forget_engagement_needs_the_exact_name(store: MemoryStore):
    before = audit_ids(store)
    radius = store.blast_radius(engagement="vandelay-soap")
    total = sum(n for types in radius.values() for n in types.values())
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tree = app.query_one(ScopeTree)
        await open_forget_engagement(pilot, "episodic", "vandelay-soap")
        dialog = app.screen
        assert isinstance(dialog, ForgetEngagementDialog)
        text = screen_text(app)
        assert f"{total} records will be erased" in text
        for tier, types in radius.items():
            for record_type in types:
                assert tier in text and record_type in text
        button = dialog.query_one("#confirm", Button)
        assert app.focused is dialog.query_one("#reason", Input)
        assert button.disabled
        await type_text(pilot, "engagement closed")
        await pilot.press("enter")
        assert app.focused is dialog.query_one("#confirm-name", Input)
        await type_text(pilot, "vandelay")
        assert button.disabled
        await type_text(pilot, "-soa")
        assert button.disabled
        await pilot.press("enter")
        assert app.focused is dialog.query_one("#cancel", Button)
        await pilot.press("tab")  # the disabled button cannot take focus
        assert app.focused is not button
        await pilot.click("#confirm")
        await settle(pilot)
        assert store.blast_radius(engagement="vandelay-soap") == radius
        dialog.query_one("#confirm-name", Input).focus()
        await pilot.press("end")
        await type_text(pilot, "p")
        assert not button.disabled
        await pilot.press("tab", "tab")
        assert app.focused is button
        await pilot.press("enter")
        await settle(pilot)
        assert store.blast_radius(engagement="vandelay-soap") == {}
        events = store.audit_events()
        assert [e["id"] for e in events[1:]] == before
        assert events[0]["action"] == "forget-scope"
        assert events[0]["reason"] == "engagement closed"
        assert len(events[0]["record_ids"]) == total
        assert tree.find("engagement", "episodic", "vandelay-soap").data.kind == "tier"


async def test_forget_engagement_says_when_erasure_is_not_verified(
    store: MemoryStore, sample_path: Path, monkeypatch
):
    """A reader in another process pins the WAL: the notice says so and names the
    forget-scope event, not the erasure-incomplete one written after it."""
    import sqlite3

    from memtui.core import index_db

    monkeypatch.setattr(index_db, "CHECKPOINT_RETRIES", 2)
    monkeypatch.setattr(index_db, "CHECKPOINT_RETRY_DELAY", 0.001)
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_forget_engagement(pilot, "episodic", "vandelay-soap")
        await type_text(pilot, "engagement closed")
        dialog = app.screen
        dialog.query_one("#confirm-name", Input).value = "vandelay-soap"
        await settle(pilot)
        reader = sqlite3.connect(sample_path)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM records").fetchone()
        try:
            await pilot.click("#confirm")
            await settle(pilot)
        finally:
            reader.rollback()
            reader.close()
        events = store.audit_events()
        assert [e["action"] for e in events[:2]] == ["erasure-incomplete", "forget-scope"]
        messages = " ".join(str(n.message) for n in app._notifications)
        assert "erasure NOT verified" in messages
        assert f"audit event #{events[1]['id']}" in messages
        assert f"audit event #{events[0]['id']}" not in messages


async def test_forget_engagement_cancel_changes_nothing(store: MemoryStore):
    before = audit_ids(store)
    radius = store.blast_radius(engagement="globex-retest")
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_forget_engagement(pilot, "working", "globex-retest")
        await type_text(pilot, "closing")
        await pilot.press("enter")
        await type_text(pilot, "globex-retest")
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, ForgetEngagementDialog)
    assert store.blast_radius(engagement="globex-retest") == radius
    assert audit_ids(store) == before


async def test_forget_engagement_is_offered_only_on_engagement_nodes(store: MemoryStore):
    """On a tier or a profile, F is not in the footer, and pressing it says to pick an
    engagement (it did nothing there); on an engagement it is offered and opens the dialog."""
    profile = next(iter(store.scope_counts("longterm")["profile_hash"]))
    before = audit_ids(store)
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tree = app.query_one(ScopeTree)
        tree.focus()
        for node in (
            tree.find("tier", "episodic", "episodic"),
            tree.find("profile_hash", "longterm", profile),
        ):
            tree.move_cursor(node)
            await settle(pilot)
            assert node.data.kind in ("tier", "profile_hash")
            assert tree.check_action("forget_scope", ()) is False
            assert "Forget" not in footer(app)
            app.clear_notifications()
            await pilot.press("F")
            await settle(pilot)
            assert not isinstance(app.screen, ForgetEngagementDialog)
            notices = [str(n.message) for n in app._notifications]
            assert notices == [
                "Pick an engagement in the tree first: F forgets every record of one engagement."
            ]
        tree.move_cursor(tree.find("engagement", "episodic", "vandelay-soap"))
        await settle(pilot)
        assert "F Forget engagement" in footer(app)
        await pilot.press("F")
        await settle(pilot)
        assert isinstance(app.screen, ForgetEngagementDialog)
    assert audit_ids(store) == before


# ---------------------------------------------------------------- reveal


async def test_masked_field_is_revealed_only_through_the_audited_dialog(tmp_path: Path):
    with MemoryStore(tmp_path / "s.db", clock=fixed_clock, operator="tester") as store:
        record_id = store.add_record(
            tier="working",
            record_type="observation",
            content="logged in as the test user",
            metadata={"session_cookie": "sid=S3CR3T", "note": "kept"},
        )
        app = make_app(store, check_on_start=False)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)

            def detail() -> str:
                return app.query_one("#detail-body").render().plain  # type: ignore[attr-defined]

            text = screen_text(app)
            assert "S3CR3T" not in text and "S3CR3T" not in detail()
            assert "masked: session_cookie" in detail() and "kept" in detail()
            assert "Reveal" in text.splitlines()[-1]
            # Cancel writes nothing and shows nothing.
            await pilot.press("R")
            await settle(pilot)
            assert isinstance(app.screen, RevealDialog)
            await type_text(pilot, "check")
            await pilot.press("escape")
            await settle(pilot)
            assert "S3CR3T" not in screen_text(app) and "S3CR3T" not in detail()
            assert [e["action"] for e in store.audit_events()] == []
            # Confirm: one audit event naming the field, never the value.
            await pilot.press("R")
            await settle(pilot)
            await type_text(pilot, "verify the session")
            await pilot.press("enter", "tab", "enter")
            await settle(pilot)
            assert "revealed session_cookie = sid=S3CR3T" in detail()
            events = store.audit_events()
            assert len(events) == 1
            assert events[0]["action"] == "reveal" and events[0]["record_ids"] == [record_id]
            assert events[0]["details"] == {"field": "session_cookie"}
            assert "S3CR3T" not in str(events[0])


# ---------------------------------------------------------------- read-only


async def test_read_only_shows_badge_and_refuses_actions(sample_path: Path):
    with MemoryStore(sample_path, read_only=True, clock=fixed_clock) as store:
        before = audit_ids(store)
        app = make_app(store, check_on_start=False)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert "READ-ONLY" in screen_text(app)
            record = app.query_one(RecordTable).current
            await pilot.press("f")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmRecordAction)
            assert any("read-only" in n.message for n in app._notifications)
            await select_scope(pilot, "tier", "longterm", "longterm")
            await pilot.press("r")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmRecordAction)
            tree = app.query_one(ScopeTree)
            tree.focus()
            tree.move_cursor(tree.find("engagement", "episodic", "acme-2026-q4"))
            await settle(pilot)
            count = len(app._notifications)
            await pilot.press("F")
            await settle(pilot)
            assert not isinstance(app.screen, ForgetEngagementDialog)
            assert len(app._notifications) == count + 1
            assert "--read-only" in list(app._notifications)[-1].message
        assert store.get(int(record.id)) is not None
        assert audit_ids(store) == before


async def test_a_database_that_stays_busy_gives_up_clearly_and_keeps_the_reason(
    store: MemoryStore, monkeypatch
):
    from memtui.core.store import MemoryStoreError

    tries: list[int] = []

    def busy(*args, **kwargs):
        tries.append(1)
        raise MemoryStoreError("the database is busy (another process is writing); try again")

    monkeypatch.setattr(store, "forget", busy)
    app = make_app(store, busy_retries=2, retry_delay=0.01, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        record = app.query_one(RecordTable).current
        await pilot.press("f")
        await settle(pilot)
        await type_text(pilot, "erase it")
        await pilot.press("tab", "tab", "enter")
        await settle(pilot)
        assert len(tries) == 3  # the first try and two retries, then it gives up
        messages = [n.message for n in app._notifications]
        assert any("database is busy" in m for m in messages)
        gave_up = [m for m in messages if "stayed busy" in m]
        assert gave_up and "nothing changed" in gave_up[0] and "reason is kept" in gave_up[0]
        assert app.saving is None and "busy" not in screen_text(app).splitlines()[0]
        # The reason waits in the dialog for the next try.
        await pilot.press("f")
        await settle(pilot)
        assert app.screen.query_one("#reason", Input).value == "erase it"
        await pilot.press("escape")
    assert store.get(int(record.id)) is not None


async def test_other_store_errors_during_an_action_are_shown(store: MemoryStore, monkeypatch):
    from memtui.core.store import MemoryStoreError

    def broken(*args, **kwargs):
        raise MemoryStoreError("no record with id 99\x1b[2J")

    monkeypatch.setattr(store, "forget", broken)
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("f")
        await settle(pilot)
        await type_text(pilot, "erase")
        await pilot.press("tab", "tab", "enter")
        await settle(pilot)
        shown = [n.message for n in app._notifications if "no record with id 99" in n.message]
        assert shown and "\\x1b[2J" in shown[0] and "\x1b" not in shown[0]
        assert app.saving is None


async def test_v_reveals_on_the_table_and_the_detail_and_verifies_on_the_audit_tab(
    tmp_path: Path,
):
    with MemoryStore(tmp_path / "v.db", clock=fixed_clock, operator="tester") as store:
        store.add_record(
            tier="working",
            record_type="observation",
            content="captured an API key",
            metadata={"api_key": "AKIA-S3CR3T"},
        )
        app = make_app(store, check_on_start=False)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert "v Reveal" in screen_text(app).splitlines()[-1]
            await pilot.press("v")  # on the table
            await settle(pilot)
            assert isinstance(app.screen, RevealDialog)
            await pilot.press("escape")
            await settle(pilot)
            app.query_one("#detail").focus()  # on the detail pane
            await pilot.press("v")
            await settle(pilot)
            assert isinstance(app.screen, RevealDialog)
            await type_text(pilot, "rotate the key")
            await pilot.press("tab", "tab", "enter")
            await settle(pilot)
            detail = app.query_one("#detail-body").render().plain  # type: ignore[attr-defined]
            assert "revealed api_key = AKIA-S3CR3T" in detail
            assert [e["action"] for e in store.audit_events()] == ["reveal"]
            # On the Audit tab, v still re-checks the chain.
            await pilot.press("4")
            await settle(pilot)
            await pilot.press("v")
            await settle(pilot)
            assert any("audit chain verified" in n.message for n in app._notifications)
            assert not isinstance(app.screen, RevealDialog)


async def test_a_short_terminal_dialog_still_shows_its_text_box(store: MemoryStore):
    """At 80x24 the dialog's inputs lose their border (one line each), but keep a field
    colour and a bar on the left, so they do not read as plain text."""
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("f")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, ConfirmRecordAction) and dialog.has_class("-compact")
        reason = dialog.query_one("#reason", Input)
        assert reason.size.height == 1
        panel = dialog.query_one(".dialog").styles.background
        assert reason.styles.background != panel
        edge, color = reason.styles.border_left
        assert edge and color.a > 0
        assert "▌why?" in screen_text(app)
