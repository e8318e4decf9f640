"""The header ``memtui search`` prints above its results: the query and its terms, the
weights and embedder, each lane's pool, and what the live rule and the filters left out."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from memtui.core.arithmetic import SHOWN_PLACES, fmt, weight_text
from memtui.core.search import LanePool, SearchResponse, SearchTrace
from memtui.render import plural, safe_text


def _pool_line(lane: str, pool: LanePool, trace: SearchTrace, places: int) -> Text:
    """``vector pool: 43 records with cosine > 0, min …, max …`` (the lane's normalization)."""
    size = pool.size
    limit = pool.limit
    best = "best " if limit is not None and size >= limit else ""
    if lane == "keyword":
        what, label = f"{best}{size} match{'' if size == 1 else 'es'}", "-bm25"
        if trace.keyword_lane_error:
            what = "none (the keyword lane failed)"
    else:
        # A record shares nothing with the query at cosine <= 0: the lane leaves it out.
        what, label = f"{best}{size} record{'' if size == 1 else 's'} with cosine > 0", "cosine"
        if trace.fallback:
            what = "none (the vector lane is off)"
    line = Text(f"{lane} pool: {what}")
    if size:
        low, high = pool.min, pool.max
        line.append(f", {label} min {fmt(low, places)}, max {fmt(high, places)}")
        if low is not None and low == high:
            line.append(" (all-equal pool → 1.0)")
    return line


def _counts(counts: dict[str, Any]) -> str:
    return ", ".join(
        f"{key.replace('_', ' ')} {n}" for key, n in counts.items() if isinstance(n, int)
    )


def _lane_exclusions(trace: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Per-lane exclusion counts, wherever the trace holds them: ``excluded_by_lane``,
    ``excluded[lane]``, ``pools[lane]["excluded"]`` or ``<lane>_excluded``."""
    found: list[tuple[str, dict[str, Any]]] = []
    by_lane = trace.get("excluded_by_lane")
    if isinstance(by_lane, dict):
        found.extend((lane, c) for lane, c in by_lane.items() if isinstance(c, dict))
    excluded = trace.get("excluded") or {}
    found.extend((lane, c) for lane, c in excluded.items() if isinstance(c, dict))
    for lane, pool in (trace.get("pools") or {}).items():
        if isinstance(pool, dict) and isinstance(pool.get("excluded"), dict):
            found.append((lane, pool["excluded"]))
    for key, counts in trace.items():
        if key.endswith("_excluded") and isinstance(counts, dict):
            found.append((key.removesuffix("_excluded"), counts))
    return found


def print_left_out(out: Console, trace: dict[str, Any]) -> None:
    """What the live rule and the filters left out, and of each lane when the trace says."""
    excluded = trace.get("excluded") or {}
    flat = _counts({key: n for key, n in excluded.items() if isinstance(n, int)})
    matched = f"keyword matches: {trace.get('matched', 0)}"
    per_lane = _lane_exclusions(trace)
    if not any(isinstance(n, int) and n for _, counts in per_lane for n in counts.values()):
        per_lane = []  # every lane's counts are zero: they would add nothing
    if not per_lane:
        out.print(Text(matched + (f"; left out: {flat}" if flat else ""), style="dim"))
    else:
        lanes = "; ".join(
            f"{lane} lane: " + (_counts({k: n for k, n in counts.items() if n}) or "none")
            for lane, counts in per_lane
        )
        out.print(Text(matched, style="dim"))
        out.print(
            Text(f"left out: {flat} ({lanes})" if flat else f"left out: {lanes}", style="dim")
        )
    missing = trace.get("vectors_missing")
    if isinstance(missing, int) and missing > 0:
        many = missing != 1
        out.print(
            Text(
                f"{missing} live in-scope record{'s have' if many else ' has'} no stored vector: "
                f"the vector lane cannot find {'them' if many else 'it'}",
                style="yellow",
            )
        )


def print_header(out: Console, response: SearchResponse, places: dict[str, int]) -> None:
    trace = response.trace
    line = Text("query: ")
    line.append(safe_text(trace.query or "(empty)", limit=200))
    if trace.terms:
        line.append("   terms: ")
        line.append(safe_text(" · ".join(trace.terms), limit=300))
        line.append("  (any term)" if trace.any_terms else "  (all required)", style="dim")
    if line.cell_len > out.width and trace.terms:  # the terms on a line of their own
        query, terms = line.divide([line.plain.index("   terms: ")])
        out.print(query)
        terms.plain.lstrip()
        out.print(terms[3:])
    else:
        out.print(line)
    if trace.empty_query:
        out.print(safe_text(trace.note or "empty query", style="yellow"))
        return
    weights, default = trace.weights, trace.default_weights
    line = Text(
        f"weights: keyword {weight_text(weights['keyword'])} · vector "
        f"{weight_text(weights['vector'])}  (default {weight_text(default['keyword'])} · "
        f"{weight_text(default['vector'])})   embedder: "
    )
    line.append(safe_text(trace.embedder or "none", limit=80))
    out.print(line)
    if trace.fallback:
        out.print(safe_text(f"fallback to keyword only: {trace.fallback}", style="yellow"))
    if trace.keyword_lane_error:
        out.print(safe_text(f"keyword lane error: {trace.keyword_lane_message}", style="bold red"))
    pools = trace.pools
    for lane in ("keyword", "vector"):
        out.print(_pool_line(lane, pools[lane], trace, places.get(lane, SHOWN_PLACES)))
    if trace.vector_search:
        out.print(safe_text(f"vector lane in the database: {trace.vector_search}", style="dim"))
    limit = pools["keyword"].limit
    if limit is not None:
        out.print(
            Text(
                f"each lane's pool: its best {limit} (--pool), min-max normalized on its own",
                style="dim",
            )
        )
    print_left_out(out, trace.to_dict())
    source = trace.source
    if source and source.kind != "memtui":
        out.print(safe_text(f"expiry: {source.expiry_rule} (now {trace.now})", style="dim"))
    if source and source.index_refreshed:
        out.print(safe_text(f"keyword index: {source.index_refreshed}", style="dim"))
    mode = trace.memory_mode
    if mode and mode.mode:
        dropped = " (the operation filter was dropped)" if mode.dropped else ""
        out.print(safe_text(f"{mode.rule}{dropped}", style="dim"))
    if not response.results:
        out.print(Text("no results", style="yellow"))
        return
    shown = len(response.results)
    note = " (truncated: raise --limit to see more)" if trace.truncated else ""
    of = plural(trace.candidates, "candidate")
    out.print(Text(f"showing {shown} of {of}{note}", style="dim"))
