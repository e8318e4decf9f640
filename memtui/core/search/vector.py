"""The vector lane: stored embeddings ranked by cosine to the query vector.

What a search reads besides the matrix is kept until the data changes: the
matrix is checked current once per state of the file (``vector_cache.load``),
the rows the live rule hides come as id arrays (``hidden_rows``), and the scope
as the ids it holds, read per search. The pool is not looked up in the records
table again: its dates are left to the caller (``Lane.dates`` is empty), unless
the file lets a row lose its record while the matrix stays current
(``_rows_have_records``); then the pool is confirmed there, with its dates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memtui.core import vector_cache
from memtui.core.index import SearchIndex
from memtui.core.search.hidden import (
    Hidden,
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
    expired = hidden.expired_flags(store, None)  # over hidden.expiring_ids, now
    if len(cached) == 0 and not cached.bad:
        return _no_vectors_lane(store, filters, hidden, expired, pool_size)
    dim = len(query_vector)
    if cached.bad or cached.dim != dim:
        _check_dimensions(store, cached, dim, filters)
    if len(cached) == 0:
        return _no_vectors_lane(store, filters, hidden, expired, pool_size)
    ids = cached.ids
    query64 = np.asarray(query_vector, dtype=np.float64)
    approx, removed = _approximate_cosines(cached, query64)
    # Rows that cannot be in the lane: hidden by the live rule, or out of scope.
    # Their scores are kept aside to count the ones that would have made the pool.
    refuted_rows, expired_rows = hidden.matrix_rows_by_reason(cached, expired)
    kept = {"refuted": approx[refuted_rows], "expired": approx[expired_rows]}
    approx[refuted_rows] = -np.inf
    if len(expired_rows):
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
        missing = hidden.live_total(store, expired) - with_vector
    # |approx - cosine| <= bound: float32 rounding of the unit query, the products,
    # the sums, the norms and the division (about 1.5 * dim + 4 units of 2**-24 for
    # a norm in NORM_RANGE), more than doubled for safety.
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
    store: SearchIndex, filters: Mapping[str, Any], hidden: Hidden, expired: Any, pool_size: int
) -> Lane:
    """The lane when no stored vector can be found: every live, in-scope record is missing."""
    lane = lane_from_ranking((), pool_size)
    lane.missing = len(_scope_ids(store, filters)) if filters else hidden.live_total(store, expired)
    return lane


#: Stored norms the lane divides by: in this range a float32 norm is as exact as the
#: float32 product (its squares neither underflow nor overflow); outside it (zero
#: included) the row's score is left to the exact pass, or is 0 for a row of zeros.
NORM_RANGE = (2.0**-40, 2.0**60)
#: Query norms in this range are scaled to a unit query without loss; outside it every
#: row is left to the exact pass.
QUERY_NORM_RANGE = (2.0**-500, 2.0**500)


def _approximate_cosines(cached: Any, query64: Any) -> tuple[Any, int]:
    """Every row's cosine to the query from a float32 product (within a rounding bound),
    and how many rows belong to forgotten records (-inf: never a result).

    The product is taken with the query scaled to unit length, then divided by
    the rows' norms in place: no temporary as long as the scores but the scores.
    Rows whose norm cannot be divided by (``_odd_rows``) are then set apart: +inf
    (unknown: the exact pass decides) or 0 (a row of zeros, as ``cosine()`` says).
    """
    np = np_module()
    odd, zeros = _odd_rows(cached)
    query_norm = math.sqrt(float(np.dot(query64, query64)))
    if QUERY_NORM_RANGE[0] <= query_norm <= QUERY_NORM_RANGE[1]:
        unit = (query64 / query_norm).astype(np.float32)
        approx = np.asarray(cached.matrix @ unit, dtype=np.float32)
        if len(odd) or len(zeros) or (cached.removed is not None and len(cached.removed)):
            with np.errstate(all="ignore"):
                np.divide(approx, cached.norms, out=approx)
        else:  # every norm in NORM_RANGE (none zeroed since): no division makes a NaN
            np.divide(approx, cached.norms, out=approx)
    else:  # a query of zeros (cosine 0 with every row), or of extreme values
        approx = np.full(len(cached.norms), np.inf, dtype=np.float32)
    if len(odd):
        approx[odd] = np.inf
    if len(zeros):
        approx[zeros] = 0.0
    removed = 0
    if cached.removed is not None and len(cached.removed):
        approx[cached.removed] = -np.inf  # rows of forgotten records: zeros, never a result
        removed = len(cached.removed)
    return approx, removed


def _odd_rows(cached: Any) -> tuple[Any, Any]:
    """The rows of ``cached`` whose stored norm is outside ``NORM_RANGE`` (or not a
    number), as two arrays: rows with a value other than 0, and rows of zeros.

    A float32 norm of tiny values underflows (to 0 for a row that is not all
    zeros), and one of huge values overflows: a score divided by it would be
    wrong beyond the rounding bound. Found once per matrix: a forget only zeroes
    rows that the lane then sets to -inf.
    """
    held = cached.odd_rows
    if held is None:
        np = np_module()
        norms = cached.norms
        with np.errstate(invalid="ignore"):
            rows = np.flatnonzero(~((norms >= NORM_RANGE[0]) & (norms <= NORM_RANGE[1])))
        nonzero = np.asarray(cached.matrix[rows]).any(axis=1) if len(rows) else rows > 0
        held = (rows[nonzero], rows[~nonzero])
        cached.odd_rows = held
    return held


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
        exact = _exact_cosines(cached.matrix, rows[near], query64, query_sq, cached.squares)
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

    Rows are taken in rounds by approximate score, scored exactly, and the best
    ``pool_size`` kept. A round takes every row down to a limit: twice the
    rounding bound below the ``take``-th best approximate score, so that the
    rows tied at the pool's edge come in together; the rows left, all below
    the limit, are the unseen ones. The loop stops once the limit, plus the
    rounding bound, is below the pool's last exact score (or once the limit
    is at or below the bound under 0: no unseen row can have a positive cosine).

    Out of scope rows are -inf already, and the scope holds records alone: only
    an unfiltered pool may need its records confirmed (``_rows_have_records``).
    Then the best rows are checked against the records table (live, with their
    dates) and a row without a live record is passed over; otherwise the dates
    are left to the caller (an empty mapping).
    """
    np = np_module()
    confirm = not filters and not _rows_have_records(store, cached)
    n = len(approx)
    ids = cached.ids
    floor = np.float32(-bound)  # every row whose cosine can still be positive is at or above it
    if float(floor) > -bound:
        floor = np.nextafter(floor, np.float32(-np.inf))
    negated = np.zeros(0, dtype=np.float64)  # -cosine of the scored rows (positive ones only)
    scored_ids = np.zeros(0, dtype=ids.dtype)  # in the same order: best first, then by id
    dates: dict[int, tuple[str | None, str | None]] = {}
    query_sq = float(np.cumsum(query64 * query64)[-1])  # in order, as cosine() sums it
    squares = _row_squares(cached)
    take = min(n, pool_size + 32)
    seen: Any = None  # rows at or above this limit have been scored (None: none yet)
    while True:
        limit, rows = _next_rows(approx, take, bound, floor, seen)
        seen = limit
        if len(rows):
            cosines = _exact_cosines(cached.matrix, rows, query64, query_sq, squares)
            positive = cosines > 0
            if len(scored_ids):
                negated = np.concatenate([negated, -cosines[positive]])
                scored_ids = np.concatenate([scored_ids, ids[rows[positive]]])
                order = np.lexsort((scored_ids, negated))
            else:  # the first round: its rows, and their ids, ascend
                negated = -cosines[positive]
                scored_ids = ids[rows[positive]]
                order = np.argsort(negated, kind="stable")
            negated, scored_ids = negated[order], scored_ids[order]
        if confirm:
            negated, scored_ids = _confirmed(store, negated, scored_ids, dates, filters, pool_size)
        # Every unseen row is below ``limit``: its cosine is below ``limit + bound``.
        if float(limit) <= -bound:
            break  # no unseen row can have a positive cosine
        if len(scored_ids) >= pool_size and float(limit) + bound < -negated[pool_size - 1]:
            break  # no unseen row can reach (or tie) the pool's last score
        take = min(n, take * 4)
    top = np.negative(negated[:pool_size]).tolist()
    return list(zip(scored_ids[:pool_size].tolist(), top, strict=True)), dates


def _confirmed(
    store: SearchIndex,
    negated: Any,
    scored_ids: Any,
    dates: dict[int, tuple[str | None, str | None]],
    filters: Mapping[str, Any],
    pool_size: int,
) -> tuple[Any, Any]:
    """The scored rows (best first) less those whose record is not live and in scope,
    read until the best ``pool_size`` are confirmed; their dates go into ``dates``."""
    np = np_module()
    while True:
        top_ids = scored_ids[:pool_size].tolist()
        unknown = sorted(set(top_ids).difference(dates))
        if not unknown:
            return negated, scored_ids
        found = dates_of(store, unknown, filters)
        dates.update(found)
        gone = np.fromiter(set(unknown).difference(found), dtype=scored_ids.dtype)
        if len(gone):
            keep = ~np.isin(scored_ids, gone)
            negated, scored_ids = negated[keep], scored_ids[keep]


#: How memtui's schemas delete a record's vector with the record (in the records table's
#: delete trigger; lower case, single spaces).
_VECTOR_WITH_RECORD = "delete from vectors where record_id = old.id"


def _rows_have_records(store: SearchIndex, cached: Any) -> bool:
    """Whether every row of ``cached`` (removed rows aside) has a record, and keeps it
    for as long as the matrix is current; found once per matrix.

    It does when each row's record was there when this was found, and the file
    deletes a record's vector with the record (``_deletes_vectors_with_records``):
    a record deleted since then took its vector with it, and the vectors
    changed, so the matrix is no longer current. Otherwise (a file made by
    other means) the lane confirms its pool's records at each search.
    """
    held = cached.rows_recorded
    if held is None:  # a copy not kept (no identity) is confirmed at each search, as built
        held = cached.identity is not None and _deletes_vectors_with_records(store)
        if held:
            held = _all_recorded(store, cached.live_ids())
        cached.rows_recorded = held
    return held


def _all_recorded(store: SearchIndex, ids: Any) -> bool:
    """Whether every one of the ascending ``ids`` is a record's id.

    When the records' ids have no gap (as many as from the lowest to the highest:
    three quick queries), ``ids`` need only lie between those two; otherwise
    every record id is read (one scan of the smallest index on records)."""
    if not len(ids):
        return True
    top = store.query("SELECT max(id) FROM records")[0][0]
    lowest = store.query("SELECT min(id) FROM records")[0][0]
    if top is None:
        return False
    if store.query("SELECT count(*) FROM records")[0][0] == top - lowest + 1:
        return bool(lowest <= ids[0] and ids[-1] <= top)
    np = np_module()
    records = np.sort(ids_from(store, "SELECT group_concat(id) FROM records"))
    return bool(members(records, ids).all())


def _deletes_vectors_with_records(store: SearchIndex) -> bool:
    """Whether a trigger on the records table deletes a record's vector with it."""
    triggers = store.query(
        "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'records'"
    )
    for row in triggers:
        text = " ".join(str(row[0] or "").lower().split())
        if "after delete on records" in text and _VECTOR_WITH_RECORD in text:
            return True
    return False


def _next_rows(approx: Any, take: int, bound: float, floor: Any, seen: Any) -> tuple[Any, Any]:
    """A round of ``_best_rows``: its limit, and the rows at or above it not yet seen
    (below ``seen``, the last round's limit; None in the first round).

    The limit is twice the bound below the ``take``-th best approximate score, or
    ``floor`` when that is lower. The first round looks for that score among the
    rows above a line drawn from a sample of every ``step``-th score (a pass over
    the scores and a selection among a few hundred), and falls back to a selection
    over every score, on the negated scores in place (quick even when most rows
    share one score, where the ascending selection is not).
    """
    np = np_module()
    n = len(approx)
    if take >= n:
        candidates = None
        limit = floor
    else:
        candidates, kth = _sampled_kth(approx, take) if seen is None else (None, None)
        if kth is None:
            scratch = np.negative(approx)
            scratch.partition(take - 1)
            kth = -float(scratch[take - 1])
        limit = floor
        if kth - 2.0 * bound > float(floor):
            limit = np.nextafter(np.float32(kth - 2.0 * bound), np.float32(-np.inf))
    if candidates is not None:
        line, among = candidates
        if limit >= line:  # every row at or above the limit is among the candidates
            return limit, among[approx[among] >= limit]
    fresh = approx >= limit
    if seen is not None:
        fresh &= approx < seen
    return limit, np.flatnonzero(fresh)


def _sampled_kth(approx: Any, take: int) -> tuple[Any, float | None]:
    """``((line, rows at or above it), take-th best score)`` when a line drawn from a
    sample has at least ``take`` rows above it, and not more than a quarter of them."""
    np = np_module()
    n = len(approx)
    step = n // (32 * take)
    if step < 4:
        return None, None
    sample = approx[::step]
    pick = 2 * -(-take // step) + 4  # about twice take rows expected at or above the line
    line = -np.partition(np.negative(sample), pick - 1)[pick - 1]
    among = np.flatnonzero(approx >= line)
    if not take <= len(among) <= n // 4:
        return None, None
    scores = np.negative(approx[among])
    scores.partition(take - 1)
    return (line, among), -float(scores[take - 1])


EXACT_CHUNK_VALUES = 16_384
"""Values scored exactly at a time (whole rows, one row at least): a chunk's float64
arrays (128 KB each) come from memory the allocator already holds, where a copy of
every row at once is fresh memory, faulted in page by page at each search."""


#: Chunks of at least this many rows are added up a position at a time across the rows
#: (one call per position, each over every row), smaller ones along each row.
COLUMN_SUM_MIN_ROWS = 256
#: Matrices of at most this many values keep each row's sum of squares, found on first
#: use (8 bytes a row; about 12 ms for 100,000 rows of 32 dims): the exact pass then adds
#: up only the products with the query. A bigger matrix would pay more at its first
#: search than its searches save (the exact pass's rows do not grow with the matrix).
SQUARES_MAX_VALUES = 8_000_000


def _exact_cosines(
    matrix: Any, rows: Any, query64: Any, query_sq: float, squares: Any = None
) -> Any:
    """``cosine(query, row)`` for each row, bit for bit as ``cosine()`` computes it.

    ``cosine()`` adds its float64 products one position at a time, from the
    first, to a sum started at ``0.0``; so does ``_ordered_sums``. ``squares``,
    when given, holds every row's sum of squares added that way (``_row_squares``).
    """
    np = np_module()
    out = np.zeros(len(rows), dtype=np.float64)
    if query_sq == 0.0:
        return out
    query_norm = math.sqrt(query_sq)
    rows_of = np.asarray(matrix)  # a plain view of a memory map: quicker to index
    step = max(1, EXACT_CHUNK_VALUES // max(1, len(query64)))
    for start in range(0, len(rows), step):
        chunk = rows[start : start + step]
        if squares is None:
            sums, dots = _ordered_sums(rows_of[chunk], query64, squares=True)
        else:
            sums, dots = squares[chunk], _ordered_sums(rows_of[chunk], query64)[1]
        nonzero = sums != 0.0
        out[start : start + len(chunk)][nonzero] = dots[nonzero] / (
            query_norm * np.sqrt(sums[nonzero])
        )
    return out


def _ordered_sums(values32: Any, query64: Any, squares: bool = False) -> tuple[Any, Any]:
    """Each row's sum of squares (with ``squares``, else None) and its dot with
    ``query64`` (None: not asked), in float64, added to ``0.0`` one position at a
    time, from the first, as ``cosine()`` adds them.

    Two ways with the same additions in the same order: for many rows, one vector
    addition per position over a transposed copy (each call adds one position of
    every row); for a few, ``np.cumsum`` along each row (an accumulation is
    strictly sequential, where ``np.sum`` would add in pairs), whose last column
    is the sum (``+ 0.0`` gives the loop's ``0.0`` where every term is ``-0.0``).
    """
    np = np_module()
    count, dim = values32.shape
    if count >= COLUMN_SUM_MIN_ROWS:
        values = np.empty((dim, count), dtype=np.float64)
        values[...] = values32.T
        query = None if query64 is None else query64[:, None]
    else:
        values = values32.astype(np.float64)
        query = query64
    sums = None
    if squares:
        sums = _in_order(np, values * values, count >= COLUMN_SUM_MIN_ROWS)
    dots = None
    if query is not None:
        np.multiply(values, query, out=values)
        dots = _in_order(np, values, count >= COLUMN_SUM_MIN_ROWS)
    return sums, dots


def _in_order(np: Any, terms: Any, by_columns: bool) -> Any:
    """The sums of ``terms`` (positions by rows when ``by_columns``, else rows by
    positions), added to ``0.0`` one position at a time; ``terms`` is overwritten."""
    if by_columns:
        total = np.zeros(terms.shape[1], dtype=np.float64)
        for position in range(len(terms)):
            total += terms[position]
        return total
    np.cumsum(terms, axis=1, out=terms)
    return terms[:, -1] + 0.0


def _row_squares(cached: Any) -> Any:
    """Every row's sum of squares as ``_ordered_sums`` adds it, for a matrix of at most
    ``SQUARES_MAX_VALUES`` values (None for a bigger one); found once per matrix. A
    forget zeroes its rows' (``vector_erasure``), as it does their norms."""
    held = cached.squares
    if held is None and 0 < cached.dim and len(cached) * cached.dim <= SQUARES_MAX_VALUES:
        np = np_module()
        rows_of = np.asarray(cached.matrix)
        held = np.empty(len(rows_of), dtype=np.float64)
        step = max(COLUMN_SUM_MIN_ROWS, EXACT_CHUNK_VALUES // cached.dim)
        for start in range(0, len(rows_of), step):
            block = rows_of[start : start + step]
            held[start : start + len(block)] = _ordered_sums(block, None, squares=True)[0]
        cached.squares = held
    return held


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
