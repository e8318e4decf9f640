"""``memtui info/records/search URL`` end to end through the command line, the password of
the URL nowhere in what they print or write; a bad URL is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import one_error_line

from memtui.cli import main

from .conftest import PASSWORD, PASSWORD_USER, database_url
from .support import sql


@pytest.fixture
def secret_url(pg_server, lg_url):
    """The module's store, named with a password (the role must give it)."""
    database = lg_url.split("?")[0].rsplit("/", 1)[1]
    return database_url(pg_server, database, f"{PASSWORD_USER}:{PASSWORD}")


def files_holding(folder: Path, secret: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_info_records_and_search_end_to_end(runner, secret_url, tmp_path):
    shown = f"postgresql://{PASSWORD_USER}@/"
    info = runner.invoke(main, ["info", secret_url])
    assert info.exit_code == 0, info.output
    assert info.output.startswith(shown)
    assert "(LangGraph PostgresStore)" in info.output.splitlines()[0]
    assert "session: read-only in the database; schema public" in info.output
    assert "index store_vectors_embedding_idx (hnsw, vector_cosine_ops)" in info.output
    data = json.loads(runner.invoke(main, ["info", secret_url, "--json"]).output)
    assert data["kind"] == "langgraph-postgres" and data["path"].startswith(shown)
    assert data["counts"]["records"] == 34 and data["counts"]["live"] == 33
    records = runner.invoke(main, ["records", secret_url, "--filter", "namespace=memories.user-1"])
    assert records.exit_code == 0, records.output
    assert "3 records" in records.output and "lg:memories.user-1/trip" in records.output
    listed = json.loads(runner.invoke(main, ["records", secret_url, "--all", "--json"]).output)
    assert len(listed) == 34
    search = runner.invoke(main, ["search", secret_url, "paris trip", "--embedder", "hash-8"])
    assert search.exit_code == 0, search.output
    assert "vector lane in the database: " in search.output
    assert "keyword index: built " in search.output
    assert "lg:memories.user-1/trip" in search.output
    found = json.loads(
        runner.invoke(main, ["search", secret_url, "trip", "--embedder", "hash-8", "--json"]).output
    )
    assert found["trace"]["vector_search"].startswith(("exact scan", "index: hnsw"))
    assert found["trace"]["source"]["index_refreshed"].startswith("up to date as of")
    outputs = [info.output, records.output, search.output, json.dumps(data), json.dumps(found)]
    assert all(PASSWORD not in text for text in outputs)
    # nor in memtui's cache (the index, the folder naming the store) or data folders
    assert files_holding(tmp_path, PASSWORD) == []


def test_a_change_without_allow_writes_is_refused_in_one_line(runner, secret_url):
    result = runner.invoke(
        main, ["forget", secret_url, "lg:memories.user-1/trip", "--reason", "r", "--yes"]
    )
    line = one_error_line(result)
    assert "is open read-only" in line and "pass --allow-writes to change it" in line
    assert PASSWORD not in line


def test_a_schema_other_than_public(runner, pg_url):
    from .support import write_store

    write_store(pg_url)
    sql(pg_url, "CREATE SCHEMA agents")
    for table in ("store", "store_vectors", "store_migrations", "vector_migrations"):
        sql(pg_url, f"ALTER TABLE {table} SET SCHEMA agents")
    result = runner.invoke(main, ["records", pg_url, "--pg-schema", "agents", "--limit", "3"])
    assert result.exit_code == 0, result.output
    assert "(schema agents)" in result.output
    found = runner.invoke(main, ["search", pg_url, "trip", "--pg-schema", "agents", "--json"])
    assert json.loads(found.stdout)["results"]
    line = one_error_line(runner.invoke(main, ["records", pg_url]))
    assert line.endswith(
        "(schema public) holds no tables but no LangGraph store, mem0 pgvector collection or "
        "Letta server passages"
    )
    line = one_error_line(runner.invoke(main, ["info", pg_url, "--pg-schema", "nope"]))
    assert "has no schema 'nope' (schemas: agents, public); give one with --pg-schema" in line


def test_pg_schema_applies_to_postgres_stores_only(runner, tmp_path):
    db = tmp_path / "x.db"
    line = one_error_line(runner.invoke(main, ["records", str(db), "--pg-schema", "agents"]))
    assert "no database at" in line or "--pg-schema applies to Postgres stores" in line


@pytest.mark.parametrize("command", ["info", "records", "search"])
def test_an_unreachable_server_is_one_line(runner, command):
    url = "postgresql://ana:Pw-hidden-3@/agents?host=/nonexistent/socket/folder"
    args = [command, url] + (["trip"] if command == "search" else [])
    line = one_error_line(runner.invoke(main, args))
    assert line.startswith("Error: cannot connect to postgresql://ana@/agents?host=")
    assert "Pw-hidden-3" not in line


def test_a_database_without_a_store_is_one_line(runner, pg_url):
    sql(pg_url, "CREATE TABLE invoices (id int)")
    line = one_error_line(runner.invoke(main, ["info", pg_url]))
    assert line.endswith(
        "(schema public) holds 1 table (invoices) but no LangGraph store, mem0 pgvector "
        "collection or Letta server passages"
    )
