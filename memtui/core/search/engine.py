"""A search from start to end: both lanes, the merge, the ranking, and the what-if rerank."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from memtui.core.cancel import stop_if
from memtui.core.index import SearchIndex
from memtui.core.search.database import DatabaseVectorLane
from memtui.core.search.embedding import embed_query
from memtui.core.search.hidden import dates_of, members, np_module
from memtui.core.search.keyword import keyword_lane
from memtui.core.search.request import SearchRequest
from memtui.core.search.scores import (
    DEFAULT_WEIGHTS,
    EXCLUSION_REASONS,
    FALLBACK_WEIGHTS,
    Lane,
    VectorMismatch,
    check_weights,
    merge_score,
)
from memtui.core.search.text import (
    empty_query_note,
    index_tokens,
    match_expression,
    sanitize_query,
)
from memtui.core.search.trace import (
    LanePool,
    LaneScore,
    ResultTrace,
    SearchResponse,
    SearchResult,
    SearchTrace,
)
from memtui.core.search.vector import vector_lane

KEYWORD_ONLY_REASON = "keyword-only search was requested: the vector lane is off"


def hybrid_search(
    store: SearchIndex, request: SearchRequest | str, **options: Any
) -> SearchResponse:
    """Search live, in-scope records by keyword (BM25) and vector (cosine), merged.

    ``request`` is a ``SearchRequest``, or the query text with the request's
    other fields as keywords (``hybrid_search(store, "sql", limit=5)``).
    Unknown filter keys raise ``MemoryStoreError`` before anything runs. When
    ``cancelled()`` turns true, the search stops at its next step (a running
    full-text statement included) and raises ``Cancelled``. The first vector
    search after a vector write builds the vector matrix (seconds at a
    million); ``vector_progress(done, total)`` follows that build.

    Without ``embedder``, the vector lane uses the embedder the file records
    only when it is a built-in (``hash-N``, ``all-MiniLM-L6-v2``): a plug-in
    named in the file is never imported (the trace's ``fallback`` names it and
    its spec, to pass as ``embedder``).

    The trace (a ``SearchTrace``) holds, among others:

    - ``query``, ``terms``, ``match``: the sanitized query and its index terms;
    - ``weights`` (used), ``requested_weights``, ``fallback`` (why the vector
      lane did not count, or None), ``embedder``;
    - ``keyword_lane_error`` (and ``keyword_lane_message``): the full-text
      query failed, as opposed to matching nothing;
    - ``pools``: each lane's candidate pool (``size``, ``min``, ``max``, ``limit``);
    - ``matched``: how many records the keyword query matched;
    - ``excluded``: by reason (``refuted``, ``expired``, ``out_of_scope``), the
      distinct records that either lane would have returned but that were
      left out: for the keyword lane every match the live rule or the scope
      dropped; for the vector lane each hidden or out-of-scope record that
      would have been in its pool. A record refuted and out of scope counts
      as refuted; one dropped by both lanes counts once;
    - ``excluded_by_lane``: the same counts for each lane on its own
      (``{"keyword": {...}, "vector": {...}}``);
    - ``vectors_missing``: when the vector lane ran, how many live, in-scope
      records have no stored vector (the lane can never find them: a keyword
      match among them scores 0 there); None when it did not run;
    - ``candidates``, ``limit``, ``truncated``: how many merged, the cut, and
      whether results were left out by it.
    """
    request = SearchRequest.of(request, **options)
    trace = _start_trace(store, request)
    if trace.empty_query:
        trace.note = empty_query_note(request.query)
        return SearchResponse(results=[], trace=trace, candidates=[])
    cancelled = request.cancelled
    stop_if(cancelled)
    keyword, keyword_excluded = _run_keyword_lane(store, request, trace)
    vector, reason = _run_vector_lane(store, request, trace)
    trace.pools["vector"] = vector.pool
    trace.vectors_missing = vector.missing
    trace.excluded_by_lane = {
        "keyword": {reason: keyword_excluded.get(reason, 0) for reason in EXCLUSION_REASONS},
        "vector": _counts(vector.dropped),
    }
    trace.excluded = {
        reason: (
            _distinct(keyword.dropped[reason], vector.dropped.get(reason, ()))
            if reason in keyword.dropped
            else keyword_excluded.get(reason, 0) + len(vector.dropped.get(reason, ()))
        )
        for reason in EXCLUSION_REASONS
    }
    trace.fallback = reason
    trace.weights = dict(FALLBACK_WEIGHTS) if reason else dict(trace.requested_weights)
    stop_if(cancelled)
    return _ranked(_merged(store, request, keyword, vector, trace), trace)


def _start_trace(store: SearchIndex, request: SearchRequest) -> SearchTrace:
    """The trace before either lane runs, after the checks that come before any work."""
    if int(request.limit) < 1:
        raise ValueError(f"limit must be at least 1, got {request.limit}")
    if int(request.pool_size) < 1:
        raise ValueError(f"pool_size must be at least 1, got {request.pool_size}")
    limit, pool_size = int(request.limit), int(request.pool_size)
    requested = check_weights(request.weights)
    filters = dict(request.filters or {})
    store.scope_clause(filters)  # the allowlist check, before any work
    sanitized = sanitize_query(request.query)
    terms = index_tokens(store, sanitized)
    trace = SearchTrace(
        input=request.query,
        query=sanitized,
        terms=terms,
        match=match_expression(terms, any_terms=request.any_terms),
        any_terms=request.any_terms,
        empty_query=not terms,
        filters=filters,
        now=store.now_text(),
        weights=dict(requested),
        requested_weights=dict(requested),
        default_weights=dict(DEFAULT_WEIGHTS),
        limit=limit,
        pools={"keyword": LanePool(limit=pool_size), "vector": LanePool(limit=pool_size)},
    )
    return trace


def _run_keyword_lane(
    store: SearchIndex, request: SearchRequest, trace: SearchTrace
) -> tuple[Lane, dict[str, int]]:
    """The keyword lane and its exclusion counts; a failed full-text query is an empty
    lane with the error in the trace (as opposed to matching nothing)."""
    pool_size = trace.pools["keyword"].limit
    try:
        keyword, excluded, matched = keyword_lane(
            store, trace.match, trace.filters, pool_size, request.cancelled
        )
        trace.matched = matched
    except sqlite3.DatabaseError as exc:
        stop_if(request.cancelled)  # the statement was interrupted: the search was cancelled
        trace.keyword_lane_error = True
        trace.keyword_lane_message = f"the full-text query failed: {exc}"
        keyword = Lane(pool=LanePool(limit=pool_size))
        excluded = dict.fromkeys(EXCLUSION_REASONS, 0)
    trace.pools["keyword"] = keyword.pool
    return keyword, excluded


def _run_vector_lane(
    store: SearchIndex, request: SearchRequest, trace: SearchTrace
) -> tuple[Lane, str | None]:
    """The vector lane, or an empty one and the reason it did not run (the fallback)."""
    vector = Lane(pool=LanePool(limit=trace.pools["vector"].limit))
    if request.keyword_only:
        trace.embedder = None
        return vector, request.keyword_only_reason or KEYWORD_ONLY_REASON
    query_vector, reason, trace.embedder = embed_query(
        store, request.query, request.embedder, any_name=request.vectors_any_name
    )
    if query_vector is None:
        return vector, reason
    stop_if(request.cancelled)
    try:
        if isinstance(store, DatabaseVectorLane):
            vector = store.database_vector_lane(
                query_vector, trace.filters, vector.pool.limit, request.cancelled
            )
            trace.vector_search = vector.note
        else:
            vector = vector_lane(
                store,
                query_vector,
                trace.filters,
                vector.pool.limit,
                request.cancelled,
                request.vector_progress,
            )
    except VectorMismatch as exc:
        return vector, str(exc)
    return vector, reason


def _merged(
    store: SearchIndex, request: SearchRequest, keyword: Lane, vector: Lane, trace: SearchTrace
) -> list[SearchResult]:
    """Every candidate of either lane that is still live, its lane scores merged.

    A vector lane that confirmed its pool in the records table brings its dates;
    every other candidate of either lane is read here, in one statement.
    """
    dates = dict(vector.dates)
    unread = sorted(
        record_id for record_id in keyword.raw.keys() | vector.raw.keys() if record_id not in dates
    )
    dates.update(dates_of(store, unread, trace.filters))
    used, fallback = trace.weights, trace.fallback
    candidates = []
    for record_id in set(keyword.raw) | set(vector.raw):
        if record_id not in dates:
            continue  # refuted, expired or gone since the lane ranked it; or no record at all
        created, expires = dates[record_id]
        keyword_raw, vector_raw = keyword.raw.get(record_id), vector.raw.get(record_id)
        keyword_norm = keyword.normalized.get(record_id, 0.0)
        vector_norm = vector.normalized.get(record_id, 0.0)
        found_by = [
            lane
            for lane, raw in (("keyword", keyword_raw), ("vector", vector_raw))
            if raw is not None
        ]
        candidates.append(
            SearchResult(
                record_id=record_id,
                keyword_score=keyword_norm,
                vector_score=vector_norm,
                score=merge_score(keyword_norm, vector_norm, used),
                created_at=created,
                expires_at=expires,
                rank=0,
                trace=ResultTrace(
                    keyword=LaneScore(keyword_raw, keyword_norm),
                    vector=LaneScore(vector_raw, vector_norm),
                    weights=used,
                    fallback=fallback,
                    found_by=found_by,
                    created_at=created,
                    expires_at=expires,
                ),
            )
        )
    return candidates


def _counts(dropped: Mapping[str, Any]) -> dict[str, int]:
    return {reason: len(dropped.get(reason, ())) for reason in EXCLUSION_REASONS}


def _distinct(first: Any, second: Any) -> int:
    """How many distinct ids two collections hold together (each ids without repeats:
    an ascending array, or a set)."""
    if not len(first) or not len(second):
        return len(first) + len(second)
    np = np_module()
    a = first if isinstance(first, np.ndarray) else np.array(sorted(first), dtype=np.int64)
    b = second if isinstance(second, np.ndarray) else np.array(sorted(second), dtype=np.int64)
    if len(a) < len(b):
        a, b = b, a
    return len(a) + len(b) - int(np.count_nonzero(members(a, b)))


def _ranked(candidates: list[SearchResult], trace: SearchTrace) -> SearchResponse:
    """Order best first, ties by record id ascending; number the ranks; cut at the limit."""
    ordered = sorted(candidates, key=lambda r: (-r.score, r.record_id))
    ranked = [replace(result, rank=index) for index, result in enumerate(ordered, start=1)]
    trace.candidates = len(ranked)
    trace.truncated = len(ranked) > trace.limit
    return SearchResponse(results=ranked[: trace.limit], trace=trace, candidates=ranked)


def rerank(
    response: SearchResponse, weights: Mapping[str, float] | Sequence[float] | None
) -> SearchResponse:
    """Re-merge the same lane scores with other weights (what-if), without re-querying.

    When the search fell back to keyword only, the vector lane has no scores and
    the fallback weights stay; the asked-for weights are kept in the trace.
    Each result's trace gains ``previous_rank``.
    """
    asked = check_weights(weights)
    used = dict(FALLBACK_WEIGHTS) if response.trace.fallback else asked
    trace = replace(response.trace, requested_weights=dict(asked), weights=used)
    candidates = [
        replace(
            old,
            score=merge_score(old.keyword_score, old.vector_score, used),
            trace=replace(old.trace, weights=used, previous_rank=old.rank),
        )
        for old in response.candidates
    ]
    return _ranked(candidates, trace)
