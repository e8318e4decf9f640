"""The paths built for a million records give exactly the answers of the plain ones.

Each fast path (index counts, the keyword lane's pool and excluded counts,
bulk vectors, the schema 2 upgrade) is checked against the straightforward
SQL it replaced, on data with refuted and expired rows, filters and ties.
"""

import sqlite3
from datetime import UTC, datetime

import numpy as np
import pytest
from conftest import fixed_clock

from memtui.core import index_db
from memtui.core import store as store_module
from memtui.core.embed import HashEmbedder
from memtui.core.records import TIERS, format_timestamp
from memtui.core.search import (
    explain_keyword,
    hybrid_search,
    index_tokens,
    match_expression,
    min_max_normalize,
)
from memtui.core.search import hidden as hidden_module
from memtui.core.search import keyword as keyword_module
from memtui.core.search.keyword import keyword_lane
from memtui.core.store import (
    SCHEMA_VERSION,
    MemoryStore,
    MemoryStoreError,
    erasure_checks,
    unpack_vector,
)

WORDS = "osprey kestrel heron plover curlew dunlin gannet petrel".split()
PROFILES = [
    "python:postgresql:waf:a:rest:flask",
    "java:mysql:waf:b:rest:spring",
    "go:x:y:z:grpc:gin",
]


def _populate(store: MemoryStore, n: int = 240, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    for i in range(n):
        words = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 5))))
        kind = i % 4
        if kind == 0:
            rid = store.record_success(
                profile_hash=PROFILES[i % 3],
                tool=f"tool{i % 5}",
                endpoint=f"/api/x{i}",
                param="q",
                content=words,
            )
            if i % 8 == 0:
                store.refute(rid, reason="wrong")
        elif kind == 1:
            expiry = ["2026-11-29T00:00:00Z", "2026-11-30T12:00:00Z", "2026-12-30T00:00:00Z"]
            store.add_record(
                tier="working",
                record_type="note",
                content=words,
                engagement=f"e{i % 3}",
                expires_at=expiry[i % 3] if i % 5 else None,
            )
        elif kind == 2:
            store.record_finding(
                finding_id=f"F{i}",
                run_id=f"r{i % 2}",
                engagement=f"e{i % 3}",
                severity="high",
                title=words,
                url=f"https://h/{i}",
                type="sqli",
                profile_hash=PROFILES[i % 3],
            )
        else:
            store.add_record(tier="knowledge", record_type="reference", content=words)


def reference_keyword_lane(store, match, filters, pool_size):
    """The lane as it was computed with one join per match (the oracle)."""
    where, params = store.scope_clause(dict(filters or {}), alias="r")
    rows = store.query(
        "SELECT records_fts.rowid, -bm25(records_fts), r.created_at, r.expires_at "
        "FROM records_fts JOIN records AS r ON r.id = records_fts.rowid "
        f"WHERE records_fts MATCH ? AND {where} "
        "ORDER BY bm25(records_fts), records_fts.rowid LIMIT ?",
        [match, *params, pool_size],
    )
    in_scope, scope_params = store.scope_clause(
        dict(filters or {}), include_refuted=True, include_expired=True, alias="r"
    )
    now = store.now_text()
    counts = store.query(
        "SELECT count(*), coalesce(sum(r.refuted != 0), 0), "
        "coalesce(sum(r.refuted = 0 AND r.expires_at IS NOT NULL AND r.expires_at <= ?), 0), "
        "coalesce(sum(r.refuted = 0 AND (r.expires_at IS NULL OR r.expires_at > ?) "
        f"AND CASE WHEN ({in_scope}) THEN 0 ELSE 1 END), 0) "
        "FROM records_fts JOIN records AS r ON r.id = records_fts.rowid WHERE records_fts MATCH ?",
        [now, now, *scope_params, match],
    )[0]
    ranked = [(r[0], float(r[1]), r[2], r[3]) for r in rows]
    excluded = {"refuted": counts[1], "expired": counts[2], "out_of_scope": counts[3]}
    return ranked, excluded, counts[0]


@pytest.fixture(scope="module")
def populated(tmp_path_factory):
    path = tmp_path_factory.mktemp("scale") / "scale.db"
    with MemoryStore(path, clock=fixed_clock, embedder=HashEmbedder(16)) as store:
        _populate(store)
    return path


QUERIES = ["osprey", "kestrel heron", "plover curlew dunlin", "gannet", "petrel osprey kestrel"]
FILTERS = [None, {"tier": "working"}, {"engagement": "e1"}, {"record_type": "tactic"}]


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("pool_size", [1, 5, 100])
def test_keyword_lane_equals_the_join_it_replaced(populated, monkeypatch, parallel, pool_size):
    side_calls = []
    if parallel:  # the two-connection path that a big store takes, started at the first step
        monkeypatch.setattr(keyword_module, "_PARALLEL_MIN_ROWS", 0)
        monkeypatch.setattr(keyword_module, "_STEPS_PER_MATCH", 0)
        monkeypatch.setattr(index_db, "PROGRESS_STEPS", 1)
        side_query = MemoryStore.side_query

        def counted(self, *args):
            side_calls.append(args)
            return side_query(self, *args)

        monkeypatch.setattr(MemoryStore, "side_query", counted)
    with MemoryStore(populated, clock=fixed_clock, read_only=True) as store:
        for query in QUERIES:
            match = match_expression(index_tokens(store, query))
            for filters in FILTERS:
                lane, excluded, matched = keyword_lane(store, match, filters, pool_size)
                ranked, want_excluded, want_matched = reference_keyword_lane(
                    store, match, filters, pool_size
                )
                assert list(lane.raw.items()) == [(i, s) for i, s, _c, _e in ranked]
                scores = list(lane.raw.values())
                assert list(lane.normalized.values()) == min_max_normalize(scores)
                assert (lane.pool.min, lane.pool.max) == (
                    (min(scores), max(scores)) if scores else (None, None)
                )
                assert (excluded, matched) == (want_excluded, want_matched), (query, filters)
                response = hybrid_search(
                    store, query, filters=filters, pool_size=pool_size, keyword_only=True
                )
                assert [(r.record_id, r.created_at, r.expires_at) for r in response.candidates] == [
                    (i, c, e) for i, _s, c, e in sorted(ranked, key=lambda r: (-r[1], r[0]))
                ]
    assert bool(side_calls) is parallel


def test_the_pool_refills_when_hidden_rows_crowd_the_top(tmp_path, monkeypatch):
    """Every best-ranked match is refuted: the first over-fetch comes short, the refill does not."""
    monkeypatch.setattr(keyword_module, "_PARALLEL_MIN_ROWS", 0)
    with MemoryStore(tmp_path / "crowd.db", clock=fixed_clock) as store:
        for i in range(30):  # short texts rank first for "wren"
            rid = store.record_success(
                profile_hash="a:b:c", tool="t", endpoint=f"/e{i}", param="q", content="wren"
            )
            store.refute(rid, reason="no")
        live = [
            store.add_record(tier="knowledge", record_type="note", content=f"wren {'x ' * i}")
            for i in range(1, 8)
        ]
        match = match_expression(["wren"])
        lane, excluded, matched = keyword_lane(store, match, None, 5)
        assert list(lane.raw) == live[:5]
        assert excluded["refuted"] == 30 and matched == 37
        assert (list(lane.raw.items()), excluded, matched) == (
            [(i, s) for i, s, _c, _e in reference_keyword_lane(store, match, None, 5)[0]],
            *reference_keyword_lane(store, match, None, 5)[1:],
        )


@pytest.mark.parametrize("include_refuted", [False, True])
@pytest.mark.parametrize("include_expired", [False, True])
def test_index_counts_equal_the_plain_group_by(populated, include_refuted, include_expired):
    flags = {"include_refuted": include_refuted, "include_expired": include_expired}
    with MemoryStore(populated, clock=fixed_clock, read_only=True) as store:
        where, params = store._live_clause(include_refuted, include_expired)
        clause = f" WHERE {where}" if where else ""
        expected = dict.fromkeys(TIERS, 0)
        for tier, count in store.query(
            f"SELECT tier, count(*) FROM records{clause} GROUP BY tier", params
        ):
            expected[tier] = count
        assert store.tier_counts(**flags) == expected
        extra = f" AND {where}" if where else ""
        for tier in TIERS:
            want = {}
            for key in ("profile_hash", "engagement"):
                rows = store.query(
                    f"SELECT {key}, count(*) FROM records WHERE tier = ?{extra} "
                    f"GROUP BY {key} ORDER BY {key}",
                    [tier, *params],
                )
                want[key] = {v: n for v, n in rows if v is not None}
            got = store.scope_counts(tier, **flags)
            assert got == want
            assert [list(got[k]) for k in got] == [list(want[k]) for k in want]  # order too


def test_ingest_stores_precomputed_vectors_as_given(tmp_path):
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((40, 12)).astype(np.float32)
    rows = [{"tier": "knowledge", "record_type": "note", "content": f"n{i}"} for i in range(40)]
    with MemoryStore(tmp_path / "v.db", clock=fixed_clock) as store:
        before = store.vectors_generation()
        ids = store.ingest(rows, vectors=vectors, embedder_name="bench-random-12")
        assert store.recorded_embedder() == {"name": "bench-random-12", "dim": 12}
        assert store.vectors_generation() == before + 1
        for record_id, vector in zip(ids, vectors, strict=True):
            assert (
                unpack_vector(
                    store.query("SELECT vector FROM vectors WHERE record_id = ?", (record_id,))[0][
                        0
                    ]
                )
                == vector.tolist()
            )
        assert store.audit_events()[0]["details"]["embedder"] == "bench-random-12"
        # the triggers are back: a single write still bumps the generation
        store.add_record(tier="knowledge", record_type="note", content="later")
        assert store.vectors_generation() == before + 1  # no embedder: no vector written
        with pytest.raises(MemoryStoreError, match="written by bench-random-12"):
            store.ingest(rows[:2], vectors=vectors[:2, :6], embedder_name="other-6")
        with pytest.raises(MemoryStoreError, match="one vector per record"):
            store.ingest(rows[:3], vectors=vectors[:2], embedder_name="bench-random-12")
        with pytest.raises(MemoryStoreError, match="embedder_name"):
            store.ingest(rows[:2], vectors=vectors[:2])
        assert store.record_count() == 41  # the refused loads wrote nothing


def test_ingest_with_vectors_then_search_by_vector(tmp_path):
    class Fixed:
        name, dim = "fixed-3", 3

        def __call__(self, texts):
            return [[1.0, 0.0, 0.0] for _ in texts]

    rows = [{"tier": "knowledge", "record_type": "note", "content": f"note {i}"} for i in range(3)]
    vectors = [[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.0, 1.0, 0.0]]
    with MemoryStore(tmp_path / "f.db", clock=fixed_clock) as store:
        ids = store.ingest(rows, vectors=vectors, embedder_name="fixed-3")
        response = hybrid_search(store, "unrelated", embedder=Fixed())
        assert [r.record_id for r in response.results] == ids[:2]  # cosine 1.0, 0.6; 0.0 is out
        assert response.results[1].trace.vector.raw == pytest.approx(0.6)


def test_explain_counts_repeated_terms_and_ignores_marker_characters(tmp_path):
    with MemoryStore(tmp_path / "x.db", clock=fixed_clock) as store:
        rid = store.add_record(
            tier="knowledge", record_type="note", content="tern \x01 tern, tern; \x01 skua"
        )
        store.add_record(tier="knowledge", record_type="note", content="skua only")
        explained = explain_keyword(store, "tern skua", rid)
        assert [(t["term"], t["tf"]) for t in explained["terms"]] == [("tern", 3), ("skua", 1)]
        assert explained["total"] == pytest.approx(-explained["bm25"], abs=1e-6)
        other = explain_keyword(store, "tern", rid + 1)
        assert other["terms"][0]["tf"] == 0 and other["bm25"] is None


def _v1_file(path):
    conn = sqlite3.connect(path)
    for statement in store_module._split_sql(store_module._MIGRATIONS[0]):
        conn.execute(statement)
    conn.execute(store_module._INSERT_TRIGGER)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executemany(
        "INSERT INTO records (tier, record_type, content, refuted, created_at, expires_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [
            ("knowledge", "note", "albatross fulmar", 0, "2026-01-01T00:00:00.000000Z", None),
            (
                "working",
                "note",
                "albatross scratch",
                0,
                "2026-01-01T00:00:00.000000Z",
                "2026-01-02T00:00:00.000000Z",
            ),
        ],
    )
    conn.execute("INSERT INTO meta (key, value) VALUES ('embedder_name', 'hash-16')")
    conn.execute("INSERT INTO meta (key, value) VALUES ('embedder_dim', '16')")
    embedder = HashEmbedder(16)
    for rid, text in conn.execute("SELECT id, content FROM records").fetchall():
        conn.execute(
            "INSERT INTO vectors (record_id, vector) VALUES (?, ?)",
            (rid, store_module.pack_vector(embedder([text])[0])),
        )
    conn.commit()
    conn.close()


def test_a_v1_file_upgrades_to_v2_on_a_writable_open(tmp_path):
    path = tmp_path / "old.db"
    _v1_file(path)
    with pytest.raises(MemoryStoreError, match="needs a schema upgrade"):
        MemoryStore(path, read_only=True)
    with MemoryStore(path, clock=fixed_clock) as store:
        assert store.query("PRAGMA user_version")[0][0] == SCHEMA_VERSION == 2
        names = {r[0] for r in store.query("SELECT name FROM sqlite_master")}
        assert {
            "records_tier",
            "records_refuted",
            "records_expiry",
            "records_type_profile",
        } <= names
        assert {f"vectors_generation_{s}" for s in ("ai", "ad", "au")} <= names
        meta = dict(store.query("SELECT key, value FROM meta"))
        assert meta["vectors_generation"] == "0" and len(meta["database_id"]) == 32
        assert store.tier_counts() == {"working": 0, "episodic": 0, "longterm": 0, "knowledge": 1}
        response = hybrid_search(store, "albatross", embedder=HashEmbedder(16))
        assert [r.record_id for r in response.results] == [1]
        assert response.trace.excluded["expired"] == 1
        assert store.forget(1, reason="upgrade test") is True
        assert store.vectors_generation() == 1
    with MemoryStore(path, read_only=True) as reader:  # upgraded once, readable read-only after
        assert reader.record_count() == 1


def test_keyword_lane_clock_boundary_is_strict_with_the_cached_hidden_rows(tmp_path):
    now = [datetime(2026, 11, 30, 12, tzinfo=UTC)]
    with MemoryStore(tmp_path / "c.db", clock=lambda: now[0]) as store:
        rid = store.add_record(
            tier="working", record_type="note", content="merlin", expires_at="2026-12-01T00:00:00Z"
        )
        match = match_expression(["merlin"])
        lane, excluded, _ = keyword_lane(store, match, None, 10)
        assert list(lane.raw) == [rid] and excluded["expired"] == 0
        now[0] = datetime(2026, 12, 1, tzinfo=UTC)  # the data did not change; the clock did
        lane, excluded, _ = keyword_lane(store, match, None, 10)  # now == expires_at: gone
        assert list(lane.raw) == [] and excluded["expired"] == 1


@pytest.mark.parametrize("probe_each_max", [0, 2000])
def test_scope_forget_verifies_the_index_word_by_word_or_one_by_one(
    tmp_path, monkeypatch, probe_each_max
):
    monkeypatch.setattr(erasure_checks, "_PROBE_EACH_MAX", probe_each_max)
    with MemoryStore(tmp_path / "w.db", clock=fixed_clock) as store:
        for i in range(60):
            store.add_record(
                tier="episodic",
                record_type="observation",
                content=f"zeta{i % 7} omega common words {i}",
                engagement="doomed" if i % 2 else "kept",
            )
        assert store.forget_scope(engagement="doomed", reason="clean") == 30
        assert store.audit_events()[0]["details"]["erasure"]["index_gone"] is True
        # Postings left behind (here: the delete trigger is gone) are caught.
        for text in ("stale words", "fine words"):
            store.add_record(
                tier="episodic", record_type="observation", content=text, engagement="bad"
            )
        store.connection.execute("DROP TRIGGER records_ad")
        store.forget_scope(engagement="bad", reason="clean")
        erasure = store.audit_events()[0]["details"]["erasure"]
        assert erasure == {"row_gone": True, "index_gone": False, "vector_gone": True}


def test_a_posting_without_its_record_is_never_a_result(tmp_path):
    """A damaged index (a posting left after its row) ranks in the lane but is no result."""
    with MemoryStore(tmp_path / "d.db", clock=fixed_clock) as store:
        kept = store.add_record(tier="knowledge", record_type="note", content="skua skua tern")
        ghost = store.add_record(tier="knowledge", record_type="note", content="skua")
        store.connection.execute("DROP TRIGGER records_ad")
        store.connection.execute("DELETE FROM records WHERE id = ?", (ghost,))
        lane, _excluded, matched = keyword_lane(store, match_expression(["skua"]), None, 10)
        assert set(lane.raw) == {kept, ghost} and matched == 2  # the index still holds both
        response = hybrid_search(store, "skua", keyword_only=True)
        assert [r.record_id for r in response.candidates] == [kept]
        assert response.results[0].created_at == store.get(kept).created_at


def test_the_expiry_cut_is_kept_only_for_its_span(tmp_path):
    """The count of passed expiries is reused between two expiries, redone past either."""
    with MemoryStore(tmp_path / "e.db", clock=fixed_clock) as store:
        for day in (2, 4, 4, 6):
            store.add_record(
                tier="working",
                record_type="note",
                content="tern",
                expires_at=f"2026-12-0{day}T00:00:00Z",
            )
        hidden = hidden_module.hidden_rows(store)
        for now, passed in [
            ("2026-12-03T00:00:00.000000Z", 1),
            ("2026-12-03T23:59:59.999999Z", 1),
            ("2026-12-04T00:00:00.000000Z", 3),  # equal to an expiry: passed
            ("2026-12-05T00:00:00.000000Z", 3),
            ("2026-12-01T00:00:00.000000Z", 0),  # the clock went back
            ("2026-12-09T00:00:00.000000Z", 4),
            ("2026-12-10T00:00:00.000000Z", 4),
        ]:
            assert hidden.expired_before(now) == passed, now


def test_the_expiry_cut_follows_the_clock_moment_by_moment(tmp_path):
    """The cut kept as a span of clock moments gives what the text comparison gives,
    at each expiry's boundary, past a next expiry in another form, and backwards."""
    now = [datetime(2026, 12, 3, tzinfo=UTC)]
    with MemoryStore(tmp_path / "m.db", clock=lambda: now[0]) as store:
        for day in (2, 4, 6):
            store.add_record(
                tier="working",
                record_type="note",
                content="tern",
                expires_at=f"2026-12-0{day}T00:00:00Z",
            )
        store.connection.execute(  # as a hand-made file may hold it: it sorts as 20:00
            "UPDATE records SET expires_at = '2026-12-05T20:00:00-05:00' "
            "WHERE expires_at LIKE '2026-12-06%'"
        )
        hidden = hidden_module.hidden_rows(store)
        match = match_expression(["tern"])
        for moment, passed in [
            (datetime(2026, 12, 3, tzinfo=UTC), 1),
            (datetime(2026, 12, 3, 23, 59, 59, 999999, tzinfo=UTC), 1),
            (datetime(2026, 12, 4, tzinfo=UTC), 2),  # equal to an expiry: passed
            (datetime(2026, 12, 5, 19, 59, 59, 999999, tzinfo=UTC), 2),
            (datetime(2026, 12, 5, 20, tzinfo=UTC), 3),  # compared as text, as SQLite does
            (datetime(2026, 12, 5, 23, tzinfo=UTC), 3),
            (datetime(2026, 12, 1, tzinfo=UTC), 0),  # the clock went back
            (datetime(2026, 12, 4, 1, tzinfo=UTC), 2),
        ]:
            now[0] = moment
            assert hidden.expired_now(store) == passed, moment
            assert hidden.expired_before(format_timestamp(moment)) == passed, moment
            _lane, excluded, matched = keyword_lane(store, match, None, 10)
            assert (excluded["expired"], matched) == (passed, 3), moment


def test_the_side_listing_starts_only_for_a_ranking_with_more_matches_than_it_keeps(
    populated, monkeypatch
):
    """The listing beside the ranking starts once the ranking has stepped past N matches."""
    calls = []
    monkeypatch.setattr(keyword_module, "_PARALLEL_MIN_ROWS", 0)
    monkeypatch.setattr(index_db, "PROGRESS_STEPS", 1)  # count every step
    monkeypatch.setattr(MemoryStore, "side_query", lambda self, *args: calls.append(args))
    with MemoryStore(populated, clock=fixed_clock, read_only=True) as store:
        match = match_expression(["osprey"])
        whole, excluded, matched = keyword_lane(store, match, None, 100)
        assert 50 < matched < 200  # N >= 216: the ranking holds every match
        assert len(whole.raw) == matched - sum(excluded.values())
        assert calls == []
        lane, _excluded, matched_again = keyword_lane(store, match, None, 1)  # N is about 18
        assert len(calls) == 1  # started beside the ranking; no second connection: in line
        assert matched_again == matched and list(lane.raw) == list(whole.raw)[:1]


def test_postings_without_rows_are_classified_exactly(tmp_path):
    """Rowids the records table does not have (past its end, or negative) take the array way."""
    with MemoryStore(tmp_path / "n.db", clock=fixed_clock) as store:
        live = store.add_record(tier="knowledge", record_type="note", content="tern tern")
        refuted = store.record_success(  # the last row: byte -1 of the table, if misread
            profile_hash="a:b:c", tool="t", endpoint="/e", param="q", content="tern"
        )
        store.refute(refuted, reason="no")
        store.connection.execute(
            "INSERT INTO records_fts (rowid, content) VALUES (-1, 'tern'), (999, 'tern')"
        )
        hidden = hidden_module.hidden_rows(store)
        for ids in ([live, refuted], [live, refuted, -1], [999, refuted, live]):
            assert hidden.hidden_among(store, ids) == ({refuted}, set()), ids
        lane, excluded, matched = keyword_lane(store, match_expression(["tern"]), None, 10)
        assert matched == 4 and excluded["refuted"] == 1 and refuted not in lane.raw
        assert [r.record_id for r in hybrid_search(store, "tern", keyword_only=True).results] == [
            live
        ]
