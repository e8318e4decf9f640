"""One record's keyword score, decomposed into its terms' BM25 contributions."""

from __future__ import annotations

import math
from typing import Any

from memtui.core.index import FTS_TABLE, SearchIndex
from memtui.core.search.text import (
    VOCAB_ROW,
    ensure_vocab,
    index_tokens,
    match_expression,
    sanitize_query,
)
from memtui.core.store import MemoryStoreError

# FTS5's bm25() constants (ext/fts5/fts5_aux.c).
BM25_K1 = 1.2
BM25_B = 0.75
BM25_MIN_IDF = 1e-6


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


def index_averages(store: SearchIndex) -> tuple[int, int]:
    """``(row count, total tokens)`` from FTS5's averages record, as ``bm25()`` reads them."""
    rows = store.query(f"SELECT block FROM {FTS_TABLE}_data WHERE id = 1")
    if not rows or not rows[0][0]:
        return 0, 0
    values = _varints(bytes(rows[0][0]))
    return values[0], (values[1] if len(values) > 1 else 0)


_DF_CACHE_TERMS = 4096


def _document_frequencies(store: SearchIndex) -> dict[str, int]:
    """Document frequencies per term, kept until the database changes: explaining
    several results of one query looks the same terms up again."""
    held: dict[str, int] = store.derived("document frequencies", lambda _store: {})
    if len(held) > _DF_CACHE_TERMS:
        held.clear()
    return held


def _term_frequency(store: SearchIndex, term: str, record_id: int) -> int:
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


def explain_keyword(store: SearchIndex, query: str, record_id: int) -> dict[str, Any]:
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
    ensure_vocab(store)
    rows_total, tokens_total = index_averages(store)
    avg_len = tokens_total / rows_total if rows_total else 0.0
    sizes = store.query(f"SELECT sz FROM {FTS_TABLE}_docsize WHERE id = ?", (int(record_id),))
    doc_len = _varints(bytes(sizes[0][0]))[0] if sizes and sizes[0][0] else 0
    out_terms = []
    total = 0.0
    frequencies = _document_frequencies(store)
    for term in terms:
        if term not in frequencies:
            found_df = store.query(f"SELECT doc FROM temp.{VOCAB_ROW} WHERE term = ?", (term,))
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
