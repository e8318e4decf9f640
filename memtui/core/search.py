"""Hybrid search: sanitizer, keyword lane, vector lane, merge and trace (design.md section 4).

The keyword lane ranks FTS5 matches by BM25; the vector lane ranks stored
embeddings by cosine similarity. Each lane is min-max normalized over its own
candidate pool, then the two are merged with fixed weights. Every number that
went into a score is kept in the trace, so the final score recomputes from it.

Everything here reads; the only writes go to the connection's ``temp`` schema
(scratch and vocabulary tables), which a read-only open allows.
"""

from __future__ import annotations

import math
import re
import secrets
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from memtui.core.embed import Embedder, EmbedderError, resolve_embedder
from memtui.core.store import FTS_TABLE, MemoryStore, MemoryStoreError, unpack_vector

DEFAULT_WEIGHTS: dict[str, float] = {"keyword": 0.3, "vector": 0.7}
FALLBACK_WEIGHTS: dict[str, float] = {"keyword": 1.0, "vector": 0.0}
DEFAULT_POOL_SIZE = 100
DEFAULT_LIMIT = 10

# FTS5's bm25() constants (ext/fts5/fts5_aux.c).
BM25_K1 = 1.2
BM25_B = 0.75
BM25_MIN_IDF = 1e-6

_VOCAB_ROW = "records_vocab_row"
_VOCAB_INSTANCE = "records_vocab_instance"
_SCRATCH = "memtui_query_tokens"
_SCRATCH_VOCAB = "memtui_query_tokens_vocab"

# Lone surrogates (U+D800..U+DFFF) are not text at all: they become separators too.
_NOT_BAREWORD = re.compile(r"[^0-9A-Za-z_\u0080-\ud7ff\ue000-\U0010ffff]+")
_TOKENIZE_OPTION = re.compile(
    r"\btokenize\s*=\s*('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|[A-Za-z0-9_]+)", re.IGNORECASE
)


# ---------------------------------------------------------------- results


@dataclass
class SearchResult:
    """One ranked record with the lane scores its merged score was computed from."""

    record_id: int
    keyword_score: float
    vector_score: float
    score: float
    created_at: str | None
    expires_at: str | None
    rank: int
    trace: dict[str, Any] = field(default_factory=dict)


@dataclass
class SearchResponse:
    """Results best first, and a plain-dict trace of how they were ranked.

    ``candidates`` holds every merged candidate (not only the first ``limit``),
    so that ``rerank`` can re-merge with other weights without querying again.
    """

    results: list[SearchResult]
    trace: dict[str, Any]
    candidates: list[SearchResult] = field(default_factory=list, repr=False)


# ---------------------------------------------------------------- sanitizing


def sanitize_query(text: str) -> str:
    """Lowercase; every character that cannot stand in an FTS5 bare word becomes a space.

    Lowercasing turns the bare-word operators ``AND OR NOT NEAR`` into plain
    words; FTS5 bare words are ASCII letters, digits, ``_`` and anything above
    U+007F, so ``.``, ``'``, ``/``, quotes, ``*``, ``:``, ``^``, brackets, ``+``
    and ``-`` all become separators.
    """
    return " ".join(_NOT_BAREWORD.sub(" ", (text or "").lower()).split())


def index_tokens(store: MemoryStore, text: str) -> list[str]:
    """``text`` split into tokens exactly as the full-text index's tokenizer makes them.

    The text goes into a scratch FTS5 table in the connection's temp schema,
    built with the index's own ``tokenize=`` option, and its tokens are read
    back in order from an ``fts5vocab`` instance table.
    """
    if not text:
        return []
    _ensure_scratch(store)
    # A random rowid keeps concurrent callers on one connection apart without shared state.
    rowid = secrets.randbits(62) + 1
    store.query(f"INSERT INTO temp.{_SCRATCH}(rowid, q) VALUES (?, ?)", (rowid, text))
    try:
        rows = store.query(
            f"SELECT term FROM temp.{_SCRATCH_VOCAB} WHERE doc = ? ORDER BY offset", (rowid,)
        )
    finally:
        store.query(f"DELETE FROM temp.{_SCRATCH} WHERE rowid = ?", (rowid,))
    return [row[0] for row in rows]


def match_expression(terms: Sequence[str], *, any_terms: bool = False) -> str:
    """An FTS5 MATCH expression with every term double-quoted (never an operator)."""
    quoted = ['"' + term.replace('"', '""') + '"' for term in terms]
    return (" OR " if any_terms else " ").join(quoted)


def _index_tokenize_option(store: MemoryStore) -> str | None:
    rows = store.query("SELECT sql FROM main.sqlite_master WHERE name = ?", (FTS_TABLE,))
    if not rows or not rows[0][0]:
        raise MemoryStoreError(f"this database has no full-text index ({FTS_TABLE})")
    found = _TOKENIZE_OPTION.search(rows[0][0])
    return found.group(1) if found else None


def _ensure_scratch(store: MemoryStore) -> None:
    option = _index_tokenize_option(store)
    tokenize = f", tokenize={option}" if option else ""
    store.query(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_SCRATCH} USING fts5(q{tokenize})")
    store.query(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_SCRATCH_VOCAB} "
        f"USING fts5vocab(temp, {_SCRATCH}, instance)"
    )


def _ensure_vocab(store: MemoryStore) -> None:
    store.query(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_VOCAB_ROW} "
        f"USING fts5vocab(main, {FTS_TABLE}, row)"
    )
    store.query(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_VOCAB_INSTANCE} "
        f"USING fts5vocab(main, {FTS_TABLE}, instance)"
    )


# ---------------------------------------------------------------- arithmetic


def min_max_normalize(values: Sequence[float]) -> list[float]:
    """``(s - min) / (max - min)`` over the pool; an all-equal pool maps to 1.0 each."""
    if not values:
        return []
    lo, hi = min(values), max(values)
    if hi == lo:
        return [1.0] * len(values)
    return [(v - lo) / (hi - lo) for v in values]


def merge_score(keyword: float, vector: float, weights: Mapping[str, float]) -> float:
    """``w_kw * keyword + w_vec * vector``; a lane that missed the record passes 0."""
    return weights["keyword"] * keyword + weights["vector"] * vector


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; 0.0 when either vector is all zeros."""
    dot = 0.0
    norm_a = 0.0
    norm_b = 0.0
    for x, y in zip(a, b, strict=True):
        dot += x * y
        norm_a += x * x
        norm_b += y * y
    if norm_a == 0.0 or norm_b == 0.0:
        return 0.0
    return dot / (math.sqrt(norm_a) * math.sqrt(norm_b))


def check_weights(weights: Mapping[str, float] | Sequence[float] | None) -> dict[str, float]:
    """Weights as ``{"keyword": w, "vector": w}``; accepts a mapping or a (kw, vec) pair."""
    if weights is None:
        return dict(DEFAULT_WEIGHTS)
    if isinstance(weights, Mapping):
        unknown = set(weights) - {"keyword", "vector"}
        if unknown:
            raise ValueError(f"unknown weight(s) {', '.join(sorted(unknown))}; use keyword, vector")
        kw = weights.get("keyword", DEFAULT_WEIGHTS["keyword"])
        vec = weights.get("vector", DEFAULT_WEIGHTS["vector"])
    else:
        pair = list(weights)
        if len(pair) != 2:
            raise ValueError("weights are two numbers: keyword, vector")
        kw, vec = pair
    out = {"keyword": float(kw), "vector": float(vec)}
    for name, value in out.items():
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{name} weight must be a finite number >= 0, got {value}")
    if out["keyword"] + out["vector"] == 0:
        raise ValueError("at least one weight must be above 0")
    return out


# ---------------------------------------------------------------- lanes


class _VectorMismatch(Exception):
    """A stored vector whose length differs from the query vector's."""


@dataclass
class _Lane:
    raw: dict[int, float] = field(default_factory=dict)
    normalized: dict[int, float] = field(default_factory=dict)
    dates: dict[int, tuple[str | None, str | None]] = field(default_factory=dict)
    pool: dict[str, Any] = field(default_factory=dict)


def _lane_from_ranked(
    ranked: Sequence[tuple[int, float, str | None, str | None]], pool_size: int
) -> _Lane:
    lane = _Lane()
    values = [raw for _, raw, _, _ in ranked]
    for (record_id, raw, created, expires), norm in zip(
        ranked, min_max_normalize(values), strict=True
    ):
        lane.raw[record_id] = raw
        lane.normalized[record_id] = norm
        lane.dates[record_id] = (created, expires)
    lane.pool = {
        "size": len(values),
        "min": min(values) if values else None,
        "max": max(values) if values else None,
        "limit": pool_size,
    }
    return lane


def _keyword_lane(
    store: MemoryStore,
    match: str,
    filters: Mapping[str, Any] | None,
    pool_size: int,
) -> tuple[_Lane, dict[str, int], int]:
    """Top ``pool_size`` live, in-scope matches by BM25, and counts of the excluded.

    Raises ``sqlite3.DatabaseError`` when FTS5 rejects the query or the index.
    """
    where, params = store.scope_clause(dict(filters or {}), alias="r")
    rows = store.query(
        f"SELECT {FTS_TABLE}.rowid, -bm25({FTS_TABLE}), r.created_at, r.expires_at "
        f"FROM {FTS_TABLE} JOIN records AS r ON r.id = {FTS_TABLE}.rowid "
        f"WHERE {FTS_TABLE} MATCH ? AND {where} "
        f"ORDER BY bm25({FTS_TABLE}), {FTS_TABLE}.rowid LIMIT ?",
        [match, *params, pool_size],
    )
    lane = _lane_from_ranked([(r[0], float(r[1]), r[2], r[3]) for r in rows], pool_size)
    in_scope, scope_params = store.scope_clause(
        dict(filters or {}), include_refuted=True, include_expired=True, alias="r"
    )
    now = store.now_text()
    counts = store.query(
        "SELECT count(*), "
        "coalesce(sum(r.refuted != 0), 0), "
        "coalesce(sum(r.refuted = 0 AND r.expires_at IS NOT NULL AND r.expires_at <= ?), 0), "
        "coalesce(sum(r.refuted = 0 AND (r.expires_at IS NULL OR r.expires_at > ?) "
        f"AND CASE WHEN ({in_scope}) THEN 0 ELSE 1 END), 0) "
        f"FROM {FTS_TABLE} JOIN records AS r ON r.id = {FTS_TABLE}.rowid "
        f"WHERE {FTS_TABLE} MATCH ?",
        [now, now, *scope_params, match],
    )[0]
    excluded = {"refuted": counts[1], "expired": counts[2], "out_of_scope": counts[3]}
    return lane, excluded, counts[0]


def _vector_lane(
    store: MemoryStore,
    query_vector: Sequence[float],
    filters: Mapping[str, Any] | None,
    pool_size: int,
) -> _Lane:
    """Top ``pool_size`` live, in-scope records by cosine to the query vector.

    Only records with a positive cosine are found by this lane: a record that
    shares nothing with the query (cosine 0 or less) is absent from the lane
    and scores 0 there, exactly like a record the keyword lane did not match.
    Otherwise min-max normalization would hand unrelated records vector credit.
    """
    where, params = store.scope_clause(dict(filters or {}), alias="r")
    rows = store.query(
        "SELECT v.record_id, v.vector, r.created_at, r.expires_at "
        "FROM vectors AS v JOIN records AS r ON r.id = v.record_id "
        f"WHERE {where}",
        params,
    )
    scored = []
    for record_id, blob, created, expires in rows:
        vector = unpack_vector(blob)
        if len(vector) != len(query_vector):
            raise _VectorMismatch(
                f"stored vector of record #{record_id} has {len(vector)} dims; "
                f"the query vector has {len(query_vector)}"
            )
        similarity = cosine(query_vector, vector)
        if similarity > 0:
            scored.append((record_id, similarity, created, expires))
    scored.sort(key=lambda item: (-item[1], item[0]))
    return _lane_from_ranked(scored[:pool_size], pool_size)


def _query_vector(
    store: MemoryStore, query: str, embedder: Embedder | None
) -> tuple[list[float] | None, str | None, str | None]:
    """The query's embedding, or None with the reason the vector lane cannot run.

    Returns ``(vector, fallback_reason, embedder_name)``.
    """
    recorded = store.recorded_embedder()
    if embedder is None:
        if recorded is None:
            return (
                None,
                ("no embedder: this database has no vectors (none recorded) and none was given"),
                None,
            )
        try:
            embedder = resolve_embedder(recorded["name"])
        except EmbedderError as exc:
            return (
                None,
                (f"the database's embedder {recorded['name']} cannot be loaded: {exc}"),
                recorded["name"],
            )
        if embedder is None:
            return None, "no embedder: the database records none", None
    name = getattr(embedder, "name", repr(embedder))
    dim = getattr(embedder, "dim", None)
    if recorded is None:
        return (
            None,
            (
                f"this database has no stored vectors (no embedder recorded); "
                f"query embedder is {name} ({dim} dims)"
            ),
            name,
        )
    if (recorded["name"], recorded["dim"]) != (name, dim):
        return (
            None,
            (
                f"stored vectors were written by {recorded['name']} ({recorded['dim']} dims); "
                f"query embedder is {name} ({dim} dims)"
            ),
            name,
        )
    try:
        vectors = embedder([query])
        vector = [float(v) for v in vectors[0]]
    except Exception as exc:  # an embedder is foreign code: any failure means fallback
        return None, f"embedder {name} failed: {type(exc).__name__}: {exc}", name
    if len(vector) != recorded["dim"]:
        return (
            None,
            (
                f"the query vector from {name} has {len(vector)} dims; "
                f"stored vectors have {recorded['dim']} dims"
            ),
            name,
        )
    if not all(math.isfinite(v) for v in vector):
        return None, f"embedder {name} returned a non-finite value for the query", name
    if not any(vector):
        return (
            None,
            (
                f"the query's embedding from {name} is all zeros (no words it knows), "
                "so cosine similarity is undefined"
            ),
            name,
        )
    return vector, None, name


# ---------------------------------------------------------------- search


def hybrid_search(
    store: MemoryStore,
    query: str,
    *,
    embedder: Embedder | None = None,
    limit: int = DEFAULT_LIMIT,
    filters: Mapping[str, Any] | None = None,
    weights: Mapping[str, float] | Sequence[float] | None = None,
    pool_size: int = DEFAULT_POOL_SIZE,
    any_terms: bool = False,
    keyword_only: bool = False,
) -> SearchResponse:
    """Search live, in-scope records by keyword (BM25) and vector (cosine), merged.

    ``embedder`` overrides the one recorded in the database; ``keyword_only``
    switches the vector lane off (a fallback with its reason in the trace).
    Unknown filter keys raise ``MemoryStoreError`` before anything runs.
    """
    if int(limit) < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    if int(pool_size) < 1:
        raise ValueError(f"pool_size must be at least 1, got {pool_size}")
    limit, pool_size = int(limit), int(pool_size)
    requested = check_weights(weights)
    filters = dict(filters or {})
    store.scope_clause(filters)  # the allowlist check, before any work

    sanitized = sanitize_query(query)
    terms = index_tokens(store, sanitized)
    match = match_expression(terms, any_terms=any_terms)
    trace: dict[str, Any] = {
        "input": query,
        "query": sanitized,
        "terms": terms,
        "match": match,
        "any_terms": any_terms,
        "empty_query": not terms,
        "note": None,
        "filters": filters,
        "now": store.now_text(),
        "weights": dict(requested),
        "requested_weights": dict(requested),
        "default_weights": dict(DEFAULT_WEIGHTS),
        "fallback": None,
        "embedder": None,
        "keyword_lane_error": False,
        "keyword_lane_message": None,
        "pools": {
            "keyword": {"size": 0, "min": None, "max": None, "limit": pool_size},
            "vector": {"size": 0, "min": None, "max": None, "limit": pool_size},
        },
        "excluded": {"refuted": 0, "expired": 0, "out_of_scope": 0},
        "matched": 0,
        "candidates": 0,
        "limit": limit,
        "truncated": False,
    }
    if not terms:
        trace["note"] = (
            "empty query: nothing searchable is left after sanitizing "
            f"{query!r} (only punctuation, operators or separators)"
        )
        return SearchResponse(results=[], trace=trace, candidates=[])

    try:
        keyword, excluded, matched = _keyword_lane(store, match, filters, pool_size)
        trace["excluded"] = excluded
        trace["matched"] = matched
    except sqlite3.DatabaseError as exc:
        trace["keyword_lane_error"] = True
        trace["keyword_lane_message"] = f"the full-text query failed: {exc}"
        keyword = _Lane(pool={"size": 0, "min": None, "max": None, "limit": pool_size})
    trace["pools"]["keyword"] = keyword.pool

    vector = _Lane(pool={"size": 0, "min": None, "max": None, "limit": pool_size})
    if keyword_only:
        reason: str | None = "keyword-only search was requested: the vector lane is off"
        trace["embedder"] = None
    else:
        query_vector, reason, trace["embedder"] = _query_vector(store, query, embedder)
        if query_vector is not None:
            try:
                vector = _vector_lane(store, query_vector, filters, pool_size)
            except _VectorMismatch as exc:
                reason = str(exc)
    trace["pools"]["vector"] = vector.pool
    trace["fallback"] = reason
    used = dict(FALLBACK_WEIGHTS) if reason else requested
    trace["weights"] = used

    candidates = []
    for record_id in set(keyword.raw) | set(vector.raw):
        created, expires = keyword.dates.get(record_id) or vector.dates[record_id]
        candidates.append(
            _result(
                record_id,
                keyword_raw=keyword.raw.get(record_id),
                keyword_norm=keyword.normalized.get(record_id, 0.0),
                vector_raw=vector.raw.get(record_id),
                vector_norm=vector.normalized.get(record_id, 0.0),
                weights=used,
                fallback=reason,
                created_at=created,
                expires_at=expires,
            )
        )
    return _ranked(candidates, trace)


def _result(
    record_id: int,
    *,
    keyword_raw: float | None,
    keyword_norm: float,
    vector_raw: float | None,
    vector_norm: float,
    weights: Mapping[str, float],
    fallback: str | None,
    created_at: str | None,
    expires_at: str | None,
) -> SearchResult:
    score = merge_score(keyword_norm, vector_norm, weights)
    found_by = [
        lane for lane, raw in (("keyword", keyword_raw), ("vector", vector_raw)) if raw is not None
    ]
    return SearchResult(
        record_id=record_id,
        keyword_score=keyword_norm,
        vector_score=vector_norm,
        score=score,
        created_at=created_at,
        expires_at=expires_at,
        rank=0,
        trace={
            "keyword": {"raw": keyword_raw, "normalized": keyword_norm},
            "vector": {"raw": vector_raw, "normalized": vector_norm},
            "weights": dict(weights),
            "fallback": fallback,
            "found_by": found_by,
            "created_at": created_at,
            "expires_at": expires_at,
        },
    )


def _ranked(candidates: list[SearchResult], trace: dict[str, Any]) -> SearchResponse:
    """Order best first, ties by record id ascending; number the ranks; cut at the limit."""
    ordered = sorted(candidates, key=lambda r: (-r.score, r.record_id))
    ranked = [replace(result, rank=index) for index, result in enumerate(ordered, start=1)]
    limit = trace["limit"]
    trace["candidates"] = len(ranked)
    trace["truncated"] = len(ranked) > limit
    return SearchResponse(results=ranked[:limit], trace=trace, candidates=ranked)


def rerank(
    response: SearchResponse, weights: Mapping[str, float] | Sequence[float] | None
) -> SearchResponse:
    """Re-merge the same lane scores with other weights (what-if), without re-querying.

    When the search fell back to keyword only, the vector lane has no scores and
    the fallback weights stay; the asked-for weights are kept in the trace.
    Each result's trace gains ``previous_rank`` (None if it was not ranked).
    """
    asked = check_weights(weights)
    trace = dict(response.trace)
    trace["requested_weights"] = dict(asked)
    used = dict(FALLBACK_WEIGHTS) if trace.get("fallback") else asked
    trace["weights"] = used
    previous = {r.record_id: r.rank for r in response.candidates}
    candidates = []
    for old in response.candidates:
        item_trace = dict(old.trace)
        item_trace["weights"] = dict(used)
        item_trace["previous_rank"] = previous.get(old.record_id)
        candidates.append(
            replace(
                old,
                score=merge_score(old.keyword_score, old.vector_score, used),
                trace=item_trace,
            )
        )
    return _ranked(candidates, trace)


# ---------------------------------------------------------------- explanation


def _varints(blob: bytes) -> list[int]:
    """Decode SQLite-style varints (as FTS5 writes them) from a blob."""
    values: list[int] = []
    position = 0
    while position < len(blob):
        value = 0
        for index in range(9):
            byte = blob[position]
            position += 1
            if index == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        values.append(value)
    return values


def index_averages(store: MemoryStore) -> tuple[int, int]:
    """``(row count, total tokens)`` from FTS5's averages record, as ``bm25()`` reads them."""
    rows = store.query(f"SELECT block FROM {FTS_TABLE}_data WHERE id = 1")
    if not rows or not rows[0][0]:
        return 0, 0
    values = _varints(bytes(rows[0][0]))
    return values[0], (values[1] if len(values) > 1 else 0)


def explain_keyword(store: MemoryStore, query: str, record_id: int) -> dict[str, Any]:
    """Decompose one record's keyword raw score (``-bm25()``) into per-term contributions.

    For each query term (a repeated term counts twice, as FTS5 counts phrases):
    ``idf = ln((N - df + 0.5) / (df + 0.5))`` (1e-6 when not positive) and
    ``contribution = idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * D / avgdl))``.
    N and avgdl cover the whole index, refuted and expired rows included, as
    FTS5's do. ``bm25`` is FTS5's own value for the record (negative; None when
    no term occurs in it), so the sum can be checked against it.
    """
    record = store.query("SELECT id FROM records WHERE id = ?", (int(record_id),))
    if not record:
        raise MemoryStoreError(f"no record with id {record_id}")
    terms = index_tokens(store, sanitize_query(query))
    _ensure_vocab(store)
    rows_total, tokens_total = index_averages(store)
    avg_len = tokens_total / rows_total if rows_total else 0.0
    sizes = store.query(f"SELECT sz FROM {FTS_TABLE}_docsize WHERE id = ?", (int(record_id),))
    doc_len = _varints(bytes(sizes[0][0]))[0] if sizes and sizes[0][0] else 0
    out_terms = []
    total = 0.0
    for term in terms:
        found_df = store.query(f"SELECT doc FROM temp.{_VOCAB_ROW} WHERE term = ?", (term,))
        df = found_df[0][0] if found_df else 0
        tf = store.query(
            f"SELECT count(*) FROM temp.{_VOCAB_INSTANCE} WHERE term = ? AND doc = ?",
            (term, int(record_id)),
        )[0][0]
        idf = math.log((rows_total - df + 0.5) / (df + 0.5)) if rows_total else BM25_MIN_IDF
        if idf <= 0.0:
            idf = BM25_MIN_IDF
        if tf and avg_len:
            contribution = idf * (
                (tf * (BM25_K1 + 1.0)) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * doc_len / avg_len))
            )
        else:
            contribution = 0.0
        total += contribution
        out_terms.append(
            {
                "term": term,
                "df": df,
                "idf": idf,
                "tf": tf,
                "doc_len": doc_len,
                "avg_len": avg_len,
                "k1": BM25_K1,
                "b": BM25_B,
                "contribution": contribution,
            }
        )
    bm25 = None
    if terms:
        found = store.query(
            f"SELECT bm25({FTS_TABLE}) FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ? AND rowid = ?",
            (match_expression(terms, any_terms=True), int(record_id)),
        )
        bm25 = float(found[0][0]) if found else None
    return {
        "record_id": int(record_id),
        "terms": out_terms,
        "rows": rows_total,
        "avg_len": avg_len,
        "doc_len": doc_len,
        "total": total,
        "bm25": bm25,
    }
