"""``memtui eval``: retrieval measured on labelled questions, each run as ``memtui search``."""

from __future__ import annotations

from collections.abc import Sequence
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
    json_option,
    open_cli_source,
    source_options,
    store_kind_options,
)
from memtui.commands.search import print_explanation, search_options, searched
from memtui.core.arithmetic import lane_places
from memtui.core.embed import resolve_embedder
from memtui.core.evaluation import DEFAULT_K, QuestionsError, best_of, sweep_weights
from memtui.eval_run import (
    Run,
    Setting,
    base_request,
    check_against,
    figures_text,
    lanes_text,
    read_questions,
    relevant_places,
    result_id,
    run,
)
from memtui.render import one_line, safe_text
from memtui.sources import MemorySource

BAR_WIDTH = 20


@click.command("eval")
@db_argument
@click.argument("questions_path", metavar="QUESTIONS.json", type=click.Path(path_type=Path))
@click.option("--k", "k", type=click.IntRange(min=1), default=DEFAULT_K, show_default=True)
@search_options
@click.option(
    "--sweep", is_flag=True, help="Also keyword only and every weight pair in steps of 0.1."
)
@source_options(writes=False)
@store_kind_options
@json_option
def evaluate(
    db: str | Path,
    questions_path: Path,
    k: int,
    weights: dict[str, float] | None,
    keyword_only: bool,
    embedder_name: str | None,
    any_terms: bool,
    pool_size: int,
    sweep: bool,
    now: str | None,
    store_options: dict[str, Any],
    as_json: bool,
) -> None:
    """Measure retrieval on labelled questions: precision@K, recall@K and MRR.

    QUESTIONS.json is a JSON list of {"question": ..., "relevant": [id, ...], "kind":
    optional (e.g. "direct", "paraphrase"), "filters": optional scope filters}; ids as
    `memtui records DB --json` prints them. Each question runs the search `memtui
    search` runs with the same options; every figure recomputes from the ranked ids.
    """
    try:
        questions = read_questions(questions_path)
    except QuestionsError as exc:
        raise click.ClickException(str(exc)) from None
    embedder = None
    if embedder_name is not None:
        embedder = resolve_embedder(embedder_name)
        if embedder is None:
            keyword_only = True
    base = base_request(
        k, embedder=embedder, pool_size=pool_size, any_terms=any_terms, keyword_only=keyword_only
    )
    chosen = Setting((weights["keyword"], weights["vector"]) if weights else None, False)
    with open_cli_source(db, read_only=True, now=now, options=store_options) as source:
        try:
            check_against(source, questions, str(questions_path))
        except QuestionsError as exc:
            raise click.ClickException(str(exc)) from None
        main = run(source, questions, chosen, k=k, base=base, search=searched)
        sweeps: list[Run] = []
        if sweep:
            settings = [Setting(None, True)] + [Setting(w, False) for w in sweep_weights()]
            sweeps = [run(source, questions, s, k=k, base=base, search=searched) for s in settings]
        if as_json:
            emit_json(_json(k, main, sweeps))
            return
        out = console()
        _print_run(out, source, main, k)
        _print_misses(out, source, main, k)
        if sweeps:
            _print_sweep(out, sweeps, k)


def _json(k: int, main: Run, sweeps: Sequence[Run]) -> dict[str, Any]:
    data: dict[str, Any] = {
        "k": k,
        "weights": main.weights,
        "keyword_only": main.keyword_only,
        "questions": [s.to_dict() for s in main.scores],
        "summary": main.summary.to_dict(),
    }
    if sweeps:
        data["sweep"] = [
            {"weights": r.setting.to_json(), "summary": r.summary.to_dict()} for r in sweeps
        ]
        best = best_of((r.setting, r.summary) for r in sweeps)
        data["best"] = best.to_json() if best is not None else None
    return data


def _print_run(out: Console, source: MemorySource, main: Run, k: int) -> None:
    lanes = lanes_text(main)
    out.print(safe_text(f"{source.label}: {len(main.scores)} questions, K = {k}, {lanes}"))
    summary = main.summary
    out.print(Text(f"all          {figures_text(summary)}", style="bold"))
    for kind, by_kind in summary.by_kind.items():
        out.print(safe_text(f"{one_line(kind, 12).plain:<12} {figures_text(by_kind)}"))
    table = Table(padding=(0, 1))
    for column in ("#", "kind", f"top {k}", "first rank", "P@K", "R@K", "RR", "question"):
        table.add_column(column, no_wrap=column != "question", justify="left")
    for n, s in enumerate(main.scores, start=1):
        rank = str(s.first_relevant_rank) if s.first_relevant_rank else "not returned"
        table.add_row(
            str(n),
            one_line(s.question.kind or "", 12),
            Text("hit", style="green") if s.hit else Text("miss", style="bold red"),
            rank,
            f"{s.precision_at_k:.3f}",
            f"{s.recall_at_k:.3f}",
            f"{s.reciprocal_rank:.3f}",
            one_line(s.question.text, 200),
        )
    out.print(table)


def _print_misses(out: Console, source: MemorySource, main: Run, k: int) -> None:
    """For each question with no relevant record in the top K: where each relevant record
    is, which of the question's terms it holds, and its breakdown where it was returned."""
    for n, (s, response) in enumerate(zip(main.scores, main.responses, strict=True), start=1):
        if s.hit:
            continue
        out.print()
        text = one_line(s.question.text, 200).plain
        out.print(safe_text(f"miss: question {n}: {text}", style="bold"))
        by_id = {result_id(r): r for r in response.results}
        places = lane_places(response.candidates or response.results, response.trace.pools)
        for place in relevant_places(source, s, response):
            rid = place.record_id
            out.print(
                safe_text(f"  relevant {one_line(rid, 60).plain}: {place.where}; {place.words()}")
            )
            result = by_id.get(rid)
            if result is not None:
                record = source.get_many([rid]).get(rid)
                details = {rid: place.explanation} if result.trace.keyword.raw is not None else {}
                print_explanation(out, result, record, details, response.trace.pools, places)


def _print_sweep(out: Console, sweeps: Sequence[Run], k: int) -> None:
    out.print()
    out.print(Text(f"sweep (best by recall@{k}, then MRR)", style="bold"))
    table = Table(padding=(0, 1))
    for column in ("keyword / vector", f"P@{k}", f"R@{k}", "MRR", f"recall@{k}"):
        table.add_column(column, no_wrap=True)
    best = best_of((r.setting, r.summary) for r in sweeps)
    for r in sweeps:
        summary = r.summary
        filled = round(summary.recall_at_k * BAR_WIDTH)
        bar = Text("█" * filled + "·" * (BAR_WIDTH - filled), style="cyan")
        label = Text(r.setting.label + ("  best" if r.setting == best else ""))
        table.add_row(
            label,
            f"{summary.precision_at_k:.3f}",
            f"{summary.recall_at_k:.3f}",
            f"{summary.mrr:.3f}",
            bar,
        )
    out.print(table)
