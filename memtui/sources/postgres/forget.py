"""What the forgets of the Postgres kinds share: the delete in one transaction, and what
it deleted handed to the purge.

A kind's forget (``langgraph_forget``, ``mem0_forget``) locks and reads the rows it
is about to delete and deletes them in one read-write transaction
(``in_one_transaction``: any failure rolls all of it back and says so in one line);
``forgotten`` then turns what was read into the forget protocol's result: the
removed ids, the SQL checks, the texts' UTF-8 bytes (``probes``) and the vectors
(``vector_probes``) that ``PostgresSource._purge_applied`` looks for after the
vacuum.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from memtui.sources.base import SourceError, SourceRecord
from memtui.sources.postgres.connection import PgConnection
from memtui.sources.postgres.erasure import VectorProbe


def block_of(*columns: str) -> str:
    """What a forget reads of each row it deletes (``FROM table AS t``), after its values:
    the block of its ``ctid``, the row's size, the largest size of ``columns`` as stored
    (a value of ``TOAST_SIGN`` bytes or more may be out of line, in the TOAST table),
    and whether one of them is compressed (``pg_column_compression``: its bytes in
    the block are not the text's, so reading the block could not find them)."""
    sizes = ", ".join(f"coalesce(pg_column_size(t.{c}), 0)" for c in columns)
    packed = " OR ".join(f"pg_column_compression(t.{c}) IS NOT NULL" for c in columns)
    return (
        f"(t.ctid::text::point)[0]::bigint, pg_column_size(t.*), greatest({sizes}), "
        f"coalesce({packed}, false)"
    )


TOASTED = "toast"
TOAST_SIGN = 1900
"""A value this large (bytes) may be stored out of line (TOAST threshold: ~2 KB a row)."""
ROLLED_BACK = "forget failed, the transaction was rolled back and nothing was changed"


def in_one_transaction(pg: PgConnection, delete: Callable[[Any], Any]) -> Any:
    """``delete(connection)`` in one read-write transaction; a failure is one line saying
    nothing was changed."""
    try:
        return pg.run(delete, transaction=True)
    except SourceError as exc:
        raise SourceError(f"{ROLLED_BACK}: {exc}") from None


def vector_probes(
    table: str, column: str, kind: str, embeddings: Iterable[Sequence[float] | None]
) -> list[VectorProbe]:
    """The deleted vectors (``column::real[]`` as read before the delete) to look for in
    the files; only pgvector's ``vector`` keeps float4 components the scan can match."""
    if kind != "vector":
        return []
    return [VectorProbe(table, column, tuple(float(v) for v in e)) for e in embeddings if e]


def note_blocks(pages: dict[str, list[Any]], table: str, rows: Sequence[Any]) -> None:
    """Note each deleted row's block and size (the last four columns of ``block_of``)
    in ``pages``; a row with a value of ``TOAST_SIGN`` bytes or more, or a compressed
    one, names its table under ``"toast"`` (the purge rewrites it)."""
    for row in rows:
        block, size, largest, compressed = row[-4:]
        pages.setdefault(table, []).append([int(block), int(size)])
        toasted = int(largest or 0) >= TOAST_SIGN or bool(compressed)
        if toasted and table not in pages.setdefault(TOASTED, []):
            pages[TOASTED].append(table)


def forgotten(
    records: Sequence[SourceRecord],
    texts: Iterable[str],
    vectors: Sequence[VectorProbe],
    checks: dict[str, bool],
    details: dict[str, Any],
    pages: dict[str, list[Any]],
) -> dict[str, Any]:
    """The forget protocol's result of a delete (``ForeignForgetting._apply_forget``);
    ``pages``: the deleted rows' blocks (``note_blocks``), for the page-local purge."""
    return {
        "pages": pages,
        "removed": [r.id for r in records],
        "checks": checks,
        "probes": [text.encode("utf-8") for text in dict.fromkeys(texts) if text],
        "vector_probes": list(vectors),
        "details": details,
    }
