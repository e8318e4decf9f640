"""Stopping a search part-way, and following the build a first vector search waits for.

A real store, a real FTS5 statement: SQLite's progress handler polls the
``cancelled`` callable while the ranking runs, and the vector matrix build
polls it between chunks.
"""

from __future__ import annotations

import pytest
from conftest import fixed_clock

from memtui.core import index_db, vector_cache, vector_matrix
from memtui.core.cancel import Cancelled
from memtui.core.embed import HashEmbedder
from memtui.core.search import hybrid_search
from memtui.core.store import MemoryStore


@pytest.fixture
def store(tmp_path):
    with MemoryStore(tmp_path / "c.db", clock=fixed_clock, embedder=HashEmbedder(16)) as opened:
        for i in range(300):
            opened.add_record(
                tier="knowledge",
                record_type="note",
                content=f"gannet shag {'cormorant ' * (i % 7)}",
            )
        yield opened


class CallsUntil:
    """``cancelled`` that turns true on its n-th call, counting every call."""

    def __init__(self, n: int) -> None:
        self.n, self.calls = n, 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.calls >= self.n


def test_a_search_cancelled_before_it_starts_raises(store):
    with pytest.raises(Cancelled):
        hybrid_search(store, "gannet", cancelled=lambda: True)


def test_the_running_ranking_statement_is_stopped_and_the_store_goes_on(store, monkeypatch):
    monkeypatch.setattr(index_db, "PROGRESS_STEPS", 1)  # the handler looks at every step
    cancelled = CallsUntil(3)  # 1: before the keyword lane; 2, 3: inside the statement
    with pytest.raises(Cancelled):
        hybrid_search(store, "gannet", cancelled=cancelled)
    assert cancelled.calls == 4  # 4: the lane's error is the interruption, so: Cancelled
    # Only that statement stopped: the connection and its next search are fine.
    response = hybrid_search(store, "gannet cormorant", keyword_only=True)
    assert response.trace.matched == sum(1 for i in range(300) if i % 7)
    assert not response.trace.keyword_lane_error


def test_an_uncancelled_search_is_the_same_with_or_without_the_callable(store, monkeypatch):
    monkeypatch.setattr(index_db, "PROGRESS_STEPS", 1)
    plain = hybrid_search(store, "shag cormorant")
    watched = hybrid_search(store, "shag cormorant", cancelled=lambda: False)
    assert [(r.record_id, r.score) for r in watched.candidates] == [
        (r.record_id, r.score) for r in plain.candidates
    ]


@pytest.mark.parametrize("file_cache", [False, True])
def test_a_cancelled_matrix_build_leaves_nothing_behind(store, tmp_path, monkeypatch, file_cache):
    monkeypatch.setenv("MEMTUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(vector_cache, "BUILD_CHUNK", 64)
    if file_cache:
        monkeypatch.setattr(vector_cache, "FILE_CACHE_MIN_VECTORS", 0)
    cancelled = CallsUntil(3)  # two chunks read, then stopped
    with pytest.raises(Cancelled):
        vector_cache.load(store, cancelled)
    vector_cache.wait_for_writes()
    assert cancelled.calls == 3
    assert vector_matrix.HELD.get(store) is None
    folder = tmp_path / "cache"
    assert not folder.exists() or not any(folder.rglob("*.npy*"))
    built = vector_cache.load(store)  # the next search builds it whole
    assert len(built) == 300


def test_the_matrix_build_reports_its_progress_once(store, monkeypatch):
    monkeypatch.setattr(vector_cache, "BUILD_CHUNK", 64)
    steps: list[tuple[int, int]] = []
    first = hybrid_search(store, "gannet", vector_progress=lambda d, t: steps.append((d, t)))
    assert first.trace.pools["vector"].size == 100
    assert len(steps) == 5  # 300 vectors in chunks of 64
    assert [d for d, _t in steps] == sorted(d for d, _t in steps)
    assert steps[-1] == (300, 300) and {t for _d, t in steps} == {300}
    hybrid_search(store, "gannet", vector_progress=lambda d, t: steps.append((d, t)))
    assert len(steps) == 5  # the matrix is held: nothing is built again
