"""What every foreign SQLite store shares: ``ForeignSqliteSource``.

It is built in layers: ``memtui.sources.foreign_store`` (the connection, memtui's
index of the store, the audit log beside it, the adapter's hooks),
``memtui.sources.foreign_forget`` (the forget protocol: intent, change,
outcome) and here, search and explain on memtui's index.

An adapter (LangGraph, preferences, tenant evidence...) supplies its reads
(``facets``, ``page``, ``get``; a store read as two tables through one view gets
them from ``memtui.sources.union_view``), what its cache rows are, its
fingerprint, and ``_apply_forget``: the store's own forget rule in one store
transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memtui.core.embed import Embedder
from memtui.core.search import SearchResponse, explain_keyword, hybrid_search
from memtui.sources.base import Progress, SourceError, SourceSearchResult, wrap_results
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

__all__ = [
    "BYTE_CHECK_LIMIT",
    "CHECKPOINT_RETRIES",
    "Clock",
    "Erasure",
    "ForeignForgetting",
    "ForeignSqliteSource",
    "ForeignStore",
    "GapsOutcome",
    "forgotten_bytes_gone",
    "occurrences_in_columns",
    "quote_identifier",
    "radius_of",
    "uri_for",
]


class _NamedEmbedder:
    """The operator's embedder under the name the cache records for the store's vectors."""

    def __init__(self, inner: Embedder, name: str) -> None:
        self.inner = inner
        self.name = name
        self.dim = inner.dim

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        return self.inner(texts)


class ForeignSqliteSource(ForeignForgetting):
    """A memory store in a SQLite file that memtui did not write."""

    # -- search

    def vector_dim(self) -> int | None:
        """The dimension of the store's vectors, None when it has none."""
        return None

    def search(
        self,
        query: str,
        *,
        embedder: Embedder | None = None,
        limit: int = 10,
        filters: Mapping[str, Any] | None = None,
        weights: Mapping[str, float] | Sequence[float] | None = None,
        pool_size: int = 100,
        any_terms: bool = False,
        keyword_only: bool = False,
        progress: Progress | None = None,
        cancelled: Callable[[], bool] | None = None,
        vector_progress: Progress | None = None,
    ) -> SearchResponse:
        filters = self.check_filters(filters)
        with self._index_lock:
            cache = self.index.store(progress)
        recorded = cache.recorded_embedder()
        reason: str | None = None
        use: Embedder | None = None
        if keyword_only:
            reason = "keyword-only search was requested: the vector lane is off"
        elif recorded is None:
            reason = f"this {self.kind_label} has no stored vectors: the keyword lane ranks alone"
        else:
            dim = recorded["dim"]
            if embedder is None:
                reason = (
                    f"no embedder for these {dim}-dim vectors: give one that makes {dim}-dim "
                    "vectors with --embedder module:callable"
                )
            elif getattr(embedder, "dim", None) != dim:
                reason = (
                    f"no embedder for these {dim}-dim vectors: {embedder.name} makes "
                    f"{embedder.dim}-dim vectors"
                )
            else:
                use = _NamedEmbedder(embedder, recorded["name"])
        response = hybrid_search(
            cache,  # type: ignore[arg-type]  # a SearchIndex, as the engine reads it
            query,
            embedder=use,
            limit=limit,
            filters=filters,
            weights=weights,
            pool_size=pool_size,
            any_terms=any_terms,
            keyword_only=use is None,
            cancelled=cancelled,
            vector_progress=vector_progress,
        )
        trace = response.trace
        if use is None:
            if trace.get("fallback") is not None:
                trace["fallback"] = reason
            trace["embedder"] = None
        else:
            trace["embedder"] = embedder.name  # type: ignore[union-attr]
            if trace.get("fallback"):
                trace["fallback"] = trace["fallback"].replace(recorded["name"], embedder.name)  # type: ignore[index,union-attr]
        trace["excluded"] = self.store_exclusions(trace.get("excluded") or {})
        by_lane = trace.get("excluded_by_lane")
        if isinstance(by_lane, dict):
            trace["excluded_by_lane"] = {
                lane: self.store_exclusions(counts) if isinstance(counts, dict) else counts
                for lane, counts in by_lane.items()
            }
        trace["now"] = self.now_label()
        trace["source"] = {
            "kind": self.kind,
            "expiry_rule": self.expiry_rule,
            "index": str(self.index.path),
        }
        id_map = cache.source_ids_of(r.record_id for r in response.candidates)
        records = self.get_many(id_map.values())

        def adjust(result: Any, out: SourceSearchResult) -> SourceSearchResult:
            out.trace["fallback"] = trace["fallback"]
            record = records.get(out.id)
            if record is not None:
                out.created_at = record.created_at
                out.expires_at = record.expires_at  # type: ignore[assignment]
                out.trace["created_at"] = record.created_at
                out.trace["expires_at"] = record.expires_at
            return out

        return wrap_results(response, lambda key: id_map.get(key, f"?{key}"), adjust)

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
        out = explain_keyword(cache, query, found[record_id])  # type: ignore[arg-type]
        out["id"] = record_id
        return out
