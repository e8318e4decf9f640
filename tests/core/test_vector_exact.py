"""The vector lane's exact pass gives ``cosine()``'s bits, and the lane its ranking.

``_exact_cosines`` recomputes, for the rows near the pool's edge, the cosine
that ``cosine()`` gives row by row: float64 products added one position at a
time from the first. Any other order of the same additions (pairs, blocks,
backwards, a BLAS dot) gives other last bits on some vectors; these tests
compare bits, on vectors built for ties and on vectors where orders differ.
"""

import math
from unittest import mock

import numpy as np
import pytest
from conftest import fixed_clock, vector_pool_row_by_row
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from memtui.core import vector_cache
from memtui.core.embed import HashEmbedder
from memtui.core.search import cosine
from memtui.core.search import vector as vector_module
from memtui.core.search.vector import _exact_cosines, vector_lane
from memtui.core.store import MemoryStore, pack_vector


def bits(values):
    """float64 values as their bit patterns (tells 0.0 from -0.0)."""
    return np.asarray(values, dtype=np.float64).view(np.int64).tolist()


def exact(matrix, rows, query):
    query = np.asarray(query, dtype=np.float64)
    return _exact_cosines(matrix, np.asarray(rows), query, float(np.cumsum(query * query)[-1]))


def row_by_row(matrix, rows, query):
    return [cosine(list(query), matrix[r].tolist()) for r in rows]


# Values over a wide range of magnitudes, signs and zeros (of both signs): any change
# of the order in which products are added changes some sum's last bits.
FLOAT32 = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 3.0]),
    st.floats(
        width=32, allow_nan=False, allow_infinity=False, min_value=-(2.0**40), max_value=2.0**40
    ),
)
QUERY = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15)


@st.composite
def tied_rows(draw):
    """A matrix whose rows repeat (whole rows, and values within rows), rows asked for in
    any order and more than once, and a query: what a hashing vector meets at the edge."""
    dim = draw(st.integers(1, 48))
    palette = draw(st.lists(FLOAT32, min_size=1, max_size=6))
    distinct = draw(
        st.lists(st.lists(st.sampled_from(palette), min_size=dim, max_size=dim), min_size=1)
    )
    picks = draw(st.lists(st.integers(0, len(distinct) - 1), min_size=1, max_size=24))
    matrix = np.array([distinct[i] for i in picks], dtype=np.float32)
    rows = draw(st.lists(st.integers(0, len(picks) - 1), min_size=1, max_size=30))
    query = draw(st.lists(st.one_of(st.sampled_from(palette), QUERY), min_size=dim, max_size=dim))
    return matrix, rows, query


@st.composite
def random_rows(draw):
    dim = draw(st.integers(1, 96))
    count = draw(st.integers(1, 16))
    matrix = draw(arrays(np.float32, (count, dim), elements=FLOAT32))
    rows = draw(st.lists(st.integers(0, count - 1), min_size=1, max_size=20))
    query = draw(st.lists(QUERY, min_size=dim, max_size=dim))
    return matrix, rows, query


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tied_rows())
def test_exact_cosines_are_cosines_bits_on_tied_rows(case):
    matrix, rows, query = case
    assert bits(exact(matrix, rows, query)) == bits(row_by_row(matrix, rows, query))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_rows())
def test_exact_cosines_are_cosines_bits_on_random_rows(case):
    matrix, rows, query = case
    assert bits(exact(matrix, rows, query)) == bits(row_by_row(matrix, rows, query))


# Chunks of many rows are added up by columns (a position of every row per call): the
# same cases with every chunk taken that way.


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tied_rows())
def test_exact_cosines_by_columns_are_cosines_bits_on_tied_rows(case):
    matrix, rows, query = case
    with mock.patch.object(vector_module, "COLUMN_SUM_MIN_ROWS", 1):
        assert bits(exact(matrix, rows, query)) == bits(row_by_row(matrix, rows, query))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_rows())
def test_exact_cosines_by_columns_are_cosines_bits_on_random_rows(case):
    matrix, rows, query = case
    with mock.patch.object(vector_module, "COLUMN_SUM_MIN_ROWS", 1):
        assert bits(exact(matrix, rows, query)) == bits(row_by_row(matrix, rows, query))


def _kept_squares(matrix):
    """The per-row sums of squares the lane keeps for a small matrix (``_row_squares``)."""
    cached = vector_cache.VectorMatrix(
        np.arange(len(matrix)),
        matrix,
        np.ones(len(matrix), np.float32),
        matrix.shape[1],
        "test",
        None,
        "memory",
    )
    return vector_module._row_squares(cached)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(tied_rows(), random_rows()), st.sampled_from([1, 10**9]))
def test_exact_cosines_from_kept_squares_are_cosines_bits(case, column_min):
    """The sums of squares kept per row, added up by columns or along rows, then the
    products with the query, give cosine()'s bits."""
    matrix, rows, query = case
    with mock.patch.object(vector_module, "COLUMN_SUM_MIN_ROWS", column_min):
        squares = _kept_squares(matrix)
        query64 = np.asarray(query, dtype=np.float64)
        got = _exact_cosines(
            matrix, np.asarray(rows), query64, float(np.cumsum(query64 * query64)[-1]), squares
        )
    assert bits(got) == bits(row_by_row(matrix, rows, query))


def _orders(products):
    """The sum of ``products`` added in other orders than cosine()'s."""
    return {
        "pairwise (np.sum)": float(np.sum(products)),
        "backwards": _sequential(products[::-1]),
        "exactly rounded (fsum)": math.fsum(products),
        "BLAS dot": float(np.dot(products, np.ones_like(products))),
    }


def _sequential(values):
    total = 0.0
    for value in values:
        total += value
    return total


@pytest.mark.parametrize("by", ["rows", "columns", "kept squares"])
def test_exact_cosines_keep_cosines_order_where_other_orders_differ(monkeypatch, by):
    """Rows on which every other order of the additions gives other bits: a change of the
    exact pass's summation order (to a pairwise sum, a dot, ...) fails here, for chunks
    added along each row, chunks added by columns, and the sums of squares kept per row
    (each other order of those alone changes some row's bits too)."""
    monkeypatch.setattr(vector_module, "COLUMN_SUM_MIN_ROWS", 1 if by == "columns" else 10**9)
    rng = np.random.default_rng(11)
    dim = 96
    matrix = (rng.standard_normal((64, dim)) * 10.0 ** rng.integers(-6, 7, (64, dim))).astype(
        np.float32
    )
    query = rng.standard_normal(dim) * 10.0 ** rng.integers(-6, 7, dim)
    rows = list(range(64))
    want = row_by_row(matrix, rows, query)
    if by == "kept squares":
        query_sq = float(np.cumsum(query * query)[-1])
        got = _exact_cosines(matrix, np.asarray(rows), query, query_sq, _kept_squares(matrix))
    else:
        got = exact(matrix, rows, query)
    assert bits(got) == bits(want)
    # The check has teeth: for every other order, some row's cosine differs in its bits.
    for name in _orders(np.ones(8)):
        changed = 0
        for row in rows:
            values = matrix[row].astype(np.float64)
            dot = _orders(values * query)[name]
            if by == "kept squares":
                dot = _sequential(values * query)
            norm = _orders(values * values)[name]
            other = dot / (math.sqrt(_sequential(query * query)) * math.sqrt(norm))
            changed += bits([other]) != bits([want[row]])
        assert changed, name


@pytest.mark.parametrize("column_min", [1, 10**9])
def test_an_all_negative_zero_sum_is_cosines_positive_zero(monkeypatch, column_min):
    """cosine() starts its sums at 0.0: products that are all -0.0 add up to 0.0 there
    (a sum started at the first product would stay -0.0)."""
    monkeypatch.setattr(vector_module, "COLUMN_SUM_MIN_ROWS", column_min)
    matrix = np.array([[-1.0, -0.0, 2.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    query = [0.0, 5.0, -0.0]  # row 0's products: -0.0, -0.0, -0.0
    got = exact(matrix, [0, 1], query)
    assert bits(got) == bits(row_by_row(matrix, [0, 1], query)) == bits([0.0, 0.0])


@pytest.mark.parametrize("column_min", [1, 6, 10**9])
def test_exact_cosines_in_chunks_are_the_same(monkeypatch, column_min):
    """Chunks of 7 rows (the last of 1), added by columns, along rows, or both."""
    monkeypatch.setattr(vector_module, "COLUMN_SUM_MIN_ROWS", column_min)
    rng = np.random.default_rng(5)
    matrix = rng.standard_normal((50, 24)).astype(np.float32)
    matrix[10:20] = matrix[3]  # ties across a chunk's border
    query = rng.standard_normal(24)
    rows = list(range(49, -1, -1))
    whole = exact(matrix, rows, query)
    monkeypatch.setattr(vector_module, "EXACT_CHUNK_VALUES", 7 * 24 + 5)  # 7 rows a chunk
    assert bits(exact(matrix, rows, query)) == bits(whole) == bits(row_by_row(matrix, rows, query))


# ---------------------------------------------------------------- the lane


WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()


@pytest.mark.parametrize("pool_size", [1, 5, 40, 150, 400])
def test_the_lane_is_the_row_by_row_pool_with_ties_odd_rows_and_several_rounds(
    tmp_path, monkeypatch, pool_size
):
    """Hundreds of rows tied (8 hashing buckets), rows of zeros, of tiny and of huge
    values, random queries (half the rows below 0: the lane takes several rounds) and a
    query of zeros: the pool, its order and its scores' bits are the row-by-row ones."""
    monkeypatch.setenv(vector_cache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    embedder = HashEmbedder(8)
    rng = np.random.default_rng(17)
    with MemoryStore(tmp_path / "t.db", clock=fixed_clock, embedder=embedder) as store:
        ids = [
            store.add_record(
                tier="knowledge",
                record_type="note",
                content=" ".join(rng.choice(WORDS, size=int(rng.integers(1, 4)))),
                expires_at="2026-11-29T00:00:00Z" if i % 17 == 0 else None,
            )
            for i in range(300)
        ]
        odd = {
            ids[1]: [0.0] * 8,
            ids[2]: [1e-30, 0.0, 2e-30, 0.0, 0.0, 0.0, 0.0, -1e-30],
            ids[3]: [1e30, 1e30, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            ids[4]: [1e-42, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],  # a float32 subnormal
        }
        for rid, vector in odd.items():
            store.connection.execute(
                "UPDATE vectors SET vector = ? WHERE record_id = ?", (pack_vector(vector), rid)
            )
        store.connection.commit()
        queries = [embedder([q])[0] for q in ("alpha", "golf hotel", "kilo lima alpha")]
        queries += [rng.standard_normal(8).tolist() for _ in range(3)]
        queries += [[1.0] + [0.0] * 7, [0.0] * 8]
        for query in queries:
            lane = vector_lane(store, query, None, pool_size)
            want = vector_pool_row_by_row(store, query, pool_size)
            assert [i for i, _ in lane.raw.items()] == [i for i, _ in want]
            assert bits(list(lane.raw.values())) == bits([s for _, s in want])


# ---------------------------------------------------------------- the rounds


def full_round(approx, take, bound):
    """A round's rows by a full sort: every row within twice the bound below the
    ``take``-th best approximate score (or at or above the floor, -bound)."""
    floor = np.float32(-bound)
    if float(floor) > -bound:
        floor = np.nextafter(floor, np.float32(-np.inf))
    limit = floor
    if take < len(approx):
        kth = float(np.sort(approx)[::-1][take - 1])
        if kth - 2.0 * bound > float(floor):
            limit = np.nextafter(np.float32(kth - 2.0 * bound), np.float32(-np.inf))
    return limit, np.flatnonzero(approx >= limit), floor


@pytest.mark.parametrize("shape", ["random", "ties", "one score", "negative", "unknown", "gone"])
@pytest.mark.parametrize("take", [1, 37, 132])
def test_a_first_round_from_a_sample_takes_the_rows_a_full_sort_takes(shape, take):
    rng = np.random.default_rng(len(shape) * 1000 + take)
    n = 60_000
    approx = rng.standard_normal(n).astype(np.float32) / 10
    if shape == "ties":  # a hashing vector's few distinct scores
        approx = rng.choice(np.array([0.1, 0.2, 0.45, 0.5, 0.7, 0.9], np.float32), n)
    elif shape == "one score":
        approx[:] = np.float32(0.47)
        approx[rng.choice(n, 300, replace=False)] = np.float32(0.8)
    elif shape == "negative":
        approx = -np.abs(approx)
    elif shape == "unknown":  # rows the exact pass must decide
        approx[rng.choice(n, 50, replace=False)] = np.inf
    elif shape == "gone":  # hidden rows, and the best rows packed where a sample misses them
        approx[rng.choice(n, n // 2, replace=False)] = -np.inf
        approx[np.arange(1, 4000, 7)] = np.float32(0.95)
    bound = 2.0 * (2 * 32 + 16) * 2.0**-24
    limit, want, floor = full_round(approx, take, bound)
    got_limit, got = vector_module._next_rows(approx, take, bound, floor, None)
    assert got_limit == limit
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize("kept_squares", [True, False])
def test_the_lane_over_thousands_of_rows_is_the_row_by_row_pool(
    tmp_path, monkeypatch, kept_squares
):
    """Enough rows for the first round to start from a sample; vectors of a few
    distinct values (ties by the hundred), some of them the same row; the rows' sums
    of squares kept with the matrix, or added up at each search."""
    monkeypatch.setenv(vector_cache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    if not kept_squares:
        monkeypatch.setattr(vector_module, "SQUARES_MAX_VALUES", 0)
    rng = np.random.default_rng(23)
    n = 6000
    vectors = rng.choice(np.array([0.0, 0.0, 1.0, 2.0, -1.0], np.float32), (n, 8))
    vectors[::50] = vectors[7]
    rows = [{"tier": "knowledge", "record_type": "note", "content": f"n{i}"} for i in range(n)]
    with MemoryStore(tmp_path / "big.db", clock=fixed_clock, embedder=HashEmbedder(8)) as store:
        store.ingest(rows, vectors=vectors, embedder_name="hash-8")
        for query in (vectors[7].tolist(), rng.standard_normal(8).tolist(), [1.0] * 8):
            for pool_size in (5, 20, 100):
                lane = vector_lane(store, query, None, pool_size)
                want = vector_pool_row_by_row(store, query, pool_size)
                assert [i for i, _ in lane.raw.items()] == [i for i, _ in want]
                assert bits(list(lane.raw.values())) == bits([s for _, s in want])
        assert (vector_cache.load(store).squares is not None) is kept_squares
