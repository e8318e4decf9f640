"""``memtui search`` (hybrid search with its arithmetic) and ``memtui reindex``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from memtui.commands.common import (
    console,
    db_argument,
    emit_json,
    filter_options,
    json_option,
    open_cli_source,
    open_store,
    operator_option,
    qdrant_options,
    scope_filters,
    source_options,
)
from memtui.core.embed import EmbedderError, resolve_embedder
from memtui.core.search import (
    DEFAULT_LIMIT,
    DEFAULT_POOL_SIZE,
    SearchResponse,
    SearchResult,
    check_weights,
)
from memtui.core.store import MemoryStoreError
from memtui.render import one_line, safe_text
from memtui.sources import SourceRecord


def _parse_weights(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> dict[str, float] | None:
    if value is None:
        return None
    parts = [p.strip() for p in value.split(",")]
    try:
        if len(parts) != 2:
            raise ValueError("give two numbers, keyword then vector, e.g. 0.5,0.5")
        return check_weights((float(parts[0]), float(parts[1])))
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command()
@click.argument("args", nargs=-1, required=True, metavar="[DB] QUERY")
@click.option("--explain", is_flag=True, help="Show each result's arithmetic and BM25 terms.")
@click.option(
    "--embedder",
    "embedder_name",
    default=None,
    help="Query embedder (default: the one recorded in DB); 'none' means keyword only.",
)
@click.option("--keyword-only", is_flag=True, help="Switch the vector lane off.")
@click.option("--any", "any_terms", is_flag=True, help="Match any term instead of all.")
@click.option("--limit", type=click.IntRange(min=1), default=DEFAULT_LIMIT, show_default=True)
@click.option(
    "--pool",
    "pool_size",
    type=click.IntRange(min=1),
    default=DEFAULT_POOL_SIZE,
    show_default=True,
    help="Candidate pool size per lane.",
)
@click.option(
    "--weights",
    callback=_parse_weights,
    default=None,
    metavar="KW,VEC",
    help="Lane weights, e.g. 0.5,0.5 (default 0.3,0.7).",
)
@filter_options
@source_options(writes=False)
@qdrant_options
@json_option
def search(
    args: tuple[str, ...],
    explain: bool,
    embedder_name: str | None,
    keyword_only: bool,
    any_terms: bool,
    limit: int,
    pool_size: int,
    weights: dict[str, float] | None,
    tier: str | None,
    record_type: str | None,
    profile: str | None,
    engagement: str | None,
    run_id: str | None,
    tool: str | None,
    extra: tuple[str, ...],
    now: str | None,
    qdrant: dict[str, Any],
    as_json: bool,
) -> None:
    """Hybrid search of DB: keyword (BM25) and vector lanes, merged; --explain shows why.

    DB is any memory store memtui recognizes (a file or a Qdrant local folder;
    leave it out with --qdrant-url URL); for a foreign store the keyword index
    is built once into memtui's cache folder, and the vector lane uses the
    store's own vectors with the --embedder given (same dimension).
    """
    if len(args) == 2:
        db: Path | None = Path(args[0])
        query = args[1]
    elif len(args) == 1 and qdrant.get("qdrant_url"):
        db, query = None, args[0]
    elif len(args) == 1:
        raise click.UsageError("give the store and the query: DB QUERY")
    else:
        raise click.UsageError("too many arguments: DB QUERY (quote a query of several words)")
    filters = scope_filters(tier, record_type, profile, engagement, run_id, tool, extra)
    embedder = None
    if embedder_name is not None:
        embedder = resolve_embedder(embedder_name)
        if embedder is None:
            keyword_only = True
    with open_cli_source(db, read_only=True, now=now, **qdrant) as source:
        source.check_filters(filters)
        progress = None
        if source.kind != "memtui" and not source.index_status()["ready"]:
            progress = _StderrProgress(f"indexing {source.label} for search")
        vector_progress = _StderrProgress(
            "building the vector cache (once after vectors change)", after=QUIET_BUILD_SECONDS
        )
        response = source.search(
            query,
            embedder=embedder,
            limit=limit,
            filters=filters,
            weights=weights,
            pool_size=pool_size,
            any_terms=any_terms,
            keyword_only=keyword_only,
            progress=progress,
            vector_progress=vector_progress,
        )
        for shown in (progress, vector_progress):
            if shown is not None:
                shown.finish()
        records = source.get_many(r.id for r in response.results)
        explanations = {}
        if explain:
            explanations = {
                r.id: source.explain(query, r.id)
                for r in response.results
                if r.trace["keyword"]["raw"] is not None
            }
        if as_json:
            emit_json(_json(query, response, records, explanations))
            return
        out = console()
        _print_header(out, response)
        if not response.results:
            return
        _print_table(out, response, records)
        if explain:
            for result in response.results:
                _print_explanation(out, result, records.get(result.id), explanations)


QUIET_BUILD_SECONDS = 0.5
"""A vector cache build shorter than this says nothing (a small store's takes milliseconds,
and each command line process builds it again)."""


class _StderrProgress:
    """Progress on stderr while a search waits for a build (a keyword index, the vector cache).

    A terminal sees the percentage move; a pipe gets one line, so logs stay short.
    Nothing is said before ``after`` seconds into the build.
    """

    def __init__(self, what: str, after: float = 0.0) -> None:
        self.what = what
        self.live = sys.stderr.isatty()
        self.shown = -1
        self.after = after
        self.started: float | None = None

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self.started is None:
            self.started = now
        if now - self.started < self.after:
            return
        percent = 100 * done // max(total, 1)
        if self.live:
            click.echo(f"\r{self.what}: {percent}%", nl=False, err=True)
        elif self.shown < 0:
            click.echo(f"{self.what}...", nl=False, err=True)
        self.shown = percent

    def finish(self) -> None:
        """End the progress line, if one was started."""
        if self.shown >= 0:
            click.echo("", err=True)


def _json(
    query: str,
    response: SearchResponse,
    records: dict[str, SourceRecord],
    explanations: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    results = []
    for result in response.results:
        record = records.get(result.id)
        item: dict[str, Any] = record.to_json() if record else {"id": result.id}
        item["search"] = {
            "rank": result.rank,
            "score": result.score,
            "keyword_score": result.keyword_score,
            "vector_score": result.vector_score,
            **result.trace,
        }
        if result.id in explanations:
            item["search"]["bm25"] = explanations[result.id]
        results.append(item)
    return {"query": query, "trace": response.trace, "results": results}


def _fmt(value: float | None, places: int = 4) -> str:
    return "—" if value is None else f"{value:.{places}f}"


def _print_header(out: Console, response: SearchResponse) -> None:
    trace = response.trace
    line = Text("query: ")
    line.append(safe_text(trace["query"] or "(empty)", limit=200))
    if trace["terms"]:
        line.append("   terms: ")
        line.append(safe_text(" · ".join(trace["terms"]), limit=300))
        line.append("  (any term)" if trace["any_terms"] else "  (all required)", style="dim")
    out.print(line)
    if trace["empty_query"]:
        out.print(safe_text(trace["note"] or "empty query", style="yellow"))
        return
    weights, default = trace["weights"], trace["default_weights"]
    line = Text(
        f"weights: keyword {weights['keyword']:.2f} · vector {weights['vector']:.2f}"
        f"  (default {default['keyword']:.2f} · {default['vector']:.2f})"
        f"   embedder: {trace['embedder'] or 'none'}"
    )
    out.print(line)
    if trace["fallback"]:
        out.print(safe_text(f"fallback to keyword only: {trace['fallback']}", style="yellow"))
    if trace["keyword_lane_error"]:
        out.print(
            safe_text(f"keyword lane error: {trace['keyword_lane_message']}", style="bold red")
        )
    for lane, label in (("keyword", "-bm25"), ("vector", "cosine")):
        pool = trace["pools"][lane]
        out.print(
            Text(
                f"{lane} pool: {pool['size']} candidates (max {pool['limit']}), "
                f"{label} min {_fmt(pool['min'])}, max {_fmt(pool['max'])}"
            )
        )
    excluded = trace["excluded"]
    left_out = ", ".join(f"{key.replace('_', ' ')} {n}" for key, n in excluded.items())
    out.print(Text(f"keyword matches: {trace['matched']}; left out: {left_out}", style="dim"))
    source = trace.get("source")
    if source and source.get("kind") != "memtui":
        out.print(safe_text(f"expiry: {source['expiry_rule']} (now {trace['now']})", style="dim"))
    mode = trace.get("memory_mode")
    if mode and mode.get("mode"):
        dropped = " (the operation filter was dropped)" if mode.get("dropped") else ""
        out.print(safe_text(f"{mode['rule']}{dropped}", style="dim"))
    if not response.results:
        out.print(Text("no results", style="yellow"))
        return
    shown = len(response.results)
    note = " (truncated: raise --limit to see more)" if trace["truncated"] else ""
    out.print(Text(f"showing {shown} of {trace['candidates']} candidates{note}", style="dim"))


def _print_table(out: Console, response: SearchResponse, records: dict[str, Any]) -> None:
    table = Table(title_justify="left")
    for column in ("rank", "id", "score", "keyword", "vector"):
        table.add_column(column, no_wrap=True, justify="right")
    for column in ("tier", "type"):
        table.add_column(column, no_wrap=True)
    table.add_column("content", overflow="fold", min_width=30, ratio=1)
    for result in response.results:
        record = records.get(result.id)
        table.add_row(
            str(result.rank),
            one_line(result.id, 60),
            f"{result.score:.4f}",
            f"{result.keyword_score:.4f}",
            f"{result.vector_score:.4f}",
            record.tier if record else "",
            one_line(record.record_type if record else "", 20),
            one_line(record.content if record else "(gone)", 160),
        )
    out.print(table)


def arithmetic_line(result: SearchResult) -> str:
    """``keyword raw → norm × w = part  +  vector raw → norm × w = part  =  score``."""
    weights = result.trace["weights"]
    parts = []
    for lane, norm in (("keyword", result.keyword_score), ("vector", result.vector_score)):
        raw = result.trace[lane]["raw"]
        part = weights[lane] * norm
        shown_raw = _fmt(raw) if raw is not None else "— (not in pool)"
        parts.append(f"{lane} {shown_raw} → {norm:.4f} × {weights[lane]:.2f} = {part:.4f}")
    return "  +  ".join(parts) + f"  =  {result.score:.4f}"


def _print_explanation(
    out: Console,
    result: SearchResult,
    record: Any,
    explanations: dict[str, dict[str, Any]],
) -> None:
    out.print()
    head = Text(f"#{result.rank}  record ", style="bold")
    head.append(safe_text(result.id, limit=80))
    if record is not None:
        head.append(f"  {record.tier} ")
        head.append(one_line(record.record_type, 20))
    out.print(head)
    out.print(Text("  " + arithmetic_line(result)))
    weights = result.trace["weights"]
    recomputed = weights["keyword"] * result.keyword_score + weights["vector"] * result.vector_score
    adds_up = abs(recomputed - result.score) <= 1e-12
    out.print(
        Text(
            "  adds up: yes" if adds_up else f"  adds up: NO (recomputed {recomputed!r})",
            style="green" if adds_up else "bold red",
        )
    )
    missing = [lane for lane in ("keyword", "vector") if result.trace[lane]["raw"] is None]
    for lane in missing:
        out.print(
            Text(
                f"  not in the {lane} pool: scores 0 there (the weights are not re-divided)",
                style="dim",
            )
        )
    if result.trace["fallback"]:
        out.print(safe_text(f"  fallback: {result.trace['fallback']}", style="yellow"))
    detail = explanations.get(result.id)
    if not detail:
        return
    table = Table(title="  BM25 by term", title_justify="left", padding=(0, 1))
    for column in ("term", "df", "idf", "tf", "len/avg", "contribution"):
        table.add_column(column, justify="left" if column == "term" else "right", no_wrap=True)
    for term in detail["terms"]:
        table.add_row(
            one_line(term["term"], 40),
            str(term["df"]),
            f"{term['idf']:.4f}",
            str(term["tf"]),
            f"{term['doc_len']}/{term['avg_len']:.2f}",
            f"{term['contribution']:.4f}",
        )
    fts = detail["bm25"]
    table.add_row(
        "sum",
        "",
        "",
        "",
        "",
        f"{detail['total']:.4f}",
        style="bold",
    )
    out.print(table)
    out.print(
        Text(
            f"  sum {detail['total']:.6f} = -bm25() {_fmt(-fts if fts is not None else None, 6)}"
            f" (keyword raw {_fmt(result.trace['keyword']['raw'], 6)}); "
            f"N = {detail['rows']} rows, k1 = 1.2, b = 0.75",
            style="dim",
        )
    )


@click.command()
@db_argument
@click.option(
    "--embedder",
    "embedder_name",
    required=True,
    help="none (drop vectors), hash, hash-N, or module:callable.",
)
@operator_option
def reindex(db: Path, embedder_name: str, operator: str | None) -> None:
    """Recompute every record's vector with an embedder (audited)."""
    embedder = resolve_embedder(embedder_name)
    with open_store(db, operator=operator) as store:
        total = store.record_count()
        with click.progressbar(
            length=total, label="re-indexing", file=sys.stderr, show_pos=True
        ) as bar:
            state = {"done": 0}

            def progress(done: int, _total: int) -> None:
                bar.update(done - state["done"])
                state["done"] = done

            try:
                count = store.reindex_vectors(embedder, progress=progress)
            except (MemoryStoreError, EmbedderError):
                raise
            except Exception as exc:  # a plug-in embedder failed; the transaction rolled back
                raise EmbedderError(
                    f"embedder {embedder_name} failed while re-indexing ({exc}); nothing changed"
                ) from None
        event = store.last_event_id
    if embedder is None:
        click.echo(f"dropped every vector of {db}: search is keyword only (audit event #{event})")
    else:
        click.echo(
            f"re-indexed {count} records of {db} with {embedder.name} "
            f"({embedder.dim} dims) (audit event #{event})"
        )
