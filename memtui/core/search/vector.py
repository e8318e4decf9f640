"""The vector lane: stored embeddings ranked by cosine to the query vector."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memtui.core import vector_cache
from memtui.core.index import SearchIndex
from memtui.core.search.hidden import (
    dates_of,
    hidden_rows,
    ids_from,
    members,
    np_module,
)
from memtui.core.search.scores import EXCLUSION_REASONS, Lane, VectorMismatch, lane_from_ranking


def vector_lane(
    store: SearchIndex,
    query_vector: Sequence[float],
    filters: Mapping[str, Any] | None,
    pool_size: int,
    cancelled: Callable[[], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Lane:
    """Top ``pool_size`` live, in-scope records by cosine to the query vector.

    Only records with a positive cosine are found by this lane: a record that
    shares nothing with the query (cosine 0 or less) is absent from the lane
    and scores 0 there, exactly like a record the keyword lane did not match.
    Otherwise min-max normalization would hand unrelated records vector credit.

    The stored vectors come as one matrix (``memtui.core.vector_cache``). A
    float32 product ranks every row at memory speed; the rows that can still
    reach the pool (an approximate score within the product's rounding bound of
    the pool's last exact score) get their cosine recomputed exactly as
    ``cosine()`` does it, in float64 summed in order, so scores and ties are the
    same as a row-by-row computation would give.

    The lane also says what it left out, from what the matrix already holds
    (no scan of the records): ``dropped``, by reason, the records hidden by the
    live rule or out of scope that would have been in the pool had they been
    live and in scope (see ``_would_enter``); and ``missing``, how many live,
    in-scope records have no stored vector (so can never be found by it).
    """
    np = np_module()
    filters = dict(filters or {})
    cached = vector_cache.load(store, cancelled, progress)
    if cached is None:
        return lane_from_ranking((), pool_size)
    hidden = hidden_rows(store)
    now = store.now_text()
    if len(cached) == 0 and not cached.bad:
        return _no_vectors_lane(store, filters, hidden.live_total, now, pool_size)
    dim = len(query_vector)
    if cached.bad or cached.dim != dim:
        _check_dimensions(store, cached, dim, filters)
    if len(cached) == 0:
        return _no_vectors_lane(store, filters, hidden.live_total, now, pool_size)
    ids = cached.ids
    query64 = np.asarray(query_vector, dtype=np.float64)
    approx, removed = _approximate_cosines(cached, query64)
    # Rows that cannot be in the lane: hidden by the live rule, or out of scope.
    # Their scores are kept aside to count the ones that would have made the pool.
    refuted_rows, expired_rows = hidden.matrix_rows_by_reason(store, cached, now)
    kept = {"refuted": approx[refuted_rows], "expired": approx[expired_rows]}
    approx[refuted_rows] = -np.inf
    approx[expired_rows] = -np.inf
    before: Any = None
    in_scope: Any = None
    if filters:
        scope = _scope_ids(store, filters)
        in_scope = members(scope, ids)
        missing = len(scope) - int(np.count_nonzero(in_scope))
        before = approx.copy()  # hidden and gone rows are -inf in it already
        approx[~in_scope] = -np.inf
    else:
        with_vector = len(ids) - removed - len(refuted_rows) - len(expired_rows)
        missing = hidden.live_total(store, now) - with_vector
    # |approx - cosine| <= bound: float32 rounding of the products, the sums
    # and the norms, doubled for safety.
    bound = 2.0 * (2 * dim + 16) * 2.0**-24
    best, dates = _best_rows(store, cached, approx, query64, bound, filters, pool_size)
    lane = lane_from_ranking(best, pool_size, dates)
    lane.missing = max(0, missing)
    if before is not None:
        # Out of scope and live: only rows near or above the pool's line can count.
        line = best[-1][1] if len(best) >= pool_size else 0.0
        outside = np.flatnonzero((before >= np.float32(line - bound)) & ~in_scope)
        kept["out_of_scope"] = before[outside]
    else:
        outside = None
    rows_of = {"refuted": refuted_rows, "expired": expired_rows, "out_of_scope": outside}
    lane.dropped = _dropped(cached, rows_of, kept, query64, bound, best, pool_size)
    return lane


def _no_vectors_lane(
    store: SearchIndex,
    filters: Mapping[str, Any],
    live_total: Callable[[SearchIndex, str], int],
    now: str,
    pool_size: int,
) -> Lane:
    """The lane when no stored vector can be found: every live, in-scope record is missing."""
    lane = lane_from_ranking((), pool_size)
    lane.missing = len(_scope_ids(store, filters)) if filters else live_total(store, now)
    return lane


def _approximate_cosines(cached: Any, query64: Any) -> tuple[Any, int]:
    """Every row's cosine to the query from a float32 product (within a rounding bound),
    and how many rows belong to forgotten records (-inf: never a result)."""
    np = np_module()
    query32 = query64.astype(np.float32)
    query_norm = float(np.sqrt(np.dot(query32, query32)))
    approx = np.asarray(cached.matrix @ query32, dtype=np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        approx /= cached.norms * np.float32(query_norm)
    approx[cached.norms == 0] = 0.0  # cosine() gives 0 for an all-zero vector
    approx[~np.isfinite(approx)] = np.inf  # unknown: let the exact pass decide
    removed = 0
    if cached.removed is not None and len(cached.removed):
        approx[cached.removed] = -np.inf  # rows of forgotten records: zeros, never a result
        removed = len(cached.removed)
    return approx, removed


def _dropped(
    cached: Any,
    rows_of: Mapping[str, Any],
    kept: Mapping[str, Any],
    query64: Any,
    bound: float,
    best: Sequence[tuple[int, float]],
    pool_size: int,
) -> dict[str, Any]:
    """By reason, the ids of the left-out rows that would have entered the pool."""
    dropped: dict[str, Any] = {}
    for reason in EXCLUSION_REASONS:
        rows = rows_of[reason]
        if rows is None or not len(rows):
            dropped[reason] = ()
            continue
        enter = _would_enter(cached, rows, kept[reason], query64, bound, best, pool_size)
        dropped[reason] = cached.ids[rows[enter]]  # rows ascend, and ids with them
    return dropped


def _would_enter(
    cached: Any,
    rows: Any,
    approx: Any,
    query64: Any,
    bound: float,
    best: Sequence[tuple[int, float]],
    pool_size: int,
) -> Any:
    """Mask over matrix ``rows`` (their approximate cosines ``approx``): which would
    have been in the vector lane's pool ``best`` had they been live and in scope.

    A full pool takes a row that ranks before its last entry (a higher cosine,
    or the same cosine and a lower id); a pool with room takes any positive
    cosine. Only rows within the rounding bound of that line get their exact
    cosine; a row whose float32 product is exactly 0 shares nothing with the
    query (cosine 0) and is never taken.
    """
    np = np_module()
    full = len(best) >= pool_size
    line = best[-1][1] if full else 0.0
    # +inf marks a row whose approximate score is unknown (a non-finite stored
    # value): it goes to the exact pass with the rows near the line.
    sure = (approx > line + bound) & (approx < np.inf)
    near = np.flatnonzero((approx >= line - bound) & ~sure & (approx != 0.0))
    if len(near):
        query_sq = float(np.cumsum(query64 * query64)[-1])
        exact = _exact_cosines(cached.matrix, rows[near], query64, query_sq)
        ok = exact > 0
        if full:
            ok &= (exact > line) | ((exact == line) & (cached.ids[rows[near]] < best[-1][0]))
        sure[near[ok]] = True
    return sure


def _scope_ids(store: SearchIndex, filters: Mapping[str, Any]) -> Any:
    np = np_module()
    where, params = store.scope_clause(dict(filters))
    return np.sort(ids_from(store, f"SELECT group_concat(id) FROM records WHERE {where}", params))


def _best_rows(
    store: SearchIndex,
    cached: Any,
    approx: Any,
    query64: Any,
    bound: float,
    filters: Mapping[str, Any],
    pool_size: int,
) -> tuple[list[tuple[int, float]], dict[int, tuple[str | None, str | None]]]:
    """Best-first over the approximate scores until no unseen row can reach the pool.

    Rows are taken in chunks by approximate score, scored exactly, and the
    best ``pool_size`` are checked against the records table (live, in scope,
    with their dates). The loop stops once the best unseen approximate score,
    plus the rounding bound, is below the pool's last exact score (or below 0).
    """
    np = np_module()
    work = approx.copy()
    n = len(work)
    scored: list[tuple[float, int]] = []  # (-cosine, record id), positive cosines only
    dates: dict[int, tuple[str | None, str | None]] = {}
    missing: set[int] = set()
    query_sq = float(np.cumsum(query64 * query64)[-1])  # in order, as cosine() sums it
    take = min(n, pool_size + 32)
    top: list[tuple[float, int]] = []
    while True:
        left = int(np.count_nonzero(work > -np.inf)) if take >= n else n
        if take < left:
            rows = np.argpartition(work, n - take)[n - take :]
        else:
            rows = np.flatnonzero(work > -np.inf)
        rows = rows[work[rows] >= -bound]  # a cosine that can still be positive
        work[rows] = -np.inf
        if len(rows):
            cosines = _exact_cosines(cached.matrix, rows, query64, query_sq)
            positive = cosines > 0
            scored.extend(
                zip((-cosines[positive]).tolist(), cached.ids[rows[positive]].tolist(), strict=True)
            )
            scored.sort()
        while True:  # the best pool_size scored rows, each confirmed live and in scope
            top = [entry for entry in scored if entry[1] not in missing][:pool_size]
            unknown = sorted(i for _, i in top if i not in dates)
            if not unknown:
                break
            found = dates_of(store, unknown, filters)
            dates.update(found)
            missing.update(i for i in unknown if i not in found)
        rest = float(work.max()) if n else -np.inf
        if rest < -bound:
            break  # no unseen row can have a positive cosine
        if len(top) >= pool_size and rest + bound < -top[-1][0]:
            break  # no unseen row can reach (or tie) the pool's last score
        take = min(n, take * 4)
    return [(record_id, -neg) for neg, record_id in top], dates


def _exact_cosines(matrix: Any, rows: Any, query64: Any, query_sq: float) -> Any:
    """``cosine(query, row)`` for each row, bit for bit as ``cosine()`` computes it.

    float64 products summed in order: a reduction over the first axis of the
    transposed rows adds them one position at a time, as the plain loop does.
    """
    np = np_module()
    values = np.ascontiguousarray(np.asarray(matrix[rows], dtype=np.float64).T)
    dots = np.add.reduce(values * query64[:, None], axis=0)
    squares = np.add.reduce(values * values, axis=0)
    out = np.zeros(len(rows), dtype=np.float64)
    nonzero = squares != 0.0
    if query_sq != 0.0:
        out[nonzero] = dots[nonzero] / (math.sqrt(query_sq) * np.sqrt(squares[nonzero]))
    return out


def _check_dimensions(
    store: SearchIndex, cached: Any, dim: int, filters: Mapping[str, Any]
) -> None:
    """Raise ``VectorMismatch`` for the first live, in-scope vector not of ``dim`` values."""
    lengths = dict(cached.bad)
    if cached.dim != dim:
        lengths.update({int(i): cached.dim for i in cached.live_ids().tolist()})
    wrong = sorted(i for i, n in lengths.items() if n != dim)
    for start in range(0, len(wrong), 5000):
        chunk = wrong[start : start + 5000]
        live = dates_of(store, chunk, filters)
        for record_id in chunk:
            if record_id in live:
                raise VectorMismatch(
                    f"stored vector of record #{record_id} has {lengths[record_id]} dims; "
                    f"the query vector has {dim}"
                )
