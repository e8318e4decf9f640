"""The query as the index sees it: sanitized words, the index's own tokens, a MATCH."""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence

from memtui.core.index import FTS_TABLE, SearchIndex
from memtui.core.store import MemoryStoreError

VOCAB_ROW = "records_vocab_row"
_VOCAB_INSTANCE = "records_vocab_instance"
_SCRATCH = "memtui_query_tokens"
_SCRATCH_VOCAB = "memtui_query_tokens_vocab"

# Lone surrogates (U+D800..U+DFFF) are not text at all: they become separators too.
_NOT_BAREWORD = re.compile(r"[^0-9A-Za-z_\u0080-\ud7ff\ue000-\U0010ffff]+")
_TOKENIZE_OPTION = re.compile(
    r"\btokenize\s*=\s*('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|[A-Za-z0-9_]+)", re.IGNORECASE
)


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


def index_tokens(store: SearchIndex, text: str) -> list[str]:
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


def _index_tokenize_option(store: SearchIndex) -> str | None:
    rows = store.query("SELECT sql FROM main.sqlite_master WHERE name = ?", (FTS_TABLE,))
    if not rows or not rows[0][0]:
        raise MemoryStoreError(f"this database has no full-text index ({FTS_TABLE})")
    found = _TOKENIZE_OPTION.search(rows[0][0])
    return found.group(1) if found else None


def _ensure_scratch(store: SearchIndex) -> None:
    option = _index_tokenize_option(store)
    tokenize = f", tokenize={option}" if option else ""
    store.query(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_SCRATCH} USING fts5(q{tokenize})")
    store.query(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_SCRATCH_VOCAB} "
        f"USING fts5vocab(temp, {_SCRATCH}, instance)"
    )


def ensure_vocab(store: SearchIndex) -> None:
    store.query(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{VOCAB_ROW} "
        f"USING fts5vocab(main, {FTS_TABLE}, row)"
    )
    store.query(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_VOCAB_INSTANCE} "
        f"USING fts5vocab(main, {FTS_TABLE}, instance)"
    )
