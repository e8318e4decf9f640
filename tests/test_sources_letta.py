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


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("MEMTUI_CACHE_DIR", raising=False)


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
        assert source.search("staging password").trace["excluded"]["deleted"] == 1
        summary = source.summary()
        assert summary.counts["soft_deleted_passages"] == 1
        assert summary.notes[0].startswith("erasure gap: 1 soft-deleted passage")


def test_embeddings_are_unpadded_to_their_real_dimension(letta):
    with open_source(letta) as source:
        record = source.get(P + "1")
        assert record.metadata["embedding_dim"] == 8 and record.metadata["stored_dims"] == 4096
        assert all(len(blob) == 32 for blob in source.cache_vectors().values())
        response = source.search("compiler functional language", embedder=HashEmbedder(8))
        assert response.trace["fallback"] is None
        assert response.results[0].id == P + "1"
        wrong = source.search("compiler", embedder=HashEmbedder(16))
        assert wrong.trace["fallback"] == (
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
