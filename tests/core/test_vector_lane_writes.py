"""The vector lane between two searches: a write to the file, by this store or by
another connection, is seen by the next search; the lane does not look its pool up
in the records table, so what it leaves to the engine (the dates) is read fresh.

Each test searches once (the matrix is cached and checked), writes, then searches
again and compares the lane with the row-by-row oracle and the results' dates with
the table's.
"""

import sqlite3
from datetime import timedelta

import numpy as np
import pytest
from conftest import NOW, fixed_clock, vector_pool_row_by_row

from memtui.core import vector_cache
from memtui.core.embed import HashEmbedder
from memtui.core.records import format_timestamp
from memtui.core.search import hybrid_search
from memtui.core.search import vector as vector_module
from memtui.core.search.vector import vector_lane
from memtui.core.store import MemoryStore, pack_vector

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()
DIM = 8


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(vector_cache.CACHE_DIR_ENV, str(folder))
    return folder


def _fill(store, n=80, seed=5):
    rng = np.random.default_rng(seed)
    return [
        store.add_record(
            tier="knowledge",
            record_type="note",
            content=" ".join(rng.choice(WORDS, size=int(rng.integers(1, 4)))),
        )
        for _ in range(n)
    ]


def assert_lane_is_the_oracle(store, query, pool_size=10):
    lane = vector_lane(store, query, None, pool_size)
    assert list(lane.raw.items()) == vector_pool_row_by_row(store, query, pool_size)
    return lane


def assert_dates_are_the_tables(store, response):
    for result in response.results:
        created, expires = store.query(
            "SELECT created_at, expires_at FROM records WHERE id = ?", (result.record_id,)
        )[0]
        assert (result.created_at, result.expires_at) == (created, expires)


def _other(store):
    return sqlite3.connect(store.path)


def _write_elsewhere(store, sql, params=()):
    conn = _other(store)
    try:
        conn.execute(sql, params)
        conn.commit()
    finally:
        conn.close()


# ---------------------------------------------------------------- another connection


CHANGES = {
    "deleted": ("DELETE FROM records WHERE id = ?", lambda top, _q: (top,)),
    "refuted": ("UPDATE records SET refuted = 1 WHERE id = ?", lambda top, _q: (top,)),
    "expired": (
        "UPDATE records SET expires_at = ? WHERE id = ?",
        lambda top, _q: (format_timestamp(NOW - timedelta(hours=1)), top),
    ),
    "expiry moved": (
        "UPDATE records SET expires_at = ? WHERE id = ?",
        lambda top, _q: (format_timestamp(NOW + timedelta(days=3)), top),
    ),
    "created moved": (
        "UPDATE records SET created_at = ? WHERE id = ?",
        lambda top, _q: (format_timestamp(NOW - timedelta(days=9)), top),
    ),
    "vector changed": (  # the opposite of the query: cosine -1
        "UPDATE vectors SET vector = ? WHERE record_id = ?",
        lambda top, query: (pack_vector([-x for x in query]), top),
    ),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_write_by_another_connection_is_seen_by_the_next_search(tmp_path, cache_dir, change):
    embedder = HashEmbedder(DIM)
    with MemoryStore(tmp_path / "m.db", clock=fixed_clock, embedder=embedder) as store:
        _fill(store)
        query = embedder.embed_one("alpha bravo")
        before = assert_lane_is_the_oracle(store, query)
        top = next(iter(before.raw))
        sql, params = CHANGES[change]
        _write_elsewhere(store, sql, params(top, query))
        after = assert_lane_is_the_oracle(store, query)
        if change in ("deleted", "refuted", "expired", "vector changed"):
            assert top not in after.raw
        else:
            assert top in after.raw
        response = hybrid_search(store, "alpha bravo", limit=20)
        assert_dates_are_the_tables(store, response)
        if change in ("expiry moved", "created moved"):
            found = {r.record_id: r for r in response.results}
            assert top in found and found[top].trace.vector.raw is not None


def test_a_vector_rewritten_on_the_stores_own_connection_is_seen(tmp_path, cache_dir):
    """A statement run on the store's connection outside its write transactions (no
    other connection's commit, no write serial): the next search still sees it."""
    embedder = HashEmbedder(DIM)
    with MemoryStore(tmp_path / "m.db", clock=fixed_clock, embedder=embedder) as store:
        ids = _fill(store)
        query = embedder.embed_one("kilo lima")
        before = assert_lane_is_the_oracle(store, query)
        outsider = next(i for i in ids if i not in before.raw)
        store.connection.execute(
            "UPDATE vectors SET vector = ? WHERE record_id = ?", (pack_vector(query), outsider)
        )
        store.connection.commit()
        after = assert_lane_is_the_oracle(store, query)
        assert after.raw[outsider] == pytest.approx(1.0)


def test_searches_in_a_row_check_the_matrix_once(tmp_path, cache_dir, monkeypatch):
    """Between two writes the matrix is checked by the first search only; a write (by
    another connection) makes the next search check it again."""
    embedder = HashEmbedder(DIM)
    with MemoryStore(tmp_path / "m.db", clock=fixed_clock, embedder=embedder) as store:
        ids = _fill(store)
        query = embedder.embed_one("golf")
        vector_lane(store, query, None, 10)
        checks = []
        identity = vector_cache.identity
        monkeypatch.setattr(vector_cache, "identity", lambda s: checks.append(1) or identity(s))
        for _ in range(3):
            vector_lane(store, query, None, 10)
        assert checks == []
        _write_elsewhere(store, "UPDATE records SET refuted = 1 WHERE id = ?", (ids[0],))
        vector_lane(store, query, None, 10)
        assert checks
        assert_lane_is_the_oracle(store, query)


def test_a_record_that_expires_between_two_searches_leaves_the_lane(tmp_path, cache_dir):
    embedder = HashEmbedder(DIM)
    now = [NOW]
    with MemoryStore(tmp_path / "m.db", clock=lambda: now[0], embedder=embedder) as store:
        _fill(store)
        query = embedder.embed_one("hotel india")
        top = next(iter(assert_lane_is_the_oracle(store, query).raw))
        later = format_timestamp(NOW + timedelta(minutes=5))
        _write_elsewhere(store, "UPDATE records SET expires_at = ? WHERE id = ?", (later, top))
        assert top in assert_lane_is_the_oracle(store, query).raw
        now[0] = NOW + timedelta(minutes=5)  # the boundary is strict: expired at its moment
        lane = assert_lane_is_the_oracle(store, query)
        assert top not in lane.raw and top in lane.dropped["expired"]
        assert top not in {r.record_id for r in hybrid_search(store, "hotel india").results}


# ---------------------------------------------------------------- files made by other means


@pytest.mark.parametrize("gap", [False, True])
def test_memtuis_schema_deletes_a_vector_with_its_record(tmp_path, cache_dir, gap):
    """memtui's own file is trusted: its pool is not looked up again, whether its
    record ids run without a gap (checked by their bounds) or not (read)."""
    with MemoryStore(tmp_path / "m.db", clock=fixed_clock, embedder=HashEmbedder(DIM)) as store:
        ids = _fill(store, n=5)
        if gap:
            _write_elsewhere(store, "DELETE FROM records WHERE id = ?", (ids[2],))
        assert vector_module._deletes_vectors_with_records(store)
        vector_lane(store, HashEmbedder(DIM).embed_one("alpha"), None, 10)
        assert vector_cache.load(store).rows_recorded is True


@pytest.mark.parametrize("where", ["past the last record", "in a gap between records"])
def test_a_vector_without_a_record_never_enters_the_pool(tmp_path, cache_dir, where):
    """A vector row whose record does not exist (a file written by other means): the
    lane confirms its pool, the row stays out, and a record added later with its id
    (its vector already there) is found."""
    embedder = HashEmbedder(DIM)
    with MemoryStore(tmp_path / "m.db", clock=fixed_clock, embedder=embedder) as store:
        ids = _fill(store)
        query = embedder.embed_one("echo foxtrot")
        orphan = max(ids) + 50
        if where == "in a gap between records":
            orphan = ids[40]
            _write_elsewhere(store, "DELETE FROM records WHERE id = ?", (orphan,))
        _write_elsewhere(
            store,
            "INSERT INTO vectors (record_id, vector) VALUES (?, ?)",
            (orphan, pack_vector(query)),
        )
        lane = assert_lane_is_the_oracle(store, query)
        assert orphan not in lane.raw and len(lane.raw) == 10
        assert vector_cache.load(store).rows_recorded is False
        _write_elsewhere(
            store,
            "INSERT INTO records (id, tier, record_type, content, created_at) "
            "VALUES (?, 'knowledge', 'note', 'late record', ?)",
            (orphan, format_timestamp(NOW)),
        )
        lane = assert_lane_is_the_oracle(store, query)
        assert lane.raw[orphan] == pytest.approx(1.0)


def test_without_the_trigger_a_deleted_records_vector_is_never_returned(tmp_path, cache_dir):
    """A file whose records table does not delete a record's vector with it: deleting a
    record leaves the vectors (and the matrix) unchanged, so the lane confirms its pool
    at each search."""
    embedder = HashEmbedder(DIM)
    with MemoryStore(tmp_path / "m.db", clock=fixed_clock, embedder=embedder) as store:
        _fill(store)
        _write_elsewhere(store, "DROP TRIGGER records_ad")
        assert not vector_module._deletes_vectors_with_records(store)
        query = embedder.embed_one("juliet")
        top = next(iter(assert_lane_is_the_oracle(store, query).raw))
        generation = store.vectors_generation()
        _write_elsewhere(store, "DELETE FROM records WHERE id = ?", (top,))
        assert store.vectors_generation() == generation  # the vector stayed
        lane = assert_lane_is_the_oracle(store, query)
        assert top not in lane.raw and len(lane.raw) == 10
        assert top not in {r.record_id for r in hybrid_search(store, "juliet").results}


def test_records_found_by_the_vector_lane_alone_come_with_the_tables_dates(tmp_path, cache_dir):
    """No keyword matches: every result comes from the vector lane, which reads no dates;
    the engine reads them, after a write that moved them."""
    embedder = HashEmbedder(DIM)
    with MemoryStore(tmp_path / "m.db", clock=fixed_clock, embedder=embedder) as store:
        _fill(store)
        first = hybrid_search(store, "zulu yankee", limit=5)
        assert first.trace.matched == 0 and first.results
        moved = format_timestamp(NOW - timedelta(days=2))
        _write_elsewhere(store, "UPDATE records SET created_at = ?", (moved,))
        response = hybrid_search(store, "zulu yankee", limit=5)
        assert [r.record_id for r in response.results] == [r.record_id for r in first.results]
        assert {r.created_at for r in response.results} == {moved}
        assert_dates_are_the_tables(store, response)
