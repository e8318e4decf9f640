"""Hybrid search: sanitizer, keyword lane, vector lane, merge and trace (docs/design.md section 4).

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
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import compress, repeat
from operator import itemgetter, sub, truediv
from typing import Any

from memtui.core.cancel import stop_if
from memtui.core.embed import Embedder, EmbedderError, builtin_embedder
from memtui.core.records import format_timestamp, parse_timestamp
from memtui.core.store import FTS_TABLE, MemoryStore, MemoryStoreError

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


def empty_query_note(query: str) -> str:
    """Why ``query`` searches nothing: no searchable word is left after sanitizing it."""
    return (
        f"empty query: nothing searchable is left after sanitizing {query!r} "
        "(only punctuation, operators or separators)"
    )


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
    # (v - lo) / (hi - lo) for each v, mapped in C
    return list(map(truediv, map(sub, values, repeat(lo)), repeat(hi - lo)))


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


@dataclass(slots=True)
class _Lane:
    raw: dict[int, float] = field(default_factory=dict)
    normalized: dict[int, float] = field(default_factory=dict)
    dates: dict[int, tuple[str | None, str | None]] = field(default_factory=dict)
    pool: dict[str, Any] = field(default_factory=dict)
    # The records this lane would have returned but the live rule or the scope
    # dropped, by reason ("refuted", "expired", "out_of_scope"): each an id array
    # (ascending) or, for a handful, a set.
    dropped: dict[str, Any] = field(default_factory=dict)
    # The vector lane: how many live, in-scope records have no stored vector.
    missing: int | None = None


EXCLUSION_REASONS = ("refuted", "expired", "out_of_scope")


def _lane_from_ranking(
    ranking: Sequence[tuple[int, float]],
    pool_size: int,
    dates: Mapping[int, tuple[str | None, str | None]] | None = None,
) -> _Lane:
    """A lane from its pool, ``(record id, raw score)`` best first: min-max normalized.

    Best first (no score above the one before it), the pool's max is its
    first score and its min its last: this gives what ``min_max_normalize``
    gives without a pass to find them. Dates when they were read.
    """
    if not ranking:
        return _Lane(pool={"size": 0, "min": None, "max": None, "limit": pool_size})
    hi, lo = ranking[0][1], ranking[-1][1]
    span = hi - lo
    raw = dict(ranking)
    if span == 0:
        normalized = dict.fromkeys(raw, 1.0)
    else:
        normalized = {record_id: (score - lo) / span for record_id, score in ranking}
    return _Lane(
        raw=raw,
        normalized=normalized,
        dates={record_id: dates[record_id] for record_id in raw} if dates else {},
        pool={"size": len(raw), "min": lo, "max": hi, "limit": pool_size},
    )


# ---------------------------------------------------------------- hidden rows

# The rows the live rule leaves out (refuted; expired) are few next to a big
# match set, and have partial indexes of their own (schema 2). Both lanes take
# them as id arrays, kept by the store until the data changes
# (``MemoryStore.derived``), instead of joining every matched row to the records table.
_JSON_IDS = "SELECT value FROM json_each(?)"
_SCOPE_BY_ID_LIMIT = 20_000


@dataclass
class _Hidden:
    """The rows the live rule can hide, as sorted id arrays.

    Expiry depends on "now", so the expiring rows keep their rank in
    ``expires_at`` order: at a given now, the expired ones are those ranked
    before the first ``expires_at`` later than now.
    """

    refuted: Any  # ids of refuted rows, ascending
    expiring_ids: Any  # ids of rows with an expires_at, ascending
    expiring_rank: Any  # each one's rank in expires_at order
    expiring_refuted: Any  # each one's refuted flag
    expiry_order: Any  # every expires_at, ascending; None when not all are text
    share: float = 0.0  # at most this fraction of all rows is hidden
    rows: int = 0  # about how many rows the table has (its highest id)
    lowest_id: int = 0  # the lowest id (negative only in a hand-made file)
    rows_in: dict[str, tuple[Any, Any, Any]] = field(default_factory=dict)
    by_id: tuple[bytes, memoryview] | None = None  # see hidden_among
    cut_span: tuple[str, str | None, int] | None = None
    cut_moments: tuple[datetime, datetime | None, int] | None = None

    def expired_before(self, now: str) -> int:
        """How many ``expires_at`` values are ``<= now`` (``expiry_order`` must be text).

        The answer holds for every now from the last expiry passed up to the
        next one, so it is kept for that span: searches in a row skip the lookup.
        """
        held = self.cut_span
        if held is not None and held[0] <= now and (held[1] is None or now < held[1]):
            return held[2]
        order = self.expiry_order
        cut = int(_np().searchsorted(order, now, side="right"))
        passed = str(order[cut - 1]) if cut else ""
        self.cut_span = (passed, str(order[cut]) if cut < len(order) else None, cut)
        return cut

    def expired_now(self, store: MemoryStore) -> int:
        """``expired_before`` the store's clock now (``expiry_order`` must be text).

        Kept as a span of clock moments too, from the moment it was computed up
        to the next expiry, so that searches in a row neither format the time
        nor look it up: timestamps in memtui's form order as the moments they
        name, and a next expiry in another form keeps no span.
        """
        moment = store.now()
        held = self.cut_moments
        if held is not None and held[0] <= moment and (held[1] is None or moment < held[1]):
            return held[2]
        cut = self.expired_before(format_timestamp(moment))
        following = self.cut_span[1] if self.cut_span is not None else None
        until = _moment_of(following) if following is not None else None
        self.cut_moments = None if following is not None and until is None else (moment, until, cut)
        return cut

    def hidden_among(self, store: MemoryStore, ids: Sequence[int]) -> tuple[set[int], set[int]]:
        """Of a few ``ids``: the refuted ones; the expired (now) and not refuted ones.

        The answer of ``classify`` for a rare query's handful of ids. Array
        calls have a fixed cost that outweighs such a query, and hash sets of
        a big store's hidden ids miss the processor's caches on every lookup;
        so this reads one byte per id from a table indexed by id (one byte per
        row: 1 MB at a million), and the expiry rank of the few it marks.
        """
        if not ids:
            return set(), set()
        if self.by_id is None:
            np = _np()
            marks = np.zeros(self.rows + 1, dtype=np.uint8)
            rank = np.full(self.rows + 1, -1, dtype=np.int32)
            if self.lowest_id >= 0:
                marks[self.refuted] = 1
                marks[self.expiring_ids[~_members(self.refuted, self.expiring_ids)]] = 2
                rank[self.expiring_ids] = self.expiring_rank
            else:  # a negative id would index from the end: every id goes the array way
                marks = np.zeros(0, dtype=np.uint8)
            self.by_id = (marks.tobytes(), memoryview(rank))
        marks, rank_at = self.by_id
        found = _marked(marks, ids)
        if found is None:  # an id past the table or a flagged negative one (no row): arrays
            np = _np()
            matched = np.unique(np.fromiter(ids, dtype=np.int64, count=len(ids)))
            refuted_mask, expired_mask = self.classify(store, matched)
            return set(matched[refuted_mask].tolist()), set(matched[expired_mask].tolist())
        if not found:
            return set(), set()
        refuted = {i for i in found if marks[i] == 1}
        expiring = [i for i in found if marks[i] == 2]
        if not expiring:
            return refuted, set()
        if self.expiry_order is None:
            gone = self.expiring_ids[self.expired_flags(store, store.now_text())]
            return refuted, set(expiring).intersection(gone.tolist())
        cut = self.expired_now(store)
        return refuted, {i for i in expiring if rank_at[i] < cut}

    def expired_flags(self, store: MemoryStore, now: str) -> Any:
        """Over ``expiring_ids``: expired at ``now`` and not refuted (refuted comes first)."""
        np = _np()
        if self.expiry_order is None:
            expired = np.sort(
                _ids_from(
                    store,
                    "SELECT group_concat(id) FROM records INDEXED BY records_expiry "
                    "WHERE expires_at IS NOT NULL AND expires_at <= ? AND refuted = 0",
                    [now],
                )
            )
            return _positions(expired, self.expiring_ids) >= 0
        cut = self.expired_before(now)
        return (self.expiring_rank < cut) & ~self.expiring_refuted

    def classify(self, store: MemoryStore, matched: Any) -> tuple[Any, Any]:
        """Masks over the ascending ``matched`` ids: refuted; expired now and not refuted."""
        np = _np()
        refuted = _mask(matched, self.refuted)
        if len(self.expiring_ids) == 0:
            return refuted, np.zeros(len(matched), dtype=bool)
        now = store.now_text()
        if len(matched) * 8 < len(self.expiring_ids) and self.expiry_order is not None:
            where = _positions(self.expiring_ids, matched)
            found = where >= 0
            expired = np.zeros(len(matched), dtype=bool)
            if found.any():
                at = where[found]
                cut = self.expired_before(now)
                expired[found] = (self.expiring_rank[at] < cut) & ~self.expiring_refuted[at]
            return refuted, expired
        gone = self.expiring_ids[self.expired_flags(store, now)]
        return refuted, _mask(matched, gone) & ~refuted

    def matrix_rows(self, store: MemoryStore, cached: Any, now: str) -> Any:
        """Rows of the vector matrix ``cached`` that the live rule hides at ``now``."""
        np = _np()
        refuted_rows, expired_rows = self.matrix_rows_by_reason(store, cached, now)
        return np.concatenate([refuted_rows, expired_rows])

    def matrix_rows_by_reason(self, store: MemoryStore, cached: Any, now: str) -> tuple[Any, Any]:
        """Rows of the vector matrix ``cached`` that the live rule hides at ``now``: the
        refuted ones, and the expired ones that are not refuted (no row in both)."""
        held = self.rows_in.get("matrix")
        if held is None or held[0] is not cached:
            ids = cached.ids
            held = (cached, _positions(ids, self.refuted), _positions(ids, self.expiring_ids))
            self.rows_in["matrix"] = held
        _matrix, refuted_rows, expiring_rows = held
        expired_rows = expiring_rows[self.expired_flags(store, now)]
        return refuted_rows[refuted_rows >= 0], expired_rows[expired_rows >= 0]

    def live_total(self, store: MemoryStore, now: str) -> int:
        """How many records are live at ``now``: every row less the hidden ones.

        The row count is kept until the data changes (``MemoryStore.derived``);
        the hidden ones are this object's arrays: no scan per search.
        """
        total = store.derived("record count", MemoryStore.record_count)
        expired = int(_np().count_nonzero(self.expired_flags(store, now)))
        return max(0, total - len(self.refuted) - expired)


def _np() -> Any:
    import numpy

    return numpy


def _parse_ids(text: str | None) -> Any:
    np = _np()
    if not text:
        return np.zeros(0, dtype=np.int64)
    return np.fromstring(text, dtype=np.int64, sep=",")


def _ids_from(store: MemoryStore, sql: str, params: Sequence[Any] = ()) -> Any:
    """An int64 array from a query returning one ``group_concat`` of ids."""
    np = _np()
    text = store.query(sql, params)[0][0]
    if not text:
        return np.zeros(0, dtype=np.int64)
    return np.fromstring(text, dtype=np.int64, sep=",")


def _marked(marks: bytes, ids: Sequence[int]) -> list[int] | None:
    """The ``ids`` whose byte in ``marks`` is set; None when one is outside ``marks``.

    A negative id reads a byte from the end: harmless when that byte is clear
    (an id that is not in the table is not hidden either), so only the marked
    ids are checked for it.
    """
    try:
        if len(ids) == 1:
            found = [ids[0]] if marks[ids[0]] else []
        else:
            flags = itemgetter(*ids)(marks)
            found = list(compress(ids, flags)) if any(flags) else []
    except IndexError:
        return None
    return None if found and min(found) < 0 else found


def _moment_of(text: str) -> datetime | None:
    """The moment a timestamp in memtui's own form names; None for any other text."""
    try:
        moment = parse_timestamp(text)
    except ValueError:
        return None
    return moment if format_timestamp(moment) == text else None


def _hidden_rows(store: MemoryStore) -> _Hidden:
    return store.derived("hidden rows", _read_hidden_rows)


def _read_hidden_rows(store: MemoryStore) -> _Hidden:
    np = _np()
    refuted = np.sort(
        _ids_from(
            store,
            "SELECT group_concat(id) FROM records INDEXED BY records_refuted WHERE refuted != 0",
        )
    )
    rows = store.query(
        "SELECT expires_at, id, refuted FROM records INDEXED BY records_expiry "
        "WHERE expires_at IS NOT NULL ORDER BY expires_at"
    )
    ids = np.array([r[1] for r in rows], dtype=np.int64)
    flags = np.array([bool(r[2]) for r in rows], dtype=bool)
    by_id = np.argsort(ids, kind="stable")
    order = None
    if all(isinstance(r[0], str) for r in rows):
        # a foreign value type (not text) is left to SQLite to compare
        order = np.array([r[0] for r in rows], dtype=str) if rows else np.zeros(0, dtype=str)
    top, lowest = store.query("SELECT max(id), min(id) FROM records")[0]
    hidden = _Hidden(
        refuted=refuted,
        expiring_ids=ids[by_id],
        expiring_rank=by_id.astype(np.int64),
        expiring_refuted=flags[by_id],
        expiry_order=order,
        share=min(1.0, (len(refuted) + len(ids)) / top) if top and top > 0 else 0.0,
        rows=max(0, int(top or 0)),
        lowest_id=int(lowest or 0),
    )
    return hidden


def _positions(sorted_ids: Any, candidates: Any) -> Any:
    """Index of each candidate in the ascending ``sorted_ids``, -1 where absent."""
    np = _np()
    if len(sorted_ids) == 0:
        return np.full(len(candidates), -1, dtype=np.int64)
    where = np.searchsorted(sorted_ids, candidates)
    where[where >= len(sorted_ids)] = len(sorted_ids) - 1
    return np.where(sorted_ids[where] == candidates, where, -1)


def _members(sorted_ids: Any, candidates: Any) -> Any:
    """Boolean mask over ``candidates``: which are in the ascending array ``sorted_ids``."""
    return _positions(sorted_ids, candidates) >= 0


def _mask(matched: Any, sorted_ids: Any) -> Any:
    """Boolean mask over the ascending ``matched``: which are in the ascending ``sorted_ids``.

    Binary-searches the smaller array in the larger one.
    """
    np = _np()
    if len(matched) <= len(sorted_ids):
        return _members(sorted_ids, matched)
    out = np.zeros(len(matched), dtype=bool)
    where = _positions(matched, sorted_ids)
    out[where[where >= 0]] = True
    return out


def _in_scope(store: MemoryStore, filters: Mapping[str, Any], ids: Any) -> Any:
    """Mask over the ascending ``ids``: which satisfy the scope filters (live rule aside)."""
    np = _np()
    where, params = store.scope_clause(dict(filters), include_refuted=True, include_expired=True)
    if len(ids) <= _SCOPE_BY_ID_LIMIT:
        found = _ids_from(
            store,
            f"SELECT group_concat(id) FROM records WHERE id IN ({_JSON_IDS}) AND {where}",
            [_json_ids(ids), *params],
        )
    else:
        found = _ids_from(store, f"SELECT group_concat(id) FROM records WHERE {where}", params)
    return _members(np.sort(found), ids)


def _json_ids(ids: Any) -> str:
    return "[" + ",".join(str(int(i)) for i in ids) + "]"


def _dates(
    store: MemoryStore, ids: Sequence[int], filters: Mapping[str, Any] | None
) -> dict[int, tuple[str | None, str | None]]:
    """``created_at`` and ``expires_at`` of those ``ids`` that are live and in scope."""
    if not ids:
        return {}
    where, params = store.scope_clause(dict(filters or {}))
    rows = store.query_tuples(
        f"SELECT id, created_at, expires_at FROM records WHERE id IN ({_JSON_IDS}) AND {where}",
        [_json_ids(ids), *params],
    )
    return {r[0]: (r[1], r[2]) for r in rows}


# ---------------------------------------------------------------- keyword lane

_RANKING = (
    f"SELECT rowid, -bm25({FTS_TABLE}) AS raw FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ? "
    "ORDER BY raw DESC, rowid LIMIT ?"
)
_LISTING = f"SELECT group_concat(rowid) FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ?"


def _keyword_lane(
    store: MemoryStore,
    match: str,
    filters: Mapping[str, Any] | None,
    pool_size: int,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[_Lane, dict[str, int], int]:
    """Top ``pool_size`` live, in-scope matches by BM25, the excluded matches counted
    by reason, and how many matched (see ``_keyword_lane_detail``)."""
    lane, total = _keyword_lane_detail(store, match, filters, pool_size, cancelled)
    return lane, {reason: len(ids) for reason, ids in lane.dropped.items()}, total


def _keyword_lane_detail(
    store: MemoryStore,
    match: str,
    filters: Mapping[str, Any] | None,
    pool_size: int,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[_Lane, int]:
    """Top ``pool_size`` live, in-scope matches by BM25, and how many matched.

    The lane's ``dropped`` holds, by reason, the ids of every match the live
    rule or the scope left out (refuted first; expired and not refuted; out of
    scope and live).

    FTS5 ranks the matches by ``bm25()`` exactly as a plain top-N query does,
    N being twice the pool plus a margin for the rows the live rule hides.
    When fewer than N match, that ranking holds every match and is the only
    statement. Otherwise a cheap pass lists every match's rowid (no BM25); on
    a big store it starts on the store's second connection as soon as the
    ranking has stepped over more than N matches, so the two run side by side. Refuted, expired and
    out-of-scope matches are counted against the cached hidden rows, never by
    reading the records table; if they crowd the top of the ranking, it is
    fetched again with a sure N. The records' dates are read once per search,
    for both lanes' candidates together (``hybrid_search``).

    Raises ``sqlite3.DatabaseError`` when FTS5 rejects the query or the index,
    and ``sqlite3.OperationalError`` when ``cancelled()`` stops a statement.
    """
    first: tuple[int, list[Any]] | None = None
    hidden = _hidden_rows(store)
    if filters:
        matched = _parse_ids(store.query_tuples(_LISTING, [match], cancelled=cancelled)[0][0])
    else:
        fetch = 2 * pool_size + int(2 * pool_size * hidden.share) + 16
        early = _EarlyListing(store, match) if hidden.rows >= _PARALLEL_MIN_ROWS else None
        rows = _ranked_matches(
            store, match, fetch, when_busy=early.start if early else None, cancelled=cancelled
        )
        if len(rows) < fetch:
            # Fewer matches than asked for: the ranking holds every one of them.
            lane, excluded, total = _every_match_ranked(store, hidden, rows, pool_size)
            return lane, total
        first = (fetch, rows)
        text = early.result() if early is not None else None
        if text is None:
            text = store.query_tuples(_LISTING, [match], cancelled=cancelled)[0][0]
        matched = _parse_ids(text)
    np = _np()
    total = len(matched)
    none = np.zeros(0, dtype=np.int64)
    if total == 0:
        lane = _lane_from_ranking((), pool_size)
        lane.dropped = dict.fromkeys(EXCLUSION_REASONS, none)
        return lane, 0
    if total > 1 and not bool((matched[1:] > matched[:-1]).all()):
        matched = np.unique(matched)
        total = len(matched)
    refuted, expired = hidden.classify(store, matched)
    out = refuted | expired
    by_reason = {"refuted": matched[refuted], "expired": matched[expired], "out_of_scope": none}
    if filters:
        live = ~out
        scope = _in_scope(store, filters, matched[live])
        outside = np.flatnonzero(live)[~scope]
        by_reason["out_of_scope"] = matched[outside]
        out[outside] = True
    dropped = set(matched[out].tolist()) if out.any() else set()
    lane_rows = _keyword_pool(store, match, pool_size, total, dropped, first, cancelled)
    lane = _lane_from_ranking(lane_rows, pool_size)
    lane.dropped = by_reason
    return lane, total


def _every_match_ranked(
    store: MemoryStore, hidden: _Hidden, rows: list[tuple[Any, ...]], pool_size: int
) -> tuple[_Lane, dict[str, int], int]:
    """The keyword lane when the ranking holds every match (no filters): one statement.

    A rare query's whole lane is this and its one statement, so it makes as
    few passes over the rows as it can, each in C where it can.
    """
    refuted, expired = hidden.hidden_among(store, list(map(itemgetter(0), rows)))
    excluded = {"refuted": len(refuted), "expired": len(expired), "out_of_scope": 0}
    total = len(rows)
    if refuted or expired:
        gone = refuted | expired  # the pool is the best pool_size of the rest
        rows = [row for row in rows[: pool_size + len(gone)] if row[0] not in gone]
    lane = _lane_from_ranking(rows[:pool_size], pool_size)
    lane.dropped = {"refuted": refuted, "expired": expired, "out_of_scope": set()}  # a few ids
    return lane, excluded, total


_SIDE_POOL: ThreadPoolExecutor | None = None
_PARALLEL_MIN_ROWS = 50_000  # below this, a second thread costs more than it saves
_STEPS_PER_MATCH = 22
"""SQLite runs up to about this many virtual-machine steps per match of the ranking (16 to 22
with 3.40): a ranking past N times as many steps has more than N matches, so the listing of
every match will be needed. Only when to start it depends on this, never an answer."""


def _side_pool() -> ThreadPoolExecutor:
    global _SIDE_POOL
    if _SIDE_POOL is None:
        _SIDE_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="memtui-search")
    return _SIDE_POOL


class _EarlyListing:
    """The list of every match, started on the side connection once the ranking needs it.

    A thread hand-off costs about a tenth of a millisecond: more than a rare
    query's whole ranking. So the listing waits for the ranking's progress
    handler to count more steps than the kept rows can take, and a ranking
    that holds every match never pays for it.
    """

    def __init__(self, store: MemoryStore, match: str) -> None:
        self.store, self.match = store, match
        self.pending: Any = None

    def start(self) -> None:
        try:
            self.pending = _side_pool().submit(self.store.side_query, _LISTING, [self.match])
        except RuntimeError:  # the pool is shutting down: the listing runs in line
            self.pending = None

    def result(self) -> str | None:
        """The listing's text, or None when it never started (or had no second connection)."""
        if self.pending is None:
            return None
        found = self.pending.result()
        return found[0][0] if found is not None else None


def _ranked_matches(
    store: MemoryStore,
    match: str,
    fetch: int,
    when_busy: Callable[[], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> list[tuple[Any, ...]]:
    """The plain top-N query by ``bm25()``, ties by rowid: ``(rowid, raw score = -bm25())``."""
    return store.query_tuples(
        _RANKING,
        [match, fetch],
        when_busy=when_busy,
        busy_steps=_STEPS_PER_MATCH * fetch,
        cancelled=cancelled,
    )


def _keyword_pool(
    store: MemoryStore,
    match: str,
    pool_size: int,
    total: int,
    dropped: set[int],
    first: tuple[int, list[Any]] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> list[tuple[int, float]]:
    """The best ``pool_size`` matches by ``(bm25(), rowid)`` outside ``dropped``, best first:
    ``(record id, raw score)``.

    ``first`` is an already fetched ``(N, top-N rows)``. If it comes short
    once the excluded rows are dropped, the ranking is fetched again with
    N = pool + every excluded match, which cannot come short.
    """
    wanted = min(pool_size, total - len(dropped))
    if wanted <= 0:
        return []
    if first is not None:
        fetch, rows = first
        keep = [r for r in rows if r[0] not in dropped][:wanted]
        if len(keep) >= wanted or len(rows) < fetch:
            return keep
    rows = _ranked_matches(store, match, min(total, pool_size + len(dropped)), cancelled=cancelled)
    return [r for r in rows if r[0] not in dropped][:wanted]


# ---------------------------------------------------------------- vector lane


def _vector_lane(
    store: MemoryStore,
    query_vector: Sequence[float],
    filters: Mapping[str, Any] | None,
    pool_size: int,
    cancelled: Callable[[], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> _Lane:
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
    from memtui.core import vector_cache

    np = _np()
    filters = dict(filters or {})
    cached = vector_cache.load(store, cancelled, progress)
    if cached is None:
        return _lane_from_ranking((), pool_size)
    hidden = _hidden_rows(store)
    now = store.now_text()
    if len(cached) == 0 and not cached.bad:
        lane = _lane_from_ranking((), pool_size)
        lane.missing = len(_scope_ids(store, filters)) if filters else hidden.live_total(store, now)
        return lane
    dim = len(query_vector)
    if cached.bad or cached.dim != dim:
        _check_dimensions(store, cached, dim, filters)
    if len(cached) == 0:
        lane = _lane_from_ranking((), pool_size)
        lane.missing = len(_scope_ids(store, filters)) if filters else hidden.live_total(store, now)
        return lane
    ids, matrix = cached.ids, cached.matrix
    query64 = np.asarray(query_vector, dtype=np.float64)
    query32 = query64.astype(np.float32)
    query_norm = float(np.sqrt(np.dot(query32, query32)))
    approx = np.asarray(matrix @ query32, dtype=np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        approx /= cached.norms * np.float32(query_norm)
    approx[cached.norms == 0] = 0.0  # cosine() gives 0 for an all-zero vector
    approx[~np.isfinite(approx)] = np.inf  # unknown: let the exact pass decide
    removed = 0
    if cached.removed is not None and len(cached.removed):
        approx[cached.removed] = -np.inf  # rows of forgotten records: zeros, never a result
        removed = len(cached.removed)
    # Rows that cannot be in the lane: hidden by the live rule, or out of scope.
    # Their scores are kept aside to count the ones that would have made the pool.
    refuted_rows, expired_rows = hidden.matrix_rows_by_reason(store, cached, now)
    kept = {"refuted": approx[refuted_rows], "expired": approx[expired_rows]}
    approx[refuted_rows] = -np.inf
    approx[expired_rows] = -np.inf
    before = in_scope = None
    if filters:
        scope = _scope_ids(store, filters)
        in_scope = _members(scope, ids)
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
    lane = _lane_from_ranking(best, pool_size, dates)
    lane.missing = max(0, missing)
    if before is not None:
        # Out of scope and live: only rows near or above the pool's line can count.
        line = best[-1][1] if len(best) >= pool_size else 0.0
        outside = np.flatnonzero((before >= np.float32(line - bound)) & ~in_scope)
        kept["out_of_scope"] = before[outside]
    else:
        outside = None
    rows_of = {"refuted": refuted_rows, "expired": expired_rows, "out_of_scope": outside}
    lane.dropped = {}
    for reason in EXCLUSION_REASONS:
        rows = rows_of[reason]
        if rows is None or not len(rows):
            lane.dropped[reason] = ()
            continue
        enter = _would_enter(cached, rows, kept[reason], query64, bound, best, pool_size)
        lane.dropped[reason] = ids[rows[enter]]  # rows ascend, and ids with them
    return lane


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
    np = _np()
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


def _scope_ids(store: MemoryStore, filters: Mapping[str, Any]) -> Any:
    np = _np()
    where, params = store.scope_clause(dict(filters))
    return np.sort(_ids_from(store, f"SELECT group_concat(id) FROM records WHERE {where}", params))


def _best_rows(
    store: MemoryStore,
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
    np = _np()
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
            found = _dates(store, unknown, filters)
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
    np = _np()
    values = np.ascontiguousarray(np.asarray(matrix[rows], dtype=np.float64).T)
    dots = np.add.reduce(values * query64[:, None], axis=0)
    squares = np.add.reduce(values * values, axis=0)
    out = np.zeros(len(rows), dtype=np.float64)
    nonzero = squares != 0.0
    if query_sq != 0.0:
        out[nonzero] = dots[nonzero] / (math.sqrt(query_sq) * np.sqrt(squares[nonzero]))
    return out


def _check_dimensions(
    store: MemoryStore, cached: Any, dim: int, filters: Mapping[str, Any]
) -> None:
    """Raise ``_VectorMismatch`` for the first live, in-scope vector not of ``dim`` values."""
    lengths = dict(cached.bad)
    if cached.dim != dim:
        lengths.update({int(i): cached.dim for i in cached.live_ids().tolist()})
    wrong = sorted(i for i, n in lengths.items() if n != dim)
    for start in range(0, len(wrong), 5000):
        chunk = wrong[start : start + 5000]
        live = _dates(store, chunk, filters)
        for record_id in chunk:
            if record_id in live:
                raise _VectorMismatch(
                    f"stored vector of record #{record_id} has {lengths[record_id]} dims; "
                    f"the query vector has {dim}"
                )


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
        # The file names its embedder, but a file is untrusted input: only a
        # built-in is taken from it. A plug-in (module:callable) would be code
        # the file chose to run; the operator passes it explicitly instead.
        recorded_name = _shown(recorded["name"])
        try:
            embedder = builtin_embedder(recorded["name"])
        except EmbedderError as exc:
            return None, f"the database's embedder {recorded_name} is refused: {exc}", None
        if embedder is None:
            spec = recorded.get("spec")
            loaded = f" (loaded as {_shown(spec)})" if spec else ""
            return (
                None,
                (
                    f"the stored vectors were written by the plug-in embedder {recorded_name}"
                    f"{loaded}; memtui never loads code that a database file names: pass it "
                    f"yourself with --embedder {_shown(spec) if spec else 'module:callable'}"
                ),
                None,
            )
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


def _shown(text: str, limit: int = 120) -> str:
    """Text read from the database file (an embedder's name), cut short for a message."""
    return text if len(text) <= limit else text[:limit] + "..."


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
    cancelled: Callable[[], bool] | None = None,
    vector_progress: Callable[[int, int], None] | None = None,
) -> SearchResponse:
    """Search live, in-scope records by keyword (BM25) and vector (cosine), merged.

    ``embedder`` overrides the one recorded in the database; ``keyword_only``
    switches the vector lane off (a fallback with its reason in the trace).
    Unknown filter keys raise ``MemoryStoreError`` before anything runs. When
    ``cancelled()`` turns true, the search stops at its next step (a running
    full-text statement included) and raises ``Cancelled``. The first vector
    search after a vector write builds the vector matrix (seconds at a
    million); ``vector_progress(done, total)`` follows that build.

    Without ``embedder``, the vector lane uses the embedder the file records
    only when it is a built-in (``hash-N``): a plug-in named in the file is
    never imported (the trace's ``fallback`` names it and its spec, to pass
    as ``embedder``).

    The trace (a plain dict) holds, among others:

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
        "excluded_by_lane": {
            "keyword": {"refuted": 0, "expired": 0, "out_of_scope": 0},
            "vector": {"refuted": 0, "expired": 0, "out_of_scope": 0},
        },
        "vectors_missing": None,
        "matched": 0,
        "candidates": 0,
        "limit": limit,
        "truncated": False,
    }
    if not terms:
        trace["note"] = empty_query_note(query)
        return SearchResponse(results=[], trace=trace, candidates=[])

    stop_if(cancelled)
    try:
        keyword, keyword_excluded, matched = _keyword_lane(
            store, match, filters, pool_size, cancelled
        )
        trace["matched"] = matched
    except sqlite3.DatabaseError as exc:
        stop_if(cancelled)  # the statement was interrupted because the search was cancelled
        trace["keyword_lane_error"] = True
        trace["keyword_lane_message"] = f"the full-text query failed: {exc}"
        keyword = _Lane(pool={"size": 0, "min": None, "max": None, "limit": pool_size})
        keyword_excluded = dict.fromkeys(EXCLUSION_REASONS, 0)
    trace["pools"]["keyword"] = keyword.pool

    vector = _Lane(pool={"size": 0, "min": None, "max": None, "limit": pool_size})
    if keyword_only:
        reason: str | None = "keyword-only search was requested: the vector lane is off"
        trace["embedder"] = None
    else:
        query_vector, reason, trace["embedder"] = _query_vector(store, query, embedder)
        if query_vector is not None:
            stop_if(cancelled)
            try:
                vector = _vector_lane(
                    store, query_vector, filters, pool_size, cancelled, vector_progress
                )
            except _VectorMismatch as exc:
                reason = str(exc)
    trace["pools"]["vector"] = vector.pool
    trace["vectors_missing"] = vector.missing
    trace["excluded_by_lane"] = {
        "keyword": {reason: keyword_excluded.get(reason, 0) for reason in EXCLUSION_REASONS},
        "vector": _counts(vector.dropped),
    }
    trace["excluded"] = {
        reason: (
            _distinct(keyword.dropped[reason], vector.dropped.get(reason, ()))
            if reason in keyword.dropped
            else keyword_excluded.get(reason, 0) + len(vector.dropped.get(reason, ()))
        )
        for reason in EXCLUSION_REASONS
    }
    trace["fallback"] = reason
    used = dict(FALLBACK_WEIGHTS) if reason else requested
    trace["weights"] = used

    stop_if(cancelled)
    # The vector lane read its pool's dates when it confirmed them live; the
    # keyword lane's other candidates are read here, in one statement.
    dates = dict(vector.dates)
    unread = sorted(record_id for record_id in keyword.raw if record_id not in dates)
    dates.update(_dates(store, unread, filters))
    candidates = []
    for record_id in set(keyword.raw) | set(vector.raw):
        if record_id not in dates:
            continue  # refuted, expired or gone since the lane ranked it; or no record at all
        created, expires = dates[record_id]
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


def _counts(dropped: Mapping[str, Any]) -> dict[str, int]:
    return {reason: len(dropped.get(reason, ())) for reason in EXCLUSION_REASONS}


def _distinct(first: Any, second: Any) -> int:
    """How many distinct ids two collections hold together (each ids without repeats:
    an ascending array, or a set)."""
    if not len(first) or not len(second):
        return len(first) + len(second)
    np = _np()
    a = first if isinstance(first, np.ndarray) else np.array(sorted(first), dtype=np.int64)
    b = second if isinstance(second, np.ndarray) else np.array(sorted(second), dtype=np.int64)
    if len(a) < len(b):
        a, b = b, a
    return len(a) + len(b) - int(np.count_nonzero(_members(a, b)))


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


_DF_CACHE_TERMS = 4096


def _document_frequencies(store: MemoryStore) -> dict[str, int]:
    """Document frequencies per term, kept until the database changes: explaining
    several results of one query looks the same terms up again."""
    held: dict[str, int] = store.derived("document frequencies", lambda _store: {})
    if len(held) > _DF_CACHE_TERMS:
        held.clear()
    return held


def _term_frequency(store: MemoryStore, term: str, record_id: int) -> int:
    """How many times the index holds ``term`` in the record: FTS5's own instance count.

    ``highlight()`` marks every instance that the index's position list gives
    for that row (what ``bm25()`` counts), so the marks, less any such
    character already in the text, are the term frequency. It reads one row's
    positions instead of scanning every instance of the term (``fts5vocab``).
    """
    rows = store.query(
        f"SELECT highlight({FTS_TABLE}, 0, char(1), ''), {FTS_TABLE}.content "
        f"FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ? AND rowid = ?",
        (match_expression([term]), record_id),
    )
    if not rows or rows[0][0] is None:
        return 0
    marked, text = rows[0]
    return marked.count("\x01") - (text or "").count("\x01")


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
    frequencies = _document_frequencies(store)
    for term in terms:
        if term not in frequencies:
            found_df = store.query(f"SELECT doc FROM temp.{_VOCAB_ROW} WHERE term = ?", (term,))
            frequencies[term] = found_df[0][0] if found_df else 0
        df = frequencies[term]
        tf = _term_frequency(store, term, int(record_id))
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
