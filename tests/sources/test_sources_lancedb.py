"""LanceDB databases (crewAI 1.x memory) on tables written by the real lancedb."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import fixed_clock
from fixtures.lancedb_support import (
    DIMS,
    content,
    copy_db,
    files_holding,
    make_crewai_db,
    memory_id,
    tree_digest,
)

from memtui.core.embed import HashEmbedder
from memtui.sources import SourceError, open_source
from memtui.sources.lancedb import INSTALL_HINT, TableChoiceError
from memtui.sources.lancedb import folder as lance_folder

lancedb = pytest.importorskip("lancedb")

FORGET_N = 3


@pytest.fixture(scope="session")
def template(tmp_path_factory) -> Path:
    return make_crewai_db(tmp_path_factory.mktemp("lance") / "memory")


@pytest.fixture
def db(template, tmp_path) -> Path:
    return copy_db(template, tmp_path / "memory")


def opened(path: Path, **kwargs):
    return open_source(path, clock=fixed_clock, cache_root=path.parent / "cache", **kwargs)


def test_crewai_rows_map_to_scope_categories_importance_and_utc_times(db):
    with opened(db) as source:
        assert source.kind == "lancedb" and source.table == "memories"
        record = source.get(f"lance:{memory_id(3)}")
        assert record is not None
        assert record.content == content(3)
        assert record.scope == {
            "scope": "/crew/research",
            "categories": ["deploy"],
            "source": "task",
        }
        assert record.created_at == "2026-11-04T10:03:00+00:00"
        assert record.metadata["importance"] == pytest.approx(0.503)
        assert record.metadata["metadata"] == {"agent": "agent-3"}
        assert len(source.page(limit=500).records) == 100
        assert [f.count for f in source.facets()] == [100]
        scoped = list(source.iter_records({"categories": "notes"}))
        assert len(scoped) == 50


def test_collection_picks_the_table_and_other_tables_show_their_columns(db):
    with opened(db, collection="docs") as source:
        assert source.text == "text" and source.vector == ("vector", 2)
        records = source.page().records
        assert [r.content for r in records] == [f"plain document {n}" for n in range(3)]
        assert records[0].metadata["columns"]["doc"] == "doc-0"
    with pytest.raises(SourceError, match="no LanceDB table 'nope'; its tables: docs, memories"):
        opened(db, collection="nope")


def test_several_tables_without_crewai_ask_for_one(tmp_path):
    db = lancedb.connect(str(tmp_path / "x"))
    db.create_table("a", [{"text": "one"}])
    db.create_table("b", [{"text": "two"}])
    with pytest.raises(TableChoiceError) as raised:
        opened(tmp_path / "x")
    assert [t.name for t in raised.value.collections] == ["a", "b"]
    assert "pick one with --collection NAME" in str(raised.value)


def test_without_pylance_the_folder_is_recognized_and_the_install_hint_shown(db, monkeypatch):
    monkeypatch.setattr(lance_folder, "lance_available", lambda: False)
    with pytest.raises(SourceError) as raised:
        opened(db)
    assert (
        str(raised.value) == f"this folder is a LanceDB database; reading it needs {INSTALL_HINT}"
    )


def test_reading_and_searching_change_no_byte_of_the_folder(db):
    before = tree_digest(db)
    with opened(db) as source:
        source.summary()
        list(source.iter_records(include_hidden=True))
        source.build_index()
        response = source.search("staging credential", embedder=HashEmbedder(DIMS))
        assert response.results
        with pytest.raises(SourceError, match="read-only"):
            source.forget(f"lance:{memory_id(FORGET_N)}", reason="test")
    assert tree_digest(db) == before


def test_the_vector_lane_runs_on_the_tables_own_vectors(db):
    with opened(db) as source:
        response = source.search("staging credential rotation", embedder=HashEmbedder(DIMS))
        assert response.trace.fallback is None
        top = response.results[0]
        assert top.trace.vector.raw is not None and top.trace.vector.normalized > 0
        assert top.score == pytest.approx(
            top.trace.weights["keyword"] * top.trace.keyword.normalized
            + top.trace.weights["vector"] * top.trace.vector.normalized
        )


def test_a_row_deleted_out_of_a_100_row_fragment_is_a_gap_until_forget_gaps(db):
    needle = content(FORGET_N).encode()
    lancedb.connect(str(db)).open_table("memories").delete(f"id = '{memory_id(FORGET_N)}'")
    assert files_holding(db / "memories.lance", needle)  # LanceDB's own delete keeps it
    with opened(db) as source:
        counts = source.summary().counts
        assert counts["deleted_rows_on_file"] == 1
        assert counts["deleted_rows_in_fragments"] == 1
        assert any("erasure gap: 1 deleted row" in n for n in source.summary().notes)
    with opened(db, allow_writes=True) as source:
        outcome = source.forget_gaps(reason="crewAI deleted it")
        assert outcome.verified, outcome.checks
        assert outcome.record_ids == (f"lance:{memory_id(FORGET_N)}",)
        assert "deleted_rows_on_file" not in source.summary().counts
        actions = [e["action"] for e in reversed(source.audit_events())]
        assert actions[-2:] == ["forget-intent", "forget"]
    assert not files_holding(db, needle)
    assert_lancedb_still_works(db, rows=99)


def assert_lancedb_still_works(db: Path, *, rows: int) -> None:
    table = lancedb.connect(str(db)).open_table("memories")
    assert table.count_rows() == rows
    from fixtures.lancedb_support import crewai_row

    odd = [9.0, -9.0] * (DIMS // 2)  # a vector no fixture row is near
    table.add([{**crewai_row(500, HashEmbedder(DIMS)), "id": "added-after", "vector": odd}])
    assert table.count_rows() == rows + 1
    hit = table.search(odd).limit(1).to_list()[0]
    assert hit["id"] == "added-after"


def test_forget_rewrites_the_fragment_and_removes_old_versions(db):
    needle = content(FORGET_N).encode()
    with opened(db, allow_writes=True) as source:
        source.build_index()
        outcome = source.forget(f"lance:{memory_id(FORGET_N)}", reason="asked to")
        assert outcome.verified, outcome.checks
        for check in ("rows_gone", "older_versions_gone", "no_deleted_rows_left", "bytes_gone"):
            assert outcome.checks[check] is True
        assert source.get(f"lance:{memory_id(FORGET_N)}") is None
        assert not source.search("zq0003x").results
        events = list(reversed(source.audit_events()))
        assert [e["action"] for e in events] == ["forget-intent", "forget"]
        assert events[1]["details"]["intent_event"] == events[0]["id"]
        audit_path = source.audit_path
        cache = source.index.path
    assert not files_holding(db, needle)
    assert needle not in audit_path.read_bytes()
    assert needle not in cache.read_bytes()
    assert_lancedb_still_works(db, rows=99)


def test_forget_scope_erases_every_row_of_the_scope(db):
    with opened(db, allow_writes=True) as source:
        outcome = source.forget_scope(scope=("scope", "/crew/ops"), reason="project closed")
        assert outcome.verified
        assert len(source.page(limit=500).records) == 50
    assert not files_holding(db, content(0).encode())
    assert_lancedb_still_works(db, rows=50)


def test_a_concurrent_writers_commit_conflict_is_retried_then_reported(tmp_path):
    from memtui.sources.lancedb import erasure

    tries: list[int] = []

    def conflicting_twice() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise OSError("Retryable commit conflict for version 7: another writer committed")
        return "done"

    assert (
        erasure._retried("deleting rows", tmp_path / "memories.lance", conflicting_twice) == "done"
    )
    assert len(tries) == 3

    def always() -> None:
        raise OSError("Commit conflict for version 7")

    with pytest.raises(SourceError, match="another writer kept committing"):
        erasure._retried("deleting rows", tmp_path / "memories.lance", always)

    def broken() -> None:
        raise OSError("disk full")

    with pytest.raises(SourceError, match="deleting rows in memories.lance failed: disk full"):
        erasure._retried("deleting rows", tmp_path / "memories.lance", broken)


def test_forget_gaps_preview_names_the_deleted_rows(db):
    lancedb.connect(str(db)).open_table("memories").delete(f"id = '{memory_id(FORGET_N)}'")
    with opened(db) as source:
        preview = source.forget_gaps_preview()
        assert preview["records"] == [f"lance:{memory_id(FORGET_N)}"]
        assert preview["counts"]["old_versions"] == 1


def test_a_table_without_an_id_column_forgets_by_row_id(db):
    with opened(db, collection="docs", allow_writes=True) as source:
        assert not source.can("forget_scope")
        record = next(r for r in source.page().records if r.content == "plain document 1")
        assert record.id.startswith("lance:")
        outcome = source.forget(record.id, reason="test")
        assert outcome.verified, outcome.checks
        assert [r.content for r in source.page().records] == [
            "plain document 0",
            "plain document 2",
        ]
    assert not files_holding(db / "docs.lance", b"plain document 1")


def _writer_row(n: int) -> dict:
    from fixtures.lancedb_support import crewai_row

    return {**crewai_row(n, HashEmbedder(DIMS)), "id": f"agent-{n}", "content": f"agent wrote {n}"}


def test_a_second_writer_committing_at_every_step_of_a_forget_loses_nothing(db, monkeypatch):
    """Another lancedb connection commits (appends, deletes) between memtui's opening of
    the table and its commit, at every step of the forget: the delete, the rewrite and
    the removal of old versions each meet a real concurrent commit."""
    from memtui.sources.lancedb import erasure

    agent = lancedb.connect(str(db)).open_table("memories")
    opened = erasure._dataset
    wrote: list[int] = []

    def raced(path: Path):
        dataset = opened(path)  # memtui's view of the table...
        n = 200 + len(wrote)
        agent.add([_writer_row(n)])  # ...then the agent commits before memtui does
        if len(wrote) == 1:
            agent.delete(f"id = '{memory_id(7)}'")  # the agent's own delete, mid-forget
        wrote.append(n)
        return dataset

    monkeypatch.setattr(erasure, "_dataset", raced)
    with opened_source(db) as source:
        outcome = source.forget(f"lance:{memory_id(FORGET_N)}", reason="asked to")
        monkeypatch.setattr(erasure, "_dataset", opened)
        assert outcome.verified, outcome.checks
        assert source.get(f"lance:{memory_id(FORGET_N)}") is None
    assert len(wrote) >= 3
    assert not files_holding(db, content(FORGET_N).encode())
    table = lancedb.connect(str(db)).open_table("memories")
    ids = set(table.to_arrow().column("id").to_pylist())
    assert {f"agent-{n}" for n in wrote} <= ids  # every row the agent wrote is there
    assert memory_id(FORGET_N) not in ids and memory_id(7) not in ids
    assert table.count_rows() == 98 + len(wrote)
    assert_lancedb_still_works(db, rows=98 + len(wrote))


def test_a_second_writer_in_a_thread_during_a_forget_loses_nothing(db):
    """An agent appending from another thread (its own connection) while memtui forgets."""
    import threading

    start = threading.Barrier(2)
    done = threading.Event()
    wrote: list[int] = []
    failed: list[BaseException] = []

    def agent() -> None:
        table = lancedb.connect(str(db)).open_table("memories")
        start.wait()
        while (not done.is_set() or len(wrote) < 3) and len(wrote) < 40 and len(failed) < 20:
            n = 300 + len(wrote)
            try:
                table.add([_writer_row(n)])
            except (OSError, RuntimeError) as exc:
                # Removing the old versions takes their transaction files, which a commit
                # racing it may need: the agent's add fails and is made again (lance's
                # own margin for this is 7 days, which a forget cannot keep).
                failed.append(exc)
                continue
            wrote.append(n)

    thread = threading.Thread(target=agent)
    thread.start()
    try:
        with opened_source(db) as source:
            start.wait()
            outcome = source.forget(f"lance:{memory_id(FORGET_N)}", reason="asked to")
    finally:
        done.set()
        thread.join()
    assert len(failed) < 20, failed
    assert all("Not found" in str(e) or "onflict" in str(e) for e in failed), failed
    assert outcome.verified, outcome.checks
    assert not files_holding(db, content(FORGET_N).encode())
    table = lancedb.connect(str(db)).open_table("memories")
    ids = set(table.to_arrow().column("id").to_pylist())
    assert {f"agent-{n}" for n in wrote} <= ids
    assert table.count_rows() == 99 + len(wrote)


def opened_source(db: Path):
    return opened(db, allow_writes=True)
