"""The cached vector matrix: same answers as row by row, stale after any vector write,
its forgotten rows zeroed (and the cache kept) on forget."""

import os
import sqlite3

import numpy as np
import pytest
from conftest import fixed_clock

from memtui.core import vector_cache, vector_files
from memtui.core.embed import HashEmbedder
from memtui.core.search import cosine, hybrid_search, min_max_normalize
from memtui.core.search.vector import vector_lane
from memtui.core.store import MemoryStore, pack_vector, unpack_vector

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(vector_cache.CACHE_DIR_ENV, str(folder))
    monkeypatch.setattr(vector_cache, "FILE_CACHE_MIN_VECTORS", 0)
    return folder


def _fill(store, n=120, seed=3):
    rng = np.random.default_rng(seed)
    ids = []
    for i in range(n):
        words = rng.choice(WORDS, size=int(rng.integers(1, 6)))
        ids.append(
            store.add_record(
                tier="knowledge" if i % 3 else "working",
                record_type="note",
                content=" ".join(words),
                engagement=f"e{i % 4}",
                expires_at="2026-11-29T00:00:00Z" if i % 11 == 0 else None,
            )
        )
    return ids


def reference_lane(store, query_vector, filters, pool_size):
    """The lane as it was computed row by row before the matrix (the oracle)."""
    where, params = store.scope_clause(dict(filters or {}), alias="r")
    rows = store.query(
        "SELECT v.record_id, v.vector FROM vectors AS v JOIN records AS r ON r.id = v.record_id "
        f"WHERE {where}",
        params,
    )
    scored = []
    for record_id, blob in rows:
        similarity = cosine(query_vector, unpack_vector(blob))
        if similarity > 0:
            scored.append((record_id, similarity))
    scored.sort(key=lambda item: (-item[1], item[0]))
    return scored[:pool_size]


@pytest.mark.parametrize("use_file", [False, True])
@pytest.mark.parametrize("filters", [None, {"engagement": "e1"}, {"tier": "working"}])
@pytest.mark.parametrize("pool_size", [1, 7, 100])
def test_the_matrix_lane_equals_the_row_by_row_lane(
    tmp_path, monkeypatch, use_file, filters, pool_size
):
    monkeypatch.setenv(vector_cache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(vector_cache, "FILE_CACHE_MIN_VECTORS", 0 if use_file else 10**9)
    embedder = HashEmbedder(32)  # few buckets: many exact ties
    with MemoryStore(tmp_path / "m.db", clock=fixed_clock, embedder=embedder) as store:
        ids = _fill(store)  # every eleventh note has expired: hidden from the lane
        for query in ("alpha", "bravo charlie", "golf golf hotel", "kilo lima alpha echo"):
            vector = embedder([query])[0]
            lane = vector_lane(store, vector, filters, pool_size)
            expected = reference_lane(store, vector, filters, pool_size)
            assert list(lane.raw.items()) == expected  # same ids, order and float values
            scores = list(lane.raw.values())
            assert list(lane.normalized.values()) == min_max_normalize(scores)
            if scores:
                assert (lane.pool.min, lane.pool.max) == (min(scores), max(scores))
        vector_cache.wait_for_writes()  # a big store's file is written in the background
        cached = vector_cache.load(store)
        assert cached.source == ("file" if use_file else "memory")
        assert len(cached) == len(ids)


def test_results_are_the_same_with_and_without_the_file_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(vector_cache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    path = tmp_path / "same.db"
    with MemoryStore(path, clock=fixed_clock, embedder=HashEmbedder(64)) as store:
        _fill(store, 80)
    answers = []
    for minimum in (10**9, 0):
        monkeypatch.setattr(vector_cache, "FILE_CACHE_MIN_VECTORS", minimum)
        with MemoryStore(path, clock=fixed_clock, read_only=True) as store:
            response = hybrid_search(store, "delta echo foxtrot", limit=50)
            answers.append([(r.record_id, r.score, r.trace) for r in response.candidates])
            vector_cache.wait_for_writes()
            again = hybrid_search(store, "delta echo foxtrot", limit=50)  # from the file now
            assert [(r.record_id, r.score) for r in again.candidates] == [
                (r.record_id, r.score) for r in response.candidates
            ]
    assert answers[0] == answers[1]
    assert list((tmp_path / "cache" / "vectors").glob("vectors-*.f32.npy"))


QUERIES = (
    "alpha",
    "bravo charlie",
    "golf golf hotel",
    "kilo lima alpha echo",
    "zanzibar quokka marmalade alpha",
)


@pytest.fixture
def builds(monkeypatch):
    """Every matrix built from the database (not loaded, not carried over), by store."""
    calls = []
    real = vector_cache._read_vectors

    def counting(store, *args):
        calls.append(store)
        return real(store, *args)

    monkeypatch.setattr(vector_cache, "_read_vectors", counting)
    return calls


def lanes(store, embedder, filters=None, pool_size=100):
    return [
        list(vector_lane(store, embedder([q])[0], filters, pool_size).raw.items()) for q in QUERIES
    ]


def rebuilt_lanes(store, embedder, monkeypatch, folder, filters=None):
    """The same lanes from a matrix built afresh from the database (another cache folder)."""
    before = os.environ[vector_cache.CACHE_DIR_ENV]
    monkeypatch.setenv(vector_cache.CACHE_DIR_ENV, str(folder))
    try:
        with MemoryStore(store.path, clock=fixed_clock, read_only=True) as other:
            got = lanes(other, embedder, filters)
            assert vector_cache.load(other).removed is None  # built, not carried over
            vector_cache.wait_for_writes()
    finally:
        monkeypatch.setenv(vector_cache.CACHE_DIR_ENV, before)
    return got


def files_holding(folder, data):
    return [p.name for p in sorted(folder.rglob("*")) if p.is_file() and data in p.read_bytes()]


def test_forget_zeroes_the_row_and_the_next_search_needs_no_rebuild(
    cache_dir, db_path, builds, monkeypatch, tmp_path
):
    embedder = HashEmbedder(64)
    with MemoryStore(db_path, clock=fixed_clock, embedder=embedder) as store:
        _fill(store, 30)
        victim = store.add_record(
            tier="working", record_type="note", content="zanzibar quokka marmalade alpha"
        )
        _fill(store, 30, seed=4)
        hybrid_search(store, "alpha")  # builds the cache; its file is written in the background
        vector_cache.wait_for_writes()
        files = vector_cache.cache_files(store)
        assert any(p.name.endswith(".f32.npy") for p in files)
        victim_vector = np.asarray(store.vector_of(victim), dtype=np.float32)
        victim_bytes = pack_vector(victim_vector.tolist())
        matrix = next(p for p in files if p.name.endswith(".f32.npy"))
        norms = next(p for p in files if p.name.endswith(".norms.npy"))
        keep = cache_dir / "hardlink.npy"  # sees the blocks the cache file has
        os.link(matrix, keep)
        row = vector_cache.load(store).ids.tolist().index(victim)
        assert np.array_equal(np.load(keep)[row], victim_vector) and victim_vector.any()
        assert files_holding(cache_dir, victim_bytes)  # the test must see the bytes first
        assert victim in dict(lanes(store, embedder)[-1])
        built = len(builds)

        assert store.forget(victim, reason="test") is True
        assert files_holding(cache_dir, victim_bytes) == []  # in no cache file, link included
        left = np.load(keep)
        assert not left[row].any()  # the row was zeroed in the file the cache maps
        assert left[row + 1].any()  # and only that row
        assert np.load(norms)[row] == 0
        assert matrix.exists()  # the same matrix file stays in use
        event = store.audit_events()[0]
        assert event["details"]["erasure"]["vector_cache_erased"] is True

        after = lanes(store, embedder)
        cached = vector_cache.load(store)
        assert len(builds) == built  # carried over: no rebuild
        assert cached.identity == vector_cache.identity(store)
        assert cached.removed.tolist() == [row]
        assert victim not in cached.live_ids().tolist()
        assert not (np.asarray(cached.matrix) == victim_vector).all(axis=1).any()
        assert all(victim not in dict(lane) for lane in after)
        assert after == rebuilt_lanes(store, embedder, monkeypatch, tmp_path / "fresh")
        for filters in ({"engagement": "e1"}, {"tier": "working"}):
            assert lanes(store, embedder, filters) == rebuilt_lanes(
                store, embedder, monkeypatch, tmp_path / "fresh", filters
            )
        for query in QUERIES:  # and the row-by-row oracle
            vector = embedder([query])[0]
            assert list(vector_lane(store, vector, None, 100).raw.items()) == reference_lane(
                store, vector, None, 100
            )

    built = len(builds)
    with MemoryStore(db_path, clock=fixed_clock, read_only=True) as reader:  # a later process
        assert lanes(reader, embedder) == after
        loaded = vector_cache.load(reader)
        assert loaded.source == "file" and loaded.removed.tolist() == [row]
    assert len(builds) == built  # it maps the carried-over file


def test_forget_without_a_cache_file_keeps_the_erasure_record_unchanged(cache_dir, db_path):
    with MemoryStore(db_path, clock=fixed_clock, embedder=HashEmbedder(64)) as store:
        ids = _fill(store, 10)
        assert store.forget(ids[0], reason="test") is True
        assert set(store.audit_events()[0]["details"]["erasure"]) == {
            "row_gone",
            "index_gone",
            "vector_gone",
        }


def test_forget_scope_keeps_the_cache_without_the_scope(
    cache_dir, db_path, builds, monkeypatch, tmp_path
):
    embedder = HashEmbedder(64)
    with MemoryStore(db_path, clock=fixed_clock, embedder=embedder) as store:
        ids = _fill(store, 40)
        doomed = ids[2::4]  # engagement e2
        hybrid_search(store, "alpha")
        vector_cache.wait_for_writes()
        assert vector_cache.cache_files(store)
        kept = {pack_vector(store.vector_of(i)) for i in ids if i not in doomed}
        payloads = {pack_vector(store.vector_of(i)) for i in doomed} - kept  # same words: same
        assert len(payloads) >= 5 and all(files_holding(cache_dir, p) for p in payloads)
        built = len(builds)
        steps = []
        count = store.forget_scope(
            engagement="e2", reason="contract ended", progress=lambda d, t: steps.append((d, t))
        )
        assert count == 10
        assert steps[-1] == (20, 20) and all(t == 20 for _, t in steps)
        assert [d for d, _ in steps] == sorted(d for d, _ in steps)
        assert store.audit_events()[0]["details"]["erasure"]["vector_cache_erased"] is True
        assert [files_holding(cache_dir, p) for p in payloads] == [[] for _ in payloads]

        cached = vector_cache.load(store)
        after = lanes(store, embedder)
        assert len(builds) == built  # no rebuild
        left = cached.live_ids().tolist()
        assert left == [r[0] for r in store.query("SELECT id FROM records ORDER BY id")]
        assert len(left) == 30 and len(cached.removed) == 10
        assert not set(doomed) & {i for lane in after for i, _ in lane}
        assert after == rebuilt_lanes(store, embedder, monkeypatch, tmp_path / "fresh")
        assert lanes(store, embedder, {"engagement": "e2"}) == [[]] * len(QUERIES)


def test_forgets_in_a_row_accumulate_the_removed_rows(cache_dir, db_path, builds):
    embedder = HashEmbedder(64)
    with MemoryStore(db_path, clock=fixed_clock, embedder=embedder) as store:
        ids = _fill(store, 30)
        vector_cache.load(store)
        vector_cache.wait_for_writes()
        for victim in (ids[3], ids[-1], ids[0]):  # ids[-1]: the highest vector id changes
            store.forget(victim, reason="test")
            lanes(store, embedder)
        assert len(builds) == 1
        expected = lanes(store, embedder)
        assert len(vector_cache.cache_files(store)) == 5  # matrix, ids, norms, removed, sidecar
    with MemoryStore(db_path, clock=fixed_clock, read_only=True) as reader:
        loaded = vector_cache.load(reader)
        assert loaded.removed.tolist() == [0, 3, 29]
        assert lanes(reader, embedder) == expected
    assert len(builds) == 1


def test_a_memory_copy_is_zeroed_in_place_and_kept(tmp_path, monkeypatch, builds):
    monkeypatch.setenv(vector_cache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(vector_cache, "FILE_CACHE_MIN_VECTORS", 10**9)
    embedder = HashEmbedder(64)
    with MemoryStore(tmp_path / "m.db", clock=fixed_clock, embedder=embedder) as store:
        ids = _fill(store, 25)
        held = vector_cache.load(store)
        assert held.source == "memory"
        vector_lane(store, embedder(["alpha"])[0], None, 10)  # the lane's per-row sums
        matrix = held.matrix
        row = held.ids.tolist().index(ids[7])
        assert matrix[row].any() and held.squares[row] > 0
        store.forget(ids[7], reason="test")
        assert not matrix[row].any()  # the very array this process holds
        assert held.norms[row] == 0 and held.squares[row] == 0  # and what it keeps of it
        assert vector_cache.load(store) is held and len(builds) == 1
        assert ids[7] not in held.live_ids().tolist()
        assert not (tmp_path / "cache").exists()


def test_the_vector_lane_never_returns_a_removed_row(cache_dir, db_path):
    embedder = HashEmbedder(64)
    with MemoryStore(db_path, clock=fixed_clock, embedder=embedder) as store:
        _fill(store, 30)
        vector = embedder(["alpha bravo"])[0]
        first = next(iter(vector_lane(store, vector, None, 10).raw))
        cached = vector_cache.load(store)
        row = cached.ids.tolist().index(first)
        assert cached.matrix[row].any()
        cached.removed = np.array([row])  # even with its values still there
        assert first not in vector_lane(store, vector, None, 10).raw


def test_a_forget_does_not_carry_over_a_stale_cache(cache_dir, db_path, builds):
    with MemoryStore(db_path, clock=fixed_clock, embedder=HashEmbedder(64)) as store:
        ids = _fill(store, 30)
        vector_cache.load(store)
        vector_cache.wait_for_writes()
        other = sqlite3.connect(db_path)  # a vector written behind the cache's back
        other.execute(
            "UPDATE vectors SET vector = ? WHERE record_id = ?", (pack_vector([0.5] * 64), ids[5])
        )
        other.commit()
        other.close()
        store.forget(ids[0], reason="test")
        assert store.audit_events()[0]["details"]["erasure"]["vector_cache_erased"] is True
        assert vector_cache.cache_files(store) == []  # stale: dropped, as before
        cached = vector_cache.load(store)
        assert len(builds) == 2  # rebuilt
        assert cached.matrix[cached.ids.tolist().index(ids[5])].tolist() == [0.5] * 64
        assert ids[0] not in cached.ids.tolist()


def test_a_forget_that_rolls_back_leaves_no_zeroed_row_trusted(cache_dir, db_path, builds):
    embedder = HashEmbedder(64)
    with MemoryStore(db_path, clock=fixed_clock, embedder=embedder) as store:
        _fill(store, 30)
        victim = store.add_record(
            tier="working", record_type="note", content="zanzibar quokka marmalade alpha"
        )
        assert victim in dict(lanes(store, embedder)[-1])
        vector_cache.wait_for_writes()
        held = vector_cache.load(store)  # as a search running meanwhile would hold it
        real = store._append_audit

        def failing(**kwargs):
            raise RuntimeError("disk full")

        store._append_audit = failing
        with pytest.raises(RuntimeError):
            store.forget(victim, reason="test")
        store._append_audit = real
        assert store.get(victim) is not None
        assert held.identity != vector_cache.identity(store)  # its zeroed row: not trusted
        assert victim in dict(lanes(store, embedder)[-1])  # rebuilt with it, not a zero row
        assert len(builds) == 2


def test_a_copy_published_while_the_forget_commits_is_zeroed_too(
    cache_dir, db_path, builds, monkeypatch
):
    embedder = HashEmbedder(64)
    with MemoryStore(db_path, clock=fixed_clock, embedder=embedder) as store:
        ids = _fill(store, 30)
        vector_cache.load(store)
        vector_cache.wait_for_writes()
        folder = cache_dir / "vectors"
        snapshot = {p.name: p.read_bytes() for p in folder.iterdir()}
        payload = pack_vector(store.vector_of(ids[6]))
        assert any(payload in data for data in snapshot.values())
        real = vector_cache.erase

        def erase_then_another_process_publishes(store, forgotten, before):
            done = real(store, forgotten, before)
            for name, data in snapshot.items():  # its own build of the database before the forget
                fresh = folder / f"{name}.other"
                fresh.write_bytes(data)
                os.replace(fresh, folder / name)
            return done

        monkeypatch.setattr(vector_cache, "erase", erase_then_another_process_publishes)
        assert store.forget(ids[6], reason="test") is True
        assert files_holding(cache_dir, payload) == []
        expected = lanes(store, embedder)
    with MemoryStore(db_path, clock=fixed_clock, read_only=True) as reader:
        assert lanes(reader, embedder) == expected
        assert ids[6] not in vector_cache.load(reader).live_ids().tolist()
    assert len(builds) == 1


def test_a_crash_before_the_carry_over_rebuilds(cache_dir, db_path, builds, monkeypatch):
    embedder = HashEmbedder(64)
    with MemoryStore(db_path, clock=fixed_clock, embedder=embedder) as store:
        ids = _fill(store, 30)
        lanes(store, embedder)
        vector_cache.wait_for_writes()
        payload = pack_vector(store.vector_of(ids[4]))
        monkeypatch.setattr(vector_cache, "carry_over", lambda store, erasure: False)
        store.forget(ids[4], reason="test")  # as if the process died right after the commit
        assert files_holding(cache_dir, payload) == []  # zeroed before the commit
        assert not list((cache_dir / "vectors").glob("*.json"))  # nothing trusts the files
    with MemoryStore(db_path, clock=fixed_clock, read_only=True) as reader:
        cached = vector_cache.load(reader)
        assert len(builds) == 2 and cached.removed is None
        assert ids[4] not in cached.ids.tolist()


def test_other_vector_writes_after_a_forget_still_rebuild(cache_dir, db_path, builds):
    embedder = HashEmbedder(64)
    with MemoryStore(db_path, clock=fixed_clock, embedder=embedder) as store:
        ids = _fill(store, 30)
        vector_cache.load(store)
        store.forget(ids[1], reason="test")
        vector_cache.load(store)
        assert len(builds) == 1
        new = store.add_record(tier="knowledge", record_type="note", content="zulu yankee")
        assert new in vector_cache.load(store).ids.tolist() and len(builds) == 2
        store.forget(ids[2], reason="test")
        store.ingest([{"tier": "knowledge", "record_type": "note", "content": "x y"}])
        assert len(vector_cache.load(store)) == 30 and len(builds) == 3
        store.forget(ids[3], reason="test")
        store.reindex_vectors(embedder)
        assert vector_cache.load(store).removed is None and len(builds) == 4


def test_every_vector_write_makes_the_cache_stale(cache_dir, db_path):
    with MemoryStore(db_path, clock=fixed_clock, embedder=HashEmbedder(64)) as store:
        _fill(store, 20)
        first = vector_cache.load(store)
        assert vector_cache.load(store) is first  # current: reused
        generation = store.vectors_generation()
        new = store.add_record(tier="knowledge", record_type="note", content="zulu yankee")
        assert store.vectors_generation() == generation + 1
        second = vector_cache.load(store)
        assert second is not first and new in second.ids.tolist()
        vector_cache.wait_for_writes()
        assert len(vector_cache.cache_files(store)) == 4  # the stale files are gone
        # an ingest bumps the generation once, however many rows it loads
        before = store.vectors_generation()
        store.ingest(
            [{"tier": "knowledge", "record_type": "note", "content": f"x{i}"} for i in range(50)]
        )
        assert store.vectors_generation() == before + 1
        assert len(vector_cache.load(store)) == 71
        # another connection writing a vector is seen too (a trigger bumps the counter)
        other = sqlite3.connect(db_path)
        other.execute(
            "UPDATE vectors SET vector = ? WHERE record_id = ?", (pack_vector([0.0] * 64), new)
        )
        other.commit()
        other.close()
        third = vector_cache.load(store)
        row = third.ids.tolist().index(new)
        assert not third.matrix[row].any()


def test_reindex_makes_the_cache_stale_and_drops_the_old_files(cache_dir, db_path):
    with MemoryStore(db_path, clock=fixed_clock, embedder=HashEmbedder(64)) as store:
        _fill(store, 20)
        old = vector_cache.load(store)
        vector_cache.wait_for_writes()
        old_files = vector_cache.cache_files(store)
        store.reindex_vectors(HashEmbedder(32))
        assert not any(p.exists() for p in old_files)
        new = vector_cache.load(store)
        assert new.dim == 32 and old.dim == 64
        assert hybrid_search(store, "alpha", embedder=HashEmbedder(32)).trace.fallback is None
        store.reindex_vectors(None)
        assert vector_cache.load(store) is None


def test_a_stale_file_from_another_process_is_deleted_and_rebuilt(cache_dir, db_path):
    with MemoryStore(db_path, clock=fixed_clock, embedder=HashEmbedder(64)) as store:
        _fill(store, 20)
    with MemoryStore(db_path, clock=fixed_clock, read_only=True) as reader:
        built = vector_cache.load(reader)  # a read-only open builds and keeps the cache too
        vector_cache.wait_for_writes()
        assert built.source == "file"
        stale = vector_cache.cache_files(reader)
    with MemoryStore(db_path, clock=fixed_clock, embedder=HashEmbedder(64)) as writer:
        writer.add_record(tier="knowledge", record_type="note", content="new words")
    with MemoryStore(db_path, clock=fixed_clock, read_only=True) as reader:
        fresh = vector_cache.load(reader)
        assert len(fresh) == 21
        assert not any(p.exists() for p in stale if p.name.endswith(".npy"))


def test_a_mismatched_stored_vector_still_falls_back_naming_it(cache_dir, db_path):
    with MemoryStore(db_path, clock=fixed_clock, embedder=HashEmbedder(64)) as store:
        ids = _fill(store, 10)
        store.connection.execute(
            "UPDATE vectors SET vector = ? WHERE record_id = ?", (pack_vector([1.0] * 8), ids[3])
        )
        response = hybrid_search(store, "alpha bravo")
        assert response.trace.fallback == (
            f"stored vector of record #{ids[3]} has 8 dims; the query vector has 64"
        )


def test_an_in_memory_store_keeps_its_matrix_in_memory(cache_dir):
    with MemoryStore(clock=fixed_clock, embedder=HashEmbedder(64)) as store:
        _fill(store, 15)
        cached = vector_cache.load(store)
        assert cached.source == "memory" and cached.path is None
        assert not cache_dir.exists()


def test_exact_cosines_are_bit_for_bit_the_plain_loop():
    from memtui.core.search.vector import _exact_cosines

    rng = np.random.default_rng(11)
    # a wide dynamic range, so that any other summation order would show
    matrix = (rng.standard_normal((40, 96)) * 10.0 ** rng.integers(-6, 6, (40, 96))).astype(
        np.float32
    )
    matrix[7] = 0.0
    query = rng.standard_normal(96) * 10.0 ** rng.integers(-6, 6, 96)
    rows = np.array([3, 0, 39, 7, 12])
    got = _exact_cosines(matrix, rows, query, float(np.cumsum(query * query)[-1]))
    want = [cosine(query.tolist(), matrix[r].tolist()) for r in rows]
    assert got.tolist() == want


def test_a_forget_while_the_file_is_written_leaves_no_copy(cache_dir, db_path, monkeypatch, builds):
    """A cache file still being published is zeroed too, then published without the row."""
    import threading

    with MemoryStore(db_path, clock=fixed_clock, embedder=HashEmbedder(64)) as store:
        ids = _fill(store, 50)
        started, release = threading.Event(), threading.Event()
        sync = vector_files.MatrixWriter.sync

        def slow_sync(self):
            started.set()
            release.wait(5)
            sync(self)

        monkeypatch.setattr(vector_files.MatrixWriter, "sync", slow_sync)
        hybrid_search(store, "alpha")  # mapped from a temporary file; published in background
        assert started.wait(5)
        pending = vector_cache.cache_files(store)
        assert [p.name for p in pending if ".tmp-" in p.name]
        row = vector_cache.load(store).ids.tolist().index(ids[0])
        keep = cache_dir / "pending-link.npy"
        os.link(next(p for p in pending if ".tmp-" in p.name), keep)
        threading.Timer(0.2, release.set).start()
        built = len(builds)
        payload = pack_vector(store.vector_of(ids[0]))
        assert store.forget(ids[0], reason="during the write") is True
        assert not np.load(keep)[row].any()  # the pending file's row was zeroed too
        vector_cache.wait_for_writes()
        published = vector_cache.cache_files(store)
        assert any(p.name.endswith(".f32.npy") for p in published)  # published, carried over
        assert files_holding(cache_dir, payload) == []
        cached = vector_cache.load(store)
        assert len(builds) == built
        assert ids[0] not in cached.live_ids().tolist()
    with MemoryStore(db_path, clock=fixed_clock, read_only=True) as reader:
        loaded = vector_cache.load(reader)
        assert loaded.source == "file" and loaded.removed.tolist() == [row]
        assert len(builds) == built


# ---------------------------------------------------------------- nothing left behind


def _cli_search(db_path):
    from click.testing import CliRunner

    from memtui.cli import main

    result = CliRunner().invoke(main, ["search", str(db_path), "alpha bravo", "--limit", "3"])
    assert result.exit_code == 0, result.output
    return result


def _unpublished(folder):
    return sorted(p.name for p in folder.rglob("*") if ".tmp-" in p.name or "trash-" in p.name)


def test_a_cli_search_publishes_its_matrix_and_leaves_no_temporary_file(
    cache_dir, db_path, monkeypatch, builds
):
    """The command closes the store only once the matrix it built is published: the next
    search maps it (no rebuild), and no temporary matrix is left behind."""
    import threading

    with MemoryStore(db_path, clock=fixed_clock, embedder=HashEmbedder(64)) as store:
        _fill(store, 60)
    closing = threading.Event()
    close, sync = MemoryStore.close, vector_files.MatrixWriter.sync

    def close_then_say_so(self):
        closing.set()  # the publisher syncs only once the command closes its store
        close(self)

    def sync_while_closing(self):
        closing.wait(5)
        sync(self)

    monkeypatch.setattr(MemoryStore, "close", close_then_say_so)
    monkeypatch.setattr(vector_files.MatrixWriter, "sync", sync_while_closing)
    _cli_search(db_path)
    vector_cache.wait_for_writes()
    assert _unpublished(cache_dir) == []
    assert list(cache_dir.rglob("*.f32.npy"))
    built = len(builds)
    _cli_search(db_path)
    assert len(builds) == built and _unpublished(cache_dir) == []


_DIES_BEFORE_PUBLISHING = """
import os, sys, threading
from memtui.core import vector_cache, vector_files
from memtui.core.store import MemoryStore
vector_cache.FILE_CACHE_MIN_VECTORS = 0
vector_files.MatrixWriter.sync = lambda self: threading.Event().wait()
vector_cache.load(MemoryStore(sys.argv[1], read_only=True))
os._exit(0)
"""


def _run(*args, env):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_a_cli_forget_erases_what_dead_processes_left_before_it_reports_verified(
    cache_dir, db_path, tmp_path
):
    """A matrix a process built but died before publishing, and a cache file a process
    moved to the trash but died before deleting, both hold the vector: the forget
    erases them (and deletes its own trash) before the CLI says verified and exits."""
    import shutil

    from conftest import ROOT

    with MemoryStore(db_path, clock=fixed_clock, embedder=HashEmbedder(64)) as store:
        _fill(store, 60)
        victim = store.add_record(tier="working", record_type="note", content="zanzibar quokka")
        payload = pack_vector(store.vector_of(victim))
    env = {**os.environ, "PYTHONPATH": str(ROOT), vector_cache.CACHE_DIR_ENV: str(cache_dir)}
    died = _run("-c", _DIES_BEFORE_PUBLISHING, str(db_path), env=env)
    assert died.returncode == 0, died.stderr
    assert [n for n in _unpublished(cache_dir) if ".tmp-" in n], "the dead process left its file"
    with MemoryStore(db_path, clock=fixed_clock) as store:
        hybrid_search(store, "alpha")  # a published matrix, and one in a dead process's trash
        vector_cache.wait_for_writes()
        matrix = next(cache_dir.rglob("*.f32.npy"))
        shutil.copy(matrix, matrix.with_name(f"trash-0123456789ab-{matrix.name}"))
    assert len(files_holding(cache_dir, payload)) == 3  # the test must see the copies first
    forget = _run(
        "-m", "memtui", "forget", str(db_path), str(victim), "--reason", "r", "--yes", env=env
    )
    assert forget.returncode == 0, forget.stderr
    assert "erasure verified" in forget.stdout
    assert files_holding(cache_dir, payload) == []
    assert _unpublished(cache_dir) == []  # erased, and the trash deleted before the exit
    with MemoryStore(db_path, clock=fixed_clock) as store:
        event = store.audit_events()[0]
        assert event["details"]["erasure"]["vector_cache_erased"] is True


def test_a_forget_while_the_matrix_is_being_built_erases_it_and_the_build_reads_again(
    cache_dir, db_path, monkeypatch, builds, tmp_path
):
    """Rows already written to a matrix still being built cannot be found by id: the
    forget erases the whole file, and the build, finding it gone, reads the vectors again."""
    import threading

    with MemoryStore(db_path, clock=fixed_clock, embedder=HashEmbedder(64)) as store:
        _fill(store, 50)
        victim = store.add_record(tier="working", record_type="note", content="zanzibar quokka")
        payload = pack_vector(store.vector_of(victim))
        write = vector_files.MatrixWriter.write
        done = []

        kept = tmp_path / "kept-link.npy"  # the file's blocks, after the forget unlinks it

        def write_then_forget(self, block):
            write(self, block)
            if not done:
                self.handle.flush()
                os.link(self.tmp, kept)
                forget = threading.Thread(
                    target=lambda: done.append(store.forget(victim, reason="mid-build"))
                )
                forget.start()
                forget.join(10)

        monkeypatch.setattr(vector_files.MatrixWriter, "write", write_then_forget)
        loaded = vector_cache.load(store)
        assert done == [True]
        assert payload not in kept.read_bytes()  # erased, not only unlinked
        assert victim not in loaded.live_ids().tolist()
        vector_cache.wait_for_writes()
        assert files_holding(cache_dir, payload) == []
        assert _unpublished(cache_dir) == []
