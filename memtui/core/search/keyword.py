"""The keyword lane: FTS5 matches ranked by BM25, the hidden and out-of-scope ones counted."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from operator import itemgetter
from typing import Any

from memtui.core.index import FTS_TABLE, SearchIndex
from memtui.core.search.hidden import (
    Hidden,
    hidden_rows,
    in_scope,
    np_module,
    parse_ids,
)
from memtui.core.search.scores import EXCLUSION_REASONS, Lane, lane_from_ranking

_RANKING = (
    f"SELECT rowid, -bm25({FTS_TABLE}) AS raw FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ? "
    "ORDER BY raw DESC, rowid LIMIT ?"
)
_LISTING = f"SELECT group_concat(rowid) FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ?"


def keyword_lane(
    store: SearchIndex,
    match: str,
    filters: Mapping[str, Any] | None,
    pool_size: int,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[Lane, dict[str, int], int]:
    """Top ``pool_size`` live, in-scope matches by BM25, the excluded matches counted
    by reason, and how many matched (see ``_keyword_lane_detail``)."""
    lane, total = _keyword_lane_detail(store, match, filters, pool_size, cancelled)
    return lane, {reason: len(ids) for reason, ids in lane.dropped.items()}, total


def _keyword_lane_detail(
    store: SearchIndex,
    match: str,
    filters: Mapping[str, Any] | None,
    pool_size: int,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[Lane, int]:
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
    hidden = hidden_rows(store)
    if filters:
        matched = parse_ids(store.query_tuples(_LISTING, [match], cancelled=cancelled)[0][0])
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
        matched = parse_ids(text)
    np = np_module()
    total = len(matched)
    none = np.zeros(0, dtype=np.int64)
    if total == 0:
        lane = lane_from_ranking((), pool_size)
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
        scope = in_scope(store, filters, matched[live])
        outside = np.flatnonzero(live)[~scope]
        by_reason["out_of_scope"] = matched[outside]
        out[outside] = True
    dropped = set(matched[out].tolist()) if out.any() else set()
    lane_rows = _keyword_pool(store, match, pool_size, total, dropped, first, cancelled)
    lane = lane_from_ranking(lane_rows, pool_size)
    lane.dropped = by_reason
    return lane, total


def _every_match_ranked(
    store: SearchIndex, hidden: Hidden, rows: list[tuple[Any, ...]], pool_size: int
) -> tuple[Lane, dict[str, int], int]:
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
    lane = lane_from_ranking(rows[:pool_size], pool_size)
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

    def __init__(self, store: SearchIndex, match: str) -> None:
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
    store: SearchIndex,
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
    store: SearchIndex,
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
