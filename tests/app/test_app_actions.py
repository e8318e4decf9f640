"""Refute, forget and forget-engagement through their dialogs.

Cancel writes nothing; confirm changes exactly what was shown and writes exactly one
audit event with the reason; an empty reason is refused; read-only refuses.

Each test drives one app through a whole flow (every way to cancel, then confirm...),
each step's checks named in its assert messages. The reason box is filled in directly
(``give_reason``) where typing it is not what is checked; the confirm test types its
reason key by key.
"""

from __future__ import annotations

import shutil
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


@pytest.fixture(scope="module")
def built_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_sample_db(tmp_path_factory.mktemp("actions") / "sample.db")


@pytest.fixture
def sample_path(built_sample: Path, tmp_path: Path) -> Path:
    """The sample database, built once for the module, copied for each test."""
    path = tmp_path / "sample.db"
    shutil.copy(built_sample, path)
    return path


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


async def open_dialog(pilot, key: str) -> None:
    """Press the key of a change and wait for its dialog (the record is read first)."""
    await pilot.press(key)
    await settle(pilot)


def give_reason(app, reason: str) -> None:
    """Fill in the open dialog's reason box (typing into it is Textual's own Input)."""
    app.screen.query_one("#reason", Input).value = reason


async def type_text(pilot, text: str) -> None:
    for char in text:
        await pilot.press("space" if char == " " else char)


def footer(app) -> str:
    return screen_text(app).splitlines()[-1]


def offers_no_refute(app) -> None:
    """Neither the footer nor the palette offers a refute; the footer offers a forget."""
    keys = footer(app)
    assert "Refute" not in keys and "Forget" in keys, keys
    assert not any(name.startswith("Refute") for name in palette(app))


def palette(app) -> list[str]:
    return [name for name, _, _ in MemtuiCommands(app.screen).commands()]


# ---------------------------------------------------------------- forget


async def test_no_forget_happens_unless_confirmed_and_saved(store: MemoryStore, monkeypatch):
    """Every way a forget does not happen, in one app: Cancel (the default), escape from
    each of the reason, Cancel and the action button, an empty reason, a database that
    stays busy (the reason kept for the next try) and another store error (shown). None
    of them removes the record or writes an audit event."""
    from memtui.core.store import MemoryStoreError

    before = audit_ids(store)
    app = make_app(store, busy_retries=2, retry_delay=0.01, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        record = app.query_one(RecordTable).current
        assert record is not None

        def nothing_changed(how: str) -> None:
            assert not isinstance(app.screen, ConfirmRecordAction), f"{how}: dialog still open"
            assert store.get(int(record.id)) is not None, f"{how}: the record was forgotten"
            assert audit_ids(store) == before, f"{how}: an audit event was written"

        # The dialog names the record; the reason is focused first; enter moves to
        # Cancel and never confirms; then the action button; Cancel is the default.
        await open_dialog(pilot, "f")
        dialog = app.screen
        assert isinstance(dialog, ConfirmRecordAction)
        text = screen_text(app)
        assert f"#{record.id}" in text and record.tier in text and record.record_type in text
        assert record.content[:40] in text
        assert "This cannot be undone" in text
        assert app.focused is dialog.query_one("#reason", Input)
        give_reason(app, "no longer needed")
        await pilot.press("enter")
        assert app.screen is dialog, "enter in the reason box confirmed"
        assert app.focused is dialog.query_one("#cancel", Button)
        await pilot.press("tab")
        assert app.focused is dialog.query_one("#confirm", Button)
        await pilot.press("shift+tab")
        assert app.focused is dialog.query_one("#cancel", Button)
        await pilot.press("enter")  # Cancel is the default
        await settle(pilot)
        nothing_changed("Cancel")

        # Escape cancels from anywhere in the dialog (from the reason box: below).
        for where in ("cancel", "confirm"):
            await open_dialog(pilot, "f")
            assert isinstance(app.screen, ConfirmRecordAction), f"escape from #{where}: no dialog"
            give_reason(app, "reason")
            app.screen.query_one(f"#{where}").focus()
            await pilot.pause()
            await pilot.press("escape")
            await settle(pilot)
            nothing_changed(f"escape from #{where}")

        # An empty (blank) reason is refused: the dialog stays, back on the reason; from
        # there, escape.
        await open_dialog(pilot, "f")
        give_reason(app, "   ")
        await pilot.press("tab", "tab", "enter")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmRecordAction), "a blank reason closed the dialog"
        assert any("reason is required" in n.message for n in app._notifications)
        assert app.focused is app.screen.query_one("#reason", Input)
        await pilot.press("escape")
        await settle(pilot)
        nothing_changed("a blank reason, then escape from #reason")

        # A database that stays busy: given up after the retries, the reason kept.
        tries: list[int] = []

        def busy(*args, **kwargs):
            tries.append(1)
            raise MemoryStoreError("the database is busy (another process is writing); try again")

        monkeypatch.setattr(store, "forget", busy)
        await open_dialog(pilot, "f")
        give_reason(app, "erase it")
        await pilot.press("tab", "tab", "enter")
        await settle(pilot)
        assert len(tries) == 3  # the first try and two retries, then it gives up
        messages = [n.message for n in app._notifications]
        assert any("database is busy" in m for m in messages)
        gave_up = [m for m in messages if "stayed busy" in m]
        assert gave_up and "nothing changed" in gave_up[0] and "reason is kept" in gave_up[0]
        assert app.saving is None and "busy" not in screen_text(app).splitlines()[0]
        nothing_changed("a busy database")
        # The reason waits in the dialog for the next try.
        await open_dialog(pilot, "f")
        assert app.screen.query_one("#reason", Input).value == "erase it"

        # That next try meets another store error: shown, its control characters escaped.
        def broken(*args, **kwargs):
            raise MemoryStoreError("no record with id 99\x1b[2J")

        monkeypatch.setattr(store, "forget", broken)
        await pilot.press("tab", "tab", "enter")
        await settle(pilot)
        shown = [n.message for n in app._notifications if "no record with id 99" in n.message]
        assert shown and "\\x1b[2J" in shown[0] and "\x1b" not in shown[0]
        assert app.saving is None, "still saving after a store error"
        nothing_changed("a store error")


async def test_confirmed_forget_and_refute_change_what_was_shown_and_refresh(store: MemoryStore):
    """One app, each change audited once:
    - a forget confirmed from the keyboard in Browse: the table and the tree refreshed;
    - refute: not on a note, a refuted tactic or a finding (key, footer, palette); on a
      live tactic escape changes nothing, confirm refutes it;
    - a forget from Search, the action button clicked: the search runs again without it;
    - the Audit tab shows the latest event first, with the reasons."""
    before = audit_ids(store)
    live_before = store.tier_counts()["working"]
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one(RecordTable)
        tree = app.query_one(ScopeTree)
        record = table.current
        assert record is not None and record.tier == "working"
        await open_dialog(pilot, "f")
        await type_text(pilot, "client asked")
        await pilot.press("tab", "tab")
        assert app.focused is app.screen.query_one("#confirm", Button)
        await pilot.press("enter")
        await settle(pilot)
        assert store.get(int(record.id)) is None
        events = store.audit_events()
        assert [e["id"] for e in events[1:]] == before, "forget: not exactly one audit event"
        event = events[0]
        assert event["action"] == "forget"
        assert event["record_ids"] == [int(record.id)]
        assert event["reason"] == "client asked"
        assert event["operator"] == "tester"
        assert any(f"audit event #{event['id']}" in n.message for n in app._notifications)
        # The table and the tree's counts refreshed (the audit tab: at the end).
        assert record.id not in [r.id for r in table.records]
        assert table.cursor_row == 0
        working = tree.find("tier", "working", "working")
        assert working is not None and working.data.live == live_before - 1

        # Refute: not on a note.
        before = audit_ids(store)
        assert table.current.record_type != "tactic"
        offers_no_refute(app)
        await pilot.press("r")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmRecordAction), "r on a note opened a dialog"
        assert audit_ids(store) == before, "r on a note wrote an audit event"
        # A live tactic: the key, the footer and the palette offer it.
        await select_scope(pilot, "tier", "longterm", "longterm")
        tactic = table.current
        assert tactic.record_type == "tactic" and tactic.state == "live"
        await settle(pilot)
        assert "r Refute" in footer(app)
        assert f"Refute tactic #{tactic.id}" in palette(app)
        live_before = store.tier_counts()["longterm"]
        # Escape: nothing changes.
        await open_dialog(pilot, "r")
        give_reason(app, "maybe")
        await pilot.press("escape")
        await settle(pilot)
        assert not store.get(int(tactic.id)).refuted, "a cancelled refute refuted the tactic"
        assert audit_ids(store) == before, "a cancelled refute wrote an audit event"
        # Confirm: refuted, audited once, gone from the table and the tree's count.
        await open_dialog(pilot, "r")
        assert isinstance(app.screen, ConfirmRecordAction)
        assert app.screen.verb == "refute"
        give_reason(app, "payload patched")
        await pilot.press("tab", "tab", "enter")
        await settle(pilot)
        refuted = store.get(int(tactic.id))
        assert refuted is not None and refuted.refuted
        assert refuted.metadata["evidence_grade"] == "hypothesis"
        events = store.audit_events()
        assert [e["id"] for e in events[1:]] == before, "refute: not exactly one audit event"
        assert events[0]["action"] == "refute" and events[0]["reason"] == "payload patched"
        assert tactic.id not in [r.id for r in table.records]
        assert tree.find("tier", "longterm", "longterm").data.live == live_before - 1
        # A refuted tactic (shown with t): not again.
        before = audit_ids(store)
        await pilot.press("t")
        await settle(pilot)
        row = next(i for i, r in enumerate(table.records) if r.state == "refuted")
        table.move_cursor(row=row)
        await settle(pilot)
        assert table.current.record_type == "tactic" and table.current.state == "refuted"
        offers_no_refute(app)
        await pilot.press("r")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmRecordAction), "r on a refuted tactic: a dialog"
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
        offers_no_refute(app)
        results.highlighted = kinds.index("tactic")
        await settle(pilot)
        assert "r Refute" in footer(app)
        assert f"Refute tactic #{results.current_id()}" in palette(app)
        assert audit_ids(store) == before, "a refused refute wrote an audit event"

        # Forget the highlighted search result, the action button clicked: forgotten,
        # the search re-run.
        target = results.current_id()
        assert target is not None
        await open_dialog(pilot, "f")
        give_reason(app, "stale finding")
        await pilot.click("#confirm")
        await settle(pilot)
        assert store.get(int(target)) is None, "the click did not forget the search result"
        assert pane.response is not None
        assert target not in [r.id for r in pane.response.results], "the search was not re-run"
        events = store.audit_events()
        assert [e["id"] for e in events[1:]] == before, "forget: not exactly one audit event"
        assert events[0]["record_ids"] == [int(target)]

        # The Audit tab (built when first shown): the latest event first, the reasons shown.
        await pilot.press("4")
        await settle(pilot)
        audit = app.query_one(AuditPane)
        assert audit.events[0]["id"] == events[0]["id"]
        assert event["id"] in [e["id"] for e in audit.events]
        text = screen_text(app)
        assert "client asked" in text and "stale finding" in text and "✓ chain verified" in text


# ---------------------------------------------------------------- forget an engagement


async def test_forget_engagement_offered_on_engagements_needs_the_exact_name(
    store: MemoryStore, sample_path: Path, monkeypatch
):
    """F is offered only on an engagement; escape changes nothing even with the name
    typed; the button waits for the exact name; the erasure is audited once; and when a
    reader in another process pins the WAL, the notice says the erasure is not verified."""
    import sqlite3

    from memtui.core import index_db

    profile = next(iter(store.scope_counts("longterm")["profile_hash"]))
    before = audit_ids(store)
    radius = store.blast_radius(engagement="vandelay-soap")
    total = sum(n for types in radius.values() for n in types.values())
    globex = store.blast_radius(engagement="globex-retest")
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tree = app.query_one(ScopeTree)
        tree.focus()

        # On a tier (the one highlighted at start) or a profile, F is not in the footer,
        # and pressing it says to pick an engagement (it did nothing there).
        for node in (
            tree.find("tier", "working", "working"),
            tree.find("profile_hash", "longterm", profile),
        ):
            tree.move_cursor(node)
            await settle(pilot)
            assert node.data.kind in ("tier", "profile_hash")
            assert tree.check_action("forget_scope", ()) is False
            assert "Forget" not in footer(app), f"F offered on a {node.data.kind}"
            app.clear_notifications()
            await pilot.press("F")
            await settle(pilot)
            assert not isinstance(app.screen, ForgetEngagementDialog)
            notices = [str(n.message) for n in app._notifications]
            assert notices == [
                "Pick an engagement in the tree first: F forgets every record of one engagement."
            ]

        # On an engagement, F is offered and opens the dialog with the blast radius.
        tree.focus()
        tree.move_cursor(tree.find("engagement", "episodic", "vandelay-soap"))
        await settle(pilot)
        assert "F Forget engagement" in footer(app)
        await pilot.press("F")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, ForgetEngagementDialog)
        text = screen_text(app)
        assert f"{total} records will be erased" in text
        for tier, types in radius.items():
            for record_type in types:
                assert tier in text and record_type in text
        # The button waits for the exact name.
        button = dialog.query_one("#confirm", Button)
        name = dialog.query_one("#confirm-name", Input)
        assert app.focused is dialog.query_one("#reason", Input)
        assert button.disabled
        give_reason(app, "engagement closed")
        await pilot.press("enter")
        assert app.focused is name
        for partial in ("vandelay", "vandelay-soa"):
            name.value = partial
            await pilot.pause()
            assert button.disabled, f"enabled by {partial!r}"
        await pilot.press("enter")
        assert app.focused is dialog.query_one("#cancel", Button)
        await pilot.press("tab")  # the disabled button cannot take focus
        assert app.focused is not button
        await pilot.click("#confirm")
        await settle(pilot)
        assert store.blast_radius(engagement="vandelay-soap") == radius, "a disabled click erased"
        name.focus()
        await pilot.press("end", "p")  # typed: "vandelay-soap"
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

        # Escape with the reason and the exact name given changes nothing.
        before = audit_ids(store)
        await open_forget_engagement(pilot, "working", "globex-retest")
        dialog = app.screen
        assert isinstance(dialog, ForgetEngagementDialog)
        give_reason(app, "closing")
        await pilot.press("enter")
        dialog.query_one("#confirm-name", Input).value = "globex-retest"
        await pilot.pause()
        assert not dialog.query_one("#confirm", Button).disabled
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, ForgetEngagementDialog), "escape: dialog still open"
        assert store.blast_radius(engagement="globex-retest") == globex, "escape erased records"
        assert audit_ids(store) == before, "escape wrote an audit event"

        # A reader in another process pins the WAL: the notice says so and names the
        # forget-scope event, not the erasure-incomplete one written after it.
        monkeypatch.setattr(index_db, "CHECKPOINT_RETRIES", 2)
        monkeypatch.setattr(index_db, "CHECKPOINT_RETRY_DELAY", 0.001)
        app.clear_notifications()
        await open_dialog(pilot, "F")  # the tree still on globex-retest
        assert isinstance(app.screen, ForgetEngagementDialog)
        give_reason(app, "engagement closed")
        app.screen.query_one("#confirm-name", Input).value = "globex-retest"
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


# ---------------------------------------------------------------- reveal


async def test_masked_field_is_revealed_only_through_the_audited_dialog(tmp_path: Path):
    """R and v (on the table and on the detail pane) open the dialog; cancel shows and
    writes nothing; confirm shows the value and audits the field, never the value; on
    the Audit tab, v re-checks the chain instead."""
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

            def not_revealed(how: str) -> None:
                assert "S3CR3T" not in screen_text(app), f"{how}: the value is on screen"
                assert "S3CR3T" not in detail(), f"{how}: the value is in the detail"
                assert store.audit_events() == [], f"{how}: an audit event was written"

            assert "masked: session_cookie" in detail() and "kept" in detail()
            assert "v Reveal" in footer(app)
            not_revealed("at start")
            # R: cancel writes nothing and shows nothing.
            await open_dialog(pilot, "R")
            assert isinstance(app.screen, RevealDialog), "R opened no dialog"
            give_reason(app, "check")
            await pilot.press("escape")
            await settle(pilot)
            not_revealed("R, then escape")
            # v on the table opens it too.
            await open_dialog(pilot, "v")
            assert isinstance(app.screen, RevealDialog), "v on the table opened no dialog"
            await pilot.press("escape")
            await settle(pilot)
            not_revealed("v, then escape")
            # v on the detail pane; confirm: one audit event naming the field, never the value.
            app.query_one("#detail").focus()
            await open_dialog(pilot, "v")
            assert isinstance(app.screen, RevealDialog), "v on the detail opened no dialog"
            give_reason(app, "verify the session")
            await pilot.press("enter", "tab", "enter")
            await settle(pilot)
            assert "revealed session_cookie = sid=S3CR3T" in detail()
            events = store.audit_events()
            assert len(events) == 1
            assert events[0]["action"] == "reveal" and events[0]["record_ids"] == [record_id]
            assert events[0]["details"] == {"field": "session_cookie"}
            assert "S3CR3T" not in str(events[0])
            # On the Audit tab, v still re-checks the chain.
            await pilot.press("4")
            await settle(pilot)
            await pilot.press("v")
            await settle(pilot)
            assert any("audit chain verified" in n.message for n in app._notifications)
            assert not isinstance(app.screen, RevealDialog)


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
