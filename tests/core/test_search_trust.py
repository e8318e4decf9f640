"""What search takes from the database file, and what its trace says it left out.

A database file is untrusted input: the embedder it names is never imported.
The trace counts what each lane dropped and the live records without vectors.
"""

import sqlite3
import sys
import textwrap

import numpy as np
import pytest
from conftest import fixed_clock

from memtui.core.embed import HASH_MAX_DIM, HashEmbedder, resolve_embedder
from memtui.core.search import cosine, hybrid_search
from memtui.core.search.vector import vector_lane
from memtui.core.store import MemoryStore, unpack_vector

REFUTED_TRAVERSAL = "path traversal encoded dot segments zzz"


def set_recorded(path, **meta):
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM meta WHERE key LIKE 'embedder%'")
    conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", list(meta.items()))
    conn.commit()
    conn.close()


@pytest.fixture
def trap(tmp_path, monkeypatch):
    """A module that leaves a file behind if anything imports it or calls into it."""
    (tmp_path / "memtui_trap.py").write_text(
        textwrap.dedent(
            f"""
            open({str(tmp_path / "imported")!r}, "w").close()

            class Tiny:
                name = "tiny-3"
                dim = 3

                def __call__(self, texts):
                    open({str(tmp_path / "called")!r}, "w").close()
                    return [[1.0, 1.0, float(len(t) % 3)] for t in texts]
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("memtui_trap", None)
    yield tmp_path
    sys.modules.pop("memtui_trap", None)


@pytest.mark.parametrize(
    "meta",
    [
        {"embedder_name": "memtui_trap:Tiny", "embedder_dim": "256"},
        {"embedder_name": "tiny-3", "embedder_dim": "256", "embedder_spec": "memtui_trap:Tiny"},
        {"embedder_name": "sys:exit", "embedder_dim": "256"},
        {"embedder_name": "this:x", "embedder_dim": "256"},
        {"embedder_name": "os:system", "embedder_dim": "256", "embedder_spec": "os:system"},
    ],
)
def test_an_embedder_named_in_the_file_is_never_imported(sample_db, trap, capsys, meta):
    set_recorded(sample_db, **meta)
    already = set(sys.modules)
    with MemoryStore(sample_db, clock=fixed_clock, read_only=True) as store:
        response = hybrid_search(store, "sql injection items api")  # no SystemExit either
    assert not (trap / "imported").exists() and not (trap / "called").exists()
    assert "memtui_trap" not in sys.modules and "this" not in set(sys.modules) - already
    assert capsys.readouterr().out == ""  # the Zen of Python stays unprinted
    reason = response.trace.fallback
    assert "memtui never loads code that a database file names" in reason
    spec = meta.get("embedder_spec")
    assert f"--embedder {spec or 'module:callable'}" in reason
    assert response.trace.weights == {"keyword": 1.0, "vector": 0.0}
    assert response.results  # the keyword lane still answers


def test_a_huge_hash_dimension_in_the_file_is_refused(sample_db):
    set_recorded(sample_db, embedder_name="hash-100000000", embedder_dim="100000000")
    with MemoryStore(sample_db, clock=fixed_clock, read_only=True) as store:
        response = hybrid_search(store, "sql injection")
    assert f"at most {HASH_MAX_DIM}" in response.trace.fallback
    assert "is refused" in response.trace.fallback


def test_a_plug_in_is_recorded_with_its_spec_and_named_when_it_is_missing(tmp_path, trap):
    embedder = resolve_embedder("memtui_trap:Tiny")
    with MemoryStore(tmp_path / "p.db", clock=fixed_clock, embedder=embedder) as store:
        store.add_record(tier="knowledge", record_type="note", content="gannet colony")
        assert store.recorded_embedder() == {
            "name": "tiny-3",
            "dim": 3,
            "spec": "memtui_trap:Tiny",
        }
        assert store.audit_events() == []
    with MemoryStore(tmp_path / "p.db", clock=fixed_clock) as store:
        assert store.embedder is None  # a plug-in is never loaded from the file
        alone = hybrid_search(store, "gannet")
        assert alone.trace.fallback == (
            "the stored vectors were written by the plug-in embedder tiny-3 "
            "(loaded as memtui_trap:Tiny); memtui never loads code that a database file "
            "names: pass it yourself with --embedder memtui_trap:Tiny"
        )
        assert alone.trace.vectors_missing is None  # the vector lane did not run
        given = hybrid_search(store, "gannet", embedder=embedder)  # the operator's choice
        assert given.trace.fallback is None and given.trace.embedder == "tiny-3"


def test_a_builtin_embedder_recorded_in_the_file_embeds_new_records(sample_db):
    with MemoryStore(sample_db, clock=fixed_clock, operator="t") as store:
        assert store.embedder is not None and store.embedder.name == "hash-256"
        rid = store.add_record(tier="knowledge", record_type="note", content="petrel burrow")
        assert store.vector_of(rid) == pytest.approx(HashEmbedder()(["petrel burrow"])[0])
        response = hybrid_search(store, "petrel burrow")
        assert response.results[0].record_id == rid
        assert response.results[0].trace.found_by == ["keyword", "vector"]
        assert response.trace.vectors_missing == 0


def test_the_trace_counts_live_records_without_a_vector(tmp_path, trap):
    embedder = resolve_embedder("memtui_trap:Tiny")
    path = tmp_path / "p.db"
    with MemoryStore(path, clock=fixed_clock, embedder=embedder) as store:
        store.add_record(tier="knowledge", record_type="note", content="skua one")
        store.add_record(tier="working", record_type="note", content="skua two", engagement="e")
    with MemoryStore(path, clock=fixed_clock) as store:  # the plug-in is not loaded: no vectors
        late = store.add_record(tier="knowledge", record_type="note", content="skua late")
        store.add_record(tier="working", record_type="note", content="skua gone", engagement="e")
        store.add_record(
            tier="knowledge",
            record_type="note",
            content="skua expired",
            expires_at="2020-01-01T00:00:00Z",
        )
        assert store.vector_of(late) is None
        response = hybrid_search(store, "skua late", embedder=embedder)
        assert response.trace.vectors_missing == 2  # live ones only, not the expired note
        scoped = hybrid_search(store, "skua", embedder=embedder, filters={"engagement": "e"})
        assert scoped.trace.vectors_missing == 1
        keyword_only = hybrid_search(store, "skua", embedder=embedder, keyword_only=True)
        assert keyword_only.trace.vectors_missing is None
        store.forget(late, reason="test")
        assert hybrid_search(store, "skua", embedder=embedder).trace.vectors_missing == 1


def test_a_refuted_record_the_vector_lane_would_top_is_counted(sample_store):
    response = hybrid_search(sample_store, REFUTED_TRAVERSAL)
    assert response.trace.matched == 0  # "zzz" is in no record: no keyword match
    assert response.trace.excluded_by_lane["keyword"]["refuted"] == 0
    assert response.trace.excluded_by_lane["vector"]["refuted"] == 1
    assert response.trace.excluded["refuted"] == 1
    refuted = sample_store.fetch(include_refuted=True, record_type="tactic")
    (nine,) = [r for r in refuted if r.refuted and "traversal" in r.content.lower()]
    query = HashEmbedder()([REFUTED_TRAVERSAL])[0]
    best = max(response.candidates, key=lambda r: r.trace.vector.raw or 0)
    assert cosine(query, sample_store.vector_of(nine.id)) > best.trace.vector.raw


# ---------------------------------------------------------------- the oracle


WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()


def reference_dropped(store, query_vector, filters, pool_size):
    """Row by row: the hidden or out-of-scope records that would have entered the pool."""
    now = store.now_text()
    rows = store.query(
        "SELECT r.id, r.refuted, r.expires_at, r.engagement, r.tier, v.vector "
        "FROM records r JOIN vectors v ON v.record_id = r.id ORDER BY r.id"
    )
    live, dropped = [], []
    for rid, refuted, expires, engagement, tier, blob in rows:
        score = cosine(query_vector, unpack_vector(blob))
        if refuted:
            reason = "refuted"
        elif expires is not None and expires <= now:
            reason = "expired"
        elif filters and any(
            {"engagement": engagement, "tier": tier}[k] != v for k, v in filters.items()
        ):
            reason = "out_of_scope"
        else:
            reason = None
        if score > 0:
            (dropped if reason else live).append((-score, rid, reason))
    pool = sorted(live)[:pool_size]
    out = {"refuted": [], "expired": [], "out_of_scope": []}
    for key in dropped:
        if len(pool) < pool_size or key[:2] < pool[-1][:2]:
            out[key[2]].append(key[1])
    return {reason: sorted(ids) for reason, ids in out.items()}


@pytest.mark.parametrize("filters", [None, {"engagement": "e1"}, {"tier": "working"}])
@pytest.mark.parametrize("pool_size", [1, 5, 100])
def test_the_vector_lanes_exclusions_equal_a_row_by_row_count(tmp_path, filters, pool_size):
    rng = np.random.default_rng(7)
    embedder = HashEmbedder(16)  # few buckets: many ties
    with MemoryStore(tmp_path / "o.db", clock=fixed_clock, embedder=embedder) as store:
        for i in range(160):
            words = rng.choice(WORDS, size=int(rng.integers(1, 5)))
            if i % 13 == 0:
                rid = store.record_success(
                    profile_hash="p",
                    tool="t",
                    endpoint=f"/x/{i}",
                    param=f"p{i}",
                    content=" ".join(words),
                )
                store.refute(rid, reason="r")
                continue
            store.add_record(
                tier="knowledge" if i % 3 else "working",
                record_type="note",
                content=" ".join(words),
                engagement=f"e{i % 4}",
                expires_at="2026-11-29T00:00:00Z" if i % 11 == 0 else None,
            )
        seen = dict.fromkeys(("refuted", "expired", "out_of_scope"), 0)
        for query in ("alpha", "bravo charlie", "golf golf hotel", "kilo lima alpha echo"):
            vector = embedder([query])[0]
            lane = vector_lane(store, vector, filters, pool_size)
            got = {reason: sorted(int(i) for i in ids) for reason, ids in lane.dropped.items()}
            assert got == reference_dropped(store, vector, filters, pool_size), (query, filters)
            for reason, ids in got.items():
                seen[reason] += len(ids)
        if pool_size > 1:  # the check has something to check (a pool of 1 takes the best)
            assert seen["refuted"] and seen["expired"]
            assert bool(seen["out_of_scope"]) == bool(filters)


def test_a_store_adopts_only_a_sane_builtin_that_wrote_vectors(sample_db, tmp_path):
    with MemoryStore(tmp_path / "empty.db", clock=fixed_clock) as store:
        store.add_record(tier="knowledge", record_type="note", content="no vectors here")
    set_recorded(tmp_path / "empty.db", embedder_name="hash-256", embedder_dim="256")
    with MemoryStore(tmp_path / "empty.db", clock=fixed_clock) as store:
        assert store.embedder is None  # no vectors: nothing to embed alongside
    for name, dim in (("hash-100000000", "100000000"), ("hash-64", "256")):
        set_recorded(sample_db, embedder_name=name, embedder_dim=dim)
        with MemoryStore(sample_db, clock=fixed_clock) as store:
            assert store.embedder is None  # refused, or not the embedder that wrote them
