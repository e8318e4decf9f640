import hashlib
import json
import math
import shutil
import sqlite3
from datetime import UTC, datetime, timedelta

import pytest
from conftest import one_error_line

from memtui.cli import main
from memtui.commands import search as search_command
from memtui.core.corpus import prepare_corpus
from memtui.core.embed import HashEmbedder
from memtui.core.records import format_timestamp
from memtui.core.search import (
    DEFAULT_WEIGHTS,
    SearchResponse,
    explain_keyword,
    hybrid_search,
    index_tokens,
    merge_score,
    min_max_normalize,
    rerank,
    sanitize_query,
)
from memtui.core.store import MemoryStore, MemoryStoreError

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
PROFILE = "python:postgresql:waf_present:generic_waf:rest:flask"


def clock():
    return NOW


@pytest.fixture
def hstore(tmp_path):
    """A file store that writes vectors with the built-in hash-256 embedder."""
    with MemoryStore(
        tmp_path / "h.db", clock=clock, embedder=HashEmbedder(), operator="tester"
    ) as opened:
        yield opened


@pytest.fixture
def plain(tmp_path):
    """A file store without an embedder: no vectors, nothing recorded."""
    with MemoryStore(tmp_path / "p.db", clock=clock, operator="tester") as opened:
        yield opened


def note(store, content, **kwargs):
    kwargs.setdefault("tier", "knowledge")
    kwargs.setdefault("record_type", "note")
    return store.add_record(content=content, **kwargs)


def ids(response: SearchResponse) -> list[int]:
    return [r.record_id for r in response.results]


def fts_raw(store, query_terms, record_id, joiner=" OR "):
    """-bm25() straight from FTS5 for the quoted terms; None when the row does not match."""
    match = joiner.join(f'"{t}"' for t in query_terms)
    row = store.query(
        "SELECT -bm25(records_fts) FROM records_fts WHERE records_fts MATCH ? AND rowid = ?",
        (match, record_id),
    )
    return row[0][0] if row else None


def assert_adds_up(response: SearchResponse):
    """Every result's score recomputes from its trace, and each norm from the pools."""
    pools = response.trace.pools
    for result in response.results:
        weights = result.trace.weights
        assert weights == response.trace.weights
        assert result.keyword_score == result.trace.keyword.normalized
        assert result.vector_score == result.trace.vector.normalized
        assert result.score == (
            weights["keyword"] * result.trace.keyword.normalized
            + weights["vector"] * result.trace.vector.normalized
        )
        for lane in ("keyword", "vector"):
            raw = result.trace.lane(lane).raw
            norm = result.trace.lane(lane).normalized
            if raw is None:
                assert norm == 0.0
                continue
            lo, hi = pools[lane].min, pools[lane].max
            assert lo <= raw <= hi
            expected = 1.0 if hi == lo else (raw - lo) / (hi - lo)
            assert norm == pytest.approx(expected, abs=1e-12)


# ---------------------------------------------------------------- arithmetic


def test_min_max_of_the_worked_example():
    assert min_max_normalize([2.0, 1.0, 0.5]) == [1.0, pytest.approx(1 / 3, abs=1e-12), 0.0]
    assert min_max_normalize([0.5, 2.0, 1.0]) == [0.0, 1.0, pytest.approx(0.333333, abs=1e-6)]


def test_all_equal_pool_and_single_hit_map_to_one():
    assert min_max_normalize([3.2, 3.2, 3.2]) == [1.0, 1.0, 1.0]
    assert min_max_normalize([0.7]) == [1.0]
    assert min_max_normalize([]) == []


def test_merge_of_the_worked_example():
    assert merge_score(1.0, 0.5, DEFAULT_WEIGHTS) == pytest.approx(0.65)
    assert DEFAULT_WEIGHTS == {"keyword": 0.3, "vector": 0.7}
    assert merge_score(1.0, 0.0, DEFAULT_WEIGHTS) == pytest.approx(0.3)


def test_real_keyword_pool_is_min_max_normalized(plain):
    short = note(plain, "lantern")
    mid = note(plain, "lantern in the old shed by the river")
    long = note(plain, "a lantern " + " ".join(f"filler{i}" for i in range(40)))
    note(plain, "nothing relevant here")
    response = hybrid_search(plain, "lantern")
    assert ids(response) == [short, mid, long]  # shorter documents score higher in BM25
    raws = [r.trace.keyword.raw for r in response.results]
    pool = response.trace.pools["keyword"]
    assert (pool.size, pool.min, pool.max, pool.limit) == (3, raws[2], raws[0], 100)
    assert [r.keyword_score for r in response.results] == [
        1.0,
        (raws[1] - raws[2]) / (raws[0] - raws[2]),
        0.0,
    ]
    assert_adds_up(response)


def test_a_single_hit_pool_scores_one(plain):
    only = note(plain, "zephyr marker")
    note(plain, "something else")
    response = hybrid_search(plain, "zephyr")
    assert ids(response) == [only]
    assert response.results[0].keyword_score == 1.0
    assert response.trace.pools["keyword"].size == 1


def test_merged_score_uses_default_weights_and_recomputes(hstore):
    for text in (
        "sql injection in the items api",
        "blind sql injection via the search parameter of the items api endpoint",
        "cross site scripting in comments",
        "items api rate limiter adds delay",
    ):
        note(hstore, text)
    response = hybrid_search(hstore, "sql injection items api")
    assert response.trace.fallback is None
    assert response.trace.weights == {"keyword": 0.3, "vector": 0.7}
    assert response.trace.embedder == "hash-256"
    top = response.results[0]
    assert top.score == pytest.approx(0.3 * top.keyword_score + 0.7 * top.vector_score)
    assert_adds_up(response)
    # a record only the vector lane found scores 0 in the keyword lane, undivided
    vector_only = [r for r in response.results if r.trace.keyword.raw is None]
    assert vector_only
    for result in vector_only:
        assert result.keyword_score == 0.0
        assert result.score == 0.7 * result.vector_score
        assert result.trace.found_by == ["vector"]


def test_vector_lane_cosine_of_identical_text_is_one(hstore):
    same = note(hstore, "graphql batching one time codes")
    note(hstore, "unrelated words about soap services")
    response = hybrid_search(hstore, "graphql batching one time codes")
    top = response.results[0]
    assert top.record_id == same
    assert top.trace.vector.raw == pytest.approx(1.0, abs=1e-6)  # float32 storage
    assert top.vector_score == 1.0


# ---------------------------------------------------------------- fallback


class RaisingEmbedder:
    name = "hash-256"
    dim = 256

    def __call__(self, texts):
        raise RuntimeError("model server offline")


class ShortEmbedder:
    """Claims hash-256 but returns three numbers."""

    name = "hash-256"
    dim = 256

    def __call__(self, texts):
        return [[1.0, 0.0, 0.0] for _ in texts]


def test_raising_embedder_falls_back_and_the_next_search_does_not(hstore):
    note(hstore, "sqlmap items api time based")
    note(hstore, "dalfox reflected xss")
    broken = hybrid_search(hstore, "items api", embedder=RaisingEmbedder())
    assert "model server offline" in broken.trace.fallback
    assert "hash-256" in broken.trace.fallback
    assert broken.trace.weights == {"keyword": 1.0, "vector": 0.0}
    assert broken.trace.pools["vector"].size == 0
    assert all(r.trace.fallback == broken.trace.fallback for r in broken.results)
    assert all(r.vector_score == 0.0 and r.score == r.keyword_score for r in broken.results)

    good = hybrid_search(hstore, "items api", embedder=HashEmbedder())
    assert good.trace.fallback is None
    assert good.trace.weights == {"keyword": 0.3, "vector": 0.7}
    assert good.trace.pools["vector"].size == 1  # the xss note shares no word
    assert all(r.trace.fallback is None for r in good.results)


def test_no_embedder_falls_back_to_keyword_only(plain):
    rid = note(plain, "sqlmap items api")
    response = hybrid_search(plain, "items")
    assert plain.recorded_embedder() is None
    assert response.trace.fallback.startswith("no embedder")
    assert response.trace.embedder is None
    assert response.trace.weights == {"keyword": 1.0, "vector": 0.0}
    assert ids(response) == [rid]
    assert response.results[0].score == 1.0


def test_an_embedder_given_for_a_database_without_vectors_falls_back(plain):
    note(plain, "sqlmap items api")
    response = hybrid_search(plain, "items", embedder=HashEmbedder())
    assert "no stored vectors" in response.trace.fallback
    assert response.trace.weights["vector"] == 0.0


def test_other_embedder_falls_back_naming_both_dimensions(hstore):
    note(hstore, "sqlmap items api")
    response = hybrid_search(hstore, "items", embedder=HashEmbedder(64))
    reason = response.trace.fallback
    assert reason == (
        "stored vectors were written by hash-256 (256 dims); query embedder is hash-64 (64 dims)"
    )
    assert response.trace.weights == {"keyword": 1.0, "vector": 0.0}


def test_query_vector_of_the_wrong_length_falls_back_naming_both(hstore):
    note(hstore, "sqlmap items api")
    reason = hybrid_search(hstore, "items", embedder=ShortEmbedder()).trace.fallback
    assert "3 dims" in reason and "256 dims" in reason


def test_keyword_only_is_a_fallback_with_its_reason(hstore):
    note(hstore, "sqlmap items api")
    response = hybrid_search(hstore, "items", keyword_only=True)
    assert "keyword-only" in response.trace.fallback
    assert response.trace.weights == {"keyword": 1.0, "vector": 0.0}


def test_a_query_the_embedder_maps_to_zero_falls_back(hstore):
    rid = note(hstore, "marker \ue000 in a private-use character")
    # U+E000 is a unicode61 token (category Co) but no word to the hash embedder
    response = hybrid_search(hstore, "\ue000")
    assert response.trace.terms == ["\ue000"]
    assert "all zeros" in response.trace.fallback
    assert ids(response) == [rid]


# ---------------------------------------------------------------- live records only


def test_refuted_tactic_leaves_search_but_its_row_stays(hstore):
    rid = hstore.record_success(
        profile_hash=PROFILE,
        tool="sqlmap",
        endpoint="/api/items/3",
        param="q",
        content="zanzibar quokka time based blind",
    )
    assert ids(hybrid_search(hstore, "zanzibar quokka")) == [rid]
    hstore.refute(rid, reason="false positive: rate limiter delay")
    after = hybrid_search(hstore, "zanzibar quokka")
    assert rid not in [r.record_id for r in after.candidates]
    assert after.trace.excluded == {"refuted": 1, "expired": 0, "out_of_scope": 0}
    lanes = after.trace.excluded_by_lane
    assert lanes["keyword"]["refuted"] == lanes["vector"]["refuted"] == 1  # one record, once
    assert after.trace.matched == 1
    kept = hstore.fetch(include_refuted=True, record_type="tactic")
    assert [r.id for r in kept] == [rid] and kept[0].refuted


def test_forgotten_record_is_gone_from_both_lanes(hstore):
    gone = note(hstore, "wombat canary phrase")
    stays = note(hstore, "wombat survives")
    assert set(ids(hybrid_search(hstore, "wombat"))) == {gone, stays}
    assert hstore.forget(gone, reason="test erasure") is True
    response = hybrid_search(hstore, "wombat canary phrase")
    assert gone not in [r.record_id for r in response.candidates]
    assert response.trace.matched == 0
    assert ids(hybrid_search(hstore, "wombat")) == [stays]


def test_expired_records_never_return_and_the_boundary_is_strict(hstore):
    at_now = note(hstore, "ibis expiring exactly now", expires_at=NOW)
    past = note(hstore, "ibis expired yesterday", expires_at=NOW - timedelta(days=1))
    future = note(hstore, "ibis live one more second", expires_at=NOW + timedelta(seconds=1))
    forever = note(hstore, "ibis without expiry")
    response = hybrid_search(hstore, "ibis")
    assert set(ids(response)) == {future, forever}
    found = {r.record_id for r in response.candidates}
    assert at_now not in found and past not in found
    assert response.trace.excluded["expired"] == 2
    by_id = {r.record_id: r for r in response.results}
    assert by_id[future].expires_at == format_timestamp(NOW + timedelta(seconds=1))
    assert by_id[future].trace.expires_at == by_id[future].expires_at
    assert by_id[forever].expires_at is None
    assert by_id[forever].created_at == format_timestamp(NOW)


def test_unknown_filter_key_is_refused(hstore):
    note(hstore, "anything")
    with pytest.raises(MemoryStoreError, match="is not in the scope-key allowlist"):
        hybrid_search(hstore, "anything", filters={"hostname": "a.example"})


def test_filters_restrict_both_lanes_and_count_what_they_left_out(hstore):
    mine = note(hstore, "heron payload", tier="episodic", engagement="eng-a", run_id="r1")
    note(hstore, "heron payload", tier="episodic", engagement="eng-b", run_id="r2")
    note(hstore, "heron in the knowledge base")
    response = hybrid_search(hstore, "heron payload", filters={"engagement": "eng-a"})
    assert ids(response) == [mine]
    assert [r.record_id for r in response.candidates] == [mine]
    # The keyword lane dropped eng-b's record (the knowledge note lacks "payload"); the
    # vector lane would also have had the knowledge note (it shares "heron"): 2 distinct.
    assert response.trace.excluded_by_lane["keyword"]["out_of_scope"] == 1
    assert response.trace.excluded_by_lane["vector"]["out_of_scope"] == 2
    assert response.trace.excluded["out_of_scope"] == 2
    assert response.trace.filters == {"engagement": "eng-a"}
    wider = hybrid_search(hstore, "heron", filters={"tier": "episodic"}, keyword_only=True)
    assert len(wider.results) == 2
    assert wider.trace.excluded["out_of_scope"] == 1


def test_ties_break_by_record_id_ascending(hstore):
    note(hstore, "filler about other things")
    first = note(hstore, "identical pelican text")
    second = note(hstore, "identical pelican text")
    third = note(hstore, "identical pelican text")
    response = hybrid_search(hstore, "pelican")
    top = response.results[:3]
    assert [r.record_id for r in top] == [first, second, third]
    assert top[0].score == top[1].score == top[2].score
    assert [r.rank for r in top] == [1, 2, 3]
    assert all(r.keyword_score == 1.0 for r in top)  # an all-equal pool


# ---------------------------------------------------------------- sanitizer


@pytest.mark.parametrize(
    ("query", "sanitized"),
    [
        ('SQLi OR "xss"*', "sqli or xss"),
        ("a.example/path?x=1,y='2'", "a example path x 1 y 2"),
        ("NEAR(alpha beta, 3)", "near alpha beta 3"),
        ("title:^admin +{x} -y", "title admin x y"),
        ("  test_sqli  ", "test_sqli"),
        ("CAFÉ", "café"),
        ("***  ...", ""),
    ],
)
def test_sanitize_query(query, sanitized):
    assert sanitize_query(query) == sanitized


HOSTILE = [
    "NOT",
    "sqli NOT xss",
    "sqli OR xss",
    "alpha AND",
    "NEAR(alpha beta)",
    'say "hello',
    "prefix*",
    "col:value",
    "a.example",
    "x/y",
    "don't",
    "a,b",
    "(unbalanced",
    "closing)",
    "^start",
    "-minus",
    "+plus",
    "{braces}",
    "\"'*:.,/()^-+{}",
    "AND OR NOT NEAR",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_never_break_the_keyword_lane(hstore, query):
    note(hstore, "sqli or xss and not near alpha beta a.example x y don't a b hello")
    response = hybrid_search(hstore, query)
    assert response.trace.keyword_lane_error is False
    if response.trace.terms:
        assert response.trace.query == sanitize_query(query)


def test_or_is_a_required_word_not_an_operator(plain):
    only_sqli = note(plain, "sqli probe on the search form")
    both = note(plain, "sqli or xss, whichever fires first")
    no_or = note(plain, "sqli xss combined payload")
    response = hybrid_search(plain, "sqli OR xss")
    assert response.trace.terms == ["sqli", "or", "xss"]
    assert ids(response) == [both]
    assert only_sqli not in ids(response) and no_or not in ids(response)
    any_mode = hybrid_search(plain, "sqli OR xss", any_terms=True)
    assert set(ids(any_mode)) == {only_sqli, both, no_or}
    assert any_mode.trace.match == '"sqli" OR "or" OR "xss"'


def test_not_and_near_are_words_too(plain):
    with_not = note(plain, "this is not a drill")
    without = note(plain, "a drill for the fire team")
    assert ids(hybrid_search(plain, "NOT drill")) == [with_not]
    assert set(ids(hybrid_search(plain, "drill"))) == {with_not, without}
    assert hybrid_search(plain, "NEAR drill").results == []


def test_dotted_host_matches(plain):
    rid = note(plain, "callback from a.example arrived")
    note(plain, "example without the dot")
    response = hybrid_search(plain, "a.example")
    assert response.trace.terms == ["a", "example"]
    assert ids(response) == [rid]


def test_underscore_splits_into_two_terms_as_the_index_does(plain):
    joined = note(plain, "payload test_sqli stored")
    spaced = note(plain, "test the sqli payload")
    response = hybrid_search(plain, "test_sqli")
    # unicode61 treats "_" (a connector punctuation) as a separator
    assert response.trace.terms == ["test", "sqli"]
    assert set(ids(response)) == {joined, spaced}


def test_terms_come_from_the_index_tokenizer_not_python(plain):
    rid = note(plain, "meeting at the cafe downtown")
    response = hybrid_search(plain, "CAFÉ")
    assert sanitize_query("CAFÉ") == "café"  # Python keeps the accent...
    assert response.trace.terms == ["cafe"]  # ...unicode61 removes it
    assert ids(response) == [rid]
    assert index_tokens(plain, "don’t İstanbul Straße") == ["don", "t", "istanbul", "straße"]


@pytest.mark.parametrize("query", ["*** ...", "", "   ", "\"'()", "😀 ✓"])
def test_empty_query_returns_nothing_and_says_why(hstore, query):
    note(hstore, "some record")
    response = hybrid_search(hstore, query)
    assert response.results == []
    assert response.trace.empty_query is True
    assert "empty query" in response.trace.note
    assert response.trace.keyword_lane_error is False


# ---------------------------------------------------------------- keyword lane errors


def test_keyword_lane_error_is_flagged_and_never_carried_over(tmp_path):
    broken_path, good_path = tmp_path / "broken.db", tmp_path / "good.db"
    with MemoryStore(broken_path, clock=clock, embedder=HashEmbedder()) as store:
        note(store, "osprey nest")
    shutil.copy(broken_path, good_path)
    raw = sqlite3.connect(broken_path)
    raw.execute("DROP TABLE records_fts_idx")  # a damaged full-text index
    raw.commit()
    raw.close()
    with MemoryStore(broken_path, clock=clock, read_only=True) as broken:
        failed = hybrid_search(broken, "osprey")
    assert failed.trace.keyword_lane_error is True
    assert "full-text query failed" in failed.trace.keyword_lane_message
    assert failed.trace.pools["keyword"].size == 0
    assert failed.trace.pools["vector"].size == 1  # the vector lane still ran
    with MemoryStore(good_path, clock=clock, read_only=True) as good:
        fine = hybrid_search(good, "osprey")
        nothing = hybrid_search(good, "albatross")
    assert fine.trace.keyword_lane_error is False
    assert fine.trace.keyword_lane_message is None
    assert fine.results[0].keyword_score == 1.0
    assert nothing.trace.keyword_lane_error is False  # no match is not an error
    assert nothing.trace.pools["keyword"].size == 0


# ---------------------------------------------------------------- limits, rerank


def test_limit_truncates_and_says_so(plain):
    for i in range(5):
        note(plain, f"gannet number {i}")
    response = hybrid_search(plain, "gannet", limit=3)
    assert len(response.results) == 3 and len(response.candidates) == 5
    assert response.trace.truncated is True
    assert hybrid_search(plain, "gannet", limit=5).trace.truncated is False


def test_pool_size_caps_each_lane(hstore):
    for i in range(6):
        note(hstore, "kestrel " + "word " * i)
    response = hybrid_search(hstore, "kestrel", pool_size=4, limit=50)
    assert response.trace.pools["keyword"].size == 4
    assert response.trace.pools["keyword"].limit == 4
    assert response.trace.pools["vector"].size == 4
    assert response.trace.matched == 6


def test_rerank_re_merges_without_querying(hstore):
    for text in ("sql injection items api", "items api", "sql", "injection in items"):
        note(hstore, text)
    response = hybrid_search(hstore, "sql injection items api", limit=10)
    hstore.close()  # rerank must not need the store
    keyword_heavy = rerank(response, {"keyword": 1.0, "vector": 0.0})
    assert keyword_heavy.trace.weights == {"keyword": 1.0, "vector": 0.0}
    expected = sorted(response.candidates, key=lambda r: (-r.keyword_score, r.record_id))
    assert ids(keyword_heavy) == [r.record_id for r in expected][:10]
    for result in keyword_heavy.results:
        assert result.score == 1.0 * result.keyword_score + 0.0 * result.vector_score
        previous = {r.record_id: r.rank for r in response.candidates}[result.record_id]
        assert result.trace.previous_rank == previous
    back = rerank(keyword_heavy, (0.3, 0.7))
    assert [(r.record_id, r.score) for r in back.results] == [
        (r.record_id, r.score) for r in response.results
    ]
    assert response.trace.weights == {"keyword": 0.3, "vector": 0.7}  # original untouched


def test_rerank_of_a_fallback_keeps_keyword_only(plain):
    note(plain, "merlin falcon")
    response = hybrid_search(plain, "falcon")
    moved = rerank(response, {"keyword": 0.5, "vector": 0.5})
    assert moved.trace.weights == {"keyword": 1.0, "vector": 0.0}
    assert moved.trace.requested_weights == {"keyword": 0.5, "vector": 0.5}


@pytest.mark.parametrize("weights", [{"keyword": -1, "vector": 1}, (0, 0), {"bm25": 1}, (1,)])
def test_bad_weights_are_refused(plain, weights):
    with pytest.raises(ValueError):
        hybrid_search(plain, "x", weights=weights)


# ---------------------------------------------------------------- BM25 explanation


@pytest.fixture
def bm25_store(plain):
    texts = [
        "alpha beta",
        "alpha alpha alpha beta gamma",  # a term repeated in the record
        "beta gamma delta epsilon zeta eta theta iota kappa lambda alpha",
        "gamma only here",
        "delta delta",
        "alpha",
    ]
    record_ids = [note(plain, text) for text in texts]
    for i in range(10):  # filler rows keep every idf above FTS5's clamp
        note(plain, f"unrelated filler text {i}")
    return plain, record_ids


@pytest.mark.parametrize(
    "query", ["alpha", "alpha beta", "alpha alpha", "beta alpha gamma", "gamma alpha alpha"]
)
def test_explanation_sums_to_fts5_bm25(bm25_store, query):
    store, record_ids = bm25_store
    terms = index_tokens(store, query)
    checked = 0
    for rid in record_ids:
        fts = fts_raw(store, terms, rid)
        detail = explain_keyword(store, query, rid)
        assert [t["term"] for t in detail["terms"]] == terms  # repeated terms stay twice
        if fts is None:
            assert detail["bm25"] is None
            assert detail["total"] == 0.0
            continue
        checked += 1
        assert fts > 0.1  # so that the 1e-6 tolerance below means something
        assert detail["total"] == pytest.approx(fts, abs=1e-6)
        assert detail["bm25"] == pytest.approx(-fts, abs=1e-12)
        assert sum(t["contribution"] for t in detail["terms"]) == pytest.approx(fts, abs=1e-6)
        assert all(t["contribution"] > 0 for t in detail["terms"] if t["tf"])
        all_terms = fts_raw(store, terms, rid, joiner=" ")  # the keyword lane's AND query
        if all_terms is not None:
            assert detail["total"] == pytest.approx(all_terms, abs=1e-6)
    assert checked >= 3


def test_explanation_terms_hold_the_bm25_inputs(bm25_store):
    store, record_ids = bm25_store
    detail = explain_keyword(store, "alpha alpha gamma", record_ids[1])
    alpha, alpha_again, gamma = detail["terms"]
    assert alpha == alpha_again  # a term repeated in the query contributes twice
    assert (alpha["tf"], alpha["df"], alpha["doc_len"]) == (3, 4, 5)
    assert (gamma["tf"], gamma["df"]) == (1, 3)
    assert (detail["rows"], detail["doc_len"]) == (16, 5)
    assert alpha["avg_len"] == (2 + 5 + 11 + 3 + 2 + 1 + 10 * 4) / 16
    assert (alpha["k1"], alpha["b"]) == (1.2, 0.75)
    assert alpha["idf"] == pytest.approx(math.log((16 - 4 + 0.5) / (4 + 0.5)))
    tf, norm = 3, 1.2 * (1 - 0.75 + 0.75 * 5 / 4.0)
    assert alpha["contribution"] == pytest.approx(alpha["idf"] * tf * 2.2 / (tf + norm))
    total = 2 * alpha["contribution"] + gamma["contribution"]
    assert detail["total"] == pytest.approx(total, abs=1e-12)
    assert detail["total"] == pytest.approx(
        fts_raw(store, ["alpha", "alpha", "gamma"], record_ids[1]), abs=1e-6
    )


def test_explanation_clamps_a_non_positive_idf_like_fts5(plain):
    rows = [note(plain, text) for text in ("wren one", "wren two", "wren three", "other")]
    detail = explain_keyword(plain, "wren", rows[0])
    # df 3 of 4 rows: ln((4 - 3 + 0.5) / 3.5) < 0, so FTS5 uses 1e-6
    assert detail["terms"][0]["idf"] == 1e-6
    assert detail["total"] == pytest.approx(fts_raw(plain, ["wren"], rows[0]), abs=1e-12)


def test_explanation_uses_the_whole_index_including_refuted_and_expired(tmp_path):
    with MemoryStore(tmp_path / "x.db", clock=clock) as store:
        live = note(store, "plover sighting report")
        note(store, "plover expired", expires_at=NOW - timedelta(days=1))
        tactic = store.record_success(
            profile_hash=PROFILE, tool="t", endpoint="/e", param="p", content="plover tactic"
        )
        store.refute(tactic, reason="wrong")
        note(store, "unrelated one")
        note(store, "unrelated two")
        note(store, "unrelated three")
        detail = explain_keyword(store, "plover", live)
        assert detail["rows"] == 6
        assert detail["terms"][0]["df"] == 3
        response = hybrid_search(store, "plover")
        assert ids(response) == [live]
        assert response.results[0].trace.keyword.raw == pytest.approx(detail["total"], abs=1e-6)


def test_explaining_a_missing_record_is_an_error(plain):
    with pytest.raises(MemoryStoreError, match="no record with id 99"):
        explain_keyword(plain, "x", 99)


# ---------------------------------------------------------------- sample corpus


def sqlmap_tactic(store):
    return next(
        r
        for r in store.fetch(record_type="tactic", tool_name="sqlmap")
        if (r.metadata["total_successes"], r.metadata["total_attempts"]) == (12, 23)
    )


def test_sample_corpus_search_finds_the_sqlmap_tactic_and_adds_up(sample_store):
    tactic = sqlmap_tactic(sample_store)
    query = "sql injection items api"
    response = hybrid_search(sample_store, query)
    assert response.trace.fallback is None
    assert response.trace.embedder == "hash-256"
    assert response.trace.terms == ["sql", "injection", "items", "api"]
    assert response.trace.pools["keyword"].size == 8
    # No keyword match was left out; one expired record would have been in the vector pool.
    assert response.trace.excluded_by_lane["keyword"] == {
        "refuted": 0,
        "expired": 0,
        "out_of_scope": 0,
    }
    assert response.trace.excluded == {"refuted": 0, "expired": 1, "out_of_scope": 0}
    assert response.trace.vectors_missing == 0
    found = {r.record_id: r for r in response.results}
    assert tactic.id in found
    hit = found[tactic.id]
    assert hit.trace.found_by == ["keyword", "vector"]
    assert_adds_up(response)
    for result in response.results:
        if result.trace.keyword.raw is None:
            continue
        detail = explain_keyword(sample_store, query, result.record_id)
        assert detail["total"] == pytest.approx(result.trace.keyword.raw, abs=1e-6)
    # the tactic is the longest of the eight keyword matches, so BM25 puts it at the
    # bottom of the keyword pool (normalized 0.0); only its vector score carries it
    assert hit.keyword_score == 0.0
    assert hit.score == 0.7 * hit.vector_score


def test_search_on_a_read_only_store_leaves_the_file_untouched(sample_db):
    before = hashlib.sha256(sample_db.read_bytes()).hexdigest()
    with MemoryStore(sample_db, clock=clock, read_only=True) as store:
        response = hybrid_search(store, "sql injection items api")
        explain_keyword(store, "sql injection items api", response.results[0].record_id)
        assert index_tokens(store, "Time-Based") == ["time", "based"]
    assert hashlib.sha256(sample_db.read_bytes()).hexdigest() == before


def test_same_query_same_file_same_order(sample_store):
    first = hybrid_search(sample_store, "xss search term", limit=30)
    second = hybrid_search(sample_store, "xss search term", limit=30)
    assert [(r.record_id, r.score) for r in first.results] == [
        (r.record_id, r.score) for r in second.results
    ]
    keys = [(-r.score, r.record_id) for r in first.results]
    assert keys == sorted(keys)


def test_ingested_corpus_rows_are_searchable(tmp_path):
    rows = prepare_corpus(
        [
            {"tier": "knowledge", "record_type": "reference", "content": "puffin colony guide"},
            {"tier": "working", "record_type": "note", "content": "puffin count pending"},
        ]
    )
    with MemoryStore(tmp_path / "c.db", clock=clock, embedder=HashEmbedder()) as store:
        loaded = store.ingest(rows)
        response = hybrid_search(store, "puffin")
    assert sorted(ids(response)) == loaded


# ---------------------------------------------------------------- command line


def test_cli_search_explain_shows_the_arithmetic(runner, cli_db):
    result = runner.invoke(main, ["search", str(cli_db), "sql injection items api", "--explain"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "terms: sql · injection · items · api" in out
    assert (
        "  keyword  raw 5.0891087 → (5.0891087 − 4.1285918) / (5.0891087 − 4.1285918) "
        "= 1.000000 × 0.3 = 0.3000000"
    ) in out
    assert (
        "  vector   raw 0.54772256 → (0.54772256 − 0.05227084) / (0.56195149 − 0.05227084) "
        "= 0.972083 × 0.7 = 0.6804581"
    ) in out
    assert "  score    0.3000000 + 0.6804581 = 0.9804581 ≈ 0.980458   adds up: yes" in out
    assert out.count("adds up: yes") == 10
    assert "adds up: NO" not in out
    assert "BM25 by term" in out and "contribution" in out
    assert "keyword pool: 8 matches, -bm25 min 4.1285918, max 5.0891087" in out
    assert "  keyword  not found by this lane → 0 × 0.3 = 0 " in out
    assert "sum 5.089109 = -bm25() 5.089109" in out


def test_cli_search_says_on_stderr_when_it_builds_the_vector_cache(runner, cli_db, monkeypatch):
    quick = runner.invoke(main, ["search", str(cli_db), "sql injection"])
    assert quick.exit_code == 0 and quick.stderr == ""  # a build of milliseconds says nothing
    monkeypatch.setattr(search_command, "QUIET_BUILD_SECONDS", 0.0)  # as if it took long
    slow = runner.invoke(main, ["search", str(cli_db), "sql injection"])
    assert slow.exit_code == 0, slow.output
    assert slow.stderr == "building the vector cache (once after vectors change)...\n"
    assert slow.stdout == quick.stdout  # the results themselves go to stdout, the same
    keyword = runner.invoke(main, ["search", str(cli_db), "sql injection", "--keyword-only"])
    assert keyword.exit_code == 0 and keyword.stderr == ""  # no vector lane: nothing built


def test_cli_search_json_parses_and_recomputes(runner, cli_db):
    result = runner.invoke(
        main, ["search", str(cli_db), "sql injection items api", "--json", "--explain"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["query"] == "sql injection items api"
    assert data["trace"]["weights"] == {"keyword": 0.3, "vector": 0.7}
    assert len(data["results"]) == 10
    for item in data["results"]:
        search = item["search"]
        assert item["state"] == "live"
        assert search["score"] == (
            search["weights"]["keyword"] * search["keyword"]["normalized"]
            + search["weights"]["vector"] * search["vector"]["normalized"]
        )
        if search["keyword"]["raw"] is not None:
            assert search["bm25"]["total"] == pytest.approx(search["keyword"]["raw"], abs=1e-6)
    assert [i["search"]["rank"] for i in data["results"]] == list(range(1, 11))


def test_cli_keyword_only_and_weights(runner, cli_db):
    result = runner.invoke(
        main, ["search", str(cli_db), "items", "--keyword-only", "--json", "--limit", "3"]
    )
    data = json.loads(result.stdout)
    assert "keyword-only" in data["trace"]["fallback"]
    assert len(data["results"]) == 3
    weighted = runner.invoke(
        main, ["search", str(cli_db), "items", "--weights", "0.5,0.5", "--json"]
    )
    assert json.loads(weighted.stdout)["trace"]["weights"] == {"keyword": 0.5, "vector": 0.5}
    bad = runner.invoke(main, ["search", str(cli_db), "items", "--weights", "1"])
    assert bad.exit_code != 0 and "--weights" in bad.output


def test_cli_filters_restrict(runner, cli_db):
    result = runner.invoke(
        main,
        ["search", str(cli_db), "injection", "--engagement", "globex-retest", "--json"],
    )
    data = json.loads(result.stdout)
    assert data["results"]
    assert {i["scope"]["engagement"] for i in data["results"]} == {"globex-retest"}


def test_cli_unknown_filter_is_one_line(runner, cli_db):
    result = runner.invoke(main, ["search", str(cli_db), "items", "--filter", "hostname=x"])
    assert "is not in the scope-key allowlist" in one_error_line(result)


def test_cli_unknown_embedder_is_one_line(runner, cli_db):
    result = runner.invoke(main, ["search", str(cli_db), "items", "--embedder", "bert"])
    assert "unknown embedder 'bert'" in one_error_line(result)


@pytest.mark.parametrize("query", ["", "   ", "***", "*** ...", "…", "\x1b[\x07"])
def test_cli_empty_query_is_an_error_that_says_why(runner, cli_db, query):
    for args in (["search", str(cli_db), query], ["search", str(cli_db), query, "--json"]):
        result = runner.invoke(main, args)
        line = one_error_line(result)
        assert line.startswith("Error: empty query: nothing searchable is left"), line
        assert line.endswith("give a word to search for") and "\x1b" not in line
        assert result.stdout == ""


def test_cli_reindex_switches_the_embedder(runner, cli_db):
    result = runner.invoke(main, ["reindex", str(cli_db), "--embedder", "hash-64"])
    assert result.exit_code == 0, result.output
    assert "re-indexed 72 records" in result.stdout and "hash-64 (64 dims)" in result.stdout
    after = json.loads(runner.invoke(main, ["search", str(cli_db), "items", "--json"]).stdout)
    assert after["trace"]["embedder"] == "hash-64"
    assert after["trace"]["fallback"] is None
    old = runner.invoke(main, ["search", str(cli_db), "items", "--embedder", "hash", "--json"])
    assert "written by hash-64 (64 dims)" in json.loads(old.stdout)["trace"]["fallback"]
    with MemoryStore(cli_db, read_only=True) as store:
        event = store.audit_events(limit=1)[0]
    assert (event["action"], event["details"]["embedder"]) == ("reindex", "hash-64")
