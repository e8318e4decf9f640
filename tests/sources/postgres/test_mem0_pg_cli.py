"""``memtui info/records/search URL`` on mem0's pgvector collection, end to end through the
command line; a change without --allow-writes is one line (the forget itself:
``test_mem0_pg_forget.py``)."""

from __future__ import annotations

import json

import pytest
from conftest import one_error_line

from memtui.cli import main

from .conftest import new_database
from .mem0_support import MEMORIES, record_id, write_collection, write_history

pytest.importorskip("mem0")


@pytest.fixture(scope="module")
def m0_cli_url(pg_server):
    with new_database(pg_server) as url:
        write_collection(url).connection_pool.close()
        yield url


def test_info_records_and_search_end_to_end(runner, m0_cli_url):
    info = runner.invoke(main, ["info", m0_cli_url])
    assert info.exit_code == 0, info.output
    assert "(mem0 pgvector collection memories)" in info.output.splitlines()[0]
    assert "index memories_hnsw_idx (hnsw, vector_cosine_ops)" in info.output
    data = json.loads(runner.invoke(main, ["info", m0_cli_url, "--json"]).output)
    assert data["kind"] == "mem0-pgvector"
    assert "keyword index: brought up to date 2026-11-30" not in info.output  # not the mark
    assert data["counts"]["records"] == len(MEMORIES) and data["counts"]["live"] == 22
    records = runner.invoke(main, ["records", m0_cli_url, "--filter", "user_id=alice"])
    assert records.exit_code == 0, records.output
    assert "3 records" in records.output and record_id("paris") in records.output
    listed = json.loads(runner.invoke(main, ["records", m0_cli_url, "--all", "--json"]).output)
    assert len(listed) == len(MEMORIES)
    assert {r["state"] for r in listed} == {"live", "expired"}
    search = runner.invoke(main, ["search", m0_cli_url, "paris trip", "--embedder", "hash-8"])
    assert search.exit_code == 0, search.output
    assert "Paris trip booked for June" in search.output
    found = json.loads(
        runner.invoke(main, ["search", m0_cli_url, "trip", "--embedder", "hash-8", "--json"]).output
    )
    assert found["trace"]["vector_search"] == "index: hnsw memories_hnsw_idx (approximate)"
    assert found["trace"]["source"]["kind"] == "mem0-pgvector"


def test_mem0_history_reaches_the_collection(runner, m0_cli_url, tmp_path):
    history = write_history(tmp_path / "history.db")
    result = runner.invoke(main, ["info", m0_cli_url, "--mem0-history", str(history), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["counts"]["deleted_with_text"] == 1


def test_a_forget_without_allow_writes_is_refused_in_one_line(runner, m0_cli_url):
    result = runner.invoke(
        main, ["forget", m0_cli_url, record_id("paris"), "--reason", "r", "--yes"]
    )
    line = one_error_line(result)
    assert "is open read-only" in line and "pass --allow-writes to change it" in line
