"""Structured retrieval lanes: plain SQL, no embeddings (docs/design.md section 5).

Four lanes a planner can audit, each row a plain dict that carries the record
ids it was computed from (provenance):

- ``profile_priors``: per-tool hits and attempts pooled over similar stack
  profiles, ranked by the Wilson lower bound of the pooled counts.
- ``host_history``: an engagement's earlier findings (this run, false
  positives and informational findings left out).
- ``learned_tactics``: tactics recorded for exactly one profile, proven first.
- ``negative_evidence``: tools that never worked, once enough tries say so;
  the advice is "deprioritize", never "skip".

Refuted and expired records are excluded everywhere through the store's own
live rule (``MemoryStore.scope_clause``). Lane output is advisory data: it
orders work, it authorizes nothing.

The lanes take the native ``MemoryStore``, not the engine's ``SearchIndex``:
they read memtui's own columns (tier, record_type, profile hash, metadata)
that a search index need not have.

Similarity threshold
--------------------
Priors and negative evidence pool over profiles whose ``profile_similarity``
to the asked-for one is at least ``DEFAULT_MIN_SIMILARITY`` = 0.75 (the asked-
for profile itself always counts). 0.75 means: at least three known positions
compared, and at most one in four of them disagreeing. So on a six-part
fingerprint one differing component pools (5/6 = 0.83: the same stack on
another framework) but two do not (4/6 = 0.67), and a fingerprint with only two
known components (at most 2/3 by the ``known / 3`` scaling) never pools with
anything but itself. A threshold of 0.5 would let such nearly empty
fingerprints, and stacks differing in a third of their components, mix their
counts into a well-known profile's priors.

Negative evidence uses exactly the pooled counts of the priors: a tool is
negative evidence when its pooled row has 0 hits and a big enough denominator.
The two tables therefore never disagree (a tool that failed on this profile but
worked on a similar one is not "deprioritize" while ranking positive in the
priors).

This module imports no Textual, Rich or click.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from memtui.core.records import SEVERITIES
from memtui.core.stats import wilson_interval, wilson_lower_bound

if TYPE_CHECKING:
    from memtui.core.store import MemoryStore

__all__ = [
    "DEFAULT_MIN_DENOMINATOR",
    "DEFAULT_MIN_SIMILARITY",
    "UNKNOWN_COMPONENTS",
    "host_history",
    "learned_tactics",
    "negative_evidence",
    "profile_priors",
    "profile_similarity",
    "similar_profiles",
    "wilson_interval",
    "wilson_lower_bound",
]

UNKNOWN_COMPONENTS: frozenset[str] = frozenset({"", "unknown", "none", "generic", "*", "?"})
"""Fingerprint components that say nothing; compared case-insensitively."""

DEFAULT_MIN_SIMILARITY = 0.75
DEFAULT_MIN_DENOMINATOR = 5
ADVICE_DEPRIORITIZE = "deprioritize"

_SQL_CHUNK = 500

_HITS = "CAST(COALESCE(json_extract(metadata, '$.total_successes'), 0) AS INTEGER)"
_TRIES = "CAST(COALESCE(json_extract(metadata, '$.total_attempts'), 0) AS INTEGER)"
_PROVEN_FIRST = "CASE json_extract(metadata, '$.evidence_grade') WHEN 'proven' THEN 0 ELSE 1 END"
_CONFIDENCE = "COALESCE(json_extract(metadata, '$.confidence'), 0)"
# A row's metadata as the lanes read it when another writer left some not JSON.
_READABLE_METADATA = (
    "(CASE WHEN typeof(metadata) != 'text' THEN '{}' WHEN json_valid(metadata) "
    "THEN metadata ELSE '{}' END)"
)


def _query(store: MemoryStore, sql: str, params: Sequence[Any]) -> list[Any]:
    """``store.query`` of a lane; when a row's metadata is not JSON (another program
    wrote it: ``memtui check`` names it), again with such metadata read as ``{}``, so
    the lane leaves out what it cannot read instead of failing. Only then: checking
    every row's metadata first would parse it once more in every lane."""
    try:
        return store.query(sql, params)
    except sqlite3.OperationalError as exc:
        if "malformed JSON" not in str(exc):
            raise
    return store.query(sql.replace("(metadata, '$", f"({_READABLE_METADATA}, '$"), params)


# ------------------------------------------------------------------ similarity


def _components(fingerprint: str | None) -> list[str]:
    return [part.strip().casefold() for part in (fingerprint or "").split(":")]


def _known(component: str) -> bool:
    return component not in UNKNOWN_COMPONENTS


def profile_similarity(a: str | None, b: str | None) -> float:
    """How alike two stack fingerprints are, in [0, 1].

    Components are compared position by position; a position where either side
    is unknown (``""``, ``unknown``, ``none``, ``generic``, ``*``, ``?``, any
    case) is skipped, and a missing position of the shorter fingerprint counts
    as unknown. The score is the fraction of compared positions that agree,
    scaled by ``min(1, compared / 3)`` so that fewer than three known
    components never match at full confidence. Nothing compared gives 0.0.
    """
    left, right = _components(a), _components(b)
    width = max(len(left), len(right))
    left += [""] * (width - len(left))
    right += [""] * (width - len(right))
    compared = agree = 0
    for x, y in zip(left, right, strict=True):
        if not (_known(x) and _known(y)):
            continue
        compared += 1
        agree += x == y
    if compared == 0:
        return 0.0
    return (agree / compared) * min(1.0, compared / 3)


def similar_profiles(
    store: MemoryStore,
    profile_hash: str,
    *,
    min_similarity: float = DEFAULT_MIN_SIMILARITY,
) -> list[dict[str, Any]]:
    """Profiles with live tactics whose similarity to ``profile_hash`` is high enough.

    The asked-for profile is always included (similarity 1.0 by definition,
    even when it is too sparse to score 1.0 against itself). Sorted by
    similarity, descending, then by profile.
    """
    where, params = store.scope_clause({"record_type": "tactic"})
    rows = store.query(
        f"SELECT DISTINCT profile_hash FROM records WHERE {where} AND profile_hash IS NOT NULL",
        params,
    )
    found: dict[str, float] = {profile_hash: 1.0}
    for (other,) in rows:
        if other == profile_hash:
            continue
        score = profile_similarity(profile_hash, other)
        if score >= min_similarity:
            found[other] = score
    return [
        {"profile_hash": p, "similarity": s}
        for p, s in sorted(found.items(), key=lambda item: (-item[1], item[0]))
    ]


# ------------------------------------------------------------------ helpers


def _rate(hits: int, n: int) -> float | None:
    return hits / n if n > 0 else None


def _bound(hits: int, n: int) -> float | None:
    # A row whose stored counts are inconsistent (more hits than tries) has no
    # honest bound: show no data rather than raise or invent one.
    if n <= 0 or hits < 0 or hits > n:
        return None
    return wilson_lower_bound(hits, n)


def _interval(hits: int, n: int) -> tuple[float, float] | None:
    if n <= 0 or hits < 0 or hits > n:
        return None
    return wilson_interval(hits, n)


def _ids(text: str | None) -> list[int]:
    return sorted(int(part) for part in (text or "").split(",") if part)


def _chunks(values: list[str]) -> Iterable[list[str]]:
    for start in range(0, len(values), _SQL_CHUNK):
        yield values[start : start + _SQL_CHUNK]


# ------------------------------------------------------------------ priors


def profile_priors(
    store: MemoryStore,
    profile_hash: str,
    *,
    min_similarity: float = DEFAULT_MIN_SIMILARITY,
) -> list[dict[str, Any]]:
    """Per-tool success counts pooled over similar profiles, best Wilson bound first.

    Counts are summed in SQL per (profile, tool); only the handful of grouped
    rows reach Python, where the similar profiles' sums are added per tool.
    Tools are pooled case-insensitively (as tactic signatures are). Refuted
    and expired tactics count for nothing. Ties break by tool name.

    Each row: ``tool``, ``hits``, ``n``, ``rate`` (raw hits/n, None for n=0),
    ``wilson`` (lower bound, None for n=0), ``interval`` ((lo, hi) or None),
    ``profiles`` (``[{profile_hash, similarity, hits, n}]`` that contributed),
    ``record_ids`` (the tactics pooled).
    """
    similar = similar_profiles(store, profile_hash, min_similarity=min_similarity)
    similarity = {p["profile_hash"]: p["similarity"] for p in similar}
    live, live_params = store.scope_clause({"record_type": "tactic"})
    pooled: dict[str, dict[str, Any]] = {}
    for chunk in _chunks(list(similarity)):
        marks = ",".join("?" * len(chunk))
        rows = _query(
            store,
            "SELECT profile_hash, lower(tool_name) AS tool_key, min(tool_name) AS tool, "
            f"SUM({_HITS}) AS hits, SUM({_TRIES}) AS n, group_concat(id) AS ids "
            f"FROM records WHERE {live} AND tool_name IS NOT NULL "
            f"AND profile_hash IN ({marks}) "
            "GROUP BY profile_hash, lower(tool_name)",
            [*live_params, *chunk],
        )
        for row in rows:
            entry = pooled.setdefault(
                row["tool_key"],
                {"tool": row["tool"], "hits": 0, "n": 0, "profiles": [], "record_ids": []},
            )
            entry["tool"] = min(entry["tool"], row["tool"])
            entry["hits"] += int(row["hits"] or 0)
            entry["n"] += int(row["n"] or 0)
            entry["profiles"].append(
                {
                    "profile_hash": row["profile_hash"],
                    "similarity": similarity[row["profile_hash"]],
                    "hits": int(row["hits"] or 0),
                    "n": int(row["n"] or 0),
                }
            )
            entry["record_ids"].extend(_ids(row["ids"]))
    out: list[dict[str, Any]] = []
    for entry in pooled.values():
        hits, n = entry["hits"], entry["n"]
        entry["profiles"].sort(key=lambda p: (-p["similarity"], p["profile_hash"]))
        out.append(
            {
                "tool": entry["tool"],
                "hits": hits,
                "n": n,
                "rate": _rate(hits, n),
                "wilson": _bound(hits, n),
                "interval": _interval(hits, n),
                "profiles": entry["profiles"],
                "record_ids": sorted(entry["record_ids"]),
            }
        )
    # No bound (n = 0) ranks after every bound, zero included.
    out.sort(key=lambda r: (r["wilson"] is None, -(r["wilson"] or 0.0), r["tool"].casefold()))
    return out


# ------------------------------------------------------------------ negative evidence


def negative_evidence(
    store: MemoryStore,
    profile_hash: str,
    min_denominator: int = DEFAULT_MIN_DENOMINATOR,
    *,
    min_similarity: float = DEFAULT_MIN_SIMILARITY,
) -> list[dict[str, Any]]:
    """Tools with zero hits over at least ``min_denominator`` pooled tries.

    Uses the same pooled counts as ``profile_priors`` (same similar profiles),
    so both lanes tell one story. The advice is "deprioritize", never "skip":
    zero of n lowers a tool's priority, it does not prove the tool useless.
    Sorted by denominator (most evidence first), then tool.

    Each row: ``tool``, ``hits`` (0), ``n``, ``record_ids``, ``profiles``,
    ``advice``.
    """
    if min_denominator < 1:
        raise ValueError(f"min_denominator must be at least 1, got {min_denominator}")
    rows = [
        {
            "tool": prior["tool"],
            "hits": 0,
            "n": prior["n"],
            "record_ids": prior["record_ids"],
            "profiles": prior["profiles"],
            "advice": ADVICE_DEPRIORITIZE,
        }
        for prior in profile_priors(store, profile_hash, min_similarity=min_similarity)
        if prior["hits"] == 0 and prior["n"] >= min_denominator
    ]
    rows.sort(key=lambda r: (-r["n"], r["tool"].casefold()))
    return rows


# ------------------------------------------------------------------ host history

_SEVERITY_ORDER = " ".join(f"WHEN '{s}' THEN {i}" for i, s in enumerate(SEVERITIES))


def _history_rows(
    store: MemoryStore, engagement: str, current_run: str | None
) -> tuple[str, list[Any]]:
    """``FROM ... WHERE ...`` and its parameters: the findings ``host_history`` lists."""
    where, params = store.scope_clause({"record_type": "finding", "engagement": engagement})
    sql = (
        f"FROM records WHERE {where} "
        "AND COALESCE(json_type(metadata, '$.false_positive'), '') != 'true' "
        "AND COALESCE(lower(json_extract(metadata, '$.severity')), '') != 'info'"
    )
    if current_run is not None:
        sql += " AND run_id IS NOT ?"
        params.append(current_run)
    return sql, params


def host_history(
    store: MemoryStore,
    engagement: str,
    current_run: str | None = None,
    *,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Earlier findings of one engagement, most severe first, then by record id.

    Left out: other engagements, the ``current_run`` (its findings are being
    made now), false positives, informational (``info``) findings, and
    refuted or expired records. ``limit``: the first that many only (an
    engagement can hold tens of thousands; ``host_history_count`` counts them).

    Each row: ``record_id``, ``finding_id``, ``title``, ``severity``,
    ``run_id``, ``url``, ``type``, ``created_at``.
    """
    rows, params = _history_rows(store, engagement, current_run)
    sql = (
        "SELECT id, content, run_id, created_at, "
        "json_extract(metadata, '$.finding_id') AS finding_id, "
        "lower(json_extract(metadata, '$.severity')) AS severity, "
        "json_extract(metadata, '$.url') AS url, "
        f"json_extract(metadata, '$.type') AS type {rows} "
        f"ORDER BY CASE lower(json_extract(metadata, '$.severity')) {_SEVERITY_ORDER} "
        f"ELSE {len(SEVERITIES)} END, id"
    )
    if limit is not None:
        sql += " LIMIT ?"
        params.append(max(0, int(limit)))
    return [
        {
            "record_id": row["id"],
            "finding_id": row["finding_id"],
            "title": row["content"],
            "severity": row["severity"],
            "run_id": row["run_id"],
            "url": row["url"],
            "type": row["type"],
            "created_at": row["created_at"],
        }
        for row in _query(store, sql, params)
    ]


def host_history_count(store: MemoryStore, engagement: str, current_run: str | None = None) -> int:
    """How many findings ``host_history`` lists for the engagement, without reading them."""
    rows, params = _history_rows(store, engagement, current_run)
    return int(_query(store, f"SELECT count(*) {rows}", params)[0][0])


# ------------------------------------------------------------------ learned tactics


def learned_tactics(
    store: MemoryStore, profile_hash: str, per_tool_cap: int = 3
) -> list[dict[str, Any]]:
    """Tactics recorded for exactly ``profile_hash``: proven first, capped per tool.

    Order: proven before hypotheses, then confidence (the stored Wilson bound)
    descending, then record id. At most ``per_tool_cap`` rows per tool (tools
    compared case-insensitively), the cap applied in SQL. Refuted and expired
    tactics are left out. A hypothesis row has ``hypothesis`` True: re-verify
    it before trusting it.

    Each row: ``record_id``, ``tool``, ``endpoint``, ``param``, ``technique``,
    ``evidence_grade``, ``hits``, ``n``, ``rate``, ``wilson``, ``content``,
    ``hypothesis``.
    """
    if per_tool_cap < 1:
        raise ValueError(f"per_tool_cap must be at least 1, got {per_tool_cap}")
    where, params = store.scope_clause({"record_type": "tactic", "profile_hash": profile_hash})
    order = f"{_PROVEN_FIRST}, {_CONFIDENCE} DESC, id"
    sql = (
        "SELECT * FROM ("
        "SELECT id, tool_name, url_pattern, content, "
        "json_extract(metadata, '$.param_name') AS param, "
        "json_extract(metadata, '$.bypass_technique') AS technique, "
        "json_extract(metadata, '$.evidence_grade') AS grade, "
        f"{_HITS} AS hits, {_TRIES} AS n, "
        f"{_PROVEN_FIRST} AS grade_rank, {_CONFIDENCE} AS confidence, "
        f"ROW_NUMBER() OVER (PARTITION BY lower(tool_name) ORDER BY {order}) AS tool_rank "
        f"FROM records WHERE {where}"
        ") WHERE tool_rank <= ? ORDER BY grade_rank, confidence DESC, id"
    )
    rows = _query(store, sql, [*params, int(per_tool_cap)])
    out: list[dict[str, Any]] = []
    for row in rows:
        hits, n = int(row["hits"]), int(row["n"])
        grade = row["grade"] or "hypothesis"
        out.append(
            {
                "record_id": row["id"],
                "tool": row["tool_name"],
                "endpoint": row["url_pattern"],
                "param": row["param"],
                "technique": row["technique"],
                "evidence_grade": grade,
                "hits": hits,
                "n": n,
                "rate": _rate(hits, n),
                "wilson": _bound(hits, n),
                "content": row["content"],
                "hypothesis": grade != "proven",
            }
        )
    return out
