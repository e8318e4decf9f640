"""Letta 0.11 SQLite: archives and tags as scopes, soft deletes, unpadded vectors, block history."""

from __future__ import annotations

import json
import sqlite3

import pytest
from fixtures.sources_support import CANARY, LETTA, copy_fixture, occurrences

from memtui.core.embed import HashEmbedder
from memtui.sources import SourceError, open_source
from memtui.sources.letta import LettaSource

P = "archival:passage-00000000-0000-4000-8000-00000000000"
HUMAN = "core:block-00000000-0000-4000-8000-000000000001"


@pytest.fixture
def letta(tmp_path):
    return copy_fixture(LETTA, tmp_path / "store", "sqlite.db")


def test_archives_and_tags_are_scopes(letta):
    with open_source(letta) as source:
        assert isinstance(source, LettaSource) and source.read_only
        facets = {f.tier: f for f in source.facets()}
        assert facets["archival"].scopes["archive"] == {"ops-runbooks": 1, "research-notes": 3}
        assert facets["archival"].scopes["tag"] == {"ops": 1, "project": 2, "travel": 1}
        assert facets["core"].scopes == {"label": {"human": 1, "persona": 1}}
        assert [r.id for r in source.page({"tag": "project"}).records] == [P + "1", P + "2"]
        assert [r.id for r in source.search("paris", filters={"tag": "travel"}).results] == [
            P + "2"
        ]
        assert source.search("paris", filters={"tag": "ops"}).results == []


def test_soft_deleted_passages_are_dimmed_hidden_and_an_erasure_gap(letta):
    with open_source(letta) as source:
        deleted = source.get(P + "4")
        assert deleted.state == "deleted"
        assert P + "4" not in {r.id for r in source.iter_records()}
        assert source.search("staging password").results == []
        assert source.search("staging password").trace.excluded["deleted"] == 1
        summary = source.summary()
        assert summary.counts["soft_deleted_passages"] == 1
        assert summary.notes[0].startswith("erasure gap: 1 soft-deleted passage")


def test_embeddings_are_unpadded_to_their_real_dimension(letta):
    with open_source(letta) as source:
        record = source.get(P + "1")
        assert record.metadata["embedding_dim"] == 8 and record.metadata["stored_dims"] == 4096
        assert all(len(blob) == 32 for blob in source.cache_vectors().values())
        response = source.search("compiler functional language", embedder=HashEmbedder(8))
        assert response.trace.fallback is None
        assert response.results[0].id == P + "1"
        wrong = source.search("compiler", embedder=HashEmbedder(16))
        assert wrong.trace.fallback == (
            "no embedder for these 8-dim vectors: hash-16 makes 16-dim vectors"
        )
        assert "vector" not in json.dumps(record.to_json()["metadata"]).replace("embedding", "")


def test_core_memory_blocks_show_their_history(letta):
    with open_source(letta) as source:
        block = source.get(HUMAN)
        assert block.tier == "core" and block.scope["label"] == "human"
        history = source.detail(HUMAN)[0]
        assert [r[0] for r in history.rows] == [1, 2, 3]
        assert history.rows[0][1] == "Name: Ada."


def test_forget_hard_deletes_one_passage_and_its_tags(letta):
    conn = sqlite3.connect(letta)
    conn.execute("UPDATE archival_passages SET is_deleted = 0 WHERE id LIKE '%4'")
    conn.commit()
    conn.close()
    assert occurrences(letta, CANARY)["word"] == 1
    with open_source(letta, allow_writes=True) as source:
        with pytest.raises(SourceError, match="core memory blocks"):
            source.forget(HUMAN, reason="r")
        outcome = source.forget(P + "4", reason="secret hint")
        assert outcome.verified and outcome.checks["bytes_gone"]
        assert source.get(P + "4") is None
        assert source.audit_events()[0]["details"]["tag_rows_removed"] == 2
    assert occurrences(letta, CANARY) == {"word": 0, "tail": 0}
    rows = (
        sqlite3.connect(letta)
        .execute("SELECT count(*) FROM passage_tags WHERE passage_id LIKE '%4'")
        .fetchone()
    )
    assert rows == (0,)


def test_forget_is_verified_when_a_live_passage_holds_the_same_text(letta):
    conn = sqlite3.connect(letta)
    conn.execute("UPDATE archival_passages SET is_deleted = 0 WHERE id LIKE '%4'")
    columns = [r[1] for r in conn.execute("PRAGMA table_info(archival_passages)")]
    copied = ", ".join("'passage-twin'" if c == "id" else f'"{c}"' for c in columns)
    conn.execute(
        f"INSERT INTO archival_passages SELECT {copied} FROM archival_passages WHERE id LIKE '%4'"
    )
    conn.commit()
    conn.close()
    assert occurrences(letta, CANARY)["word"] == 2
    with open_source(letta, allow_writes=True) as source:
        outcome = source.forget(P + "4", reason="secret hint")
        assert outcome.verified, outcome.problem
        assert source.get(P + "4") is None
        assert CANARY in source.get("archival:passage-twin").content
    assert occurrences(letta, CANARY)["word"] == 1


def test_each_lane_names_soft_deleted_passages_deleted(letta):
    with open_source(letta) as source:
        trace = source.search("staging password").trace
        assert trace.excluded_by_lane["keyword"] == {
            "deleted": 1,
            "expired": 0,
            "out_of_scope": 0,
        }
        with_vectors = source.search("staging password", embedder=HashEmbedder(8)).trace
        assert with_vectors.excluded_by_lane["vector"]["deleted"] == 1
        for counts in (trace, with_vectors):
            assert all("refuted" not in c for c in counts.excluded_by_lane.values())


def test_cli_search_says_deleted_in_each_lane(letta):
    from click.testing import CliRunner

    from memtui.cli import main

    result = CliRunner().invoke(main, ["search", str(letta), "staging"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "left out: deleted 1, expired 0, out of scope 0 (keyword lane: deleted 1;" in (
        result.output
    )
    assert "refuted" not in result.output


def _passage_bytes(path, pid):
    conn = sqlite3.connect(path)
    try:
        blob = conn.execute(
            "SELECT embedding FROM archival_passages WHERE id = ?", (pid,)
        ).fetchone()[0]
    finally:
        conn.close()
    return bytes(blob[:32])  # the real 8 dims; the rest is zero padding


def test_forget_gaps_erases_every_soft_deleted_passage(letta):
    """info names the gap and the command that clears it; forget-gaps clears it the way
    forget erases one passage: the row, its tags, freed pages purged, audited."""
    from click.testing import CliRunner
    from conftest import one_error_line
    from fixtures.sources_support import digest, file_bytes

    from memtui.cli import main

    pid = P[len("archival:") :] + "4"
    vector = _passage_bytes(letta, pid)
    assert occurrences(letta, CANARY)["word"] == 1 and vector in file_bytes(letta)
    runner = CliRunner()
    info = runner.invoke(main, ["info", str(letta)], env={"COLUMNS": "250"})
    assert "erasure gap: 1 soft-deleted passage(s)" in info.output
    assert "memtui forget-gaps PATH --allow-writes" in info.output
    line = one_error_line(runner.invoke(main, ["forget-gaps", str(letta), "--reason", "x"]))
    assert "pass --allow-writes to change it" in line
    untouched = digest(letta)
    refused = runner.invoke(main, ["forget-gaps", str(letta), "--reason", "x", "--allow-writes"])
    assert "Delete the 1 soft-deleted passage(s)" in refused.output
    assert "not confirmed; nothing was changed" in refused.output
    assert digest(letta) == untouched
    result = runner.invoke(
        main,
        ["forget-gaps", str(letta), "--reason", "clear soft deletes", "--allow-writes", "--yes"],
    )
    assert result.exit_code == 0, result.output
    assert result.output.strip() == (
        "deleted 1 soft-deleted passage(s) and 2 tag row(s): erasure verified "
        "(audit events #1 intent, #2 outcome)"
    )
    assert occurrences(letta, CANARY) == {"word": 0, "tail": 0}
    assert vector not in file_bytes(letta)
    conn = sqlite3.connect(letta)
    assert conn.execute("SELECT count(*) FROM archival_passages").fetchone() == (4,)
    assert conn.execute(
        "SELECT count(*) FROM passage_tags WHERE passage_id = ?", (pid,)
    ).fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM passage_tags").fetchone() == (4,)
    conn.close()
    with open_source(letta) as source:
        summary = source.summary()
        assert summary.counts["soft_deleted_passages"] == 0
        assert not any(n.startswith("erasure gap") for n in summary.notes)
        events = source.audit_events()
        assert [e["action"] for e in events] == ["forget", "forget-intent"]
        outcome, intent = events
        assert intent["status"] == "completed"
        assert intent["details"]["plan"] == {"passages": 1, "tag_rows": 2}
        details = outcome["details"]
        assert details["operation"] == "forget-gaps" and details["intent_event"] == intent["id"]
        assert details["passages_removed"] == 1 and details["tag_rows_removed"] == 2
        assert details["erasure"] == {
            "rows_gone": True,
            "tags_gone": True,
            "bytes_gone": True,
            "cache_gone": True,
        }
        assert outcome["record_ids"] == [P + "4"]
        assert CANARY not in json.dumps(events)
        assert source.verify_audit() is None
    again = runner.invoke(
        main, ["forget-gaps", str(letta), "--reason", "x", "--allow-writes", "--yes"]
    )
    assert again.exit_code == 0
    assert again.output.strip() == "no erasure gap: no soft-deleted passage is left on file"


def test_forget_gaps_purges_the_cached_copy_and_keeps_live_passages(letta, tmp_path):
    with open_source(letta, allow_writes=True) as source:
        source.search("staging password")  # builds the cache, which holds the passage
        cache = tmp_path / "cache" / "memtui" / "sources"
        assert any(CANARY.encode() in p.read_bytes() for p in cache.glob("letta-*.db*"))
        live = {r.id for r in source.iter_records()}
        with pytest.raises(SourceError, match="needs a reason|reason"):
            source.forget_gaps(reason="")
        outcome = source.forget_gaps(reason="clear soft deletes")
        assert outcome.verified and outcome.record_ids == (P + "4",)
        assert {r.id for r in source.iter_records(include_hidden=True)} == live
        assert source.get(P + "4") is None
        assert not any(CANARY.encode() in p.read_bytes() for p in cache.glob("letta-*.db*"))
        with pytest.raises(SourceError, match="no erasure gap"):
            source.forget_gaps(reason="again")
    with open_source(letta) as source, pytest.raises(SourceError, match="read-only"):
        source.forget_gaps(reason="r")
