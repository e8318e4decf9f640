"""Explicit-preference stores: sessions as scopes, versions, eligible work, the forget rule."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner
from conftest import fixed_clock
from fixtures.sources_support import CANARY, CANARY2, PREFERENCES, copy_fixture, occurrences

from memtui.cli import main
from memtui.sources import SourceError, open_source
from memtui.sources.preferences import PreferenceSource


@pytest.fixture
def prefs(tmp_path):
    return copy_fixture(PREFERENCES, tmp_path / "store")


def rows(path, sql, params=()):
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def test_sessions_are_scopes_and_versions_are_shown(prefs):
    with open_source(prefs) as source:
        assert isinstance(source, PreferenceSource) and source.read_only
        facets = {f.tier: f for f in source.facets(include_hidden=True)}
        assert facets["preference"].scopes["session"] == {"s-alpha": 4, "s-beta": 3}
        assert facets["work"].scopes["origin"] == {"chat": 3, "scheduler": 1}
        live = [r.id for r in source.page({"tier": "preference", "session": "s-alpha"}).records]
        assert live == ["pref:2", "pref:4"]  # the active versions
        old = source.get("pref:1")
        assert old.state == "inactive" and old.metadata["version"] == 1
        versions = source.detail("pref:2")[0]
        assert versions.title == "versions of 'tone' in session 's-alpha'"
        assert [(r[0], r[1], r[3]) for r in versions.rows] == [
            ("pref:1", "", "onboarding form"),
            ("pref:2", "active", "chat 2026-11-02"),
        ]
        assert "no expiry" in source.expiry_rule


def test_work_shows_its_revision_and_eligibility(prefs):
    with open_source(prefs) as source:
        eligible = [r.id for r in source.page({"tier": "work"}).records]
        assert eligible == ["work:1", "work:3", "work:4"]
        stale = source.get("work:2")
        assert stale.state == "inactive"
        assert stale.metadata["context_revision"] == 2 and stale.metadata["session_revision"] == 3
        section = source.detail("work:2")[0]
        assert section.rows[0][2].startswith("no")
        assert source.notes(stale) == "rev 2 (session at 3): not eligible · done"


def test_forget_applies_the_stores_rule_in_one_transaction(prefs):
    assert occurrences(prefs, CANARY)["word"] == 1  # only in the old allergy version
    with open_source(prefs, allow_writes=True, operator="ana") as source:
        assert [r.id for r in source.search(CANARY2).results] == ["pref:4", "work:1"]
        preview = source.forget_preview("pref:4")
        assert preview["records"] == ["pref:3", "pref:4"]
        outcome = source.forget("pref:4", reason="the user asked us to forget it")
        assert outcome.verified and outcome.removed == ("pref:3", "pref:4")
        # Every version gone; the session's revision advanced; unrelated preferences survive.
        assert source.get("pref:3") is None and source.get("pref:4") is None
        assert [r.id for r in source.page({"tier": "preference"}).records] == [
            "pref:2",
            "pref:5",
            "pref:7",
        ]
        # Search and the eligible-work view no longer show the value anywhere.
        assert source.search(CANARY2).results == []
        assert source.search(CANARY).results == []
        assert source.search("allergic").results == []
        view = json.dumps([r.to_json() for r in source.iter_records()])
        assert CANARY2 not in view and CANARY not in view and "allergic" not in view
        assert [r.id for r in source.page({"tier": "work"}).records] == ["work:3", "work:4"]
        assert source.get("work:1").state == "inactive"  # stamped with revision 3, now 4
        assert source.search("casual").results[0].id == "pref:2"
        events = source.audit_events()
        assert [e["action"] for e in events] == ["forget", "forget-intent"]
        # The work result quotes part of the value, not the value: nothing quotes it.
        assert outcome.checks["no_work_quotes_value"] and outcome.checks["bytes_gone"]
        assert events[0]["details"]["work_rows_quoting_value"] == 0
        assert events[0]["details"]["versions_deleted"] == 2
        assert events[0]["details"]["session_revision"] == 4
        assert CANARY2 not in json.dumps(events) and "allergic" not in json.dumps(events)
    assert rows(prefs, "SELECT session, revision FROM assistant_memory_revisions ORDER BY 1") == [
        ("s-alpha", 4),
        ("s-beta", 1),
    ]
    kind, payload = rows(prefs, "SELECT kind, payload FROM memory_events ORDER BY seq DESC")[0]
    assert kind == "preference_forgotten"
    assert json.loads(payload) == {
        "by": "memtui",
        "name": "allergy",
        "revision": 4,
        "session": "s-alpha",
        "versions_deleted": 2,
    }
    # The old version's text is gone from the file's bytes; the work result that
    # quoted the newer value stays on file (the store's rule), out of future context.
    assert occurrences(prefs, CANARY) == {"word": 0, "tail": 0}
    assert rows(prefs, "SELECT count(*) FROM assistant_work WHERE result LIKE ?", (f"%{CANARY2}%",))


def test_forget_is_verified_when_another_session_holds_the_same_value(prefs):
    conn = sqlite3.connect(prefs)
    conn.execute(
        "INSERT INTO assistant_preferences (session, name, value, source, created, active) "
        "SELECT 's-beta', name, value, source, created, 1 FROM assistant_preferences WHERE id = 4"
    )
    conn.commit()
    conn.close()
    with open_source(prefs, allow_writes=True) as source:
        outcome = source.forget("pref:4", reason="the user asked us to forget it")
        assert outcome.verified, outcome.problem
        assert outcome.checks["bytes_gone"] is True
        kept = source.get("pref:8")
        assert kept is not None and CANARY2 in kept.content


def test_the_forget_is_all_or_nothing(prefs):
    with open_source(prefs, allow_writes=True) as source:
        source._conn.execute(
            "CREATE TEMP TRIGGER refuse BEFORE INSERT ON memory_events "
            "BEGIN SELECT RAISE(ABORT, 'event log full'); END"
        )
        with pytest.raises(SourceError, match="nothing was changed"):
            source.forget("pref:4", reason="r")
        assert source.get("pref:3") is not None and source.get("pref:4") is not None
    assert rows(
        prefs, "SELECT revision FROM assistant_memory_revisions WHERE session = 's-alpha'"
    ) == [(3,)]


def test_work_results_are_not_forgotten_one_by_one(prefs):
    with open_source(prefs, allow_writes=True) as source:
        with pytest.raises(SourceError, match="only preferences are forgotten"):
            source.forget("work:1", reason="r")
        assert source.audit_events() == []


def test_cli_forget_needs_allow_writes_then_follows_the_rule(prefs):
    runner = CliRunner()
    refused = runner.invoke(main, ["forget", str(prefs), "pref:4", "--reason", "r", "--yes"])
    assert refused.exit_code == 1 and "--allow-writes" in refused.output
    done = runner.invoke(
        main, ["forget", str(prefs), "pref:4", "--reason", "asked", "--yes", "--allow-writes"]
    )
    assert done.exit_code == 0, done.output
    assert "forgot record pref:4 and pref:3: erasure verified" in done.output
    listed = runner.invoke(main, ["records", str(prefs), "--json"])
    assert CANARY2 not in listed.output and "pref:2" in listed.output


def quote_in_work(path, session, text):
    """A work row in ``session`` whose result quotes ``text``; its id."""
    conn = sqlite3.connect(path)
    try:
        with conn:
            revision = conn.execute(
                "SELECT revision FROM assistant_memory_revisions WHERE session = ?", (session,)
            ).fetchone()[0]
            return conn.execute(
                "INSERT INTO assistant_work (origin, session, prompt, result, status, created, "
                "context_revision) VALUES ('chat', ?, 'plan the picnic', ?, 'done', 1796040900, ?)",
                (session, f"Noted: {text}, so we stay indoors", revision),
            ).lastrowid
    finally:
        conn.close()


def test_a_value_quoted_by_eligible_work_elsewhere_is_not_reported_erased(prefs):
    value = "allergic to qwphlumbix pollen"
    assert quote_in_work(prefs, "s-beta", value) == 5
    with open_source(prefs, allow_writes=True, operator="ana") as source:
        outcome = source.forget("pref:4", reason="the user asked us to forget it")
        # The preference is gone by the store's rule, but its value is still on file and
        # still reaches future context through s-beta's work: no claim of erasure.
        assert outcome.removed == ("pref:3", "pref:4")
        assert not outcome.verified
        assert outcome.checks["bytes_gone"] is False
        assert outcome.checks["no_work_quotes_value"] is False
        assert outcome.checks["value_out_of_future_context"] is False
        assert outcome.checks["versions_gone"] is True
        assert "1 work row still quotes the forgotten value" in outcome.problem
        assert "work:5 (session 's-beta', still eligible for future context)" in outcome.problem
        assert "the store's rule keeps work results" in outcome.problem
        assert value not in outcome.problem
        # The honest statement matches what a search still finds.
        assert [r.id for r in source.search(CANARY2).results] == ["work:5"]
        event = source.audit_events()[0]
        assert event["details"]["verified"] is False
        assert event["details"]["work_rows_quoting_value"] == 1
        assert event["details"]["work_quoting_value"] == [
            {"id": "work:5", "session": "s-beta", "eligible_for_future_context": True}
        ]
        assert CANARY2 not in json.dumps(event)


def test_a_value_quoted_by_work_that_left_future_context_is_still_on_file(prefs):
    """Same-session work leaves future context with the revision, but keeps the value."""
    quote_in_work(prefs, "s-alpha", "allergic to qwphlumbix pollen")
    with open_source(prefs, allow_writes=True) as source:
        outcome = source.forget("pref:4", reason="asked")
        assert not outcome.verified
        assert outcome.checks["value_out_of_future_context"] is True
        assert outcome.checks["no_work_quotes_value"] is False
        assert "work:5 (session 's-alpha', no longer eligible for future context)" in (
            outcome.problem
        )
        assert source.get("work:5").state == "inactive"
        assert source.search(CANARY2).results == []  # out of the default (eligible) view
        assert [r.id for r in source.search(CANARY2, filters={"tier": "work"}).results] == []


def test_cli_says_which_work_still_quotes_the_value(prefs):
    quote_in_work(prefs, "s-beta", "allergic to qwphlumbix pollen")
    done = CliRunner().invoke(
        main, ["forget", str(prefs), "pref:4", "--reason", "asked", "--yes", "--allow-writes"]
    )
    assert done.exit_code == 3, done.output
    assert "forgot record pref:4 and pref:3: erasure NOT verified" in done.output
    assert "work:5 (session 's-beta', still eligible for future context)" in done.output
    assert "erasure verified" not in done.output
    assert "allergic" not in done.output


def test_a_quote_is_the_value_as_a_whole_phrase(prefs):
    """'English' is quoted by 'Translated into English'; 'French' is not by 'Frenchman'."""
    quote_in_work(prefs, "s-beta", "a Frenchman joins")
    with open_source(prefs, allow_writes=True) as source:
        outcome = source.forget("pref:7", reason="asked")  # language: French, then English
        assert outcome.removed == ("pref:6", "pref:7")
        assert not outcome.verified
        event = source.audit_events()[0]
        assert event["details"]["work_quoting_value"] == [
            {"id": "work:3", "session": "s-beta", "eligible_for_future_context": False}
        ]
        assert "1 work row still quotes" in outcome.problem


def test_work_content_is_one_line_and_detail_times_have_one_format(prefs):
    with open_source(prefs, allow_writes=True, clock=fixed_clock) as source:
        work = source.get("work:1")
        # memtui joins prompt and result itself: with " · ", not a newline of its own.
        assert work.content == (
            "plan the team lunch · Booked the indoor room, away from the qwphlumbix pollen terrace"
        )
        assert source.get("work:4").content == "draft a reply"  # no result yet
        # Every time in the detail as the app shows a record's created_at.
        sections = {s.title: s for s in source.detail("pref:5")}
        versions = sections["versions of 'tone' in session 's-beta'"]
        assert versions.rows[0][4] == "2026-11-30 12:02:00 UTC"
        assert [r[3] for r in sections["memory events"].rows] == ["2026-11-30 12:02:00 UTC"]
        source.forget("pref:5", reason="asked")
        assert [r[1] for r in source.history_section("pref:5").rows] == [
            "2026-11-30 12:00:00 UTC",
            "2026-11-30 12:00:00 UTC",
        ]


def test_cli_prompt_names_the_record_once_and_without_a_hash(prefs):
    asked = CliRunner().invoke(
        main, ["forget", str(prefs), "pref:4", "--reason", "r", "--allow-writes"], input="n\n"
    )
    assert asked.exit_code != 0  # declined
    assert "Forget preference pref:4 ('allergy: allergic to qwphlumbix pollen')" in asked.output
    assert "preference preference" not in asked.output and "#pref" not in asked.output
    assert "and 1 more version(s)? Rule: Every version of 'allergy'" in asked.output
    assert "without the value. This cannot be undone" in asked.output
    with open_source(prefs) as source:
        assert source.get("pref:4") is not None
