"""Labelled questions run on a source: what ``memtui eval`` and the app's Eval tab share.

Both read the questions file, check it against the store and run each question as
``memtui search`` would with the same options through ``run``, so the figures on
screen are the command's. The command adds its stderr progress (``search``); the
app adds a worker's cancel check (``cancelled``). Problems are ``QuestionsError``:
one line, which the command prints on stderr and the tab shows in its status line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtui.core.cancel import stop_if
from memtui.core.evaluation import (
    Question,
    QuestionScore,
    QuestionsError,
    Summary,
    parse_questions,
    score,
    summarize,
)
from memtui.core.search import (
    DEFAULT_LIMIT,
    DEFAULT_POOL_SIZE,
    SearchRequest,
    SearchResponse,
    sanitize_query,
)
from memtui.core.search.trace import SearchResult
from memtui.render import escape_controls, one_line
from memtui.sources import MemorySource, SourceError
from memtui.sources.shapes import SourceSearchResult

Search = Callable[[MemorySource, SearchRequest], SearchResponse]


def result_id(result: SearchResult) -> str:
    """A result's record id as its source spells it (every source's results carry it)."""
    return result.id if isinstance(result, SourceSearchResult) else str(result.record_id)


@dataclass(frozen=True)
class Setting:
    """One way of searching: the lane weights (None: the store's default) or keyword only."""

    weights: tuple[float, float] | None
    keyword_only: bool

    @property
    def label(self) -> str:
        if self.keyword_only:
            return "keyword only"
        if self.weights is None:
            return "default weights"
        return f"{self.weights[0]:.1f} / {self.weights[1]:.1f}"

    def to_json(self) -> Any:
        if self.keyword_only:
            return "keyword-only"
        return list(self.weights) if self.weights is not None else None


@dataclass
class Run:
    """The questions searched one way: each score and the responses behind them."""

    setting: Setting
    scores: list[QuestionScore]
    responses: list[SearchResponse]
    weights: dict[str, float]
    keyword_only: bool

    @property
    def summary(self) -> Summary:
        return summarize(self.scores)


def read_questions(path: Path) -> list[Question]:
    """The questions of ``path``; ``QuestionsError`` naming the problem if it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise QuestionsError(f"{path}: no such file (a JSON list of questions)") from None
    except UnicodeDecodeError as exc:
        raise QuestionsError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise QuestionsError(f"{path}: cannot read it ({exc.strerror})") from None
    try:
        questions = parse_questions(text, label=str(path))
    except QuestionsError as exc:
        raise QuestionsError(escape_controls(str(exc))) from None
    for n, question in enumerate(questions, start=1):
        if not sanitize_query(question.text):
            raise QuestionsError(
                f"{path}, question {n}: no word to search for in "
                f"{one_line(question.text, 40).plain!r}"
            )
    return questions


def check_against(source: MemorySource, questions: Sequence[Question], label: str) -> None:
    """Every filter key and relevant id is the store's, before any search runs."""
    ids = sorted({rid for q in questions for rid in q.relevant})
    known = set(source.get_many(ids))
    for n, question in enumerate(questions, start=1):
        try:
            source.check_filters(question.filters)
        except SourceError as exc:
            raise QuestionsError(f"{label}, question {n}: {exc}") from None
        missing = [rid for rid in question.relevant if rid not in known]
        if missing:
            raise QuestionsError(
                f"{label}, question {n}: relevant id {escape_controls(missing[0])!r} is not in "
                f"{escape_controls(source.label)} (`memtui records STORE --json` lists the ids)"
            )


def base_request(
    k: int,
    *,
    embedder: Any = None,
    pool_size: int = DEFAULT_POOL_SIZE,
    any_terms: bool = False,
    keyword_only: bool = False,
) -> SearchRequest:
    """The search every question runs (its query, filters and weights set per question):
    at least K results, ``memtui search``'s default limit otherwise."""
    return SearchRequest(
        "",
        embedder=embedder,
        limit=max(k, DEFAULT_LIMIT),
        pool_size=pool_size,
        any_terms=any_terms,
        keyword_only=keyword_only,
    )


def plain_search(source: MemorySource, request: SearchRequest) -> SearchResponse:
    """The source's search, refused (one line) when its index finds no word in the query."""
    source.check_filters(request.filters)
    response = source.search(request)
    if response.trace.empty_query:
        note = escape_controls(response.trace.note or "")
        raise QuestionsError(f"{note}; give a word to search for")
    return response


def run(
    source: MemorySource,
    questions: Sequence[Question],
    setting: Setting,
    *,
    k: int,
    base: SearchRequest,
    search: Search = plain_search,
    cancelled: Callable[[], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Run:
    """Each question searched as ``memtui search`` would with ``base``'s options.

    ``cancelled`` is polled between questions (and by each search): once it is true,
    ``memtui.core.cancel.Cancelled`` is raised. ``progress(done, total)`` follows the
    questions."""
    scores, responses = [], []
    weights: dict[str, float] = {}
    keyword_only = base.keyword_only or setting.keyword_only
    for done, question in enumerate(questions):
        stop_if(cancelled)
        if progress is not None:
            progress(done, len(questions))
        request = base.but(
            query=question.text,
            filters=dict(question.filters) or None,
            weights=setting.weights,
            keyword_only=keyword_only,
            cancelled=cancelled,
        )
        response = search(source, request)
        weights = dict(response.trace.weights)
        responses.append(response)
        scores.append(score(question, [result_id(r) for r in response.results], k))
    stop_if(cancelled)
    return Run(setting, scores, responses, weights, keyword_only)


def figures_text(summary: Summary) -> str:
    """A summary's figures on one line, as the command and the tab print them."""
    return (
        f"precision@K {summary.precision_at_k:.3f}  recall@K {summary.recall_at_k:.3f}  "
        f"MRR {summary.mrr:.3f}  ({summary.count} question{'s' if summary.count != 1 else ''})"
    )


def lanes_text(main: Run) -> str:
    """The weights the searches ran with: ``weights keyword 0.3 / vector 0.7``."""
    if main.keyword_only:
        return "keyword only"
    return (
        f"weights keyword {main.weights.get('keyword', 0):g} / vector "
        f"{main.weights.get('vector', 0):g}"
    )


@dataclass(frozen=True)
class Place:
    """Where one relevant record of a question is, and which of its terms it holds."""

    record_id: str
    rank: int | None
    held: list[str]
    lacking: list[str]
    explanation: dict[str, Any]

    @property
    def where(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else "not returned"

    def words(self) -> str:
        out = f"terms in it: {', '.join(self.held) or 'none'}"
        if self.lacking:
            out += f"; not in it: {', '.join(self.lacking)}"
        return out


def relevant_places(
    source: MemorySource, scored: QuestionScore, response: SearchResponse
) -> list[Place]:
    """Each relevant record of a question: its rank (or not returned) and its BM25 terms."""
    ranks = {result_id(r): r.rank for r in response.results}
    places = []
    for rid in scored.question.relevant:
        explained = source.explain(scored.question.text, rid)
        terms = [t for t in explained.get("terms", []) if isinstance(t, dict)]
        held = list(dict.fromkeys(str(t["term"]) for t in terms if t.get("tf")))
        lacking = list(dict.fromkeys(str(t["term"]) for t in terms if not t.get("tf")))
        places.append(Place(rid, ranks.get(rid), held, lacking, explained))
    return places
