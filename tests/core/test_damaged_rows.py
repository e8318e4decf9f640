"""Rows another program wrote into a memtui database, that memtui's writers never would.

Each kind of damage is written with sqlite3 directly. Every view reads such a row
with its damage marked (``records``, ``search`` and their ``--json``, ``--explain``,
the app's detail), ``check`` names it by id, and what the database itself refuses
(a trigger aborting a delete) or cannot hash (a BLOB audit reason) is one line.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import one_error_line

from memtui.cli import main
from memtui.core.check import check_database
from memtui.core.records import RAW_METADATA_KEY
from memtui.core.store import MemoryStore, MemoryStoreError
from memtui.tui.app import make_app
from memtui.tui.browse import RecordTable
from memtui.tui.search_view import SearchPane
from memtui.tui.testing import fixed_clock, screen_text, settle

CREATED = "2026-11-01T00:00:00.000000Z"
INSERT = (
    "INSERT INTO records (tier, record_type, content, metadata, engagement, created_at) "
    "VALUES ('episodic', 'note', {content}, {metadata}, 'eng-1', '" + CREATED + "')"
)

# kind: (content SQL, metadata SQL, what the damage says)
DAMAGE = {
    "invalid JSON metadata": (
        "'foreign login note'",
        "'{not json'",
        "metadata is not valid JSON (Expecting property name enclosed in double quotes "
        "at line 1 column 2)",
    ),
    "a JSON list as metadata": (
        "'foreign login note'",
        "'[1, 2, 3]'",
        "metadata is a JSON list, not an object",
    ),
    "100k-deep JSON metadata": (
        "'foreign login note'",
        "printf('%.*c', 100000, '[') || printf('%.*c', 100000, ']')",
        "metadata is JSON nested too deep to read",
    ),
    "a 5,000-digit integer in metadata": (
        "'foreign login note'",
        "'{\"n\": ' || printf('%.*c', 5000, '9') || '}'",
        "metadata holds a number too long to read",
    ),
    "content that is not UTF-8": (
        "CAST(X'6c6f67696e20fffe' AS TEXT)",
        "'{}'",
        "content is not valid UTF-8 (its bad bytes are shown as \\xNN)",
    ),
    "metadata that is not UTF-8": (
        "'foreign login note'",
        "CAST(X'7b2261223a22ff227d' AS TEXT)",
        "metadata is not valid UTF-8 (its bad bytes are shown as \\xNN)",
    ),
    "a BLOB as content": (
        "X'6c6f67696e2000ff'",
        "'{}'",
        "content is a BLOB, not text",
    ),
}


def _db_with(path: Path, *rows: tuple[str, str]) -> Path:
    """A memtui database with one sound record (#1), then ``rows`` written by raw SQL."""
    with MemoryStore(path, clock=fixed_clock, operator="tester") as store:
        store.add_record(
            tier="episodic", record_type="note", content="a sound login note", engagement="eng-1"
        )
    conn = sqlite3.connect(path)
    for content, metadata in rows:
        conn.execute(INSERT.format(content=content, metadata=metadata))
    conn.commit()
    conn.close()
    return path


@pytest.fixture(params=list(DAMAGE), ids=list(DAMAGE))
def damaged(request, tmp_path):
    content, metadata, says = DAMAGE[request.param]
    return _db_with(tmp_path / "other-writer.db", (content, metadata)), says, request.param


def _ok(result) -> str:
    assert result.exit_code == 0, result.output
    assert result.exception is None, result.exception
    return result.output


def test_records_marks_the_damaged_row(runner, damaged):
    path, says, kind = damaged
    for width in ("200", "80"):  # the table, and the narrow listing
        out = _ok(runner.invoke(main, ["records", str(path)], env={"COLUMNS": width}))
        assert "live damaged" in out
        assert out.count("damaged") == 1
    found = json.loads(_ok(runner.invoke(main, ["records", str(path), "--json"])))
    sound, row = found
    assert "damage" not in sound and sound["content"] == "a sound login note"
    assert row["id"] == "2" and row["damage"] == [says]
    if kind.startswith("content"):
        assert row["content"].startswith("login")
    if "metadata" in kind:
        assert list(row["metadata"]) == [RAW_METADATA_KEY]


def test_search_marks_the_damaged_row(runner, damaged):
    path, says, _kind = damaged
    out = _ok(runner.invoke(main, ["search", str(path), "login"]))
    assert "damaged" in out and "a sound login note" in out
    found = json.loads(_ok(runner.invoke(main, ["search", str(path), "login", "--json"])))
    by_id = {result["id"]: result for result in found["results"]}
    assert by_id["2"]["damage"] == [says] and "damage" not in by_id["1"]
    explained = _ok(runner.invoke(main, ["search", str(path), "login", "--explain"]))
    assert "record 2" in explained and "record 1" in explained
    explained = json.loads(
        _ok(runner.invoke(main, ["search", str(path), "login", "--explain", "--json"]))
    )
    assert {r["id"]: r.get("damage") for r in explained["results"]} == {"1": None, "2": [says]}


def test_check_names_the_damaged_row_by_id(runner, damaged):
    path, says, _kind = damaged
    result = runner.invoke(main, ["check", str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"problem: rows: record #2 is damaged (written by another program): {says}" in (
        result.output
    )
    report = check_database(path)
    assert [
        f.message for f in report.findings if f.check == "rows" and f.severity == "problem"
    ] == [f"record #2 is damaged (written by another program): {says}"]


def test_a_damaged_row_can_be_forgotten_and_check_passes_after(runner, damaged):
    path, _says, _kind = damaged
    out = _ok(runner.invoke(main, ["forget", str(path), "2", "--reason", "damaged", "--yes"]))
    assert "erasure verified" in out
    assert check_database(path).ok


@pytest.mark.parametrize("kind", ["content that is not UTF-8", "a BLOB as content"])
def test_reindex_embeds_damaged_content_as_it_is_shown(runner, tmp_path, kind):
    content, metadata, _says = DAMAGE[kind]
    path = _db_with(tmp_path / "reindex.db", (content, metadata))
    out = _ok(runner.invoke(main, ["reindex", str(path), "--embedder", "hash-64"]))
    assert "2" in out
    with MemoryStore(path, clock=fixed_clock, read_only=True) as store:
        assert store.vector_count() == 2
        shown = store.get(2)
        assert shown is not None and shown.content.startswith("login")
    report = check_database(path)
    assert "vectors" in report.passed


PROFILE = "python:postgresql:waf_present:generic_waf:rest:flask"


@pytest.mark.parametrize("metadata", ["'{not json'", DAMAGE["100k-deep JSON metadata"][1]])
def test_the_lanes_read_past_unreadable_metadata(runner, tmp_path, metadata):
    path = _db_with(tmp_path / "lanes.db")
    with MemoryStore(path, clock=fixed_clock, operator="tester") as store:
        store.record_success(profile_hash=PROFILE, tool="sqlmap", endpoint="/api/1", param="q")
    conn = sqlite3.connect(path)
    for record_type, content in (("tactic", "foreign tactic"), ("finding", "foreign finding")):
        conn.execute(
            "INSERT INTO records (tier, record_type, content, metadata, profile_hash, "
            f"engagement, tool_name, created_at) VALUES ('longterm', ?, ?, {metadata}, ?, "
            "'eng-1', 'sqlmap', ?)",
            (record_type, content, PROFILE, CREATED),
        )
    conn.commit()
    conn.close()
    lanes = ["lanes", str(path), "--profile", PROFILE, "--engagement", "eng-1", "--json"]
    found = json.loads(_ok(runner.invoke(main, lanes)))
    text = json.dumps(found)
    assert "foreign tactic" in text and "foreign finding" in text


def test_secret_fields_of_unreadable_metadata_stay_masked(runner, tmp_path):
    path = _db_with(
        tmp_path / "secret.db",
        ("'foreign login note'", '\'{"password": "hunter2-SECRET", "api": {"token": "t0k\''),
    )
    out = _ok(runner.invoke(main, ["records", str(path), "--json"]))
    assert "hunter2-SECRET" not in out and "t0k" not in out
    row = json.loads(out)[1]
    assert row["metadata"][RAW_METADATA_KEY] == (
        '{"password": "•••••••• (masked)", "api": {"token": "•••••••• (masked)"'
    )


def test_check_lists_every_damaged_row_past_the_first_twenty(tmp_path):
    path = _db_with(tmp_path / "many.db", *[("'foreign login note'", "'[]'")] * 25)
    rows = [f.message for f in check_database(path).findings if f.severity == "problem"]
    assert len(rows) == 21
    assert (
        rows[0]
        == "record #2 is damaged (written by another program): metadata is a JSON list, not an object"
    )
    assert rows[-1] == "5 more damaged records: #22, #23, #24, #25, #26"


def test_a_tactic_with_unreadable_metadata_is_not_rewritten(runner, tmp_path):
    path = _db_with(tmp_path / "tactic.db", ("'foreign login note'", "'{not json'"))
    conn = sqlite3.connect(path)
    conn.execute("UPDATE records SET record_type = 'tactic' WHERE id = 2")
    conn.commit()
    conn.close()
    line = one_error_line(runner.invoke(main, ["refute", str(path), "2", "--reason", "wrong"]))
    assert line.startswith("Error: record #2's metadata is not valid JSON")
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT metadata, refuted FROM records WHERE id = 2").fetchone() == (
        "{not json",
        0,
    )
    conn.close()


async def test_the_app_shows_a_damaged_row_marked(tmp_path):
    path = _db_with(tmp_path / "app.db", ("X'6c6f67696e2000ff'", "'{not json'"))
    with MemoryStore(path, clock=fixed_clock, operator="tester") as store:
        app = make_app(store, check_on_start=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            table = app.query_one(RecordTable)
            await pilot.press("end")
            await settle(pilot)
            assert table.current is not None and table.current.id == "2"
            text = screen_text(app)
            assert "damaged · login \\x00\\xff" in text  # the row
            detail = app.query_one("#detail-body").render().plain  # type: ignore[attr-defined]
            assert "DAMAGED" in detail
            assert "content is a BLOB, not text" in detail
            assert "metadata is not valid JSON" in detail
            assert f"{RAW_METADATA_KEY} {{not json" in detail
            # The search results mark it too.
            await pilot.press("slash")
            await settle(pilot)
            for char in "login":
                await pilot.press(char)
            await pilot.press("enter")
            pane = app.query_one(SearchPane)
            for _ in range(200):
                if pane.response is not None and "2" in pane.records:
                    break
                await pilot.pause(0.05)
            await settle(pilot)
            assert "damaged · login \\x00\\xff" in screen_text(app)
            assert "damaged · a sound" not in screen_text(app)


# ---------------------------------------------------------------- what the database refuses


def _add_trigger(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute(sql)
    conn.commit()
    conn.close()


KEEP_RECORDS = (
    "CREATE TRIGGER keep_records BEFORE DELETE ON records "
    "BEGIN SELECT RAISE(ABORT, 'records are kept by policy'); END"
)


def test_a_trigger_that_aborts_deletes_is_a_one_line_refusal(runner, tmp_path):
    path = _db_with(tmp_path / "kept.db")
    _add_trigger(path, KEEP_RECORDS)
    refused = (
        "Error: the database refused the delete: records are kept by policy (a trigger or "
        "constraint that memtui did not create); nothing was erased. Remove it to forget "
        f"here (sqlite3 {path} .schema shows the triggers)"
    )
    forget = ["forget", str(path), "1", "--reason", "gone", "--yes"]
    assert one_error_line(runner.invoke(main, forget)) == refused
    scope = ["forget-scope", str(path), "--engagement", "eng-1", "--reason", "gone", "--yes"]
    result = runner.invoke(main, scope)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.splitlines()[-1] == refused
    with MemoryStore(path, clock=fixed_clock, read_only=True) as store:
        assert store.get(1) is not None
        assert store.audit_events() == []  # nothing half-written: no forget event either


def test_the_store_reports_the_refused_delete(tmp_path):
    path = _db_with(tmp_path / "kept.db")
    _add_trigger(path, KEEP_RECORDS)
    with MemoryStore(path, clock=fixed_clock, operator="tester") as store:
        with pytest.raises(MemoryStoreError, match="refused the delete: records are kept"):
            store.forget(1, reason="gone")
        assert store.get(1) is not None


BLOB_REASON = (
    "INSERT INTO audit_events (at, operator, action, record_ids, reason, details, "
    "prev_hash, hash) SELECT '" + CREATED + "', 'someone', 'forget', '[]', X'00ff', '{}', "
    "hash, printf('%.*c', 64, 'f') FROM audit_events ORDER BY id DESC LIMIT 1"
)


def test_a_blob_audit_reason_fails_audit_verify_in_one_line(runner, sample_db):
    _add_trigger(sample_db, BLOB_REASON)
    says = (
        "event #2: its reason is a BLOB, not text: memtui writes text there, so another "
        "program wrote it"
    )
    line = one_error_line(runner.invoke(main, ["audit", "verify", str(sample_db)]))
    assert line == f"Error: audit chain broken: {says}"
    listing = runner.invoke(main, ["audit", str(sample_db)])
    assert "Traceback" not in listing.output and f"chain BROKEN: {says}" in listing.output
    assert ("audit", f"audit chain broken at {says}") in [
        (f.check, f.message) for f in check_database(sample_db).findings
    ]


@pytest.mark.parametrize("name", ["audit_events_no_update", "audit_events_no_delete"])
def test_check_reports_a_missing_append_only_trigger(sample_db, name):
    change = "UPDATE" if name.endswith("update") else "DELETE"
    conn = sqlite3.connect(sample_db)
    conn.execute(f"DROP TRIGGER {name}")
    conn.commit()
    found = [(f.check, f.message) for f in check_database(sample_db).findings]
    assert found == [
        (
            "audit-triggers",
            f"the audit log's append-only trigger {name} (which refuses every {change}) is "
            "missing: another program dropped it, so events can be changed without SQLite "
            "refusing; memtui check --audit-head with a head recorded earlier tells whether "
            "the log was rewritten",
        )
    ]
    # Put back under the same name but narrowed so that it refuses nothing.
    conn.execute(
        f"CREATE TRIGGER {name} BEFORE {change} ON audit_events WHEN 0 "
        "BEGIN SELECT RAISE(ABORT, 'audit_events is append-only'); END"
    )
    conn.commit()
    conn.close()
    assert [(f.check, f.message) for f in check_database(sample_db).findings] == [
        (
            "audit-triggers",
            f"the audit log's append-only trigger {name} (which refuses every {change}) is "
            "not the one memtui created (its statement was changed): it may no longer "
            "refuse it",
        )
    ]
