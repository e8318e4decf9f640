"""The erasure gap of a mem0 pgvector collection: what mem0's own ``PGVector.delete``
leaves in the table's pages, and what its history keeps of memories it deleted, both
counted by ``info`` and cleared with proof by ``forget-gaps`` (one audited change);
mem0's own ``PGVector`` still works afterwards."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import NOW

from memtui.cli import main
from memtui.sources import open_source

from .conftest import admin, database_url, new_database
from .mem0_support import embed, library, memory_id, sql, write_collection, write_history

pytest.importorskip("mem0")

COPIES = itertools.count(1)
LAST = "bulk13"
SECRET = "bulk memory number 13 about coffee"
"""The memory mem0 wrote last: the lowest tuple of its page, which pruning does not move
(a memory written early sits at the page's end, and pruning a full page writes the
others over it)."""
DELETED_IN_HISTORY = "the old office door code"
CLEAR = ["--allow-writes", "--reason", "clean up", "--yes"]


@pytest.fixture(scope="module")
def collection_template(pg_server: Any) -> Iterator[str]:
    with new_database(pg_server) as url:
        write_collection(url).connection_pool.close()
        yield url.split("?")[0].rsplit("/", 1)[1]


@pytest.fixture
def m0_url(pg_server: Any, collection_template: str) -> Iterator[str]:
    name = f"{collection_template}_{next(COPIES)}"
    admin(pg_server, f'CREATE DATABASE "{name}" TEMPLATE "{collection_template}"')
    url = database_url(pg_server, name)
    sql(url, "ALTER TABLE memories SET (autovacuum_enabled = false)")
    try:
        yield url
    finally:
        admin(pg_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def mem0_delete(url: str, name: str) -> None:
    """mem0 forgets a memory its own way (the server checkpoints, as every few minutes)."""
    store = library(url)
    store.delete(memory_id(name))
    store.connection_pool.close()
    sql(url, "CHECKPOINT")


def secret_in_table_files(url: str) -> int:
    with open_source(url, now=NOW) as source:
        erasure = source.erasure()
        root, why = erasure.data_directory()
        assert root is not None, why
        sql(url, "CHECKPOINT")
        return erasure.scan_files(root, erasure.store_tables, [SECRET.encode()])[SECRET.encode()]


def info(runner: Any, url: str, *extra: str) -> dict[str, Any]:
    result = runner.invoke(main, ["info", url, *extra, "--json", "--now", NOW.isoformat()])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def outcome_event(url: str, *extra: Any, **options: Any) -> tuple[dict, dict]:
    with open_source(url, now=NOW, **options) as source:
        events = {e["action"]: e for e in source.audit_events(limit=2)}
    assert set(events) == {"forget-intent", "forget"}
    assert events["forget-intent"]["id"] < events["forget"]["id"]
    return events["forget-intent"], events["forget"]


def test_a_mem0_delete_leaves_the_text_in_the_pages_and_forget_gaps_erases_it(runner, m0_url):
    mem0_delete(m0_url, LAST)
    assert secret_in_table_files(m0_url) >= 1  # the dead row version still holds it
    counts = info(runner, m0_url)["counts"]
    assert counts["dead_row_versions"] >= 1
    result = runner.invoke(main, ["forget-gaps", m0_url, *CLEAR])
    assert result.exit_code == 0, result.output
    assert "rewrote memories" in result.output and "erasure verified" in result.output
    assert secret_in_table_files(m0_url) == 0
    counts = info(runner, m0_url)["counts"]
    assert counts["dead_row_versions"] == 0 and counts["free_space_remnant_bytes"] == 0
    intent, outcome = outcome_event(m0_url)
    assert outcome["details"]["operation"] == "forget-gaps"
    assert outcome["details"]["erasure"]["dead_rows_gone"] is True
    assert SECRET not in json.dumps([intent, outcome], default=str)
    store = library(m0_url)  # mem0's own store still reads, writes and searches
    try:
        assert store.get(memory_id(LAST)) is None
        assert store.get(memory_id("rome")).payload["data"] == "Rome trip with the family in May"
        fresh = memory_id("after")
        store.insert(
            vectors=[embed("a note after the rewrite")], payloads=[{"data": "x"}], ids=[fresh]
        )
        hits = store.search("a note", embed("a note after the rewrite"), top_k=1)
        assert str(hits[0].id) == fresh
    finally:
        store.connection_pool.close()


def test_forget_gaps_clears_the_history_text_of_memories_mem0_deleted(runner, m0_url, tmp_path):
    history = write_history(tmp_path / "history.db")
    assert DELETED_IN_HISTORY.encode() in history.read_bytes()
    summary = info(runner, m0_url, "--mem0-history", str(history))
    assert summary["counts"]["deleted_with_text"] == 1
    note = next(n for n in summary["notes"] if "history.db" in n and "erasure gap" in n)
    assert "forget-gaps" in note
    preview_args = ["forget-gaps", m0_url, "--mem0-history", str(history), *CLEAR]
    result = runner.invoke(main, preview_args)
    assert result.exit_code == 0, result.output
    assert "erasure verified" in result.output
    assert DELETED_IN_HISTORY.encode() not in history.read_bytes()
    assert info(runner, m0_url, "--mem0-history", str(history))["counts"]["deleted_with_text"] == 0
    intent, outcome = outcome_event(m0_url, mem0_history=str(history))
    checks = outcome["details"]["erasure"]
    assert checks["history_text_cleared"] is True and checks["history.db_bytes_gone"] is True
    assert "dead_rows_gone" not in checks  # the tables held nothing: not rewritten
    assert intent["details"]["plan"]["history_memories_with_text"] == 1
    assert DELETED_IN_HISTORY not in json.dumps([intent, outcome], default=str)
    with open_source(m0_url, now=NOW, mem0_history=str(history)) as source:
        assert source.history is not None
        assert source.history.rows(memory_id("gone"))  # the events stay
        assert source.history.rows(memory_id("paris"))[0].texts()  # a live memory's stay


def test_with_nothing_left_behind_forget_gaps_says_so_and_writes_nothing(runner, m0_url, tmp_path):
    result = runner.invoke(main, ["forget-gaps", m0_url, *CLEAR])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("no erasure gap: none")
    with open_source(m0_url, now=NOW) as source:
        assert source.audit_events(limit=5) == []
    history = Path(tmp_path / "history.db")
    write_history(history)
    result = runner.invoke(main, ["forget-gaps", m0_url, "--mem0-history", str(history), "--yes"])
    assert result.exit_code != 0  # the history holds a gap, but writes were not allowed
    assert DELETED_IN_HISTORY.encode() in history.read_bytes()
