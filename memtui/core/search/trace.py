"""What a search found and how it ranked it: results, and a typed trace of every number.

The trace holds every number that went into a score, so the final score
recomputes from it. ``to_dict()`` gives it as plain data (the ``--json``
shape): keys in a fixed order, an optional part only when it is set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LANES = ("keyword", "vector")


@dataclass(slots=True)
class LanePool:
    """A lane's candidate pool: how many, its raw score range (min-max normalization)."""

    size: int = 0
    min: float | None = None
    max: float | None = None
    limit: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"size": self.size, "min": self.min, "max": self.max, "limit": self.limit}


@dataclass(slots=True)
class LaneScore:
    """One result's score in one lane: raw (None when the lane did not find it), normalized."""

    raw: float | None
    normalized: float
    field: str | None = None
    """The text field whose vector scored, for a record with several (LangGraph's rule)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"raw": self.raw, "normalized": self.normalized}
        if self.field is not None:
            out["field"] = self.field
        return out


@dataclass(slots=True)
class ResultTrace:
    """How one result's score was made: each lane's score, the weights, the dates."""

    keyword: LaneScore
    vector: LaneScore
    weights: dict[str, float]
    fallback: str | None
    found_by: list[str]
    created_at: str | None
    expires_at: str | int | None
    """A foreign store's own expiry value (a number in some: a tenant store's turn)."""
    previous_rank: int | None = None
    """Its rank before a ``rerank`` (set by ``rerank`` only)."""

    def lane(self, name: str) -> LaneScore:
        """The score in lane ``name`` (``"keyword"`` or ``"vector"``)."""
        return self.keyword if name == "keyword" else self.vector

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "keyword": self.keyword.to_dict(),
            "vector": self.vector.to_dict(),
            "weights": dict(self.weights),
            "fallback": self.fallback,
            "found_by": list(self.found_by),
            "created_at": self.created_at,
            "expires_at": self.expires_at,
        }
        if self.previous_rank is not None:
            out["previous_rank"] = self.previous_rank
        return out


@dataclass(slots=True)
class SourceNote:
    """Which store answered: its kind and expiry rule; a foreign store's index file and
    a Qdrant collection when there is one."""

    kind: str
    expiry_rule: str
    index: str | None = None
    collection: str | None = None
    index_refreshed: str | None = None
    """When memtui's index of a store it refreshes in place was last brought up to date,
    and what that took (``2026-11-30T12:00:00Z, 3 rows read``)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "expiry_rule": self.expiry_rule}
        if self.index is not None:
            out["index"] = self.index
        if self.collection is not None:
            out["collection"] = self.collection
        if self.index_refreshed is not None:
            out["index_refreshed"] = self.index_refreshed
        return out


@dataclass(slots=True)
class MemoryModeNote:
    """A store's memory mode (Cyber-AutoAgent's): the rule, and the filters it dropped."""

    mode: str | None
    rule: str
    dropped: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "rule": self.rule, "dropped": list(self.dropped)}


def _no_exclusions() -> dict[str, int]:
    return {"refuted": 0, "expired": 0, "out_of_scope": 0}


@dataclass(slots=True)
class SearchTrace:
    """How a search ranked its results (see ``hybrid_search`` for what each part means)."""

    input: str
    query: str
    terms: list[str]
    match: str
    any_terms: bool
    empty_query: bool
    filters: dict[str, Any]
    now: str
    weights: dict[str, float]
    requested_weights: dict[str, float]
    default_weights: dict[str, float]
    limit: int
    pools: dict[str, LanePool]
    note: str | None = None
    fallback: str | None = None
    embedder: str | None = None
    keyword_lane_error: bool = False
    keyword_lane_message: str | None = None
    excluded: dict[str, int] = field(default_factory=_no_exclusions)
    excluded_by_lane: dict[str, dict[str, int]] = field(
        default_factory=lambda: {lane: _no_exclusions() for lane in LANES}
    )
    vectors_missing: int | None = None
    matched: int = 0
    candidates: int = 0
    truncated: bool = False
    source: SourceNote | None = None
    memory_mode: MemoryModeNote | None = None
    vector_search: str | None = None
    """How a vector lane computed in the store's own database ran: with the store's
    index (approximate) or an exact scan; None for memtui's own vector lane."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "input": self.input,
            "query": self.query,
            "terms": list(self.terms),
            "match": self.match,
            "any_terms": self.any_terms,
            "empty_query": self.empty_query,
            "note": self.note,
            "filters": dict(self.filters),
            "now": self.now,
            "weights": dict(self.weights),
            "requested_weights": dict(self.requested_weights),
            "default_weights": dict(self.default_weights),
            "fallback": self.fallback,
            "embedder": self.embedder,
            "keyword_lane_error": self.keyword_lane_error,
            "keyword_lane_message": self.keyword_lane_message,
            "pools": {lane: pool.to_dict() for lane, pool in self.pools.items()},
            "excluded": dict(self.excluded),
            "excluded_by_lane": {lane: dict(n) for lane, n in self.excluded_by_lane.items()},
            "vectors_missing": self.vectors_missing,
            "matched": self.matched,
            "candidates": self.candidates,
            "limit": self.limit,
            "truncated": self.truncated,
        }
        if self.source is not None:
            out["source"] = self.source.to_dict()
        if self.memory_mode is not None:
            out["memory_mode"] = self.memory_mode.to_dict()
        if self.vector_search is not None:
            out["vector_search"] = self.vector_search
        return out


@dataclass
class SearchResult:
    """One ranked record with the lane scores its merged score was computed from."""

    record_id: int
    keyword_score: float
    vector_score: float
    score: float
    created_at: str | None
    expires_at: str | None
    rank: int
    trace: ResultTrace


@dataclass
class SearchResponse:
    """Results best first, and the trace of how they were ranked.

    ``candidates`` holds every merged candidate (not only the first ``limit``),
    so that ``rerank`` can re-merge with other weights without querying again.
    """

    results: list[SearchResult]
    trace: SearchTrace
    candidates: list[SearchResult] = field(default_factory=list, repr=False)
