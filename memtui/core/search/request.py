"""What a search asks for: one value, passed from the CLI or the app down to the engine."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memtui.core.search.scores import DEFAULT_LIMIT, DEFAULT_POOL_SIZE

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """A search: the query, its scope and cut, the lanes and weights, and its callbacks.

    ``embedder`` overrides the one recorded in the database; ``keyword_only``
    switches the vector lane off, ``keyword_only_reason`` saying why when the
    caller (a source) decided it (the trace's ``fallback``). ``vectors_any_name``:
    the stored vectors are a foreign store's own, recorded under no embedder's
    name, so any embedder of their dimension is taken, under its own name.

    ``progress(done, total)`` follows a build of a foreign store's keyword
    index, ``vector_progress`` a build of the vector matrix (the first vector
    search after vectors changed). ``cancelled`` is polled while the search
    runs; once it returns true the search stops and raises
    ``memtui.core.cancel.Cancelled``.
    """

    query: str
    embedder: Any = None
    limit: int = DEFAULT_LIMIT
    filters: Mapping[str, Any] | None = None
    weights: Mapping[str, float] | Sequence[float] | None = None
    pool_size: int = DEFAULT_POOL_SIZE
    any_terms: bool = False
    keyword_only: bool = False
    keyword_only_reason: str | None = None
    vectors_any_name: bool = False
    progress: Progress | None = None
    cancelled: Callable[[], bool] | None = None
    vector_progress: Progress | None = None

    @classmethod
    def of(cls, request: SearchRequest | str, **changes: Any) -> SearchRequest:
        """``request`` itself, or a request for the query text ``request``; with ``changes``."""
        if isinstance(request, str):
            return cls(request, **changes)
        return replace(request, **changes) if changes else request

    def but(self, **changes: Any) -> SearchRequest:
        """The same request with ``changes`` (field name: new value)."""
        return replace(self, **changes)
