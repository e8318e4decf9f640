"""The rows the live rule hides (refuted, expired) and the scope, as id arrays."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import compress
from operator import itemgetter
from typing import Any

from memtui.core.index import SearchIndex
from memtui.core.records import format_timestamp, parse_timestamp

# The rows the live rule leaves out (refuted; expired) are few next to a big
# match set, and have partial indexes of their own (schema 2). Both lanes take
# them as id arrays, kept by the store until the data changes
# (``SearchIndex.derived``), instead of joining every matched row to the records table.
_JSON_IDS = "SELECT value FROM json_each(?)"
_SCOPE_BY_ID_LIMIT = 20_000


@dataclass
class Hidden:
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
    records: int | None = None  # the row count, read on first use (live_total)

    def expired_before(self, now: str) -> int:
        """How many ``expires_at`` values are ``<= now`` (``expiry_order`` must be text).

        The answer holds for every now from the last expiry passed up to the
        next one, so it is kept for that span: searches in a row skip the lookup.
        """
        held = self.cut_span
        if held is not None and held[0] <= now and (held[1] is None or now < held[1]):
            return held[2]
        order = self.expiry_order
        cut = int(np_module().searchsorted(order, now, side="right"))
        passed = str(order[cut - 1]) if cut else ""
        self.cut_span = (passed, str(order[cut]) if cut < len(order) else None, cut)
        return cut

    def expired_now(self, store: SearchIndex) -> int:
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

    def hidden_among(self, store: SearchIndex, ids: Sequence[int]) -> tuple[set[int], set[int]]:
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
            np = np_module()
            marks = np.zeros(self.rows + 1, dtype=np.uint8)
            rank = np.full(self.rows + 1, -1, dtype=np.int32)
            if self.lowest_id >= 0:
                marks[self.refuted] = 1
                marks[self.expiring_ids[~members(self.refuted, self.expiring_ids)]] = 2
                rank[self.expiring_ids] = self.expiring_rank
            else:  # a negative id would index from the end: every id goes the array way
                marks = np.zeros(0, dtype=np.uint8)
            self.by_id = (marks.tobytes(), memoryview(rank))
        marks, rank_at = self.by_id
        found = _marked(marks, ids)
        if found is None:  # an id past the table or a flagged negative one (no row): arrays
            np = np_module()
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

    def expired_flags(self, store: SearchIndex, now: str | None) -> Any:
        """Over ``expiring_ids``: expired at ``now`` and not refuted (refuted comes first).

        ``now`` None is the store's clock now (``expired_now``: no time formatted
        while it stays between two expiries)."""
        np = np_module()
        if not len(self.expiring_ids):
            return self.expiring_refuted  # no row expires: an empty mask
        if now is None and self.expiry_order is not None:
            return (self.expiring_rank < self.expired_now(store)) & ~self.expiring_refuted
        if now is None:
            now = store.now_text()
        if self.expiry_order is None:
            expired = np.sort(
                ids_from(
                    store,
                    "SELECT group_concat(id) FROM records INDEXED BY records_expiry "
                    "WHERE expires_at IS NOT NULL AND expires_at <= ? AND refuted = 0",
                    [now],
                )
            )
            return _positions(expired, self.expiring_ids) >= 0
        cut = self.expired_before(now)
        return (self.expiring_rank < cut) & ~self.expiring_refuted

    def classify(self, store: SearchIndex, matched: Any) -> tuple[Any, Any]:
        """Masks over the ascending ``matched`` ids: refuted; expired now and not refuted."""
        np = np_module()
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

    def matrix_rows_by_reason(self, cached: Any, expired: Any) -> tuple[Any, Any]:
        """Rows of the vector matrix ``cached`` that the live rule hides: the refuted ones,
        and the ``expired`` ones (``expired_flags``) that are not refuted (no row in both)."""
        held = self.rows_in.get("matrix")
        if held is None or held[0] is not cached:
            ids = cached.ids
            refuted_rows = _positions(ids, self.refuted)
            held = (cached, refuted_rows[refuted_rows >= 0], _positions(ids, self.expiring_ids))
            self.rows_in["matrix"] = held
        _matrix, refuted_rows, expiring_rows = held
        if not len(expiring_rows):
            return refuted_rows, expiring_rows
        expired_rows = expiring_rows[expired]
        return refuted_rows, expired_rows[expired_rows >= 0]

    def live_total(self, store: SearchIndex, expired: Any) -> int:
        """How many records are live: every row less the refuted and the ``expired`` ones
        (``expired_flags``).

        The row count is read once for this object (kept, like it, until the data
        changes); the hidden ones are its arrays: no scan per search.
        """
        if self.records is None:
            self.records = store.record_count()
        return max(0, self.records - len(self.refuted) - int(np_module().count_nonzero(expired)))


def np_module() -> Any:
    import numpy

    return numpy


def parse_ids(text: str | None) -> Any:
    np = np_module()
    if not text:
        return np.zeros(0, dtype=np.int64)
    return np.fromstring(text, dtype=np.int64, sep=",")


def ids_from(store: SearchIndex, sql: str, params: Sequence[Any] = ()) -> Any:
    """An int64 array from a query returning one ``group_concat`` of ids."""
    np = np_module()
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


def hidden_rows(store: SearchIndex) -> Hidden:
    return store.derived("hidden rows", _read_hidden_rows)


def _read_hidden_rows(store: SearchIndex) -> Hidden:
    np = np_module()
    refuted = np.sort(
        ids_from(
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
    hidden = Hidden(
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
    np = np_module()
    if len(sorted_ids) == 0:
        return np.full(len(candidates), -1, dtype=np.int64)
    where = np.searchsorted(sorted_ids, candidates)
    where[where >= len(sorted_ids)] = len(sorted_ids) - 1
    return np.where(sorted_ids[where] == candidates, where, -1)


def members(sorted_ids: Any, candidates: Any) -> Any:
    """Boolean mask over ``candidates``: which are in the ascending array ``sorted_ids``."""
    return _positions(sorted_ids, candidates) >= 0


def _mask(matched: Any, sorted_ids: Any) -> Any:
    """Boolean mask over the ascending ``matched``: which are in the ascending ``sorted_ids``.

    Binary-searches the smaller array in the larger one.
    """
    np = np_module()
    if len(matched) <= len(sorted_ids):
        return members(sorted_ids, matched)
    out = np.zeros(len(matched), dtype=bool)
    where = _positions(matched, sorted_ids)
    out[where[where >= 0]] = True
    return out


def in_scope(store: SearchIndex, filters: Mapping[str, Any], ids: Any) -> Any:
    """Mask over the ascending ``ids``: which satisfy the scope filters (live rule aside)."""
    np = np_module()
    where, params = store.scope_clause(dict(filters), include_refuted=True, include_expired=True)
    if len(ids) <= _SCOPE_BY_ID_LIMIT:
        found = ids_from(
            store,
            f"SELECT group_concat(id) FROM records WHERE id IN ({_JSON_IDS}) AND {where}",
            [_json_ids(ids), *params],
        )
    else:
        found = ids_from(store, f"SELECT group_concat(id) FROM records WHERE {where}", params)
    return members(np.sort(found), ids)


def _json_ids(ids: Any) -> str:
    return "[" + ",".join(str(int(i)) for i in ids) + "]"


def dates_of(
    store: SearchIndex, ids: Sequence[int], filters: Mapping[str, Any] | None
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
