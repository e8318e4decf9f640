"""Forget with proof in mem0's pgvector collection: one transaction deleting the memories'
rows (vector and payload), audited (intent before outcome, no password), vacuumed, the
text looked for in every text and jsonb column and in the table's files, the history's
text cleared when it is attached, and mem0's own ``PGVector`` still working after it;
the CLI's ``forget`` and ``forget-scope`` end to end."""

from __future__ import annotations

import itertools
import json
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import fixed_clock, one_error_line

from memtui.cli import main
from memtui.sources import SourceError, open_source

from .conftest import PASSWORD, PASSWORD_USER, admin, database_url, new_database
from .mem0_support import (
    MEMORIES,
    embed,
    library,
    memory_id,
    record_id,
    sql,
    write_collection,
    write_history,
)

pytest.importorskip("mem0")

COPIES = itertools.count(1)
SECRET = "Paris trip booked for June"
ALICE = {"paris", "dark", "billing"}
FORGET = ["--reason", "asked by the user", "--allow-writes", "--yes"]


@pytest.fixture(scope="module")
def collection_template(pg_server: Any) -> Iterator[str]:
    """A database holding the collection, written once by mem0's own ``PGVector`` (HNSW
    index): each test copies it (``CREATE DATABASE ... TEMPLATE``)."""
    with new_database(pg_server) as url:
        write_collection(url).connection_pool.close()
        yield url.split("?")[0].rsplit("/", 1)[1]


@pytest.fixture
def m0_store(pg_server: Any, collection_template: str) -> Iterator[str]:
    """This test's copy of the collection, named with a password (scram-sha-256)."""
    name = f"{collection_template}_{next(COPIES)}"
    admin(pg_server, f'CREATE DATABASE "{name}" TEMPLATE "{collection_template}"')
    try:
        yield database_url(pg_server, name, f"{PASSWORD_USER}:{PASSWORD}")
    finally:
        admin(pg_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def opened(url: str, **options: Any) -> Any:
    return open_source(url, allow_writes=True, clock=fixed_clock, operator="tester", **options)


def ids(url: str) -> set[str]:
    return {str(i) for (i,) in sql(url, "SELECT id FROM memories")}


def table_bytes(source: Any, probe: bytes) -> int:
    """Occurrences of ``probe`` in the files of the collection's table (after a checkpoint)."""
    erasure = source.erasure()
    root, why = erasure.data_directory()
    assert root is not None, why
    source.pg.query("CHECKPOINT")
    return erasure.scan_files(root, erasure.store_tables, [probe])[probe]


def vector_bytes(text: str) -> bytes:
    values = embed(text)
    return struct.pack(f"={len(values)}f", *values)


def test_forget_one_memory_deletes_its_row_and_proves_it(m0_store):
    with opened(m0_store) as source:
        assert table_bytes(source, SECRET.encode()) >= 1  # data (and text_lemmatized)
        assert table_bytes(source, vector_bytes(SECRET)) == 2  # the heap and the HNSW index
        preview = source.forget_preview(record_id("paris"))
        assert preview["counts"] == {"rows": 1, "vectors": 1}
        outcome = source.forget(record_id("paris"), reason="asked")
        assert outcome.verified, outcome.checks
        assert {"row_gone", "text_gone", "statistics_gone", "bytes_gone"} <= set(outcome.checks)
        assert table_bytes(source, SECRET.encode()) == 0
        assert table_bytes(source, vector_bytes(SECRET)) == 0
        assert source.get(record_id("paris")) is None
    assert ids(m0_store) == {memory_id(n) for n, *_ in MEMORIES} - {memory_id("paris")}


def test_forget_scope_takes_one_user_and_leaves_the_others(m0_store):
    with opened(m0_store) as source:
        assert source.blast_radius(scope=("user_id", "alice")) == {"memory": {"memory": 3}}
        outcome = source.forget_scope(scope=("user_id", "alice"), reason="erasure request")
        assert outcome.verified, outcome.checks
        assert outcome.forgotten == 3
        assert source.facets()[0].scopes["user_id"].get("alice") is None
    left = ids(m0_store)
    assert left == {memory_id(n) for n, *_ in MEMORIES} - {memory_id(n) for n in ALICE}
    assert sql(m0_store, "SELECT count(*) FROM memories WHERE payload->>'user_id' = 'bob'") == [
        (3,)
    ]
    assert sql(m0_store, "SELECT count(*) FROM memories WHERE vector IS NULL") == [(0,)]


def test_forget_scope_of_an_agent_takes_it_across_users(m0_store):
    with opened(m0_store) as source:
        outcome = source.forget_scope(scope=("agent_id", "helper"), reason="r")
        assert outcome.verified and outcome.forgotten == 2
    assert memory_id("dark") not in ids(m0_store) and memory_id("coffee") not in ids(m0_store)
    assert memory_id("paris") in ids(m0_store)


def test_without_allow_writes_the_refusal_is_one_line_and_nothing_changes(m0_store):
    with open_source(m0_store, clock=fixed_clock) as source:
        for attempt in (
            lambda: source.forget(record_id("paris"), reason="r"),
            lambda: source.forget_scope(scope=("user_id", "alice"), reason="r"),
        ):
            with pytest.raises(SourceError) as raised:
                attempt()
            message = str(raised.value)
            assert "\n" not in message and "--allow-writes" in message
            assert PASSWORD not in message
    assert len(ids(m0_store)) == len(MEMORIES)


def test_the_audit_has_intent_before_outcome_and_no_password_or_text(m0_store):
    with opened(m0_store) as source:
        outcome = source.forget(record_id("paris"), reason="asked")
        audit_path = Path(source.audit_path)
        events = source.audit_events(limit=10)
    assert audit_path.is_relative_to(Path(os.environ["XDG_DATA_HOME"]) / "memtui" / "audit")
    assert outcome.intent_event_id is not None and outcome.intent_event_id < outcome.event_id
    by_id = {e["id"]: e for e in events}
    intent, final = by_id[outcome.intent_event_id], by_id[outcome.event_id]
    assert intent["action"] == "forget-intent" and final["action"] == "forget"
    assert final["details"]["intent_event"] == intent["id"]
    assert final["details"]["source"]["collection"] == "memories"
    assert final["details"]["erasure"]["bytes_gone"] is True
    assert any(step.startswith("VACUUM") for step in final["details"]["purge"])
    stored = b"".join(p.read_bytes() for p in audit_path.parent.iterdir())
    assert PASSWORD.encode() not in stored and SECRET.encode() not in stored
    assert PASSWORD not in json.dumps(events, default=str)


def test_a_copy_of_the_text_in_another_memory_is_named_and_not_verified(m0_store):
    sql(
        m0_store,
        "UPDATE memories SET payload = jsonb_set(payload, '{note}', to_jsonb(%s::text)) "
        "WHERE id = %s::uuid",
        [f"she said: {SECRET}!", memory_id("rome")],
    )
    with opened(m0_store) as source:
        outcome = source.forget(record_id("paris"), reason="r")
    assert not outcome.verified and outcome.checks["text_gone"] is False
    assert "still in 1 place(s) of the store's tables" in (outcome.remark or "")


def test_a_failure_mid_forget_rolls_everything_back(m0_store):
    sql(
        m0_store,
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF OLD.payload->>'data' LIKE 'works on%' THEN RAISE EXCEPTION 'kept'; END IF; "
        "RETURN OLD; END $$",
    )
    sql(
        m0_store,
        "CREATE TRIGGER keep BEFORE DELETE ON memories FOR EACH ROW EXECUTE FUNCTION refuse()",
    )
    with opened(m0_store) as source:
        with pytest.raises(SourceError, match="rolled back and nothing was changed") as raised:
            source.forget_scope(scope=("user_id", "alice"), reason="r")
        assert "\n" not in str(raised.value)
        actions = [e["action"] for e in source.audit_events(limit=5)]
    assert actions[:2] == ["forget-failed", "forget-intent"]
    assert len(ids(m0_store)) == len(MEMORIES)


def test_the_history_text_is_cleared_with_the_memory(m0_store, tmp_path):
    history = write_history(tmp_path / "history.db")
    with opened(m0_store, mem0_history=str(history)) as source:
        preview = source.forget_preview(record_id("dark"))
        assert preview["counts"]["history_rows"] == 2
        assert "history row(s) cleared" in preview["rule"]
        outcome = source.forget(record_id("dark"), reason="r")
        assert outcome.verified, outcome.checks
        assert outcome.checks["history_text_cleared"]
        assert outcome.checks["history.db_bytes_gone"]
        assert source.history is not None
        rows = source.history.rows(memory_id("dark"))
        assert [r.event for r in rows] == ["ADD", "UPDATE"] and not any(r.texts() for r in rows)
        assert source.history.rows(memory_id("paris"))[0].texts()  # another memory's stays
    data = history.read_bytes()
    assert b"prefers dark mode" not in data and b"prefers light mode" not in data
    assert b"Paris trip booked" in data


def test_the_keyword_index_purges_its_copy(m0_store):
    with opened(m0_store) as source:
        assert [r.id for r in source.search("Paris June").results][:1] == [record_id("paris")]
        source.forget(record_id("paris"), reason="r")
        assert source.search("Paris June").results == []
        index_file = Path(source.index.path)
    assert SECRET.encode() not in index_file.read_bytes()


def test_mem0_still_opens_lists_searches_and_inserts_after(m0_store):
    with opened(m0_store) as source:
        source.forget_scope(scope=("user_id", "alice"), reason="r")
    store = library(m0_store)
    try:
        assert store.get(memory_id("paris")) is None
        listed = store.list(filters={"user_id": "bob"}, top_k=10)
        assert {m.payload["data"] for m in listed[0]} >= {"drinks coffee black, no sugar"}
        found = store.search("coffee", embed("drinks coffee black, no sugar"), top_k=1)
        assert found[0].id == memory_id("coffee")
        new = memory_id("after")
        store.insert(
            vectors=[embed("a new memory")], payloads=[{"data": "a new memory"}], ids=[new]
        )
        assert store.get(new).payload["data"] == "a new memory"
        assert store.search("x", embed("a new memory"), top_k=1)[0].id == new
    finally:
        store.connection_pool.close()


def test_the_dialog_and_info_name_what_erasure_cannot_reach(m0_store):
    with opened(m0_store) as source:
        rule = source.forget_preview(record_id("paris"))["rule"]
        scope_rule = source.forget_scope_rule("user_id")
        notes = " ".join(source.summary().notes)
    for text in (rule, scope_rule, notes):
        assert "WAL segments" in text and "replicas" in text and "pg_dump" in text
    assert rule.startswith("The memory's row of memories") and rule.endswith(".")
    assert "Every memory whose user_id is this one" in scope_rule


def test_forget_and_forget_scope_through_the_cli(runner, m0_store):
    refused = runner.invoke(main, ["forget", m0_store, record_id("paris"), "--reason", "r"])
    assert refused.exit_code != 0 and "--allow-writes" in one_error_line(refused)
    result = runner.invoke(main, ["forget", m0_store, record_id("paris"), *FORGET])
    assert result.exit_code == 0, result.output
    assert "erasure verified" in result.output
    assert memory_id("paris") not in ids(m0_store)
    result = runner.invoke(main, ["forget-scope", m0_store, "--scope", "user_id=bob", *FORGET])
    assert result.exit_code == 0, result.output
    assert "3 records" in result.output and "erasure verified" in result.output
    assert not sql(m0_store, "SELECT id FROM memories WHERE payload->>'user_id' = 'bob'")
    assert memory_id("dark") in ids(m0_store)
    info = runner.invoke(main, ["info", m0_store])
    assert info.exit_code == 0 and "WAL segments" in info.output
    audit = runner.invoke(main, ["audit", m0_store])
    assert audit.exit_code == 0, audit.output
    for output in (refused.output, result.output, info.output, audit.output):
        assert PASSWORD not in output
