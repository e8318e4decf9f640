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


def forgotten(
    records: Sequence[SourceRecord],
    texts: Iterable[str],
    vectors: Sequence[VectorProbe],
    checks: dict[str, bool],
    details: dict[str, Any],
) -> dict[str, Any]:
    """The forget protocol's result of a delete (``ForeignForgetting._apply_forget``)."""
    return {
        "removed": [r.id for r in records],
        "checks": checks,
        "probes": [text.encode("utf-8") for text in dict.fromkeys(texts) if text],
        "vector_probes": list(vectors),
        "details": details,
    }
