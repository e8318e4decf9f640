"""The Lanes and Audit tabs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from textual.widgets import Select

from memtui.core.lanes import host_history, learned_tactics, profile_priors
from memtui.core.store import MemoryStore
from memtui.tui.app import make_app
from memtui.tui.audit_view import AuditPane, AuditTable
from memtui.tui.lanes_view import LanesPane
from memtui.tui.testing import build_sample_db, fixed_clock, screen_text, settle

SIZE = (120, 40)
FLASK = "python:postgresql:waf_present:generic_waf:rest:flask"


@pytest.fixture
def sample_path(tmp_path: Path) -> Path:
    return build_sample_db(tmp_path / "sample.db")


@pytest.fixture
def store(sample_path: Path):
    with MemoryStore(sample_path, clock=fixed_clock, operator="tester") as opened:
        yield opened


async def test_lanes_show_priors_tactics_negative_evidence_and_history(store: MemoryStore):
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)
        pane = app.query_one(LanesPane)
        app.query_one("#lanes-profile", Select).value = FLASK
        await settle(pilot)
        assert pane.profile == FLASK
        text = screen_text(app)
        # The sqlmap tactic: 12 hits of 23, Wilson lower bound 0.3296.
        assert "0.3296" in text and "12/23" in text
        priors = profile_priors(store, FLASK)
        assert pane.data["priors"] == priors
        # Priors are sorted by the bound and show hits/n, raw rate and bound.
        tools = [row["tool"] for row in priors]
        positions = [text.index(f"{tool} ") for tool in tools]
        assert positions == sorted(positions)
        for row in priors:
            assert f"{row['hits']}/{row['n']}" in text
            assert f"{row['wilson']:.4f}" in text
        assert "┃" in text and "━" in text  # the interval bars
        # Learned tactics with proven / hypothesis marks.
        tactics = learned_tactics(store, FLASK)
        assert "✓ proven" in text
        if any(t["hypothesis"] for t in tactics):
            assert "? HYPOTHESIS" in text
        # Negative evidence: commix, 0 of 8, deprioritize (never "skip").
        assert "0/8" in text and "deprioritize" in text
        # Host history for the first engagement.
        engagement = store.engagements()[0]
        assert pane.engagement == engagement
        for row in host_history(store, engagement)[:3]:
            assert row["finding_id"] in text


async def test_lanes_follow_the_engagement_choice(store: MemoryStore):
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)
        app.query_one("#lanes-engagement", Select).value = "globex-retest"
        await settle(pilot)
        pane = app.query_one(LanesPane)
        assert pane.data["history"] == host_history(store, "globex-retest")
        assert "host history: globex-retest" in screen_text(app)


async def test_lanes_profile_select_works_from_the_keyboard(store: MemoryStore):
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)
        pane = app.query_one(LanesPane)
        first = pane.profile
        await pilot.press("enter")  # open the Select
        await pilot.pause()
        await pilot.press("down", "enter")
        await settle(pilot)
        assert pane.profile != first


async def test_audit_shows_the_log_newest_first_and_the_chain_state(store: MemoryStore):
    store.refute(1, reason="payload patched")
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)
        pane = app.query_one(AuditPane)
        assert [e["id"] for e in pane.events] == [e["id"] for e in store.audit_events()]
        assert pane.events[0]["action"] == "refute"
        text = screen_text(app)
        assert "✓ chain verified" in text
        assert "payload patched" in text
        assert app.focused is app.query_one(AuditTable)
        await pilot.press("v")
        await settle(pilot)
        assert any("audit chain verified" in n.message for n in app._notifications)


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
        app = make_app(store)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("4")
            await settle(pilot)
            text = screen_text(app)
            assert "✗ chain BROKEN" in text
            assert "event #2" in text
