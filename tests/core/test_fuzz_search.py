"""Property-based tests of the query sanitizer, normalization and merge."""

import re

import pytest
from conftest import fixed_clock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtui.core.embed import HashEmbedder
from memtui.core.search import hybrid_search, merge_score, min_max_normalize, sanitize_query
from memtui.core.store import MemoryStore

BAREWORDS_AND_SPACES = re.compile(r"^[0-9a-z_\u0080-\U0010ffff ]*$")


@given(st.text())
def test_sanitizer_never_raises_and_leaves_only_bare_words(text):
    clean = sanitize_query(text)
    assert BAREWORDS_AND_SPACES.match(clean)
    assert clean == clean.strip() and "  " not in clean
    for operator in ('"', "*", ":", "(", ")", "^", "+", "-", "{", "}", "."):
        assert operator not in clean


@pytest.fixture(scope="module")
def fuzz_store():
    store = MemoryStore(clock=fixed_clock, embedder=HashEmbedder(64))
    for text in (
        "sql injection in items api",
        "not or near and",
        "café crème on a.example",
        "données 注入 攻撃 🙂 payload",
        "test_sqli param q",
    ):
        store.add_record(tier="knowledge", record_type="reference", content=text)
    yield store
    store.close()


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.text(
        alphabet=st.sampled_from(list("abc NOT OR NEAR AND \"*:^()+-{}.,/'\\ \t\n_éü注🙂\x00\x1b"))
        | st.characters(),
        max_size=40,
    )
)
def test_any_query_runs_without_a_keyword_lane_error(fuzz_store, query):
    response = hybrid_search(fuzz_store, query)
    assert response.trace.keyword_lane_error is False
    for result in response.results:
        assert 0.0 <= result.keyword_score <= 1.0 and 0.0 <= result.vector_score <= 1.0
        weights = result.trace.weights
        assert result.score == pytest.approx(
            weights["keyword"] * result.keyword_score + weights["vector"] * result.vector_score
        )


@given(st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), max_size=50))
def test_min_max_stays_in_unit_range_and_keeps_order(values):
    normalized = min_max_normalize(values)
    assert len(normalized) == len(values)
    assert all(0.0 <= v <= 1.0 for v in normalized)
    for a, na in zip(values, normalized, strict=True):
        for b, nb in zip(values, normalized, strict=True):
            if a < b:
                assert na <= nb
    if values and len(set(values)) == 1:
        assert normalized == [1.0] * len(values)


unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(unit, unit, unit)
def test_merge_is_the_weighted_sum_and_stays_in_range(keyword, vector, w):
    weights = {"keyword": w, "vector": 1.0 - w}
    merged = merge_score(keyword, vector, weights)
    assert merged == pytest.approx(w * keyword + (1.0 - w) * vector)
    assert -1e-12 <= merged <= 1.0 + 1e-12


def test_a_lone_surrogate_in_a_query_is_a_separator(fuzz_store):
    """Found by the fuzzer: '\\ud800' used to reach SQLite and fail to encode."""
    assert sanitize_query("sql\ud800injection") == "sql injection"
    assert hybrid_search(fuzz_store, "\ud800").results == []
