import json
import os
import sqlite3

from click.testing import CliRunner

from memtui.cli import main
from memtui.core.check import check_database


def problems(path):
    return [(f.check, f.message) for f in check_database(path).findings if f.severity == "problem"]


def test_a_healthy_database_passes_every_check(sample_db):
    report = check_database(sample_db)
    assert report.ok, report.findings
    assert set(report.passed) == {"integrity", "schema", "index-count", "fts5", "vectors", "audit"}


def test_a_truncated_file_is_named(sample_db, tmp_path):
    data = sample_db.read_bytes()
    cut = tmp_path / "cut.db"
    cut.write_bytes(data[: len(data) // 3])
    found = problems(cut)
    assert found and found[0][0] == "size" and "truncated" in found[0][1]


def test_random_bytes_are_named(tmp_path):
    noise = tmp_path / "noise.db"
    noise.write_bytes(os.urandom(8192))
    assert problems(noise) == [("open", "not a SQLite database (the file header is wrong)")]


def test_an_index_out_of_sync_is_named(sample_db):
    conn = sqlite3.connect(sample_db)
    conn.execute("DROP TRIGGER records_ai")
    conn.execute(
        "INSERT INTO records (tier, record_type, content, created_at) "
        "VALUES ('working', 'note', 'unindexed words', '2026-11-30T00:00:00.000000Z')"
    )
    conn.commit()
    conn.close()
    checks = {check for check, _ in problems(sample_db)}
    assert "index-count" in checks and "fts5" in checks


def test_an_edited_audit_row_is_named(sample_db):
    conn = sqlite3.connect(sample_db)
    conn.execute("DROP TRIGGER audit_events_no_update")
    conn.execute("UPDATE audit_events SET operator = 'someone-else' WHERE id = 1")
    conn.commit()
    conn.close()
    assert problems(sample_db) == [
        ("audit", "audit chain broken at event #1: its contents do not match its hash (edited)")
    ]


def test_vectors_of_the_wrong_dimension_are_named(sample_db):
    conn = sqlite3.connect(sample_db)
    conn.execute("UPDATE vectors SET vector = zeroblob(16) WHERE record_id = 3")
    conn.commit()
    conn.close()
    assert problems(sample_db) == [
        ("vectors", "1 vectors do not have the recorded 256 dimensions of hash-256")
    ]


def test_check_cli_exits_non_zero_with_one_line_per_problem(sample_db, tmp_path):
    runner = CliRunner()
    ok = runner.invoke(main, ["check", str(sample_db)])
    assert ok.exit_code == 0 and ok.output.startswith("ok:")
    noise = tmp_path / "noise.db"
    noise.write_bytes(b"x" * 5000)
    bad = runner.invoke(main, ["check", str(noise)])
    assert bad.exit_code == 1
    assert bad.output.strip().splitlines() == [
        "problem: open: not a SQLite database (the file header is wrong)"
    ]
    as_json = json.loads(runner.invoke(main, ["check", str(noise), "--json"]).output)
    assert as_json["ok"] is False and as_json["findings"][0]["check"] == "open"


def test_compact_and_reindex_text_are_audited(sample_db):
    runner = CliRunner()
    result = runner.invoke(main, ["reindex-text", str(sample_db), "--operator", "ana"])
    assert result.exit_code == 0 and "72 records" in result.output
    result = runner.invoke(main, ["compact", str(sample_db), "--operator", "ana"])
    assert result.exit_code == 0, result.output
    audit = json.loads(runner.invoke(main, ["audit", str(sample_db), "--json"]).output)
    assert [e["action"] for e in audit[:2]] == ["compact", "reindex-text"]
    assert check_database(sample_db).ok
