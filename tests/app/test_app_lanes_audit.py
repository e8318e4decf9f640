"""The Lanes and Audit tabs, on a memtui database and on a foreign store."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fixtures.sources_support import LANGGRAPH_VECTORS, copy_fixture
from rich.console import Console
from rich.text import Text
from textual.geometry import Spacing
from textual.widgets import DataTable, Select, Static

from memtui.core.lanes import host_history, learned_tactics, profile_priors
from memtui.core.store import MemoryStore
from memtui.sources import open_source
from memtui.sources.native import NativeSource
from memtui.tui.app import make_app
from memtui.tui.audit_view import AuditPane, AuditTable
from memtui.tui.lanes_view import LanesPane
from memtui.tui.testing import build_sample_db, fixed_clock, screen_text, settle

SIZE = (120, 40)
FLASK = "python:postgresql:waf_present:generic_waf:rest:flask"
LG_NOW = "2026-11-30T12:00:30Z"
CANARY_ID = "lg:memories.user-1/canary"
COLOR_ID = "lg:memories.user-1/pref-color"


@pytest.fixture(scope="module")
def built_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_sample_db(tmp_path_factory.mktemp("lanes") / "sample.db")


@pytest.fixture
def sample_path(built_sample: Path, tmp_path: Path) -> Path:
    """The sample database, built once for the module, copied for each test."""
    return Path(shutil.copy(built_sample, tmp_path / "sample.db"))


@pytest.fixture
def store(sample_path: Path):
    with MemoryStore(sample_path, clock=fixed_clock, operator="tester") as opened:
        yield opened


class NoAuditSource(NativeSource):
    """A source that keeps no audit log."""

    @property
    def capabilities(self) -> frozenset[str]:
        return super().capabilities - {"audit"}


def refusing(name: str):
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"{name} was called")

    return refuse


async def test_lanes_keyboard_priors_tactics_evidence_and_the_engagement_choice(
    store: MemoryStore, monkeypatch
):
    """The Lanes tab in one app run, each check on its own: the profile Select from the
    keyboard, the four lanes of the flask profile, the lanes following the engagement
    choice, then a long host history (fewer rows allowed from there on). The source
    keeps no audit log (lanes need none): last, the Audit tab says so, having read
    nothing of an audit log (any call, from the start of the app, fails)."""
    source = NoAuditSource(store)
    for name in ("audit_events", "verify_audit", "audit_head", "interrupted_forgets"):
        monkeypatch.setattr(source, name, refusing(name))
    app = make_app(source, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)
        pane = app.query_one(LanesPane)
        # -- the profile Select works from the keyboard (it has focus on the tab).
        first = pane.profile
        await pilot.press("enter")  # open the Select
        await pilot.pause()
        await pilot.press("down", "enter")
        await settle(pilot)
        assert pane.profile != first, "keyboard: down and enter pick another profile"

        # -- priors, tactics, negative evidence and history for the flask profile.
        app.query_one("#lanes-profile", Select).value = FLASK
        await settle(pilot)
        assert pane.profile == FLASK
        text = screen_text(app)
        # The sqlmap tactic: 12 hits of 23, Wilson lower bound 0.3296.
        assert "0.3296" in text and "12/23" in text, "priors: sqlmap's bound"
        priors = profile_priors(store, FLASK)
        assert pane.data["priors"] == priors
        assert pane.data == app.source.lanes(
            FLASK, pane.engagement, min_denominator=LanesPane.MIN_DENOMINATOR
        )
        # Priors are sorted by the bound and show hits/n, raw rate and bound.
        tools = [row["tool"] for row in priors]
        positions = [text.index(f"{tool} ") for tool in tools]
        assert positions == sorted(positions), "priors: sorted by the bound"
        for row in priors:
            assert f"{row['hits']}/{row['n']}" in text
            assert f"{row['wilson']:.4f}" in text
        assert "┃" in text and "━" in text  # the interval bars
        # Learned tactics with proven / hypothesis marks.
        tactics = learned_tactics(store, FLASK)
        assert "✓ proven" in text, "tactics: proven"
        if any(t["hypothesis"] for t in tactics):
            assert "? HYPOTHESIS" in text
        # Negative evidence: commix, 0 of 8, deprioritize (never "skip").
        assert "0/8" in text and "deprioritize" in text, "negative evidence"
        # Host history for the first engagement.
        engagement = store.engagements()[0]
        assert pane.engagement == engagement, "history: the first engagement"
        for row in host_history(store, engagement)[:3]:
            assert row["finding_id"] in text

        # -- the lanes follow the engagement choice.
        pane = await choose_engagement(app, pilot, "globex-retest")
        assert pane.data["history"] == host_history(store, "globex-retest"), "engagement"
        assert "host history: globex-retest" in screen_text(app)

        # -- an engagement can hold tens of thousands of findings: the tab shows the first.
        monkeypatch.setattr(LanesPane, "HISTORY_ROWS", 2)
        every = host_history(store, "acme-2026-q4")
        assert len(every) > 2
        pane = await choose_engagement(app, pilot, "acme-2026-q4")
        assert pane.data["history"] == every[:2], "long history: the first 2"
        assert pane.data["history_total"] == len(every)
        text = screen_text(app)
        assert f"{len(every)} findings, the first 2 shown" in text, "long history: counted"
        assert f"… and {len(every) - 2} more, less severe or later" in text
        assert every[0]["finding_id"] in text and every[2]["finding_id"] not in text

        # -- a source without an audit log: the Audit tab says so and reads nothing.
        await pilot.press("4")
        await settle(pilot)
        audit = app.query_one(AuditPane)
        assert "no audit log for this source" in screen_text(app), "no audit log"
        assert not audit.query(DataTable)
        audit.reload()
        await settle(pilot)
        assert audit.events == [] and not audit.verified, "no audit log: nothing read"
        assert not any(n.severity == "error" for n in app._notifications)


async def choose_engagement(app, pilot, engagement: str) -> LanesPane:
    """Choose ``engagement`` on the Lanes tab; the pane once its lanes are read."""
    app.query_one("#lanes-engagement", Select).value = engagement
    await settle(pilot)
    return app.query_one(LanesPane)


async def test_audit_shows_the_log_newest_first_the_chain_state_and_its_columns(
    store: MemoryStore,
):
    store.refute(1, reason="payload patched")
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)
        pane = app.query_one(AuditPane)
        assert [e["id"] for e in pane.events] == [e["id"] for e in store.audit_events()]
        assert pane.events[0]["action"] == "refute", "newest first"
        text = screen_text(app)
        assert "✓ chain verified" in text
        assert "payload patched" in text
        assert app.focused is app.query_one(AuditTable)
        # A memtui database keeps its audit columns: no status column, reason last.
        table = app.query_one(AuditTable)
        labels = [str(c.label) for c in table.columns.values()]
        assert "status" not in labels and labels[-1] == "reason", "columns"
        assert not app.query_one("#audit-interrupted", Static).display, "no interrupted line"
        await pilot.press("v")
        await settle(pilot)
        assert any("audit chain verified" in n.message for n in app._notifications), "v"


async def test_audit_shows_the_first_broken_link(sample_path: Path):
    with MemoryStore(sample_path, clock=fixed_clock, operator="tester") as store:
        store.refute(1, reason="first")
        store.refute(3, reason="second")
    conn = sqlite3.connect(sample_path)
    conn.execute("DROP TRIGGER audit_events_no_update")
    conn.execute("UPDATE audit_events SET reason = 'tampered' WHERE id = 2")
    conn.commit()
    conn.close()
    with MemoryStore(sample_path, clock=fixed_clock, read_only=True) as store:
        broken = store.verify_audit()
        assert broken is not None
        app = make_app(store, check_on_start=False)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("4")
            await settle(pilot)
            text = screen_text(app)
            assert "✗ chain BROKEN" in text
            assert "event #2" in text


def interrupted_forget(source: Any, record_id: str, reason: str) -> None:
    """A forget that stops between its intent and its outcome (the process died)."""

    def crash(record: Any) -> Any:
        raise KeyboardInterrupt

    original = source._apply_forget
    source._apply_forget = crash
    try:
        with pytest.raises(KeyboardInterrupt):
            source.forget(record_id, reason=reason)
    finally:
        source._apply_forget = original


async def test_audit_on_a_foreign_store_shows_intent_outcome_and_interrupted_forgets(
    tmp_path: Path,
):
    path = copy_fixture(LANGGRAPH_VECTORS, tmp_path / "store")
    source = open_source(path, now=LG_NOW, allow_writes=True, operator="tester")
    try:
        outcome = source.forget(CANARY_ID, reason="client asked for erasure")
        assert outcome.verified and outcome.intent_event_id is not None
        hostile = "crashed [bold red]mid[/] way\x1b[2J"
        interrupted_forget(source, COLOR_ID, hostile)
        events = source.audit_events()
        assert [e["action"] for e in events] == ["forget-intent", "forget", "forget-intent"]
        assert [e.get("status") for e in events] == ["interrupted", None, "completed"]

        app = make_app(source, check_on_start=False)
        async with app.run_test(size=(160, 44)) as pilot:
            await settle(pilot)
            await pilot.press("4")
            await settle(pilot)
            pane = app.query_one(AuditPane)
            assert [e["id"] for e in pane.events] == [e["id"] for e in events]
            assert [e["id"] for e in pane.interrupted] == [events[0]["id"]]
            text = screen_text(app)
            assert "✓ chain verified" in text and "3 events" in text
            # The interrupted forget is counted on a line of its own, in bold.
            note = app.query_one("#audit-interrupted", Static)
            assert note.display
            # Its layout comes from the stylesheet, not from widget code.
            assert note.styles.padding == Spacing(0, 1, 0, 1)
            assert set(note._inline_styles.get_rules()) <= {"display"}  # shown: state
            assert "1 interrupted forget(s)" in text
            line = note.content
            assert isinstance(line, Text) and line.plain.startswith("1 interrupted forget(s)")
            assert "bold" in str(line.get_style_at_offset(Console(), 0))
            # Each event's state is in the table: a status column for the intents.
            table = app.query_one(AuditTable)
            labels = [str(c.label) for c in table.columns.values()]
            assert "status" in labels
            by_row = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
            assert "interrupted" in by_row[0] and "forget-intent" in by_row[0]
            assert "completed" in by_row[2] and "forget-intent" in by_row[2]
            assert "forget" in by_row[1] and "interrupted" not in by_row[1]
            # String record ids, shown as they are.
            assert COLOR_ID in by_row[0] and CANARY_ID in by_row[1]
            # The detail of the interrupted intent says so, and shows its string id.
            assert table.cursor_row == 0
            detail = screen_text(app)
            assert "INTERRUPTED" in detail
            assert "no outcome" in detail and COLOR_ID in detail
            # Hostile reason text stays literal: markup not applied, escapes visible.
            assert "[bold red]mid[/]" in detail
            assert "\x1b" not in detail and "\\x1b[2J" in detail
            # The outcome: its erasure checks, pointing at its intent.
            await pilot.press("down")
            await settle(pilot)
            detail = screen_text(app)
            assert f"intent     event #{outcome.intent_event_id}" in detail
            assert "client asked for erasure" in detail and CANARY_ID in detail
            await pilot.press("down")
            await settle(pilot)
            assert "COMPLETED" in screen_text(app)
            # v re-checks the chain of memtui's audit database beside the store.
            await pilot.press("v")
            await settle(pilot)
            assert any("audit chain verified: 3 events" in n.message for n in app._notifications)
    finally:
        source.close()


async def test_audit_on_a_foreign_store_without_interrupted_forgets_has_no_such_line(
    tmp_path: Path,
):
    path = copy_fixture(LANGGRAPH_VECTORS, tmp_path / "store")
    with open_source(path, now=LG_NOW, allow_writes=True, operator="tester") as source:
        source.forget(CANARY_ID, reason="erase")
        app = make_app(source, check_on_start=False)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("4")
            await settle(pilot)
            pane = app.query_one(AuditPane)
            assert [e["action"] for e in pane.events] == ["forget", "forget-intent"]
            assert pane.interrupted == []
            assert not app.query_one("#audit-interrupted", Static).display
            assert "interrupted" not in screen_text(app)
            assert "completed" in screen_text(app)


def test_widget_code_sets_no_inline_style():
    """Every look comes from ``app.tcss``: no ``widget.styles.x = ...`` in the app's code
    (showing and hiding with ``display`` is state, not style)."""
    import ast

    import memtui.tui

    found = []
    for path in sorted(Path(memtui.tui.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for target in targets:
                chain = target
                while isinstance(chain, ast.Attribute):
                    if chain.attr == "styles":
                        found.append(f"{path.name}:{node.lineno}")
                    chain = chain.value
    assert found == []
