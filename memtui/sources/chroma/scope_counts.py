"""How many live documents of one Chroma collection hold each scope value, by the cheapest
of three plans, each exact.

Chroma keeps metadata in ``embedding_metadata (id, key, string_value, ...)`` with an
index on ``(key, string_value)`` that holds neither ``id`` nor the collection: a
count over it alone is every collection's. Measured at 100,000 documents (a
second collection of 2,000 beside them):

- a folder of one collection: that index alone, 10-40 ms;
- the other collections are smaller than this one: that index's counts minus the
  other collections' own, walked from their rows in ``embeddings`` (its
  ``(segment_id, ...)`` index) to their metadata by primary key, 20 ms;
- otherwise: this collection's rows walked the same way, 230 ms; SQLite's own
  choice, the metadata index joined to ``embeddings`` row by row for every
  collection's documents, took 830 ms. Under a scope filter SQLite still chooses.

The first two rely on what Chroma does: a document's metadata rows go with it
(no metadata row without its ``embeddings`` row).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]


def scope_counts(
    query: Query,
    *,
    segment_id: str,
    keys: Sequence[str],
    live_count: int,
    where: str = "",
    params: Sequence[Any] = (),
) -> list[tuple[Any, ...]]:
    """(key, value, live documents) of ``keys`` in the segment's collection; ``where``
    (conditions on ``e``, the collection's ``embeddings`` rows) narrows them."""
    marks = ",".join("?" * len(keys))
    if where:
        return query(_FILTERED.format(where=where, marks=marks), (segment_id, *params, *keys))
    others = int(query("SELECT count(*) FROM embeddings", ())[0][0]) - live_count
    if others <= 0:
        return query(_EVERY.format(marks=marks), tuple(keys))
    if others < live_count:
        every = query(_EVERY.format(marks=marks), tuple(keys))
        theirs = query(_THEIRS.format(marks=marks), (segment_id, *keys))
        return _minus(every, theirs)
    return query(_OURS.format(marks=marks), (segment_id, *keys))


_EVERY = (
    "SELECT m.key, m.string_value, count(*) FROM embedding_metadata AS m "
    "WHERE m.key IN ({marks}) AND m.string_value IS NOT NULL GROUP BY m.key, m.string_value"
)
#: ``CROSS JOIN`` keeps SQLite to this order: the collection's rows, then their metadata
_OURS = (
    "SELECT m.key, m.string_value, count(*) FROM embeddings AS e "
    "CROSS JOIN embedding_metadata AS m ON m.id = e.id "
    "WHERE e.segment_id = ? AND m.key IN ({marks}) AND m.string_value IS NOT NULL "
    "GROUP BY m.key, m.string_value"
)
_FILTERED = (
    "SELECT m.key, m.string_value, count(*) FROM embeddings AS e "
    "JOIN embedding_metadata AS m ON m.id = e.id "
    "WHERE e.segment_id = ?{where} AND m.key IN ({marks}) AND m.string_value IS NOT NULL "
    "GROUP BY m.key, m.string_value"
)
_THEIRS = (
    "SELECT m.key, m.string_value, count(*) FROM embeddings AS e "
    "CROSS JOIN embedding_metadata AS m ON m.id = e.id "
    "WHERE e.segment_id IN (SELECT id FROM segments WHERE scope = 'METADATA' AND id != ?) "
    "AND m.key IN ({marks}) AND m.string_value IS NOT NULL GROUP BY m.key, m.string_value"
)


def _minus(
    every: Sequence[tuple[Any, ...]], theirs: Sequence[tuple[Any, ...]]
) -> list[tuple[Any, ...]]:
    counts = {(key, value): int(n) for key, value, n in every}
    for key, value, n in theirs:
        counts[(key, value)] = counts.get((key, value), 0) - int(n)
    return [(key, value, n) for (key, value), n in counts.items() if n > 0]
