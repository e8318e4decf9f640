"""What the Eval tab shows, as Rich ``Text``: the summary, the questions' rows and one
question's ranked results. Pure functions of a ``memtui.eval_run.Run`` (no Textual),
with the figures as ``memtui eval`` prints them (three places)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from memtui.core.evaluation import QuestionScore
from memtui.core.search import SearchResponse, SearchResult
from memtui.eval_run import Place, Run, figures_text, lanes_text, result_id
from memtui.render import one_line, safe_text
from memtui.sources.base import SourceRecord
from memtui.tui.breakdown import KEYWORD_STYLE, VECTOR_STYLE, score_text
from memtui.tui.format import Column
from memtui.tui.search_results import display_id

HIT = "✓ hit"
MISS = "✗ miss"
RELEVANT_MARK = "●"
"""Marks a relevant record among a question's results (a character, not only a colour)."""
NOT_RETURNED = "not returned"

QUESTION_COLUMNS: tuple[Column, ...] = (
    Column("n", "#", 3),
    Column("kind", "kind", 10, 1),
    Column("top", "top K", 6),
    Column("rank", "first rank", 12),
    Column("p", "P@K", 5),
    Column("r", "R@K", 5),
    Column("rr", "RR", 5),
)
MIN_QUESTION_WIDTH = 20


def rank_text(scored: QuestionScore) -> str:
    """The first relevant rank, or "not returned" (as the command's table says)."""
    rank = scored.first_relevant_rank
    return str(rank) if rank else NOT_RETURNED


def outcome(scored: QuestionScore) -> Text:
    """Hit or miss at K, with its mark."""
    return Text(HIT, style="green") if scored.hit else Text(MISS, style="bold red")


def question_cells(n: int, scored: QuestionScore, question_width: int = 200) -> dict[str, Text]:
    """One question's row, by column key (and ``question``: its text, one line)."""
    return {
        "n": Text(str(n), justify="right"),
        "kind": one_line(scored.question.kind or "", 12),
        "top": outcome(scored),
        "rank": Text(rank_text(scored)),
        "p": Text(f"{scored.precision_at_k:.3f}"),
        "r": Text(f"{scored.recall_at_k:.3f}"),
        "rr": Text(f"{scored.reciprocal_rank:.3f}"),
        "question": one_line(scored.question.text, max(question_width, 1)),
    }


def summary_text(run: Run, k: int) -> Text:
    """The summary on top: questions, K and the weights the searches ran with, then the
    figures overall and per kind (the lines ``memtui eval`` prints)."""
    summary = run.summary
    out = Text(f"{summary.count} questions, K = {k}, {lanes_text(run)}\n")
    out.append(f"{'all':<12} {figures_text(summary)}", style="bold")
    for kind, by_kind in summary.by_kind.items():
        out.append("\n")
        label = one_line(kind, 12)
        out.append_text(label)
        out.append(" " * max(1, 13 - label.cell_len))
        out.append(figures_text(by_kind))
    return out


def question_heading(n: int, scored: QuestionScore, k: int, places: list[Place]) -> Text:
    """A question's heading in the detail: its number, kind, outcome, text, and where
    each relevant record is (its rank, or not returned) with the terms it holds."""
    out = Text(f"question {n}", style="bold")
    if scored.question.kind:
        out.append("  ")
        out.append_text(one_line(scored.question.kind, 20))
    out.append("  ")
    out.append_text(outcome(scored))
    out.append(f" at K = {k}  ·  first relevant rank {rank_text(scored)}\n", style="dim")
    out.append_text(safe_text(scored.question.text, limit=500, style="bold"))
    for place in places:
        out.append("\n")
        out.append(f"{RELEVANT_MARK} relevant ", style="bold")
        out.append_text(one_line(place.record_id, 60))
        out.append(f": {place.where}; ")
        out.append_text(one_line(place.words(), 400))
    return out


def result_heading(
    result: SearchResult, record: SourceRecord | None, relevant: bool, id_width: int
) -> Text:
    """A result's line in the detail: the relevant mark, rank, score, lanes, id, content."""
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append(RELEVANT_MARK if relevant else " ", style="bold yellow" if relevant else "")
    line.append(f" {result.rank:>3} ")
    line.append(score_text(result.score), style="bold")
    line.append(" ")
    line.append("K" if result.trace.keyword.raw is not None else "·", KEYWORD_STYLE)
    line.append("V" if result.trace.vector.raw is not None else "·", VECTOR_STYLE)
    line.append(" ")
    shown = display_id(result_id(result), id_width)
    shown.align("right", id_width)
    line.append_text(shown)
    line.append("  ")
    if record is None:
        line.append("(record no longer on file)", style="dim")
    else:
        line.append_text(one_line(record.tier, 12))
        line.append(" ")
        line.append_text(one_line(record.record_type, 12))
        line.append("  ")
        line.append_text(one_line(record.content, 300))
    if relevant:
        line.stylize("bold")
    return line


def results_group(
    response: SearchResponse,
    scored: QuestionScore,
    records: dict[str, SourceRecord],
    breakdowns: dict[str, RenderableType],
    id_width: int,
) -> list[RenderableType]:
    """Each result of a question's search, best first, the relevant ones marked, each
    followed by its breakdown (``breakdowns``, by record id)."""
    relevant = set(scored.question.relevant)
    if not response.results:
        note = response.trace.note or "The search returned no record."
        return [safe_text(note, style="dim")]
    out: list[RenderableType] = [
        Text(
            f"{RELEVANT_MARK} marks a relevant record · rank · score · lanes (K/V) · id · content",
            style="dim",
        )
    ]
    for result in response.results:
        rid = result_id(result)
        out.append(result_heading(result, records.get(rid), rid in relevant, id_width))
        if rid in breakdowns:
            out.append(breakdowns[rid])
    return out


def detail(heading: Text, results: list[RenderableType]) -> Group:
    """A question's detail: its heading, a blank line, its results."""
    return Group(heading, Text(), *results)
