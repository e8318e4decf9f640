"""Forget with proof in a Letta server's Postgres: one transaction deleting a passage and
its tag rows, audited (one intent, one outcome, no password, no text), purged, the text
looked for in every text and json column and in the tables' files; core blocks refused;
read-only without --allow-writes; the soft-deleted passages' gap cleared by forget-gaps."""

from __future__ import annotations

import itertools
import json
import struct
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import NOW, fixed_clock, one_error_line

from memtui.cli import main
from memtui.sources import SourceError, open_source

from .conftest import PASSWORD, PASSWORD_USER, admin, database_url, new_database
from .letta_support import (
    EMBEDDER,
    HUMAN,
    ORG,
    PASSAGES,
    PERSONA,
    RESEARCH,
    passage_id,
    real_vector,
    record_id,
    sql,
    write_letta,
    write_passage,
)

COPIES = itertools.count(1)
SECRET = "Paris trip planned for the spring conference"
SOFT = ["Old note: the staging password hint was zqxjvortex", "the door code of the old office"]
FORGET = ["--reason", "asked by the user", "--allow-writes", "--yes"]


@pytest.fixture(scope="module")
def letta_template(pg_server: Any) -> Iterator[str]:
    """A Letta server database written once; each test copies it."""
    with new_database(pg_server) as url:
        write_letta(url)
        yield url.split("?")[0].rsplit("/", 1)[1]


@pytest.fixture
def letta_store(pg_server: Any, letta_template: str) -> Iterator[str]:
    """This test's copy, named with a password (scram-sha-256)."""
    name = f"{letta_template}_{next(COPIES)}"
    admin(pg_server, f'CREATE DATABASE "{name}" TEMPLATE "{letta_template}"')
    try:
        yield database_url(pg_server, name, f"{PASSWORD_USER}:{PASSWORD}")
    finally:
        admin(pg_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def opened(url: str, **options: Any) -> Any:
    return open_source(url, allow_writes=True, clock=fixed_clock, operator="tester", **options)


def anywhere(url: str, text: str) -> list[str]:
    """Every ``table.column`` of the schema (text, varchar, json, jsonb) holding ``text``:
    one statement, one connection."""
    columns = sql(
        url,
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = "
        "'public' AND data_type IN ('text', 'character varying', 'json', 'jsonb') "
        "ORDER BY table_name, column_name",
    )
    probes = " UNION ALL ".join(
        f'SELECT \'{table}.{column}\' FROM "{table}" WHERE strpos("{column}"::text, %(t)s) > 0'
        for table, column in columns
    )
    return sorted({str(r[0]) for r in sql(url, probes, {"t": text})})


def table_bytes(source: Any, probe: bytes) -> int:
    """Occurrences of ``probe`` in the files of Letta's tables (after a checkpoint)."""
    erasure = source.erasure()
    root, why = erasure.data_directory()
    assert root is not None, why
    source.pg.query("CHECKPOINT")
    return erasure.scan_files(root, erasure.store_tables, [probe])[probe]


def vector_bytes(text: str) -> bytes:
    """The first 16 float4 of ``text``'s embedding as Letta stores it (its 8 real values,
    then the padding's zeros), as pgvector keeps them on disk."""
    values = real_vector(text) + [0.0] * 8
    return struct.pack(f"={len(values)}f", *values)


def test_forget_one_passage_erases_it_and_its_tags_and_proves_it(letta_store):
    assert anywhere(letta_store, SECRET) == ["archival_passages.text"]
    with opened(letta_store) as source:
        assert table_bytes(source, SECRET.encode()) == 1
        assert table_bytes(source, vector_bytes(SECRET)) == 1  # out of line, in the TOAST table
        preview = source.forget_preview(record_id(2))
        assert preview["counts"] == {"passages": 1, "tag_rows": 2}
        assert preview["rule"].startswith("The passage's row of archival_passages")
        outcome = source.forget(record_id(2), reason="asked")
        assert outcome.verified, outcome.checks
        assert {"row_gone", "tags_gone", "text_gone", "bytes_gone"} <= set(outcome.checks)
        assert outcome.removed == (record_id(2),)
        assert table_bytes(source, SECRET.encode()) == 0
        assert table_bytes(source, vector_bytes(SECRET)) == 0
        assert source.get(record_id(2)) is None
        assert source.search("Paris spring conference").results == []
        events = source.audit_events(limit=10)
        index_file = Path(source.index.path)
        audit_folder = Path(source.audit_path).parent
    assert [e["action"] for e in events] == ["forget", "forget-intent"]
    assert events[0]["details"]["passages_removed"] == 1
    assert events[0]["details"]["tag_rows_removed"] == 2
    assert anywhere(letta_store, SECRET) == []
    tags = "SELECT count(*) FROM passage_tags WHERE passage_id = ANY(%s)"
    assert sql(letta_store, tags, [[passage_id(2)]]) == [(0,)]
    assert sql(letta_store, "SELECT count(*) FROM archival_passages") == [(len(PASSAGES) - 1,)]
    assert SECRET.encode() not in index_file.read_bytes()
    stored = b"".join(p.read_bytes() for p in audit_folder.iterdir())
    assert PASSWORD.encode() not in stored and SECRET.encode() not in stored
    assert PASSWORD not in json.dumps(events, default=str)


def test_core_blocks_are_refused_and_nothing_is_audited(letta_store):
    with opened(letta_store) as source:
        with pytest.raises(SourceError, match="core memory blocks are the agent's working"):
            source.forget(f"core:{HUMAN}", reason="r")
        assert source.blast_radius(scope=("tag", "ops")) == {"archival": {"passage": 3}}
        with pytest.raises(SourceError, match="forgets by archive, tag, not by 'label'"):
            source.forget_scope(scope=("label", "human"), reason="r")
        assert source.audit_events() == []
    assert sql(letta_store, "SELECT count(*) FROM block") == [(2,)]


def test_without_allow_writes_the_session_is_read_only_and_nothing_changes(runner, letta_store):
    with open_source(letta_store, clock=fixed_clock) as source:
        assert source.pg.query("SHOW default_transaction_read_only") == [("on",)]
        for attempt in (
            lambda: source.forget(record_id(2), reason="r"),
            lambda: source.forget_gaps(reason="r"),
        ):
            with pytest.raises(SourceError) as raised:
                attempt()
            assert "\n" not in str(raised.value) and "--allow-writes" in str(raised.value)
    refused = runner.invoke(main, ["forget", letta_store, record_id(2), "--reason", "r", "--yes"])
    line = one_error_line(refused)
    assert "pass --allow-writes" in line and PASSWORD not in line
    assert sql(letta_store, "SELECT count(*) FROM archival_passages") == [(len(PASSAGES),)]


def test_forget_gaps_erases_the_soft_deleted_passages(runner, letta_store):
    info = runner.invoke(main, ["info", letta_store])
    assert "erasure gap: 2 soft-deleted passage(s)" in info.output
    result = runner.invoke(main, ["forget-gaps", letta_store, *FORGET])
    assert result.exit_code == 0, result.output
    assert "deleted 2 soft-deleted passage(s) and 2 tag row(s)" in result.output
    assert "erasure verified" in result.output
    for text in SOFT:
        assert anywhere(letta_store, text) == []
    assert sql(letta_store, "SELECT count(*) FROM archival_passages WHERE is_deleted") == [(0,)]
    tags = "SELECT count(*) FROM passage_tags WHERE passage_id = ANY(%s)"
    assert sql(letta_store, tags, [[passage_id(4), passage_id(8)]]) == [(0,)]
    with opened(letta_store) as source:
        counts = source.summary().counts
        assert counts["soft_deleted_passages"] == 0
        # the deleted vectors' TOAST chunks are not counted as dead after the rewrite
        assert counts["dead_row_versions"] == 0
        assert table_bytes(source, b"zqxjvortex") == 0
        events = source.audit_events(limit=10)
        assert source.get(record_id(1)) is not None
    assert [e["action"] for e in events] == ["forget", "forget-intent"]
    assert events[0]["details"]["operation"] == "forget-gaps"
    info = runner.invoke(main, ["info", letta_store])
    assert "soft-deleted" not in info.output.split("no expiry")[0]
    for output in (info.output, result.output):
        assert PASSWORD not in output


def test_forget_scope_of_an_archive_and_another_embedding_dimension(letta_store):
    sql(
        letta_store,
        "UPDATE archival_passages SET embedding_config = "
        "json_build_object('embedding_model', 'other', 'embedding_dim', 16) WHERE id = %s",
        [passage_id(7)],
    )
    with opened(letta_store) as source:
        assert source.vector_dim() == 8
        assert source.search("billing database", embedder=EMBEDDER).trace.vectors_missing == 1
        assert "1 of 16 dims" in source.vectors.describe()
        outcome = source.forget_scope(scope=("archive", "ops-runbooks"), reason="r")
        assert outcome.verified, (outcome.checks, outcome.remark, outcome.problem)
        assert outcome.forgotten == 11  # the soft-deleted one too
    assert sql(letta_store, "SELECT count(*) FROM archival_passages") == [(len(PASSAGES) - 11,)]
    assert sql(letta_store, "SELECT count(*) FROM block") == [(2,)]


def test_a_copy_in_the_agents_messages_is_named_and_not_verified(letta_store):
    """Letta's agent inserts a passage with a tool call: its text stays in ``messages``,
    which a forget does not change; the outcome says where it still is."""
    agent = "agent-00000000-0000-4000-8000-000000000001"
    sql(
        letta_store,
        "INSERT INTO agents (id, message_buffer_autoclear, organization_id) VALUES (%s, false, %s)",
        [agent, ORG],
    )
    arguments = json.dumps({"content": SECRET})
    call = [{"function": {"name": "archival_memory_insert", "arguments": arguments}}]
    sql(
        letta_store,
        "INSERT INTO messages (id, role, tool_calls, sequence_id, organization_id, agent_id) "
        "VALUES ('message-1', 'assistant', %s, 1, %s, %s)",
        [json.dumps(call), ORG, agent],
    )
    with opened(letta_store) as source:
        outcome = source.forget(record_id(2), reason="r")
    assert not outcome.verified and outcome.checks["text_gone"] is False
    assert outcome.checks["row_gone"] and outcome.checks["tags_gone"]
    assert "still in 1 place(s) of the store's tables" in (outcome.remark or "")
    assert anywhere(letta_store, SECRET) == ["messages.tool_calls"]


def test_the_keyword_index_follows_lettas_own_changes(letta_store):
    with opened(letta_store) as source:
        assert [r.id for r in source.search("Rome family").results] == [record_id(6)]
        assert source.index.last_sync.action == "built"
    later = NOW + timedelta(hours=10)
    with psycopg.connect(letta_store) as conn:
        write_passage(conn, 40, RESEARCH, "a new passage about the harbour ferry", ["new"], False)
        conn.execute(
            "UPDATE archival_passages SET is_deleted = true, updated_at = %s WHERE id = %s",
            [later, passage_id(6)],
        )
        conn.execute("DELETE FROM archival_passages WHERE id = %s", [passage_id(5)])
    with opened(letta_store) as source:
        assert [r.id for r in source.search("harbour ferry").results] == [record_id(40)]
        rome = source.search("Rome family")
        assert rome.results == [] and rome.trace.excluded["deleted"] == 1
        assert [r.id for r in source.search("bullet points").results] == [f"core:{PERSONA}"]
        sync = source.index.last_sync
        # read: the two changed rows, and the newest before them again (the lag)
        assert sync.action == "refreshed" and sync.removed == 1 and sync.written == 2
        assert sync.rows_read == 3
