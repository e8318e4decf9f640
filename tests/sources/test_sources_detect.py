"""Detection by tables and columns, default modes, clear errors, and the CLI on every source."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import SAMPLE_CORPUS, one_error_line
from fixtures.sources_support import (
    LANGGRAPH,
    LANGGRAPH_VECTORS,
    LETTA,
    PREFERENCES,
    TENANT,
    copy_fixture,
)

from memtui.cli import main
from memtui.sources import KINDS, SourceError, open_source, recognize
from memtui.sources.native import NativeSource


@pytest.fixture(autouse=True)
def fixed_now_and_width(monkeypatch):
    monkeypatch.setenv("MEMTUI_NOW", "2026-11-30T12:00:30Z")
    monkeypatch.setenv("COLUMNS", "250")


@pytest.fixture
def native_db(tmp_path):
    path = tmp_path / "native" / "anything.sqlite"
    path.parent.mkdir()
    result = CliRunner().invoke(main, ["ingest", str(SAMPLE_CORPUS), "--db", str(path)])
    assert result.exit_code == 0, result.output
    return path


@pytest.fixture
def stores(tmp_path, native_db):
    folder = tmp_path / "stores"
    return {
        "memtui": native_db,
        "langgraph": copy_fixture(LANGGRAPH, folder, "a.db"),
        "langgraph-vectors": copy_fixture(LANGGRAPH_VECTORS, folder, "b"),
        "preferences": copy_fixture(PREFERENCES, folder, "c.json"),
        "tenant-evidence": copy_fixture(TENANT, folder, "memory.db"),
        "letta": copy_fixture(LETTA, folder, "store.txt"),
    }


def test_each_store_is_recognized_by_its_schema_whatever_its_name(stores):
    for kind, path in stores.items():
        expected = "langgraph" if kind == "langgraph-vectors" else kind
        assert recognize(path)[0] == expected, path


def test_native_opens_writable_and_foreign_read_only_by_default(stores):
    with open_source(stores["memtui"]) as native:
        assert isinstance(native, NativeSource) and not native.read_only
        assert {"forget", "refute", "reveal", "lanes"} <= native.capabilities
    with open_source(stores["memtui"], read_only=True) as native:
        assert native.read_only and "forget" not in native.capabilities
    for kind in ("langgraph", "preferences", "tenant-evidence", "letta"):
        with open_source(stores[kind]) as source:
            assert source.read_only and "forget" not in source.capabilities
        with open_source(stores[kind], allow_writes=True) as source:
            assert not source.read_only and "forget" in source.capabilities
        with open_source(stores[kind], allow_writes=True, read_only=True) as source:
            assert source.read_only


def test_an_unknown_sqlite_file_gets_one_clear_line(tmp_path):
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, amount REAL, customer TEXT)")
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(SourceError) as raised:
        open_source(path)
    message = str(raised.value)
    # Short, beside the path: what was found, and where the list of formats is.
    assert len(message.removeprefix(str(path))) < 200, message
    assert "found tables: customers(id, name), invoices(amount, customer, id)" in message
    assert "memtui info --formats" in message
    runner = CliRunner()
    for args in (["records", str(path)], ["search", str(path), "x"], ["audit", str(path)]):
        line = one_error_line(runner.invoke(main, args))
        assert "not a memory store memtui recognizes" in line and "invoices" in line
    line = one_error_line(runner.invoke(main, ["forget", str(path), "1", "--reason", "r", "--yes"]))
    assert "found tables" in line


def test_a_file_with_many_tables_still_gets_a_short_line(tmp_path):
    path = tmp_path / "big.db"
    conn = sqlite3.connect(path)
    for n in range(30):
        columns = ", ".join(f"column_{n}_{c} TEXT" for c in range(12))
        conn.execute(f"CREATE TABLE table_with_a_long_name_{n} ({columns})")
    conn.commit()
    conn.close()
    line = one_error_line(CliRunner().invoke(main, ["records", str(path)]))
    assert len(line.removeprefix("Error: ").removeprefix(str(path))) < 200, line
    assert "found tables: table_with_a_long_name_0(" in line and line.count("…") == 1
    assert "memtui info --formats lists what it opens" in line


def test_info_formats_lists_every_store_memtui_opens():
    result = CliRunner().invoke(main, ["info", "--formats"])
    assert result.exit_code == 0, result.output
    for kind in KINDS:
        assert f"  {kind.label}: {kind.needs}\n" in result.output
    assert "--qdrant-url URL" in result.output
    listed = json.loads(CliRunner().invoke(main, ["info", "--formats", "--json"]).output)
    assert [item["kind"] for item in listed] == [kind.name for kind in KINDS]
    line = one_error_line(CliRunner().invoke(main, ["info", "--formats", "x.db"]))
    assert "give it alone" in line


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: None, "no database at"),
        (lambda p: p.write_bytes(b"\x00garbage" * 100), "is not a SQLite database"),
    ],
)
def test_bad_paths_are_one_line(tmp_path, make, message):
    path = tmp_path / "target"
    make(path)
    assert message in one_error_line(CliRunner().invoke(main, ["records", str(path)]))
    with pytest.raises(SourceError, match=message):
        open_source(path)


def test_a_folder_is_refused_with_what_memtui_opens(tmp_path):
    with pytest.raises(SourceError, match="is a folder; memtui opens SQLite files"):
        open_source(tmp_path)


def test_records_json_is_one_shape_for_every_source(stores):
    runner = CliRunner()
    keys = set()
    for kind, path in stores.items():
        args = ["records", str(path), "--all", "--json"]
        if kind == "tenant-evidence":
            args += ["--now", "50"]
        result = runner.invoke(main, args)
        assert result.exit_code == 0, (kind, result.output)
        data = json.loads(result.output)
        assert data, kind
        for item in data:
            keys.add(tuple(item))
            assert isinstance(item["id"], str)
        states = {item["state"] for item in data}
        assert "live" in states
        if kind != "langgraph-vectors":  # the only fixture without hidden records
            assert states - {"live"}, (kind, states)
    assert keys == {
        (
            "id",
            "tier",
            "record_type",
            "content",
            "scope",
            "created_at",
            "expires_at",
            "state",
            "metadata",
        )
    }


def test_records_pages_with_after_and_limit(stores):
    runner = CliRunner()
    path = str(stores["preferences"])
    first = json.loads(
        runner.invoke(main, ["records", path, "--all", "--limit", "3", "--json"]).output
    )
    assert [r["id"] for r in first] == ["pref:1", "pref:2", "pref:3"]
    rest = json.loads(
        runner.invoke(main, ["records", path, "--all", "--after", "pref:3", "--json"]).output
    )
    assert [r["id"] for r in rest][:2] == ["pref:4", "pref:5"] and len(rest) == 8
    line = one_error_line(runner.invoke(main, ["records", path, "--filter", "hostname=x"]))
    assert (
        "filter 'hostname' is not in the scope-key allowlist (name, origin, record_type, " in line
    )


def test_search_explains_a_foreign_store_like_a_native_one(stores):
    runner = CliRunner()
    result = runner.invoke(
        main,
        [
            "search",
            str(stores["langgraph-vectors"]),
            "dark mode editor",
            "--explain",
            "--embedder",
            "hash-8",
        ],
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "embedder: hash-8" in out and "fallback" not in out
    assert "adds up: yes" in out and "adds up: NO" not in out
    assert "BM25 by term" in out and "lg:memories.user-1/pref-color" in out
    fallback = runner.invoke(
        main, ["search", str(stores["langgraph-vectors"]), "dark mode", "--json"]
    )
    data = json.loads(fallback.stdout)
    assert data["trace"]["fallback"].startswith("no embedder for these 8-dim vectors")
    for item in data["results"]:
        search = item["search"]
        assert search["score"] == (
            search["weights"]["keyword"] * search["keyword"]["normalized"]
            + search["weights"]["vector"] * search["vector"]["normalized"]
        )
    prefs = runner.invoke(main, ["search", str(stores["preferences"]), "tone", "--json"])
    trace = json.loads(prefs.stdout)["trace"]
    assert trace["excluded"] == {"inactive": 1, "expired": 0, "out_of_scope": 0}


def test_refute_is_native_only(stores):
    runner = CliRunner()
    line = one_error_line(
        runner.invoke(
            main, ["refute", str(stores["langgraph"]), "lg:profile/main", "--reason", "r"]
        )
    )
    assert "refute is not supported by LangGraph SqliteStore sources" in line


def test_info_says_what_a_store_is(stores):
    result = CliRunner().invoke(main, ["info", str(stores["preferences"]), "--json"])
    data = json.loads(result.output)
    assert data["kind"] == "preferences" and data["with_allow_writes"] == ["forget"]
    assert data["scope_keys"] == ["session", "name", "origin"]
    assert [t["tier"] for t in data["tiers"]] == ["preference", "work"]


def test_sources_import_no_ui():
    code = (
        "import sys, memtui.sources, memtui.sources.langgraph, memtui.sources.preferences, "
        "memtui.sources.tenant; "
        "print(sorted(m for m in ('textual', 'click', 'rich') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_letta_is_recognized_without_core_memory_and_says_so(tmp_path):
    """The recognizer needs archival_passages only; block is read when present."""
    from memtui.sources.detect import KINDS
    from memtui.sources.letta import LettaSource

    path = tmp_path / "archive-only.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE archival_passages (id TEXT PRIMARY KEY, text TEXT, embedding_config TEXT, "
        "metadata_ TEXT, tags TEXT, embedding BLOB, created_at TEXT, updated_at TEXT, "
        "is_deleted INTEGER, archive_id TEXT)"
    )
    conn.execute(
        "INSERT INTO archival_passages VALUES ('p1', 'a passage', '{}', '{}', '[]', NULL, "
        "'2026-11-30 12:00:00', '2026-11-30 12:00:00', 0, 'a1')"
    )
    conn.commit()
    conn.close()
    with open_source(path) as source:
        assert isinstance(source, LettaSource)
        assert [r.id for r in source.iter_records()] == ["archival:p1"]
    letta = next(k for k in KINDS if k.name == "letta")
    assert "+ block" not in letta.needs
    assert letta.needs.startswith("archival_passages(") and "block when present" in letta.needs
