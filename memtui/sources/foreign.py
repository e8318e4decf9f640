"""What every foreign store shares: ``ForeignSource``, and ``ForeignSqliteSource`` for
one in a SQLite file.

It is built in layers: ``memtui.sources.foreign_store`` (the connection, memtui's
index of the store, the audit log beside it, the adapter's hooks),
``memtui.sources.foreign_forget`` (the forget protocol: intent, change,
outcome), ``memtui.sources.sqlite_file`` (a SQLite file's connection and purge) and
here, search and explain on memtui's index.

An adapter (LangGraph, preferences, tenant evidence...) supplies its reads
(``facets``, ``page``, ``get``; a store read as two tables through one view gets
them from ``memtui.sources.union_view``), what its cache rows are, its
fingerprint, and ``_apply_forget``: the store's own forget rule in one store
transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from memtui.core.search import (
    SearchRequest,
    SearchResponse,
    SourceNote,
    explain_keyword,
    hybrid_search,
)
from memtui.sources.base import SourceError, SourceSearchResult, wrap_results
from memtui.sources.foreign_erasure import (
    BYTE_CHECK_LIMIT,
    CHECKPOINT_RETRIES,
    Erasure,
    GapsOutcome,
    forgotten_bytes_gone,
    occurrences_in_columns,
    quote_identifier,
    radius_of,
)
from memtui.sources.foreign_forget import ForeignForgetting
from memtui.sources.foreign_store import Clock, ForeignStore, uri_for
from memtui.sources.sqlite_file import SqliteFileStore

__all__ = [
    "BYTE_CHECK_LIMIT",
    "CHECKPOINT_RETRIES",
    "Clock",
    "Erasure",
    "ForeignForgetting",
    "ForeignSource",
    "ForeignSqliteSource",
    "ForeignStore",
    "GapsOutcome",
    "forgotten_bytes_gone",
    "occurrences_in_columns",
    "quote_identifier",
    "radius_of",
    "uri_for",
]


class ForeignSource(ForeignForgetting):
    """A memory store that memtui did not write, searched on memtui's index of it."""

    # -- search

    def vector_dim(self) -> int | None:
        """The dimension of the store's vectors, None when it has none."""
        return None

    def search(self, request: SearchRequest | str, **options: Any) -> SearchResponse:
        request = SearchRequest.of(request, **options)
        request = request.but(filters=self.check_filters(request.filters))
        with self._index_lock:
            cache = self.index.store(request.progress)
        reason = self._vector_lane_off(request, cache.recorded_embedder())
        if reason is not None:
            request = request.but(embedder=None, keyword_only=True, keyword_only_reason=reason)
        response = hybrid_search(
            cache,  # a SearchIndex, as the engine reads it
            request.but(vectors_any_name=True),
        )
        trace = response.trace
        trace.excluded = self.store_exclusions(trace.excluded)
        trace.excluded_by_lane = {
            lane: self.store_exclusions(counts) for lane, counts in trace.excluded_by_lane.items()
        }
        trace.now = self.now_label()
        trace.source = SourceNote(
            kind=self.kind, expiry_rule=self.expiry_rule, index=str(self.index.path)
        )
        id_map = cache.source_ids_of(r.record_id for r in response.candidates)
        records = self.get_many(id_map.values())

        def adjust(result: Any, out: SourceSearchResult) -> SourceSearchResult:
            record = records.get(out.id)
            if record is not None:
                out.created_at = record.created_at
                out.expires_at = record.expires_at  # type: ignore[assignment]
                out.trace = replace(
                    out.trace, created_at=record.created_at, expires_at=record.expires_at
                )
            return out

        return wrap_results(response, lambda key: id_map.get(key, f"?{key}"), adjust)

    def _vector_lane_off(
        self, request: SearchRequest, recorded: dict[str, Any] | None
    ) -> str | None:
        """Why the vector lane cannot run on the store's own vectors; None when it can."""
        if request.keyword_only:
            return "keyword-only search was requested: the vector lane is off"
        if recorded is None:
            return f"this {self.kind_label} has no stored vectors: the keyword lane ranks alone"
        dim = recorded["dim"]
        embedder = request.embedder
        if embedder is None:
            return (
                f"no embedder for these {dim}-dim vectors: give one that makes {dim}-dim "
                "vectors with --embedder module:callable"
            )
        if getattr(embedder, "dim", None) != dim:
            return (
                f"no embedder for these {dim}-dim vectors: {embedder.name} makes "
                f"{embedder.dim}-dim vectors"
            )
        return None

    def store_exclusions(self, counts: Mapping[str, Any]) -> dict[str, Any]:
        """Exclusion counts in the store's words: the cache's ``refuted`` is the store's
        hidden state (``inactive``, ``deleted``); a store whose only hidden state is
        ``expired`` has no refute concept, so it reports no ``refuted`` at all."""
        out: dict[str, Any] = {}
        for key, value in counts.items():
            if key != "refuted":
                out[key] = value
            elif self.hidden_state not in ("expired", "refuted"):
                out[self.hidden_state] = value
            elif value:  # hidden rows in a store without a refute concept: never dropped
                out[key] = value
        return out

    def explain(self, query: str, record_id: str) -> dict[str, Any]:
        with self._index_lock:
            cache = self.index.store()
        found = cache.cache_ids([record_id])
        if record_id not in found:
            raise SourceError(f"no record with id {record_id}")
        out = explain_keyword(cache, query, found[record_id])
        out["id"] = record_id
        return out


class ForeignSqliteSource(SqliteFileStore, ForeignSource):
    """A memory store in a SQLite file that memtui did not write."""
