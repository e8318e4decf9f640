"""mem0 stores (the committed fixture, written by mem0ai 2.2.1 itself): the history view,
the erasure-gap count, history discovery, forget with history clearing, forget-gaps,
mem0's expiry rule, and read-only opens that change no byte.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import fixed_clock, one_error_line
from fixtures.qdrant_support import MEM0_IDS, copy_mem0_store, tree_bytes

from memtui.cli import main
from memtui.core.embed import HashEmbedder
from memtui.sources import SourceError, open_source
from memtui.sources.mem0 import Mem0Source

STORAGE = Path("collection") / "mem0" / "storage.sqlite"
DELETED = (MEM0_IDS["berlin"], MEM0_IDS["old-phone"])
GAP_WORDS = (b"plumvexquor", b"glyptavonex")


@pytest.fixture(autouse=True)
def private_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MEM0_DIR", raising=False)
    monkeypatch.setenv("COLUMNS", "250")


@pytest.fixture
def mem0(tmp_path) -> Path:
    return copy_mem0_store(tmp_path / "store")


def history_of(folder: Path) -> Path:
    return folder.parent / "history.db"


def history_rows(path: Path) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT memory_id, event, old_memory, new_memory FROM history ORDER BY rowid"
        ).fetchall()
    finally:
        conn.close()


def test_a_mem0_store_is_recognized_with_its_history(mem0):
    with open_source(mem0, clock=fixed_clock) as source:
        assert isinstance(source, Mem0Source) and source.read_only
        assert source.history is not None and source.history.path == history_of(mem0)
        assert source.history.found == "next to the Qdrant folder"
        assert "history" in source.capabilities and "vectors" in source.capabilities
        live = [r.id for r in source.iter_records()]
        assert live == sorted(v for k, v in MEM0_IDS.items() if k not in ("berlin", "old-phone"))
        hotel = source.get(MEM0_IDS["hotel"])
        assert hotel.scope == {"user_id": "alice", "agent_id": "travel-bot", "run_id": "trip-42"}
        assert hotel.metadata["role"] == "user" and hotel.metadata["hash"]
        assert source.get(MEM0_IDS["allergy"]).metadata["metadata"] == {"category": "health"}
        facets = {f.tier: f for f in source.facets()}
        assert facets["memory"].scopes["agent_id"] == {"travel-bot": 3}
        assert [r.id for r in source.page({"run_id": "trip-42"}).records] == [MEM0_IDS["hotel"]]


def test_the_history_view_shows_add_update_delete(mem0):
    with open_source(mem0, clock=fixed_clock) as source:
        history = source.detail(MEM0_IDS["passport"])[0]
        assert history.title.startswith("mem0 history")
        assert [row[0] for row in history.rows] == ["ADD", "UPDATE"]
        assert history.rows[1][2].startswith("Alice keeps her passport code zqxjvortex")
        assert history.rows[1][3] == "Alice renewed her passport qwphlumbix in March"
        assert history.note == "2 of 2 history row(s) still hold text"
        deleted = source.get(MEM0_IDS["berlin"])
        assert deleted.state == "deleted"
        assert deleted.content == "Alice used to live in Berlin Mitte plumvexquor"
        assert deleted.metadata["history_events"] == ["ADD", "UPDATE", "DELETE"]
        rows = source.detail(MEM0_IDS["berlin"])[0].rows
        assert [r[0] for r in rows] == ["ADD", "UPDATE", "DELETE"]
        assert rows[2][2] == "Alice used to live in Berlin Mitte plumvexquor" and rows[2][6]
        assert source.notes(deleted).startswith("deleted by mem0: text still in history.db")
        assert source.notes(source.get(MEM0_IDS["passport"])) == "user · history: ADD UPDATE"


def test_the_summary_counts_the_erasure_gap_and_raw_messages(mem0):
    with open_source(mem0, clock=fixed_clock) as source:
        summary = source.summary()
        assert summary.counts["deleted_with_text"] == 2
        assert summary.counts["messages"] == 3
        assert summary.counts["earlier_versions"] == 1
        assert summary.notes[0].startswith(
            "erasure gap: 2 deleted memories still have text readable in history.db"
        )
        assert any("messages table holds 3 raw chat message(s)" in n for n in summary.notes)
        assert set(DELETED) == set(source.gap_ids())
        assert not {r.id for r in source.iter_records()} & set(DELETED)
        assert source.search("berlin").results == []
        assert source.search("berlin").trace.excluded["deleted"] == 1
    info = json.loads(CliRunner().invoke(main, ["info", str(mem0), "--json"]).output)
    assert info["counts"]["deleted_with_text"] == 2 and info["counts"]["messages"] == 3


def test_history_is_found_inside_via_mem0_dir_and_in_home(mem0, tmp_path, monkeypatch):
    history = history_of(mem0)
    inside = mem0 / "history.db"
    shutil.move(history, inside)
    with open_source(mem0) as source:
        assert source.history.found == "inside the Qdrant folder"
    for where, setup in (
        ("in $MEM0_DIR", lambda d: monkeypatch.setenv("MEM0_DIR", str(d))),
        ("in ~/.mem0", lambda d: None),
    ):
        home = tmp_path / "home" / ".mem0" if where == "in ~/.mem0" else tmp_path / "mem0dir"
        home.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(inside, home / "history.db")
        setup(home)
        moved = inside.with_name("elsewhere.sqlite")
        shutil.move(inside, moved)
        with open_source(mem0) as source:
            assert source.history.found == where, where
        shutil.move(moved, inside)
        monkeypatch.delenv("MEM0_DIR", raising=False)
        (home / "history.db").unlink()
    with open_source(mem0, mem0_history=inside) as source:
        assert source.history.found == "given with --mem0-history"


def test_a_history_that_shares_no_memory_id_is_not_accepted(mem0, tmp_path, monkeypatch):
    stranger = tmp_path / "other" / "history.db"
    stranger.parent.mkdir()
    conn = sqlite3.connect(stranger)
    conn.execute(
        "CREATE TABLE history (id TEXT PRIMARY KEY, memory_id TEXT, old_memory TEXT, "
        "new_memory TEXT, event TEXT, created_at DATETIME, updated_at DATETIME, "
        "is_deleted INTEGER, actor_id TEXT, role TEXT)"
    )
    conn.execute(
        "INSERT INTO history VALUES ('h1', 'm-1', NULL, 'someone else', 'ADD', '', '', 0, NULL, NULL)"
    )
    conn.commit()
    conn.close()
    with pytest.raises(SourceError, match="shares no memory id with collection mem0"):
        open_source(mem0, mem0_history=stranger)
    history_of(mem0).unlink()
    monkeypatch.setenv("MEM0_DIR", str(stranger.parent))
    with open_source(mem0) as source:
        assert source.history is None and "history" not in source.capabilities
        notes = source.summary().notes
        assert any("shares no memory id with this collection: ignored" in n for n in notes)
        assert source.detail(MEM0_IDS["seat"])[0].note.startswith("no history.db found")


def test_older_history_columns_are_read(mem0):
    history = history_of(mem0)
    conn = sqlite3.connect(history)
    conn.executescript(
        """
        CREATE TABLE old AS SELECT id, memory_id, old_memory AS prev_value,
            new_memory AS new_value, event, created_at AS timestamp, is_deleted FROM history;
        DROP TABLE history;
        ALTER TABLE old RENAME TO history;
        """
    )
    conn.close()
    with open_source(mem0) as source:
        assert source.history.columns["old_memory"] == "prev_value"
        assert source.history.columns["created_at"] == "timestamp"
        rows = source.detail(MEM0_IDS["passport"])[0].rows
        assert [r[0] for r in rows] == ["ADD", "UPDATE"]
        assert rows[1][3] == "Alice renewed her passport qwphlumbix in March"
        assert source.summary().counts["deleted_with_text"] == 2
    with open_source(mem0, allow_writes=True) as source:
        assert source.forget(MEM0_IDS["passport"], reason="r").verified


def test_forget_deletes_the_point_and_clears_every_history_row(mem0):
    storage, history = mem0 / STORAGE, history_of(mem0)
    before = history_rows(history)
    for word in (b"zqxjvortex", b"qwphlumbix"):
        assert word in history.read_bytes()  # the byte check can fail
    assert b"qwphlumbix" in storage.read_bytes()
    with open_source(mem0, clock=fixed_clock, allow_writes=True) as source:
        source.search("passport", embedder=HashEmbedder(8))
        preview = source.forget_preview(MEM0_IDS["passport"])
        assert preview["counts"] == {
            "points": 1,
            "history_rows": 2,
            "history_rows_with_text": 2,
            "messages_with_same_text": 0,
        }
        outcome = source.forget(MEM0_IDS["passport"], reason="user request", operator="ana")
        assert outcome.verified, outcome
        assert outcome.checks == {
            "point_gone": True,
            "history_text_cleared": True,
            "storage.sqlite_bytes_gone": True,
            "history.db_bytes_gone": True,
            "cache_gone": True,
        }
        assert source.get(MEM0_IDS["passport"]) is None
        events = source.audit_events()
        assert [e["action"] for e in events] == ["forget", "forget-intent"]
        assert events[1]["status"] == "completed"
        assert events[0]["details"]["history_rows_cleared"] == 2
        assert "passport" not in json.dumps(events)
    after = history_rows(history)
    assert len(after) == len(before)  # the events stay
    assert [r[:2] for r in after] == [r[:2] for r in before]
    assert [r for r in after if r[0] == MEM0_IDS["passport"][3:]] == [
        (MEM0_IDS["passport"][3:], "ADD", None, None),
        (MEM0_IDS["passport"][3:], "UPDATE", None, None),
    ]
    for word in (b"zqxjvortex", b"qwphlumbix", b"xjvortex", b"phlumbix"):
        assert word not in history.read_bytes()
        assert word not in storage.read_bytes()
    from qdrant_client import QdrantClient

    client = QdrantClient(path=str(mem0))
    try:
        assert client.count("mem0").count == 5
    finally:
        client.close()
    with open_source(mem0) as source:  # mem0 sees nothing of it either
        assert source.get(MEM0_IDS["passport"]) is None
        assert source.summary().counts["deleted_with_text"] == 2


def add_twin_memory(folder: Path, memory_id: str, twin: str) -> None:
    """Another memory with the same text, history and vector (what mem0 writes when the
    same fact is added for a second user)."""
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(folder))
    try:
        (point,) = client.retrieve("mem0", [memory_id], with_payload=True, with_vectors=True)
        payload = {**point.payload, "user_id": "bob"}
        client.upsert("mem0", [models.PointStruct(id=twin, vector=point.vector, payload=payload)])
    finally:
        client.close()
    conn = sqlite3.connect(history_of(folder))
    conn.execute(
        "INSERT INTO history (id, memory_id, old_memory, new_memory, event, created_at, "
        "updated_at, is_deleted, actor_id, role) SELECT id || '-twin', ?, old_memory, "
        "new_memory, event, created_at, updated_at, is_deleted, actor_id, role FROM history "
        "WHERE memory_id = ?",
        (twin, memory_id),
    )
    conn.commit()
    conn.close()


def test_forget_is_verified_when_a_live_memory_holds_the_same_text(mem0):
    twin = "00000000-0000-4000-8000-000000000099"
    add_twin_memory(mem0, MEM0_IDS["passport"][3:], twin)
    with open_source(mem0, clock=fixed_clock, allow_writes=True) as source:
        outcome = source.forget(MEM0_IDS["passport"], reason="user request", operator="ana")
        assert outcome.verified, outcome.problem
        assert outcome.checks["storage.sqlite_bytes_gone"] is True
        assert outcome.checks["history.db_bytes_gone"] is True
        assert source.get(MEM0_IDS["passport"]) is None
        assert "qwphlumbix" in source.get(f"qd:{twin}").content
    assert b"zqxjvortex" in history_of(mem0).read_bytes()  # the twin's own history


def test_forget_of_a_deleted_memory_clears_what_mem0_left(mem0):
    with open_source(mem0, clock=fixed_clock, allow_writes=True) as source:
        preview = source.forget_preview(MEM0_IDS["berlin"])
        assert preview["counts"]["points"] == 0 and preview["counts"]["history_rows"] == 3
        outcome = source.forget(MEM0_IDS["berlin"], reason="r", operator="ana")
        assert outcome.verified, outcome
        assert "point_gone" not in outcome.checks
        assert source.get(MEM0_IDS["berlin"]) is None
        assert source.summary().counts["deleted_with_text"] == 1
    assert b"plumvexquor" not in history_of(mem0).read_bytes()


def test_forget_gaps_clears_the_text_of_mems_own_deletes(mem0):
    history, storage = history_of(mem0), mem0 / STORAGE
    runner = CliRunner()
    line = one_error_line(runner.invoke(main, ["forget-gaps", str(mem0), "--reason", "r"]))
    assert "pass --allow-writes to change it" in line
    untouched = tree_bytes(mem0.parent)
    refused = runner.invoke(main, ["forget-gaps", str(mem0), "--reason", "r", "--allow-writes"])
    assert "not confirmed; nothing was changed" in refused.output
    assert tree_bytes(mem0.parent) == untouched
    for word in GAP_WORDS:
        assert word in history.read_bytes()
    result = runner.invoke(
        main,
        [
            "forget-gaps",
            str(mem0),
            "--reason",
            "erasure audit",
            "--allow-writes",
            "--yes",
            "--operator",
            "ana",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.output.strip() == (
        "cleared the text of 2 deleted memories (5 history rows): erasure verified "
        "(audit events #1 intent, #2 outcome)"
    )
    for word in GAP_WORDS:
        assert word not in history.read_bytes() and word not in storage.read_bytes()
    with open_source(mem0) as source:
        assert source.summary().counts["deleted_with_text"] == 0
        assert source.gap_ids() == []
        events = source.audit_events()
        assert [e["action"] for e in events] == ["forget", "forget-intent"]
        assert events[0]["details"]["operation"] == "forget-gaps"
        assert sorted(events[0]["record_ids"]) == sorted(DELETED)
        assert events[0]["details"]["verified"] is True and events[1]["status"] == "completed"
        assert source.verify_audit() is None
        assert len(source.page().records) == 6  # live memories untouched
    again = runner.invoke(
        main, ["forget-gaps", str(mem0), "--reason", "r", "--allow-writes", "--yes"]
    )
    assert "no erasure gap" in again.output


def test_forget_gaps_applies_to_mem0_only(tmp_path):
    from fixtures.qdrant_support import make_cyber_folder

    folder = make_cyber_folder(tmp_path / "q")
    line = one_error_line(
        CliRunner().invoke(
            main, ["forget-gaps", str(folder), "--reason", "r", "--allow-writes", "--yes"]
        )
    )
    assert "Cyber-AutoAgent memories (Qdrant) has no such gap" in line


def test_reading_a_mem0_store_changes_no_byte(mem0):
    before = tree_bytes(mem0.parent)
    with open_source(mem0, clock=fixed_clock) as source:
        source.summary()
        for record in source.iter_records(include_hidden=True):
            source.detail(record.id)
            source.forget_preview(record.id)
        source.search("lisbon hotel", embedder=HashEmbedder(8))
        with pytest.raises(SourceError, match="read-only"):
            source.forget_gaps(reason="r")
    assert tree_bytes(mem0.parent) == before


def test_mem0_expiry_and_a_server_with_its_history(mem0, tmp_path):
    """mem0 on a Qdrant server: the points through the client, the history from disk."""
    from qdrant_client import QdrantClient, models

    client = QdrantClient(":memory:")
    client.create_collection(
        "mem0", vectors_config=models.VectorParams(size=8, distance=models.Distance.COSINE)
    )
    embed = HashEmbedder(8)
    base = {"user_id": "alice", "hash": "h", "created_at": "2026-11-01T00:00:00+00:00"}
    client.upsert(
        "mem0",
        [
            models.PointStruct(
                id=MEM0_IDS["seat"][3:],
                vector=embed.embed_one("window seats"),
                payload={
                    **base,
                    "data": "Alice prefers window seats",
                    "expiration_date": "2026-11-30",
                },
            ),
            models.PointStruct(
                id=MEM0_IDS["allergy"][3:],
                vector=embed.embed_one("peanuts"),
                payload={
                    **base,
                    "data": "Alice is allergic to peanuts",
                    "expiration_date": "2026-11-29",
                },
            ),
        ],
    )
    with open_source(
        None, qdrant_client=client, mem0_history=history_of(mem0), now="2026-11-30T23:59:59Z"
    ) as source:
        assert isinstance(source, Mem0Source) and source.is_server
        assert source.get(MEM0_IDS["seat"]).state == "live"  # the date itself is live
        assert source.get(MEM0_IDS["allergy"]).state == "expired"
        assert [r.id for r in source.search("window").results] == [MEM0_IDS["seat"]]
        assert source.search("peanuts").trace.excluded["expired"] == 1
        assert "mem0 rule" in source.expiry_rule
        assert [r[0] for r in source.detail(MEM0_IDS["seat"])[0].rows] == ["ADD"]
    with open_source(None, qdrant_client=client, now="2026-12-01T00:00:00Z") as source:
        assert source.get(MEM0_IDS["seat"]).state == "expired"
        assert source.history is None  # none found: $HOME and $MEM0_DIR are empty here
    client.close()
