"""``memtui search`` (hybrid search with its arithmetic) and ``memtui reindex``."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import click
from rich.cells import cell_len
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from memtui.commands.common import (
    console,
    database_file_argument,
    emit_json,
    filter_options,
    json_option,
    open_cli_source,
    open_store,
    operator_option,
    scope_filters,
    source_options,
    store_and_argument,
    store_kind_options,
    warn_refused,
)
from memtui.commands.search_header import print_header
from memtui.core.arithmetic import (
    LaneStep,
    arithmetic,
    bm25_digits,
    lane_places,
    weight_text,
)
from memtui.core.embed import EmbedderError, resolve_embedder
from memtui.core.search import (
    DEFAULT_LIMIT,
    DEFAULT_POOL_SIZE,
    LanePool,
    SearchRequest,
    SearchResponse,
    SearchResult,
    check_weights,
    empty_query_note,
    sanitize_query,
)
from memtui.core.store import MemoryStoreError
from memtui.render import escape_controls, one_line, plural, safe_text
from memtui.sources import MemorySource, SourceRecord


def _parse_weights(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> dict[str, float] | None:
    if value is None:
        return None
    parts = [p.strip() for p in value.split(",")]
    try:
        if len(parts) != 2:
            raise ValueError("give two numbers, keyword then vector, e.g. 0.5,0.5")
        weights = check_weights((float(parts[0]), float(parts[1])))
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    keyword, vector = (weight_text(weights[lane]) for lane in ("keyword", "vector"))
    total = Decimal(keyword) + Decimal(vector)  # as typed: 0.1 + 0.9 is exactly 1
    if total != 1:
        raise click.BadParameter(
            f"the weights must add up to 1, got {keyword} + {vector} = {total} (e.g. 0.4,0.6): "
            "otherwise scores leave 0..1 and cannot be compared with other searches"
        )
    return weights


def search_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The options that say how a search runs (``search`` and ``eval`` take the same):
    ``--embedder``, ``--keyword-only``, ``--any``, ``--pool`` and ``--weights``."""
    options = [
        click.option(
            "--embedder",
            "embedder_name",
            default=None,
            help="Query embedder (default: the one recorded in DB); 'none' means keyword only.",
        ),
        click.option("--keyword-only", is_flag=True, help="Switch the vector lane off."),
        click.option("--any", "any_terms", is_flag=True, help="Match any term instead of all."),
        click.option(
            "--pool",
            "pool_size",
            type=click.IntRange(min=1),
            default=DEFAULT_POOL_SIZE,
            show_default=True,
            help="Candidate pool size per lane.",
        ),
        click.option(
            "--weights",
            callback=_parse_weights,
            default=None,
            metavar="KW,VEC",
            help="Lane weights adding up to 1, e.g. 0.5,0.5 (default 0.3,0.7).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@click.command()
@click.argument("args", nargs=-1, required=True, metavar="[DB] QUERY")
@click.option("--explain", is_flag=True, help="Show each result's arithmetic and BM25 terms.")
@click.option("--limit", type=click.IntRange(min=1), default=DEFAULT_LIMIT, show_default=True)
@search_options
@filter_options
@source_options(writes=False)
@store_kind_options
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
    store_options: dict[str, Any],
    as_json: bool,
) -> None:
    """Hybrid search of DB: keyword (BM25) and vector lanes, merged; --explain shows why.

    DB is any memory store memtui recognizes (a file or a Qdrant local folder;
    leave it out with --qdrant-url URL); for a foreign store the keyword index
    is built once into memtui's cache folder, and the vector lane uses the
    store's own vectors with the --embedder given (same dimension).
    """
    db, query = store_and_argument(
        args, store_options, "query", "QUERY", " (quote a query of several words)"
    )
    if not sanitize_query(query):  # refused before a store is opened or indexed
        raise _empty_query(empty_query_note(query))
    filters = scope_filters(tier, record_type, profile, engagement, run_id, tool, extra)
    embedder = None
    if embedder_name is not None:
        embedder = resolve_embedder(embedder_name)
        if embedder is None:
            keyword_only = True
    request = SearchRequest(
        query,
        embedder=embedder,
        limit=limit,
        filters=filters,
        weights=weights,
        pool_size=pool_size,
        any_terms=any_terms,
        keyword_only=keyword_only,
    )
    with open_cli_source(db, read_only=True, now=now, options=store_options) as source:
        response = searched(source, request)
        records = source.get_many(r.id for r in response.results)
        explanations = {}
        if explain:
            explanations = {
                r.id: source.explain(query, r.id)
                for r in response.results
                if r.trace.keyword.raw is not None
            }
        if as_json:
            emit_json(_json(query, response, records, explanations))
            return
        _print_results(console(), response, records, explanations if explain else None)


def searched(source: MemorySource, request: SearchRequest) -> SearchResponse:
    """The search, with progress on stderr while it waits for a build."""
    source.check_filters(request.filters)
    progress = None
    if not source.index_status()["ready"]:  # a foreign store's index, built on first use
        progress = _StderrProgress(f"indexing {escape_controls(source.label)} for search")
    vector_progress = _StderrProgress(
        "building the vector cache (once after vectors change)", after=QUIET_BUILD_SECONDS
    )
    response = source.search(request.but(progress=progress, vector_progress=vector_progress))
    for shown in (progress, vector_progress):
        if shown is not None:
            shown.finish()
    warn_refused(source)
    if response.trace.empty_query:  # the index's tokenizer found no word either
        raise _empty_query(response.trace.note or "")
    return response


def _print_results(
    out: Console,
    response: SearchResponse,
    records: dict[str, Any],
    explanations: dict[str, dict[str, Any]] | None,
) -> None:
    """The header, the results table and, with --explain (``explanations``), each
    result's arithmetic."""
    pools = response.trace.pools
    candidates = response.candidates or response.results
    places = lane_places(candidates, pools) if explanations is not None else {}
    print_header(out, response, places)
    if not response.results:
        return
    _print_table(out, response, records)
    if explanations is not None:
        for result in response.results:
            print_explanation(out, result, records.get(result.id), explanations, pools, places)


def _empty_query(note: str) -> click.ClickException:
    return click.ClickException(f"{escape_controls(note)}; give a word to search for")


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
            **result.trace.to_dict(),
        }
        if result.id in explanations:
            item["search"]["bm25"] = explanations[result.id]
        results.append(item)
    return {"query": query, "trace": response.trace.to_dict(), "results": results}


# ---------------------------------------------------------------- the table

CONTENT_LINES = 2
"""Lines of a record's content in the results table (cut with an ellipsis; --json has it all)."""
MIN_CONTENT_WIDTH = 20
MAX_ID_WIDTH = 24
MIN_ID_WIDTH = 8


def clip_lines(text: Text, width: int, lines: int = CONTENT_LINES) -> Text:
    """``text`` wrapped at ``width`` (words kept whole), its first ``lines`` lines; an ellipsis
    ends the last one when there was more."""
    measure = Console(width=max(width, 1), markup=False, highlight=False, emoji=False)
    wrapped = text.wrap(measure, max(width, 1))
    kept = list(wrapped)[:lines]
    if len(wrapped) > lines:
        last = kept[-1]
        last.rstrip()
        last.truncate(max(width - 1, 0))
        last.append("…", style="dim")
    out = Text()
    for index, line in enumerate(kept):
        line.rstrip()
        if index:
            out.append("\n")
        out.append_text(line)
    return out


def _cells(text: Text) -> int:
    """The widest line of ``text``, in terminal cells."""
    return max((cell_len(line) for line in text.plain.split("\n")), default=0)


def _print_table(out: Console, response: SearchResponse, records: dict[str, Any]) -> None:
    rows = []
    for result in response.results:
        record = records.get(result.id)
        kind = Text("\n").join(
            [one_line(record.tier, 12), one_line(record.record_type, 20)] if record else []
        )
        if getattr(record, "damage", ()):
            kind.append("\ndamaged", style="bold red")
        rows.append(
            [
                Text(str(result.rank)),
                one_line(result.id, 60),
                Text(f"{result.score:.4f}"),
                Text(f"{result.keyword_score:.4f}"),
                Text(f"{result.vector_score:.4f}"),
                kind,
            ]
        )
    heads = ("#", "id", "score", "keyword", "vector", "tier/type")
    widths = [
        max([len(head)] + [_cells(row[index]) for row in rows]) for index, head in enumerate(heads)
    ]
    # Each column has a space either side and a rule after it; one rule opens the row.
    rules = 3 * (len(heads) + 1) + 1
    # A long id (a foreign store's) folds onto more lines before the content gets narrower
    # than MIN_CONTENT_WIDTH.
    others = sum(widths) - widths[1]
    widths[1] = min(
        widths[1], MAX_ID_WIDTH, max(MIN_ID_WIDTH, out.width - rules - others - MIN_CONTENT_WIDTH)
    )
    content_width = max(MIN_CONTENT_WIDTH, out.width - rules - sum(widths))
    numeric = all(str(result.id).isdigit() for result in response.results)
    table = Table()
    for head, width in zip(heads, widths, strict=True):
        if head == "id":
            justify = "right" if numeric else "left"
            table.add_column(head, justify=justify, overflow="fold", width=width)
        else:
            justify = "left" if head == "tier/type" else "right"
            table.add_column(head, justify=justify, no_wrap=True)
    table.add_column("content", no_wrap=True, width=content_width)
    for result, row in zip(response.results, rows, strict=True):
        record = records.get(result.id)
        content = one_line(record.content if record else "(gone)", content_width * 3)
        table.add_row(*row, clip_lines(content, content_width))
    out.print(table)


# ---------------------------------------------------------------- the explanation


def _lane_segments(step: LaneStep, fallback: bool) -> list[str]:
    """A lane's arithmetic in pieces that a line may break between."""
    tail = f"× {step.weight} = {step.part}"
    if step.raw is None:
        if fallback:
            return ["lane off (fallback) → 0", tail]
        return ["not found by this lane → 0", tail, "(the weights are not re-divided)"]
    if step.all_equal:
        return [f"raw {step.raw}", f"→ all-equal pool → {step.normalized}", tail]
    return [
        f"raw {step.raw}",
        f"→ ({step.raw} − {step.low})",
        f"/ ({step.high} − {step.low})",
        f"= {step.normalized} {tail}",
    ]


def _fill(segments: list[str], head: str, width: int, break_before: int | None = None) -> list[str]:
    """``head`` then the segments, broken between segments to fit ``width`` (and before
    segment ``break_before``); later lines are indented under the first segment."""
    indent = " " * len(head)
    lines, line = [], head + segments[0]
    for index, segment in enumerate(segments[1:], start=1):
        if index == break_before or len(line) + 1 + len(segment) > width:
            lines.append(line)
            line = indent + segment
        else:
            line += " " + segment
    lines.append(line)
    return lines


def explanation_lines(
    result: SearchResult,
    pools: Mapping[str, LanePool],
    width: int,
    places: dict[str, int] | None = None,
) -> list[str]:
    """The arithmetic of ``result``: one line (or two, when narrow) per lane, then the sum."""
    shown = arithmetic(result, pools, places)
    fallback = bool(result.trace.fallback)
    lanes = [(f"  {step.lane:<8} ", _lane_segments(step, fallback)) for step in shown.steps]
    # When one lane's arithmetic needs two lines, each full one breaks at the same place,
    # before "= normalized × weight = part", so the lanes read alike.
    split = any(len(head + " ".join(segments)) > width for head, segments in lanes)
    lines = []
    for head, segments in lanes:
        # (When even the fraction does not fit on the first line, it just wraps.)
        even = len(segments) == 4 and len(head + " ".join(segments[:3])) <= width
        lines.extend(_fill(segments, head, width, 3 if split and even else None))
    parts = " + ".join(step.part for step in shown.steps)
    lines.append(f"  {'score':<8} {parts} = {shown.total} ≈ {shown.score}")
    return lines


def print_explanation(
    out: Console,
    result: SearchResult,
    record: Any,
    explanations: dict[str, dict[str, Any]],
    pools: Mapping[str, LanePool],
    places: dict[str, int],
) -> None:
    out.print()
    head = Text(f"#{result.rank}  record ", style="bold")
    head.append(safe_text(result.id, limit=80))
    if record is not None:
        head.append(f"  {record.tier} ")
        head.append(one_line(record.record_type, 20))
    out.print(head)
    lines = explanation_lines(result, pools, out.width, places)
    for line in lines[:-1]:
        out.print(Text(line))
    weights = result.trace.weights
    recomputed = weights["keyword"] * result.keyword_score + weights["vector"] * result.vector_score
    adds_up = abs(recomputed - result.score) <= 1e-12 and arithmetic(result, pools, places).adds_up
    total = Text(lines[-1])
    total.append(
        "   adds up: yes" if adds_up else f"   adds up: NO (recomputed {recomputed!r})",
        style="green" if adds_up else "bold red",
    )
    out.print(total)
    if result.trace.fallback:
        out.print(safe_text(f"  fallback: {result.trace.fallback}", style="yellow"))
    field = result.trace.vector.field
    if field is not None:  # a store with a vector per text field: the one that scored
        out.print(safe_text(f"  vector   best of its fields: {field}", style="dim"))
    detail = explanations.get(result.id)
    if not detail:
        return
    out.print(Text("  BM25 by term", style="bold"))
    table = Table(padding=(0, 1))
    for column in ("term", "df", "idf", "tf", "len/avg", "contribution"):
        table.add_column(column, justify="left" if column == "term" else "right", no_wrap=True)
    digits = bm25_digits(detail)
    for term, idf, contribution in zip(
        detail["terms"], digits.idf, digits.contributions, strict=True
    ):
        table.add_row(
            one_line(term["term"], 40),
            str(term["df"]),
            idf,
            str(term["tf"]),
            f"{term['doc_len']}/{digits.avg_len}",
            contribution,
        )
    if digits.remainder is not None:
        table.add_row("(rounding)", "", "", "", "", digits.remainder, style="dim")
    table.add_row("sum", "", "", "", "", digits.total, style="bold")
    out.print(Padding(table, (0, 0, 0, 2), expand=False))
    fts = detail["bm25"]
    line = f"  sum {digits.total} = -bm25() {digits.number(-fts if fts is not None else None)}"
    raw = result.trace.keyword.raw
    if digits.number(raw) != digits.total:
        line += f" (keyword raw {digits.number(raw)})"
    rows = detail["rows"]
    line += f"; N = {rows} row{'' if rows == 1 else 's'}, k1 = 1.2, b = 0.75"
    out.print(Text(line, style="dim"))


@click.command()
@database_file_argument
@click.option(
    "--embedder",
    "embedder_name",
    required=True,
    help="none (drop vectors), hash, hash-N, minilm, or module:callable.",
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
        click.echo(
            f"dropped every vector of {escape_controls(str(db))}: search is keyword only "
            f"(audit event #{event})"
        )
    else:
        click.echo(
            f"re-indexed {plural(count, 'record')} of {escape_controls(str(db))} "
            f"with {embedder.name} "
            f"({embedder.dim} dims) (audit event #{event})"
        )
