"""Bad input at the command line: one clear line, a non-zero exit, no traceback, nothing written."""

import json
import sqlite3

import pytest
from conftest import SAMPLE_CORPUS, one_error_line

from memtui.cli import main
from memtui.core import store as store_module
from memtui.core.store import SCHEMA_VERSION
from memtui.core.store import connection as store_connection


def snapshot(path):
    """The bytes of a database file and its WAL (to prove nothing was written).

    A read-only open of a WAL-mode file may leave an empty WAL: no WAL and an
    empty one hold the same (nothing).
    """
    parts = {}
    for suffix in ("", "-wal"):
        part = path.with_name(path.name + suffix)
        parts[suffix] = part.read_bytes() if part.exists() else b""
    return parts


def v1_file(path):
    """A database as memtui schema 1 wrote it: one note, no schema-2 indexes."""
    conn = sqlite3.connect(path)
    for statement in store_module._split_sql(store_module._MIGRATIONS[0]):
        conn.execute(statement)
    conn.execute(store_module._INSERT_TRIGGER)
    conn.execute("PRAGMA user_version = 1")
    conn.execute(
        "INSERT INTO records (tier, record_type, content, created_at) "
        "VALUES ('knowledge', 'note', 'albatross fulmar', '2026-01-01T00:00:00.000000Z')"
    )
    conn.commit()
    conn.close()


@pytest.fixture
def newer_db(cli_db):
    conn = sqlite3.connect(cli_db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    return cli_db


@pytest.mark.parametrize(
    "args",
    [
        ["records", "{db}"],
        ["audit", "{db}"],
        ["search", "{db}", "sql injection"],
        ["forget", "{db}", "1", "--reason", "r", "--yes"],
        ["forget-scope", "{db}", "--engagement", "globex-retest", "--reason", "r", "--yes"],
        ["ingest", str(SAMPLE_CORPUS), "--db", "{db}"],
        ["migrate", "{db}"],
    ],
)
def test_a_database_from_a_newer_memtui_is_refused_untouched(runner, newer_db, args):
    before = snapshot(newer_db)
    argv = [a.format(db=newer_db) for a in args]
    line = one_error_line(runner.invoke(main, argv))
    assert "written by a newer memtui" in line and f"schema {SCHEMA_VERSION + 1}" in line
    assert snapshot(newer_db) == before


@pytest.mark.parametrize(
    "args",
    [["records", "{db}"], ["audit", "{db}"], ["ingest", str(SAMPLE_CORPUS), "--db", "{db}"]],
)
def test_an_sqlite_without_fts5_is_one_line_and_creates_nothing(
    runner, tmp_path, monkeypatch, args
):
    db = tmp_path / "new.db"
    before = None
    if args[0] != "ingest":  # the read commands need a memtui database to open
        store_module.MemoryStore(db).close()
        for suffix in ("-wal", "-shm"):
            (tmp_path / f"new.db{suffix}").unlink(missing_ok=True)
        before = snapshot(db)
    monkeypatch.setattr(store_connection, "fts5_available", lambda: False)
    line = one_error_line(runner.invoke(main, [a.format(db=db) for a in args]))
    assert "built without FTS5" in line and "use a Python whose SQLite has FTS5" in line
    left = {p.name for p in tmp_path.iterdir()}
    if before is None:
        assert left == set()  # ingest created nothing
    else:  # a read-only open of a WAL file may leave its empty WAL and index
        assert left <= {"new.db", "new.db-wal", "new.db-shm"}
        assert snapshot(db) == before


def test_bad_json_corpus_says_where_and_writes_nothing(runner, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[\n  {"tier": "working",\n   "content": oops}\n]\n')
    db = tmp_path / "x.db"
    line = one_error_line(runner.invoke(main, ["ingest", str(bad), "--db", str(db)]))
    assert "invalid JSON at line 3, column 15" in line and str(bad) in line
    assert not db.exists()


def test_a_record_missing_a_field_is_named_and_nothing_is_written(runner, cli_db, tmp_path):
    corpus = tmp_path / "missing.json"
    corpus.write_text(
        json.dumps(
            [
                {"tier": "working", "record_type": "note", "content": "fine"},
                {
                    "tier": "episodic",
                    "record_type": "finding",
                    "finding_id": "F-9",
                    "run_id": "r",
                    "engagement": "e",
                    "severity": "high",
                    "url": "https://a.example/x",
                    "type": "xss",
                },
            ]
        )
    )
    before = snapshot(cli_db)
    line = one_error_line(runner.invoke(main, ["ingest", str(corpus), "--db", str(cli_db)]))
    assert "record 1: missing field 'title'" in line
    assert snapshot(cli_db) == before
    fresh = tmp_path / "fresh.db"
    one_error_line(runner.invoke(main, ["ingest", str(corpus), "--db", str(fresh)]))
    assert not fresh.exists()


def test_a_refused_ingest_prints_one_line_not_the_progress_label(runner, cli_db):
    # Loading starts and is refused inside the store: the label must not be left behind.
    before = snapshot(cli_db)
    line = one_error_line(runner.invoke(main, ["ingest", str(SAMPLE_CORPUS), "--db", str(cli_db)]))
    assert "this tactic is already in the database" in line
    assert "ingesting" not in line
    assert snapshot(cli_db) == before


@pytest.mark.parametrize("command", ["records", "audit"])
def test_an_empty_file_is_not_a_database_and_stays_empty(runner, tmp_path, command):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    line = one_error_line(runner.invoke(main, [command, str(empty)]))
    assert "is empty (0 bytes), not a memtui database" in line
    assert f"memtui ingest CORPUS.json --db {empty}" in line
    assert "--read-only" not in line
    assert empty.read_bytes() == b""
    line = one_error_line(runner.invoke(main, ["migrate", str(empty)]))
    assert "nothing to upgrade" in line
    assert empty.read_bytes() == b"" and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


@pytest.mark.parametrize(
    "args",
    [
        ["refute", "{db}", "1", "--reason", "x"],
        ["forget", "{db}", "1", "--reason", "x", "--yes"],
        ["forget-scope", "{db}", "--engagement", "e", "--reason", "x", "--yes"],
        ["reveal", "{db}", "1", "password", "--reason", "x", "--yes"],
        ["compact", "{db}"],
        ["reindex-text", "{db}"],
        ["reindex", "{db}", "--embedder", "hash-64"],
        ["search", "{db}", "x"],
        ["lanes", "{db}", "--profile", "p"],
    ],
    ids=lambda args: args[0],
)
def test_a_command_never_makes_a_database_in_an_empty_file(runner, tmp_path, args):
    """Only ingest makes a database; a command that changes or reads one refuses an
    empty file instead of quietly writing a schema (and an audit event) into it."""
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    line = one_error_line(runner.invoke(main, [a.format(db=empty) for a in args]))
    assert "is empty (0 bytes), not a memtui database" in line
    assert empty.read_bytes() == b"" and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]
    result = runner.invoke(main, ["ingest", str(SAMPLE_CORPUS), "--db", str(empty)])
    assert result.exit_code == 0, result.output  # ingest makes one there
    assert empty.stat().st_size > 0


def test_demo_out_to_a_missing_folder_is_one_line(runner, tmp_path):
    target = tmp_path / "missing" / "walkthrough.json"
    line = one_error_line(runner.invoke(main, ["demo", "--out", str(target)]))
    assert line == f"Error: cannot write the walkthrough to {target}: No such file or directory"
    assert not target.parent.exists()


def test_demo_never_replaces_a_file_given_with_db(runner, tmp_path, cli_db):
    other = tmp_path / "notes.txt"
    other.write_text("keep me\n")
    for path in (other, cli_db):
        before = path.read_bytes()
        for reset in ([], ["--reset"]):
            args = ["demo", "--db", str(path), "--summary", *reset]
            line = one_error_line(runner.invoke(main, args))
            assert line == (
                f"Error: {path} already exists and is not a demo database; memtui demo replaces "
                f"nothing: give a path that does not exist, or open it with memtui {path}"
            )
            assert path.read_bytes() == before


def test_demo_never_rebuilds_a_damaged_file_in_the_data_folder_unasked(
    runner, tmp_path, monkeypatch
):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    path = tmp_path / "memtui" / "demo.db"
    path.parent.mkdir()
    path.write_text("not a database\n")
    line = one_error_line(runner.invoke(main, ["demo", "--summary"]))
    assert line == (
        f"Error: {path} is not a demo database (damaged, or written by something else); "
        "memtui demo --reset rebuilds it from the sample corpus"
    )
    assert path.read_text() == "not a database\n"


def test_an_older_schema_names_the_command_that_upgrades_it(runner, tmp_path):
    old = tmp_path / "old.db"
    v1_file(old)
    before = snapshot(old)
    for command in ("records", "audit"):
        line = one_error_line(runner.invoke(main, [command, str(old)]))
        assert "needs a schema upgrade (schema 1 to 2)" in line
        assert f"run `memtui migrate {old}` once" in line and "--read-only" not in line
    assert snapshot(old) == before
    done = runner.invoke(main, ["migrate", str(old)])
    assert done.exit_code == 0, done.output
    assert done.output.strip() == f"upgraded {old} from schema 1 to 2 (audit event #1)"
    listed = runner.invoke(main, ["records", str(old), "--json"])
    assert listed.exit_code == 0 and json.loads(listed.output)[0]["content"] == "albatross fulmar"
    audit = json.loads(runner.invoke(main, ["audit", str(old), "--json"]).output)
    assert [(e["action"], e["details"], e["operator"]) for e in audit] == [
        ("migrate", {"from_schema": 1, "to_schema": 2}, "cli-tester")
    ]
    again = runner.invoke(main, ["migrate", str(old)])
    assert again.exit_code == 0 and again.output.strip() == f"{old} is already at schema 2"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: None, "no database at"),
        (lambda p: p.write_bytes(b"\x00garbage" * 100), "is not a SQLite database"),
    ],
)
def test_migrate_refuses_what_is_not_a_memtui_database(runner, tmp_path, make, message):
    path = tmp_path / "target.db"
    make(path)
    line = one_error_line(runner.invoke(main, ["migrate", str(path)]))
    assert message in line
    foreign = tmp_path / "foreign.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    line = one_error_line(runner.invoke(main, ["migrate", str(foreign)]))
    assert "not a memtui one" in line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "{db}"], "give the store and the query: DB QUERY"),
        (["search", "{db}", "a", "b"], "too many arguments: DB QUERY (quote a query"),
        (["forget", "{db}", "--reason", "r"], "give the store and the record: DB RECORD_ID"),
        (["forget", "{db}", "a", "b", "--reason", "r"], "too many arguments: DB RECORD_ID"),
        (["search", "{db}", "sql", "--limit", "0"], "Invalid value for '--limit'"),
        (["records", "{db}", "--bogus"], "No such option '--bogus'"),
        (["--bogus"], "No such option '--bogus'"),
        (["cache", "bogus"], "No such command 'bogus'"),
        (["records", "{db}", "--x\x1b[2J"], "No such option '--x\\x1b[2J'"),
    ],
)
def test_a_usage_error_is_one_line_naming_the_help_to_read(runner, cli_db, args, message):
    result = runner.invoke(main, [a.format(db=cli_db) for a in args])
    line = one_error_line(result)
    assert result.exit_code == 2
    assert line.startswith("Error: ") and message in line, line
    command = " ".join(
        ["main", *[a for a in args[:1] if a in ("search", "forget", "records", "cache")]]
    )
    assert line.endswith(f"(see '{command} --help')"), line
    assert "\x1b" not in line


@pytest.mark.parametrize(
    ("weights", "shown"),
    [("0.5,0.7", "0.5 + 0.7 = 1.2"), ("0.1,0.2", "0.1 + 0.2 = 0.3"), ("2,0", "2.0 + 0.0 = 2.0")],
)
def test_weights_that_do_not_add_up_to_1_are_refused(runner, cli_db, weights, shown):
    result = runner.invoke(main, ["search", str(cli_db), "items", "--weights", weights])
    line = one_error_line(result)
    assert f"the weights must add up to 1, got {shown}" in line


@pytest.mark.parametrize("weights", ["0.1,0.9", "0.45,0.55", "1,0", "0,1"])
def test_weights_that_add_up_to_1_are_taken(runner, cli_db, weights):
    result = runner.invoke(main, ["search", str(cli_db), "items", "--weights", weights, "--json"])
    assert result.exit_code == 0, result.output
    kw, vec = (float(w) for w in weights.split(","))
    assert json.loads(result.stdout)["trace"]["weights"] == {"keyword": kw, "vector": vec}


def test_counts_of_one_are_singular(runner, tmp_path):
    corpus = tmp_path / "one.json"
    corpus.write_text(
        json.dumps(
            [{"tier": "episodic", "record_type": "note", "content": "puffin", "engagement": "solo"}]
        )
    )
    db = tmp_path / "one.db"
    said = runner.invoke(main, ["ingest", str(corpus), "--db", str(db)]).output
    assert "ingested 1 record into" in said
    assert runner.invoke(main, ["records", str(db)]).output.startswith("1 record · ")
    assert "showing 1 of 1 candidate\n" in runner.invoke(main, ["search", str(db), "puffin"]).output
    audit = runner.invoke(main, ["audit", str(db)]).output  # the ingest's summary event
    assert audit.split("\n")[0].rstrip() == "1 audit event"
    verify = runner.invoke(main, ["audit", "verify", str(db)]).output
    assert verify.startswith("audit chain verified: 1 event"), verify
    assert "over 1 record (audit event" in runner.invoke(main, ["reindex-text", str(db)]).output
    scope = ["forget-scope", str(db), "--engagement", "solo", "--reason", "r", "--yes"]
    said = runner.invoke(main, scope).output
    assert "engagement 'solo': 1 record (" in said and "forgot 1 record of engagement" in said
