import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import SAMPLE_CORPUS, one_error_line

from memtui.cli import main
from memtui.core.store import MemoryStore
from memtui.tui.testing import fixed_clock


def test_ingest_reports_counts(runner, tmp_path):
    db = tmp_path / "x.db"
    result = runner.invoke(main, ["ingest", str(SAMPLE_CORPUS), "--db", str(db)])
    assert result.exit_code == 0
    assert "ingested 72 records" in result.output
    assert "longterm 18" in result.output


def test_malformed_corpus_is_one_line_and_loads_nothing(runner, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"tier": "working", "record_type": "note", "content": "a"}, {"tier": "x"}]')
    db = tmp_path / "x.db"
    line = one_error_line(runner.invoke(main, ["ingest", str(bad), "--db", str(db)]))
    assert "record 1: unknown tier 'x'" in line
    assert not db.exists()


def test_records_json_has_one_shape(runner, cli_db):
    result = runner.invoke(main, ["records", str(cli_db), "--tier", "longterm", "--json"])
    data = json.loads(result.output)
    assert len(data) == 17
    assert set(data[0]) >= {
        "id",
        "tier",
        "record_type",
        "content",
        "scope",
        "created_at",
        "expires_at",
        "state",
        "metadata",
    }
    assert all(r["state"] == "live" for r in data)
    everything = json.loads(runner.invoke(main, ["records", str(cli_db), "--all", "--json"]).output)
    assert {r["state"] for r in everything} == {"live", "refuted", "expired"}


def test_records_table_lists_content(runner, cli_db):
    result = runner.invoke(main, ["records", str(cli_db), "--engagement", "globex-retest"])
    assert result.exit_code == 0
    assert "zephyrquokka" in result.output


def test_unknown_filter_is_refused(runner, cli_db):
    line = one_error_line(
        runner.invoke(main, ["records", str(cli_db), "--filter", "hostname=db01"])
    )
    assert "filter 'hostname' is not in the scope-key allowlist" in line


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: None, "no database at"),
        (lambda p: p.write_bytes(b"\x00garbage" * 100), "is not a SQLite database"),
    ],
)
def test_bad_database_files_are_one_line(runner, tmp_path, make, message):
    path = tmp_path / "target.db"
    make(path)
    line = one_error_line(runner.invoke(main, ["records", str(path)]))
    assert message in line


def test_forget_asks_and_cancel_changes_nothing(runner, cli_db):
    result = runner.invoke(main, ["forget", str(cli_db), "1", "--reason", "r"], input="n\n")
    assert result.exit_code != 0
    assert "nothing was changed" in result.output
    audit = json.loads(runner.invoke(main, ["audit", str(cli_db), "--json"]).output)
    assert [e["action"] for e in audit] == ["ingest"]


def test_forget_with_confirmation_erases_and_audits(runner, cli_db):
    result = runner.invoke(main, ["forget", str(cli_db), "1", "--reason", "wrong"], input="y\n")
    assert result.exit_code == 0, result.output
    assert "erasure verified" in result.output and "audit event #2" in result.output
    ids = [
        r["id"]
        for r in json.loads(runner.invoke(main, ["records", str(cli_db), "--all", "--json"]).output)
    ]
    assert "1" not in ids and "2" in ids  # ids are strings, one shape for every source
    audit = json.loads(runner.invoke(main, ["audit", str(cli_db), "--json"]).output)
    assert audit[0]["action"] == "forget" and audit[0]["operator"] == "cli-tester"
    assert audit[0]["reason"] == "wrong"


def test_forget_missing_id_is_one_line(runner, cli_db):
    line = one_error_line(
        runner.invoke(main, ["forget", str(cli_db), "999", "--reason", "r", "--yes"])
    )
    assert "no record with id 999" in line


def test_refute_non_tactic_is_refused(runner, cli_db):
    rows = json.loads(
        runner.invoke(main, ["records", str(cli_db), "--type", "finding", "--json"]).output
    )
    line = one_error_line(
        runner.invoke(main, ["refute", str(cli_db), str(rows[0]["id"]), "--reason", "r"])
    )
    assert "not a tactic" in line


def test_refute_then_audit_verify(runner, cli_db):
    result = runner.invoke(
        main, ["refute", str(cli_db), "1", "--reason", "patched", "--operator", "ana"]
    )
    assert result.exit_code == 0 and "audit event #2" in result.output
    verify = runner.invoke(main, ["audit", "verify", str(cli_db)])
    assert verify.exit_code == 0 and "audit chain verified: 2 events" in verify.output
    table = runner.invoke(main, ["audit", str(cli_db)])
    assert "refute" in table.output and "ana" in table.output and "chain verified" in table.output


def test_forget_scope_shows_blast_radius_and_needs_confirmation(runner, cli_db):
    refused = runner.invoke(
        main,
        ["forget-scope", str(cli_db), "--engagement", "globex-retest", "--reason", "r"],
        input="n\n",
    )
    assert refused.exit_code != 0
    assert "episodic/finding" in refused.output
    done = runner.invoke(
        main,
        ["forget-scope", str(cli_db), "--engagement", "globex-retest", "--reason", "r", "--yes"],
    )
    assert done.exit_code == 0 and "forgot" in done.output
    left = json.loads(
        runner.invoke(
            main, ["records", str(cli_db), "--engagement", "globex-retest", "--all", "--json"]
        ).output
    )
    assert left == []


def test_control_characters_never_reach_the_terminal(runner, tmp_path):
    corpus = tmp_path / "hostile.json"
    corpus.write_text(
        json.dumps(
            [
                {
                    "tier": "working",
                    "record_type": "note",
                    "content": "\x1b[2J\x1b]52;c;SGVsbG8=\x07 [bold red]hi[/]",
                }
            ]
        )
    )
    db = tmp_path / "h.db"
    assert runner.invoke(main, ["ingest", str(corpus), "--db", str(db)]).exit_code == 0
    out = runner.invoke(main, ["records", str(db)]).output
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J" in out and "[bold red]hi[/]" in out
    raw = json.loads(runner.invoke(main, ["records", str(db), "--json"]).output)
    assert raw[0]["content"].startswith("\x1b[2J")


def test_demo_summary_builds_the_sample(runner, tmp_path):
    db = tmp_path / "demo.db"
    result = runner.invoke(main, ["demo", "--summary", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "engagements: acme-2026-q4, globex-retest" in result.output


@pytest.fixture
def demo_home(tmp_path) -> Path:
    """Where ``memtui demo`` keeps its database: in the test's own ``XDG_DATA_HOME``
    (``tests/conftest.py``)."""
    return tmp_path / "data" / "memtui" / "demo.db"


def demo_summary(runner, *args: str) -> str:
    result = runner.invoke(main, ["demo", "--summary", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_demo_keeps_its_database_between_runs(runner, demo_home):
    first = demo_summary(runner)
    assert first.startswith(f"built the demo database at {demo_home} from the sample corpus\n")
    tactic = next(r for r in json_records(runner, demo_home) if r["record_type"] == "tactic")
    forget = ["forget", str(demo_home), tactic["id"], "--reason", "wrong", "--yes"]
    assert runner.invoke(main, forget).exit_code == 0
    again = demo_summary(runner)
    assert again.startswith(f"demo database at {demo_home} kept from the last run")
    assert "memtui demo --reset rebuilds it" in again
    assert tactic["id"] not in {r["id"] for r in json_records(runner, demo_home)}
    with MemoryStore(demo_home, read_only=True) as store:
        assert [e["action"] for e in store.audit_events()] == ["forget", "ingest"]


def test_demo_reset_rebuilds_it_and_says_so(runner, demo_home):
    demo_summary(runner)
    tactic = next(r for r in json_records(runner, demo_home) if r["record_type"] == "tactic")
    forget = ["forget", str(demo_home), tactic["id"], "--reason", "wrong", "--yes"]
    assert runner.invoke(main, forget).exit_code == 0
    out = demo_summary(runner, "--reset")
    assert out.startswith(
        f"rebuilt the demo database at {demo_home} from the sample corpus "
        "(its refutes, forgets and audit log are gone)\n"
    )
    assert tactic["id"] in {r["id"] for r in json_records(runner, demo_home)}
    with MemoryStore(demo_home, read_only=True) as store:
        assert [e["action"] for e in store.audit_events()] == ["ingest"]
    assert not list(demo_home.parent.glob(".demo.db.building*"))


def test_a_demo_summary_beside_an_open_demo_changes_nothing_under_it(runner, demo_home):
    demo_summary(runner)
    inode = demo_home.stat().st_ino
    with MemoryStore(demo_home, clock=fixed_clock, operator="app") as app_store:
        tactic = app_store.fetch(record_type="tactic", limit=1)[0]
        app_store.forget(tactic.id, reason="wrong")
        demo_summary(runner)
        assert demo_home.stat().st_ino == inode
        assert app_store.get(tactic.id) is None
        assert [e["action"] for e in app_store.audit_events()] == ["forget", "ingest"]


def json_records(runner, db: Path) -> list[dict]:
    result = runner.invoke(main, ["records", str(db), "--all", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_forget_scope_says_when_erasure_is_not_verified(runner, cli_db, monkeypatch):
    import sqlite3

    from memtui.core import index_db

    monkeypatch.setattr(index_db, "CHECKPOINT_RETRIES", 2)
    monkeypatch.setattr(index_db, "CHECKPOINT_RETRY_DELAY", 0.001)
    reader = sqlite3.connect(cli_db)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM records").fetchone()
    try:
        result = runner.invoke(
            main,
            [
                "forget-scope",
                str(cli_db),
                "--engagement",
                "globex-retest",
                "--reason",
                "r",
                "--yes",
            ],
        )
    finally:
        reader.rollback()
        reader.close()
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output
    audit = json.loads(runner.invoke(main, ["audit", str(cli_db), "--json"]).output)
    assert [e["action"] for e in audit[:2]] == ["erasure-incomplete", "forget-scope"]
    scope_event, incomplete_event = audit[1]["id"], audit[0]["id"]
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("forgot 15 records of engagement 'globex-retest': erasure NOT verified")
    assert "another connection holds a read transaction" in last
    assert (
        f"audit events #{scope_event} forget-scope, #{incomplete_event} erasure-incomplete" in last
    )


def test_forget_scope_names_its_own_audit_event(runner, cli_db):
    result = runner.invoke(
        main,
        ["forget-scope", str(cli_db), "--engagement", "globex-retest", "--reason", "r", "--yes"],
    )
    assert result.exit_code == 0, result.output
    audit = json.loads(runner.invoke(main, ["audit", str(cli_db), "--json"]).output)
    assert audit[0]["action"] == "forget-scope"
    assert result.output.strip().splitlines()[-1] == (
        f"forgot 15 records of engagement 'globex-retest': erasure verified "
        f"(audit event #{audit[0]['id']})"
    )


def test_records_refuses_an_unknown_tier(runner, cli_db):
    for args in (["--tier", "bogus"], ["--filter", "tier=bogus"]):
        line = one_error_line(runner.invoke(main, ["records", str(cli_db), *args]))
        assert "unknown tier 'bogus'" in line
        assert "working, episodic, longterm, knowledge" in line


def test_forget_prompt_reads_as_one_sentence_per_stop(runner, cli_db):
    result = runner.invoke(main, ["forget", str(cli_db), "1", "--reason", "r"], input="n\n")
    assert "remains. This cannot be undone" in result.output
    assert ".." not in result.output


def test_records_refuses_a_tier_another_store_does_not_have(runner, tmp_path):
    from fixtures.sources_support import TENANT, copy_fixture

    evidence = copy_fixture(TENANT, tmp_path / "store")
    listed = runner.invoke(main, ["records", str(evidence), "--tier", "runbook", "--json"])
    assert listed.exit_code == 0 and len(json.loads(listed.output)) == 2
    line = one_error_line(runner.invoke(main, ["records", str(evidence), "--tier", "bogus"]))
    assert "unknown tier 'bogus'" in line and "working, incident, runbook" in line


def test_a_forget_whose_file_is_replaced_while_it_asks_changes_nothing(
    runner, cli_db, tmp_path, monkeypatch
):
    from memtui.commands import changes as commands

    restored = tmp_path / "restored.db"
    shutil.copyfile(cli_db, restored)

    def replaced_while_asking(question: str, assume_yes: bool) -> None:
        os.replace(restored, cli_db)  # the operator is still reading the question

    monkeypatch.setattr(commands, "confirm_or_abort", replaced_while_asking)
    line = one_error_line(runner.invoke(main, ["forget", str(cli_db), "1", "--reason", "r"]))
    assert line == (
        f"Error: {cli_db} was replaced by another file since memtui opened it; nothing was "
        "changed: open the store again to change the file now at that path"
    )
    assert any(r["id"] == "1" for r in json_records(runner, cli_db))
    with MemoryStore(cli_db, read_only=True) as store:
        assert [e["action"] for e in store.audit_events()] == ["ingest"]
