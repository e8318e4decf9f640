"""The arithmetic of a score: normalization, weights, cosine; a lane's pool."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import sub, truediv
from typing import Any

from memtui.core.search.trace import LanePool

DEFAULT_WEIGHTS: dict[str, float] = {"keyword": 0.3, "vector": 0.7}
FALLBACK_WEIGHTS: dict[str, float] = {"keyword": 1.0, "vector": 0.0}
DEFAULT_POOL_SIZE = 100
DEFAULT_LIMIT = 10


def min_max_normalize(values: Sequence[float]) -> list[float]:
    """``(s - min) / (max - min)`` over the pool; an all-equal pool maps to 1.0 each."""
    if not values:
        return []
    lo, hi = min(values), max(values)
    if hi == lo:
        return [1.0] * len(values)
    # (v - lo) / (hi - lo) for each v, mapped in C
    return list(map(truediv, map(sub, values, repeat(lo)), repeat(hi - lo)))


def merge_score(keyword: float, vector: float, weights: Mapping[str, float]) -> float:
    """``w_kw * keyword + w_vec * vector``; a lane that missed the record passes 0."""
    return weights["keyword"] * keyword + weights["vector"] * vector


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; 0.0 when either vector is all zeros."""
    dot = 0.0
    norm_a = 0.0
    norm_b = 0.0
    for x, y in zip(a, b, strict=True):
        dot += x * y
        norm_a += x * x
        norm_b += y * y
    if norm_a == 0.0 or norm_b == 0.0:
        return 0.0
    return dot / (math.sqrt(norm_a) * math.sqrt(norm_b))


def check_weights(weights: Mapping[str, float] | Sequence[float] | None) -> dict[str, float]:
    """Weights as ``{"keyword": w, "vector": w}``; accepts a mapping or a (kw, vec) pair."""
    if weights is None:
        return dict(DEFAULT_WEIGHTS)
    if isinstance(weights, Mapping):
        unknown = set(weights) - {"keyword", "vector"}
        if unknown:
            raise ValueError(f"unknown weight(s) {', '.join(sorted(unknown))}; use keyword, vector")
        kw = weights.get("keyword", DEFAULT_WEIGHTS["keyword"])
        vec = weights.get("vector", DEFAULT_WEIGHTS["vector"])
    else:
        pair = list(weights)
        if len(pair) != 2:
            raise ValueError("weights are two numbers: keyword, vector")
        kw, vec = pair
    out = {"keyword": float(kw), "vector": float(vec)}
    for name, value in out.items():
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{name} weight must be a finite number >= 0, got {value}")
    if out["keyword"] + out["vector"] == 0:
        raise ValueError("at least one weight must be above 0")
    return out


class VectorMismatch(Exception):
    """A stored vector whose length differs from the query vector's."""


@dataclass(slots=True)
class Lane:
    """One lane's pool: raw and normalized scores by record id, and what it left out."""

    raw: dict[int, float] = field(default_factory=dict)
    normalized: dict[int, float] = field(default_factory=dict)
    dates: dict[int, tuple[str | None, str | None]] = field(default_factory=dict)
    pool: LanePool = field(default_factory=LanePool)
    # The records this lane would have returned but the live rule or the scope
    # dropped, by reason ("refuted", "expired", "out_of_scope"): each an id array
    # (ascending) or, for a handful, a set.
    dropped: dict[str, Any] = field(default_factory=dict)
    # The vector lane: how many live, in-scope records have no stored vector.
    missing: int | None = None
    # A lane computed in the store's own database: how (``index: hnsw (approximate)``).
    note: str | None = None


EXCLUSION_REASONS = ("refuted", "expired", "out_of_scope")


def lane_from_ranking(
    ranking: Sequence[tuple[int, float]],
    pool_size: int,
    dates: Mapping[int, tuple[str | None, str | None]] | None = None,
) -> Lane:
    """A lane from its pool, ``(record id, raw score)`` best first: min-max normalized.

    Best first (no score above the one before it), the pool's max is its
    first score and its min its last: this gives what ``min_max_normalize``
    gives without a pass to find them. Dates when they were read.
    """
    if not ranking:
        return Lane(pool=LanePool(limit=pool_size))
    hi, lo = ranking[0][1], ranking[-1][1]
    span = hi - lo
    raw = dict(ranking)
    if span == 0:
        normalized = dict.fromkeys(raw, 1.0)
    else:
        normalized = {record_id: (score - lo) / span for record_id, score in ranking}
    return Lane(
        raw=raw,
        normalized=normalized,
        dates={record_id: dates[record_id] for record_id in raw} if dates else {},
        pool=LanePool(size=len(raw), min=lo, max=hi, limit=pool_size),
    )
