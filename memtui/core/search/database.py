"""A vector lane computed in the store's own database, for an index that offers one.

memtui's vector lane ranks the vectors it holds (``memtui.core.search.vector``). A
store that ranks its vectors itself (pgvector's ``<=>`` with the store's own HNSW
or IVFFlat index) is searched where it lives: its index speaks ``SearchIndex`` for
the keyword lane and this protocol for the vector lane, and the engine asks it
for the lane instead of building a matrix.

The lane it returns is what ``vector_lane`` returns: the pool (index record ids,
raw cosines best first, min-max normalized), the dates of each record it
confirmed live and in scope, how many live in-scope records have no vector
(``missing``), and in ``note`` how the database ran it (with an index, which is
approximate, or an exact scan) for the trace's ``vector_search``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from memtui.core.search.scores import Lane


@runtime_checkable
class DatabaseVectorLane(Protocol):
    """An index whose vector lane runs in the store's database."""

    def database_vector_lane(
        self,
        query_vector: Sequence[float],
        filters: Mapping[str, Any],
        pool_size: int,
        cancelled: Callable[[], bool] | None,
    ) -> Lane:
        """The top ``pool_size`` live, in-scope records by cosine (only positive ones)."""
        ...
