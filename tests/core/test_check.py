import json
import os
import random
import re
import sqlite3

import pytest
from click.testing import CliRunner
from conftest import fixed_clock

from memtui.cli import main
from memtui.core.check import check_database, parse_audit_head
from memtui.core.store import MemoryStore


def problems(path):
    return [(f.check, f.message) for f in check_database(path).findings if f.severity == "problem"]


def test_a_healthy_database_passes_every_check(sample_db):
    report = check_database(sample_db)
    assert report.ok, report.findings
    assert set(report.passed) == {
        "integrity",
        "schema",
        "index-count",
        "fts5",
        "schema-objects",
        "vectors",
        "audit",
        "audit-triggers",
        "rows",
    }


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


def _without_trigger(conn, name, *statements):
    """Run ``statements`` with trigger ``name`` dropped, then put it back (as a careful
    tamperer would: a missing append-only trigger is reported on its own)."""
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    conn.execute(f"DROP TRIGGER {name}")
    for statement in statements:
        conn.execute(statement)
    conn.execute(sql)


def test_an_edited_audit_row_is_named(sample_db):
    conn = sqlite3.connect(sample_db)
    _without_trigger(
        conn,
        "audit_events_no_update",
        "UPDATE audit_events SET operator = 'someone-else' WHERE id = 1",
    )
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


# ---------------------------------------------------------------- damaged files


def _cli_check(*args):
    result = CliRunner().invoke(main, ["check", *map(str, args)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    return result


def _overwrite(path, page, offset, data):
    page_size = int.from_bytes(path.read_bytes()[16:18], "big")
    with path.open("r+b") as handle:
        handle.seek((page - 1) * page_size + offset)
        handle.write(data)


def _leaf_page(path, table):
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT max(pageno) FROM dbstat WHERE name = ? AND pagetype = 'leaf'", (table,)
        ).fetchone()[0]
    finally:
        conn.close()


def test_a_damaged_table_after_integrity_keeps_every_finding(sample_db):
    # The audit's first crash: integrity_check found the damage, then the vector
    # queries raised "database disk image is malformed" and the findings were lost.
    _overwrite(sample_db, _leaf_page(sample_db, "vectors"), 3000, random.Random(0).randbytes(512))
    report = check_database(sample_db)
    found = problems(sample_db)
    assert not report.ok
    assert found[0][0] == "integrity" and found[0][1].startswith("SQLite integrity_check: ")
    assert ("vectors", "could not be read: database disk image is malformed") in found
    assert "audit" in report.passed  # the checks after the failing one still ran
    result = _cli_check(sample_db)
    assert result.exit_code == 1
    assert "problem: vectors: could not be read: database disk image is malformed" in result.output


def _garble_trigger_sql(path):
    """The audit's second crash: a schema statement with a byte that is not UTF-8,
    which SQLite quotes in its error text."""
    data = bytearray(path.read_bytes())
    where = data.index(b"audit_events_no_delete BEFORE DELETE ON audit_events BEGIN")
    begin = data.index(b"BEGIN", where)
    data[begin + 1] = 0xD9
    path.write_bytes(bytes(data))


def test_an_error_text_that_is_not_utf8_is_a_named_problem(sample_db):
    _garble_trigger_sql(sample_db)
    found = problems(sample_db)
    assert found[0] == (
        "integrity",
        'could not be read: malformed database schema (audit_events_no_delete) - near "B\\xd9GIN": '
        "syntax error",
    )
    assert {check for check, _ in found} >= {"integrity", "vectors", "audit"}
    assert ("audit", "could not be read: the same error as integrity") in found
    result = _cli_check(sample_db)
    assert result.exit_code == 1
    assert all(line.startswith("problem: ") for line in result.output.splitlines())


def test_check_cannot_be_broken_by_random_bytes_anywhere(sample_db, tmp_path):
    """Seeded: one random region of 64-4096 bytes overwritten per trial."""
    base = sample_db.read_bytes()
    rng = random.Random(20261130)
    damaged = 0
    for trial in range(60):
        data = bytearray(base)
        size = rng.randint(64, 4096)
        offset = rng.randrange(100, len(data) - size)  # past the header (tested on its own)
        data[offset : offset + size] = rng.randbytes(size)
        path = tmp_path / f"trial{trial}.db"
        path.write_bytes(bytes(data))
        report = check_database(path)  # never raises
        result = _cli_check(path)
        lines = result.output.splitlines()
        assert all(line.startswith(("problem: ", "note: ", "ok: ")) for line in lines), lines
        if "integrity" not in report.passed:
            damaged += 1
            assert result.exit_code == 1, (trial, offset, size, lines)
            assert any(line.startswith("problem: ") for line in lines)
        assert result.exit_code == (0 if report.ok else 1)
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(f"{path}{suffix}"):
                os.remove(f"{path}{suffix}")
    assert damaged >= 20  # the trials did reach the checks that read damaged pages


# ---------------------------------------------------------------- full-text index


def test_content_changed_without_the_index_is_named_out_of_sync(sample_db):
    conn = sqlite3.connect(sample_db)
    conn.execute("DROP TRIGGER records_au")
    conn.execute("UPDATE records SET content = 'words the index never saw' WHERE id = 3")
    conn.commit()
    conn.close()
    assert problems(sample_db) == [
        (
            "fts5",
            "the full-text index is out of sync with the records; "
            f"run memtui reindex-text {sample_db}",
        )
    ]
    assert CliRunner().invoke(main, ["reindex-text", str(sample_db)]).exit_code == 0
    assert check_database(sample_db).ok


def test_a_damaged_index_is_named_damaged(sample_db):
    conn = sqlite3.connect(sample_db)
    conn.execute(
        "UPDATE records_fts_data SET block = randomblob(length(block)) "
        "WHERE id = (SELECT max(id) FROM records_fts_data)"
    )
    conn.commit()
    conn.close()
    [(check, message)] = problems(sample_db)
    assert check == "fts5" and message.startswith("the full-text index is damaged")
    assert message.endswith(f"memtui reindex-text {sample_db} rebuilds it")


# ---------------------------------------------------------------- schema


def _downgrade_to_schema_1(path):
    """A schema-1 file, as memtui 1 wrote it: without migration 2's indexes,
    vector triggers and meta rows."""
    conn = sqlite3.connect(path)
    for index in ("records_tier", "records_refuted", "records_expiry", "records_type_profile"):
        conn.execute(f"DROP INDEX {index}")
    for suffix in ("ai", "ad", "au"):
        conn.execute(f"DROP TRIGGER vectors_generation_{suffix}")
    conn.execute("DELETE FROM meta WHERE key IN ('vectors_generation', 'database_id')")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()


def test_an_older_schema_is_named_with_the_command_that_upgrades_it(sample_db):
    _downgrade_to_schema_1(sample_db)
    report = check_database(sample_db)
    assert problems(sample_db) == [
        (
            "schema",
            "schema 1 is older than this memtui's 2; any writable open upgrades it "
            f"(memtui compact {sample_db}, or the app without --read-only); read-only "
            "opens refuse it until then",
        )
    ]
    assert set(report.passed) == {
        "integrity",
        "index-count",
        "fts5",
        "schema-objects",
        "vectors",
        "audit",
        "audit-triggers",
        "rows",
    }
    assert CliRunner().invoke(main, ["compact", str(sample_db)]).exit_code == 0
    assert check_database(sample_db).ok


def test_a_newer_schema_is_named_and_the_memtui_checks_are_skipped(sample_db):
    conn = sqlite3.connect(sample_db)
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    report = check_database(sample_db)
    assert [(f.check, f.severity, f.message) for f in report.findings] == [
        (
            "schema",
            "problem",
            "schema 3 was written by a newer memtui (this one knows schemas up to 2); "
            "check it with that memtui",
        ),
        ("schema", "note", "the memtui checks were skipped for this schema"),
    ]
    assert report.passed == ["integrity"]


def test_a_sqlite_file_that_is_not_memtui_is_named(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE things (x)")
    conn.commit()
    conn.close()
    assert problems(path) == [("schema", "a SQLite database but not a memtui one (tables: things)")]


# ---------------------------------------------------------------- audit log


def _events_sql(path, *statements):
    conn = sqlite3.connect(path)
    _without_trigger(conn, "audit_events_no_delete", *statements)
    conn.commit()
    conn.close()


@pytest.fixture
def audited_db(sample_db):
    """The sample with three audit events: ingest, reindex-text, compact."""
    runner = CliRunner()
    assert runner.invoke(main, ["reindex-text", str(sample_db)]).exit_code == 0
    assert runner.invoke(main, ["compact", str(sample_db)]).exit_code == 0
    return sample_db


def _head(path):
    result = CliRunner().invoke(main, ["audit", "head", str(path)])
    assert result.exit_code == 0
    return result.output.strip()


def test_deleting_the_newest_audit_event_is_named(audited_db):
    _events_sql(audited_db, "DELETE FROM audit_events WHERE id = 3")
    assert problems(audited_db) == [
        (
            "audit",
            "the newest audit event was deleted (the log ends at #2, events up to #3 were written)",
        )
    ]


def test_deleting_several_or_all_newest_events_is_named(audited_db, tmp_path):
    copy = tmp_path / "copy.db"
    copy.write_bytes(audited_db.read_bytes())
    _events_sql(audited_db, "DELETE FROM audit_events WHERE id >= 2")
    assert problems(audited_db) == [
        (
            "audit",
            "the newest 2 audit events were deleted (the log ends at #1, events up to #3 "
            "were written)",
        )
    ]
    _events_sql(copy, "DELETE FROM audit_events")
    assert problems(copy) == [
        ("audit", "every audit event was deleted (events up to #3 were written)")
    ]


def test_an_edited_sequence_is_named(audited_db, tmp_path):
    copy = tmp_path / "copy.db"
    copy.write_bytes(audited_db.read_bytes())
    _events_sql(audited_db, "DELETE FROM sqlite_sequence WHERE name = 'audit_events'")
    assert problems(audited_db) == [
        (
            "audit",
            "sqlite_sequence has no entry for audit_events though the log holds events up "
            "to #3: it was edited, so a deletion of the newest events cannot be ruled out",
        )
    ]
    _events_sql(copy, "UPDATE sqlite_sequence SET seq = 1 WHERE name = 'audit_events'")
    assert problems(copy) == [
        (
            "audit",
            "sqlite_sequence says events up to #1 were written, but the log holds #3: "
            "it was edited",
        )
    ]


def test_truncation_with_the_sequence_rewritten_needs_a_recorded_head(audited_db):
    head = _head(audited_db)
    number, digest = head.split()
    assert number == "3" and len(digest) == 64
    for form in (head, f"{number}:{digest}", digest, f"#{number} {digest.upper()}"):
        assert _cli_check(audited_db, "--audit-head", form).exit_code == 0
    _events_sql(
        audited_db,
        "DELETE FROM audit_events WHERE id = 3",
        "UPDATE sqlite_sequence SET seq = 2 WHERE name = 'audit_events'",
    )
    # Inside the file the log is consistent again: only the recorded head tells.
    assert check_database(audited_db).ok
    result = _cli_check(audited_db, "--audit-head", head)
    assert result.exit_code == 1
    assert result.output.strip() == (
        "problem: audit-head: the recorded head #3 is not in the log (the log ends at #2): "
        "events were deleted (and the sequence rewritten) or the log was replaced since it "
        "was recorded"
    )
    assert problems_with_head(audited_db, digest) == [
        (
            "audit-head",
            f"the recorded head {digest} is not in the log (the log ends at #2): events were "
            "deleted or the log was rewritten since it was recorded",
        )
    ]


def problems_with_head(path, head):
    report = check_database(path, audit_head=head)
    return [(f.check, f.message) for f in report.findings if f.severity == "problem"]


def test_a_rewritten_log_does_not_reach_the_recorded_head(audited_db):
    other = "ab" * 32
    assert problems_with_head(audited_db, f"2:{other}") == [
        (
            "audit-head",
            f"event #2 does not have the recorded hash {other}: the log was rewritten (or "
            "replaced) since the head was recorded",
        )
    ]
    assert check_database(audited_db, audit_head=_head(audited_db)).passed[-1] == "audit-head"


def test_a_malformed_audit_head_is_a_usage_error(sample_db):
    result = CliRunner().invoke(main, ["check", str(sample_db), "--audit-head", "12 nothex"])
    assert result.exit_code == 2 and "--audit-head" in result.output
    with pytest.raises(ValueError):
        parse_audit_head("3")


# ---------------------------------------------------------------- free pages


def _notes(path):
    return [(f.check, f.message) for f in check_database(path).findings if f.severity == "note"]


def test_free_pages_zeroed_by_memtui_are_said_to_be_zeroed(sample_db):
    result = CliRunner().invoke(
        main,
        ["forget-scope", str(sample_db), "--engagement", "acme-2026-q4", "--reason", "t", "--yes"],
    )
    assert result.exit_code == 0, result.output
    [(check, message)] = _notes(sample_db)
    assert check == "free-pages"
    assert re.fullmatch(
        r"\d+ free pages, all zeroed: no deleted content survives in them", message
    ), message


def test_free_pages_holding_deleted_bytes_are_named(sample_db):
    conn = sqlite3.connect(sample_db)
    conn.execute("PRAGMA secure_delete = OFF")  # another tool, not memtui
    conn.execute("DELETE FROM vectors")
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    notes = dict(_notes(sample_db))
    assert re.fullmatch(
        r"\d+ of \d+ free pages still hold bytes of deleted content \(freed without "
        r"secure_delete, so not by memtui\); memtui compact .* rewrites the file without them",
        notes["free-pages"],
    ), notes
    assert CliRunner().invoke(main, ["compact", str(sample_db)]).exit_code == 0
    assert "free-pages" not in dict(_notes(sample_db))


def test_free_pages_are_not_inspected_while_the_log_holds_newer_pages(sample_db):
    writer = sqlite3.connect(sample_db)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("DELETE FROM vectors")
    writer.commit()
    try:
        notes = dict(_notes(sample_db))
    finally:
        writer.close()
    assert re.fullmatch(
        r"\d+ free pages, not inspected while the write-ahead log holds newer pages; "
        r"memtui compact .* rewrites the file without them",
        notes["free-pages"],
    ), notes


def test_audit_verify_names_deleted_newest_events(audited_db):
    _events_sql(audited_db, "DELETE FROM audit_events WHERE id = 3")
    result = CliRunner().invoke(main, ["audit", "verify", str(audited_db)])
    assert result.exit_code == 1
    assert result.output.strip() == (
        "Error: audit chain broken: the newest events were deleted (the log ends at #2, "
        "events up to #3 were written)"
    )


def test_audit_verify_compares_a_recorded_head(audited_db):
    head = _head(audited_db)
    runner = CliRunner()
    ok = runner.invoke(main, ["audit", "verify", str(audited_db), "--head", head])
    assert ok.exit_code == 0
    assert ok.output.strip() == "audit chain verified: 3 events, reaching the recorded head"
    _events_sql(
        audited_db,
        "DELETE FROM audit_events WHERE id = 3",
        "UPDATE sqlite_sequence SET seq = 2 WHERE name = 'audit_events'",
    )
    assert runner.invoke(main, ["audit", "verify", str(audited_db)]).exit_code == 0
    bad = runner.invoke(main, ["audit", "verify", str(audited_db), "--head", head])
    assert bad.exit_code == 1
    assert bad.output.strip() == (
        "Error: audit chain does not reach the recorded head: the recorded head #3 is not "
        "in the log (the log ends at #2): events were deleted (and the sequence rewritten) "
        "or the log was replaced since it was recorded"
    )


@pytest.mark.parametrize("command", ["records", "info", "compact"])
def test_other_commands_name_an_error_text_that_is_not_utf8_in_one_line(sample_db, command):
    _garble_trigger_sql(sample_db)
    result = CliRunner().invoke(main, [command, str(sample_db)])
    if isinstance(result.exception, UnicodeDecodeError):
        raise result.exception
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"Error: {sample_db} is not a usable SQLite database: malformed database schema "
        '(audit_events_no_delete) - near "B\\xd9GIN": syntax error'
    )


def test_a_truncated_file_is_named_by_every_check_run(sample_db, tmp_path):
    """A read-only check can leave an empty -wal behind: that holds no pages, so the
    next check still compares the file with its header and names the truncation."""
    data = sample_db.read_bytes()
    cut = tmp_path / "cut.db"
    cut.write_bytes(data[: len(data) // 3])
    runner = CliRunner()
    for _ in range(2):
        result = runner.invoke(main, ["check", str(cut)])
        assert result.exit_code == 1
        assert "problem: size: the file is truncated" in result.output, result.output
    wal = tmp_path / "cut.db-wal"
    assert wal.exists() and wal.stat().st_size <= 32  # what the first check left
    wal.write_bytes(b"")
    assert problems(cut)[0][0] == "size"


@pytest.mark.parametrize(
    ("fixture", "what"),
    [
        ("langgraph_store.sqlite", "a LangGraph SqliteStore"),
        ("letta_0_11.sqlite", "a Letta 0.11 SQLite database"),
        ("tenant_evidence.sqlite", "a tenant evidence store"),
        ("preferences.sqlite", "an explicit-preference store"),
    ],
)
def test_a_store_memtui_recognizes_is_named_in_one_line(fixture, what, tmp_path):
    from fixtures.sources_support import FIXTURES, copy_fixture

    path = copy_fixture(FIXTURES / fixture, tmp_path)
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        f"problem: schema: {what}, not a memtui database: memtui check covers memtui "
        f"databases; `memtui info {path}` describes this store"
    ]


def test_every_schema_object_memtui_did_not_create_is_named(sample_db):
    """A trigger, table, view or index of another's, and a trigger of memtui's rewritten."""
    conn = sqlite3.connect(sample_db)
    conn.executescript(
        "CREATE TABLE kept (content TEXT);"
        "CREATE TRIGGER keep_on_delete AFTER DELETE ON records BEGIN "
        "INSERT INTO kept VALUES (old.content); END;"
        "CREATE VIEW contents AS SELECT content FROM records;"
        "CREATE INDEX records_by_content ON records(content);"
        "DROP TRIGGER records_au;"
        "CREATE TRIGGER records_au AFTER UPDATE OF content ON records BEGIN "
        "INSERT INTO kept VALUES (old.content); END;"
    )
    conn.close()
    found = sorted(message for check, message in problems(sample_db) if check == "schema-objects")
    assert found == [
        "index 'records_by_content' on 'records': memtui did not create it",
        "table 'kept': memtui did not create it",
        "trigger 'keep_on_delete' on 'records': memtui did not create it",
        "trigger 'records_au' on 'records': not the one memtui creates (its SQL was changed)",
        "view 'contents': memtui did not create it",
    ]
    result = _cli_check(sample_db)
    assert result.exit_code == 1
    assert "problem: schema-objects: trigger 'keep_on_delete' on 'records'" in result.output


def test_a_database_memtui_wrote_has_only_its_own_schema_objects(sample_db):
    with MemoryStore(sample_db, clock=fixed_clock) as store:  # every path that recreates one
        store.ingest([{"tier": "knowledge", "record_type": "note", "content": "more"}])
        store.forget_scope(engagement=store.engagements()[0], reason="r")
        store.compact()
    assert "schema-objects" in check_database(sample_db).passed
