"""forget-scope on foreign stores: a mem0 user, a LangGraph namespace and what nests under
it, a Letta archive, a Cyber-AutoAgent operation and a plain Qdrant payload scope, each
with its blast radius, the store's own forget rule for every record, one purge and byte
check, and one intent and one outcome audit event; and the refusals, one line each.
"""

from __future__ import annotations

import sqlite3

import pytest
from click.testing import CliRunner
from conftest import fixed_clock, one_error_line
from fixtures.qdrant_support import OP_B, copy_mem0_store, make_cyber_folder, tree_bytes
from fixtures.sources_support import (
    LANGGRAPH_VECTORS,
    LETTA,
    PREFERENCES,
    copy_fixture,
    file_bytes,
)

from memtui.cli import main
from memtui.sources import SourceError, open_source


@pytest.fixture(autouse=True)
def private_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MEMTUI_NOW", "2026-11-30T12:00:00Z")
    monkeypatch.setenv("MEMTUI_OPERATOR", "tester")
    monkeypatch.delenv("MEM0_DIR", raising=False)
    monkeypatch.setenv("COLUMNS", "250")


def cli(*args: str, input: str | None = None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input)


def ids_of(source, **filters) -> list[str]:
    return [r.id for r in source.iter_records(filters or None, include_hidden=True)]


def outcome_events(source) -> list[dict]:
    return [e for e in source.audit_events() if e.get("details", {}).get("operation")]


# ---------------------------------------------------------------- mem0


def test_cli_forgets_a_mem0_user_and_their_history_text(tmp_path):
    folder = copy_mem0_store(tmp_path / "store")
    with open_source(folder, clock=fixed_clock) as source:
        alice = {r.id: r.content for r in source.iter_records({"user_id": "alice"})}
    assert len(alice) == 6  # every point of the fixture (the others are deleted memories)

    before = tree_bytes(folder.parent)
    asked = cli(
        "forget-scope",
        folder,
        "--scope",
        "user_id=alice",
        "--reason",
        "erasure request",
        "--allow-writes",
        input="n\n",
    )
    assert asked.exit_code == 1
    assert tree_bytes(folder.parent) == before
    assert "user_id 'alice': 6 records (memory/memory 6)" in asked.output
    assert "not confirmed; nothing was changed" in asked.output

    done = cli(
        "forget-scope",
        folder,
        "--scope",
        "user_id=alice",
        "--reason",
        "erasure request",
        "--allow-writes",
        "--yes",
    )
    assert done.exit_code == 0, done.output
    last = done.output.splitlines()[-1]
    assert last == (
        "forgot 6 records of user_id 'alice': erasure verified (audit events #1 intent, #2 outcome)"
    )
    with open_source(folder, clock=fixed_clock) as source:
        assert not set(alice) & set(ids_of(source))
        events = source.audit_events()
        assert [e["action"] for e in events] == ["forget", "forget-intent"]
        outcome = events[0]["details"]
        assert outcome["operation"] == "forget-scope"
        assert outcome["scope"] == {"user_id": "alice"}
        assert outcome["verified"] is True and outcome["count"] == 6
        assert sorted(events[0]["record_ids"]) == sorted(alice)
    history = sqlite3.connect(folder.parent / "history.db")
    try:
        kept = [
            t for row in history.execute("SELECT old_memory, new_memory FROM history") for t in row
        ]
    finally:
        history.close()
    assert not any(t and t in kept for t in alice.values())
    storage = folder / "collection" / "mem0" / "storage.sqlite"
    for text in alice.values():
        assert text.encode() not in file_bytes(storage)


def test_forget_scope_of_a_foreign_store_needs_allow_writes_and_changes_nothing(tmp_path):
    folder = copy_mem0_store(tmp_path / "store")
    before = tree_bytes(folder.parent)
    result = cli("forget-scope", folder, "--scope", "user_id=alice", "--reason", "r", "--yes")
    assert "pass --allow-writes" in one_error_line(result)
    assert tree_bytes(folder.parent) == before


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--scope", "namespace=x"], "by user_id, agent_id, run_id, not by 'namespace'"),
        (["--engagement", "acme"], "by user_id, agent_id, run_id, not by 'engagement'"),
        (["--scope", "user_id=nobody"], "user_id 'nobody' has no records to forget"),
        (["--scope", "user_id"], "--scope"),
        (["--scope", "user_id=alice", "--engagement", "e"], "not both"),
        ([], "name the scope to forget"),
    ],
)
def test_forget_scope_refuses_a_scope_the_store_does_not_have(tmp_path, args, says):
    folder = copy_mem0_store(tmp_path / "store")
    before = tree_bytes(folder.parent)
    result = cli("forget-scope", folder, *args, "--reason", "r", "--allow-writes", "--yes")
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert says in result.output
    assert tree_bytes(folder.parent) == before


def test_a_store_without_scopes_refuses_forget_scope(tmp_path):
    path = copy_fixture(PREFERENCES, tmp_path)
    before = path.read_bytes()
    result = cli(
        "forget-scope", path, "--scope", "session=s1", "--reason", "r", "--allow-writes", "--yes"
    )
    assert "forget-scope is not supported by" in one_error_line(result)
    assert path.read_bytes() == before


# ---------------------------------------------------------------- LangGraph


def test_a_langgraph_namespace_goes_with_what_nests_under_it(tmp_path):
    path = copy_fixture(LANGGRAPH_VECTORS, tmp_path)
    with open_source(path, clock=fixed_clock, allow_writes=True) as source:
        doomed = ids_of(source, namespace="memories.user-2")
        nested = ids_of(source, namespace="memories.user-2.notes")
        kept = sorted(set(ids_of(source)) - set(doomed))
        assert nested and set(nested) < set(doomed)
        assert source.blast_radius(scope=("namespace", "memories.user-2")) == {
            "memories": {"item": len(doomed)}
        }
        texts = [source.get(i).content for i in doomed]
        done = source.forget_scope(
            scope=("namespace", "memories.user-2"), reason="user left", operator="tester"
        )
        assert int(done) == len(doomed) and done.verified, done.problem
        assert sorted(done.removed) == sorted(doomed)
        assert sorted(ids_of(source)) == kept
        events = source.audit_events()
        assert [e["id"] for e in events] == [done.event_id, done.intent_event_id]
        assert events[1]["details"]["scope"] == {"namespace": "memories.user-2"}
    conn = sqlite3.connect(path)
    try:
        left = conn.execute(
            "SELECT count(*) FROM store_vectors WHERE prefix = 'memories.user-2' "
            "OR prefix LIKE 'memories.user-2.%'"
        ).fetchone()[0]
    finally:
        conn.close()
    assert left == 0
    for text in texts:
        assert text.encode() not in file_bytes(path)


# ---------------------------------------------------------------- Letta


def test_a_letta_archive_goes_passage_by_passage_and_core_blocks_stay(tmp_path):
    path = copy_fixture(LETTA, tmp_path)
    with open_source(path, clock=fixed_clock, allow_writes=True) as source:
        doomed = ids_of(source, archive="ops-runbooks")
        core = ids_of(source, tier="core")
        others = ids_of(source, archive="research-notes")
        assert any(source.get(i).state == "deleted" for i in doomed)  # soft-deleted go too
        done = source.forget_scope(scope=("archive", "ops-runbooks"), reason="agent retired")
        assert int(done) == len(doomed) and done.verified, done.problem
        assert ids_of(source, archive="ops-runbooks") == []
        assert ids_of(source, tier="core") == core
        assert ids_of(source, archive="research-notes") == others
        with pytest.raises(SourceError, match="by archive, tag, agent, not by 'label'"):
            source.blast_radius(scope=("label", "human"))
    conn = sqlite3.connect(path)
    try:
        tags = conn.execute(
            "SELECT count(*) FROM passage_tags WHERE archive_id = "
            "'archive-00000000-0000-4000-8000-00000000000b'"
        ).fetchone()[0]
    finally:
        conn.close()
    assert tags == 0


# ---------------------------------------------------------------- Qdrant


def test_a_cyber_autoagent_operation_goes_and_the_other_stays(tmp_path):
    folder = make_cyber_folder(tmp_path / "qdrant", web_cache=False)
    with open_source(folder, clock=fixed_clock, allow_writes=True) as source:
        doomed = ids_of(source, operation=OP_B)
        kept = sorted(set(ids_of(source)) - set(doomed))
        texts = [source.get(i).content for i in doomed]
        done = source.forget_scope(scope=("operation", OP_B), reason="operation closed")
        assert int(done) == len(doomed) == 5 and done.verified, done.problem
        assert sorted(ids_of(source)) == kept
    storage = folder / "collection" / "cyber_autoagent_memories" / "storage.sqlite"
    for text in texts:
        assert text.encode() not in file_bytes(storage)


def test_a_plain_qdrant_collection_forgets_a_payload_scope(tmp_path):
    from qdrant_client import QdrantClient, models

    folder = tmp_path / "plain"
    client = QdrantClient(path=str(folder))
    try:
        client.create_collection(
            "notes", vectors_config=models.VectorParams(size=4, distance=models.Distance.COSINE)
        )
        client.upsert(
            "notes",
            points=[
                models.PointStruct(
                    id=n,
                    vector=[1.0, float(n), 0.5, 0.25],
                    payload={"text": f"note number {n} of tenant {n % 2}", "tenant": n % 2},
                )
                for n in range(1, 7)
            ],
            wait=True,
        )
    finally:
        client.close()
    result = cli(
        "forget-scope",
        folder,
        "--scope",
        "tenant=1",
        "--reason",
        "offboarded",
        "--allow-writes",
        "--yes",
    )
    assert result.exit_code == 0, result.output
    assert "tenant '1': 3 records (points/point 3)" in result.output
    assert result.output.splitlines()[-1].startswith(
        "forgot 3 records of tenant '1': erasure verified"
    )
    with open_source(folder, clock=fixed_clock) as source:
        left = [source.get(i).metadata["payload"]["tenant"] for i in ids_of(source)]
    assert left == [0, 0, 0]
    for n in (1, 3, 5):
        assert f"note number {n} of".encode() not in file_bytes(
            folder / "collection" / "notes" / "storage.sqlite"
        )


def _attach(path, agent: str, name: str, archive_suffix: str) -> None:
    """An agent row and its link to an archive, as Letta's ORM writes them."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "INSERT OR IGNORE INTO agents (id, name, message_buffer_autoclear, is_deleted, "
            "organization_id) VALUES (?, ?, 0, 0, 'org-1')",
            (agent, name),
        )
        conn.execute(
            "INSERT INTO archives_agents (agent_id, archive_id, created_at, is_owner) "
            "VALUES (?, ?, '2026-11-30 12:00:00', 1)",
            (agent, f"archive-00000000-0000-4000-8000-00000000000{archive_suffix}"),
        )
    conn.close()


def test_a_letta_agents_passages_go_and_a_shared_archive_is_refused(tmp_path):
    path = copy_fixture(LETTA, tmp_path)
    _attach(path, "agent-ops", "ops-bot", "b")
    _attach(path, "agent-research", "research-bot", "a")
    _attach(path, "agent-helper", "helper-bot", "a")
    with open_source(path, clock=fixed_clock, allow_writes=True) as source:
        ops = ids_of(source, archive="ops-runbooks")
        assert source.blast_radius(scope=("agent", "ops-bot")) == {
            "archival": {"passage": len(ops)}
        }
        before = path.read_bytes()
        with pytest.raises(SourceError, match="attached to 1 other agent"):
            source.blast_radius(scope=("agent", "research-bot"))
        with pytest.raises(SourceError, match="attached to 1 other agent"):
            source.forget_scope(scope=("agent", "agent-research"), reason="r")
        assert path.read_bytes() == before
        done = source.forget_scope(scope=("agent", "ops-bot"), reason="agent retired")
        assert int(done) == len(ops) and done.verified, done.problem
        assert ids_of(source, archive="ops-runbooks") == []
        assert ids_of(source, archive="research-notes")
