"""Retrieval measured on labelled questions: precision@K, recall@K, reciprocal rank.

A question names the records that answer it (``relevant``); the search it runs returns
ids in rank order (``ranked``). Every figure here is a function of those two and K, so
a report recomputes from its own ``ranked`` lists:

- first relevant rank: the 1-based rank of the first relevant id in ``ranked`` (None
  when none is returned);
- precision@K: relevant ids among the first K, over K;
- recall@K: relevant ids among the first K, over the number of relevant ids;
- reciprocal rank: 1 / first relevant rank (0 when none is returned);
- a summary: the means over questions (MRR is the mean reciprocal rank), overall and
  per ``kind`` (e.g. "direct", "paraphrase").
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_K = 3
SWEEP_STEPS = 10
"""The weight sweep moves the keyword weight from 0 to 1 in tenths."""


class QuestionsError(ValueError):
    """A questions file memtui cannot run: one line saying what and where."""


@dataclass(frozen=True)
class Question:
    """One labelled question: its text, the ids that answer it, its kind and filters."""

    text: str
    relevant: tuple[str, ...]
    kind: str | None = None
    filters: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class QuestionScore:
    """How one question's search did at K."""

    question: Question
    ranked: tuple[str, ...]
    first_relevant_rank: int | None
    precision_at_k: float
    recall_at_k: float
    reciprocal_rank: float

    @property
    def hit(self) -> bool:
        """Whether a relevant id is among the first K."""
        return self.recall_at_k > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question.text,
            "kind": self.question.kind,
            "ranked": list(self.ranked),
            "first_relevant_rank": self.first_relevant_rank,
            "precision_at_k": self.precision_at_k,
            "recall_at_k": self.recall_at_k,
            "reciprocal_rank": self.reciprocal_rank,
        }


@dataclass(frozen=True)
class Summary:
    """Means over a set of questions, overall and per kind."""

    precision_at_k: float
    recall_at_k: float
    mrr: float
    count: int
    by_kind: Mapping[str, Summary] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "precision_at_k": self.precision_at_k,
            "recall_at_k": self.recall_at_k,
            "mrr": self.mrr,
            "count": self.count,
        }
        if self.by_kind:
            out["by_kind"] = {
                kind: {k: v for k, v in s.to_dict().items() if k != "by_kind"}
                for kind, s in self.by_kind.items()
            }
        return out


def score(question: Question, ranked: Sequence[str], k: int) -> QuestionScore:
    """The figures of one question whose search returned ``ranked``."""
    if k < 1:
        raise ValueError("K must be at least 1")
    relevant = set(question.relevant)
    first = next((rank for rank, rid in enumerate(ranked, start=1) if rid in relevant), None)
    found = len(relevant.intersection(ranked[:k]))
    return QuestionScore(
        question=question,
        ranked=tuple(ranked),
        first_relevant_rank=first,
        precision_at_k=found / k,
        recall_at_k=found / len(relevant) if relevant else 0.0,
        reciprocal_rank=1 / first if first else 0.0,
    )


def _means(scores: Sequence[QuestionScore]) -> tuple[float, float, float]:
    n = len(scores)
    if not n:
        return 0.0, 0.0, 0.0
    return (
        sum(s.precision_at_k for s in scores) / n,
        sum(s.recall_at_k for s in scores) / n,
        sum(s.reciprocal_rank for s in scores) / n,
    )


def summarize(scores: Sequence[QuestionScore]) -> Summary:
    """The means overall and per kind (questions without a kind count only overall)."""
    kinds: dict[str, list[QuestionScore]] = {}
    for s in scores:
        if s.question.kind is not None:
            kinds.setdefault(s.question.kind, []).append(s)
    by_kind = {}
    for kind in sorted(kinds):
        p, r, m = _means(kinds[kind])
        by_kind[kind] = Summary(p, r, m, len(kinds[kind]))
    p, r, m = _means(scores)
    return Summary(p, r, m, len(scores), by_kind)


def sweep_weights(steps: int = SWEEP_STEPS) -> list[tuple[float, float]]:
    """Every (keyword, vector) weight pair from 0.0/1.0 to 1.0/0.0 in ``1/steps``."""
    return [(round(i / steps, 10), round(1 - i / steps, 10)) for i in range(steps + 1)]


def best_of(summaries: Iterable[tuple[Any, Summary]]) -> Any:
    """The label whose summary is best by recall@K, then MRR (the first among equals)."""
    best_label, best = None, None
    for label, summary in summaries:
        if best is None or (summary.recall_at_k, summary.mrr) > (best.recall_at_k, best.mrr):
            best_label, best = label, summary
    return best_label


def parse_questions(text: str, *, label: str = "questions") -> list[Question]:
    """The questions of a questions file's text, or ``QuestionsError`` naming the problem.

    The file is a JSON list of ``{"question": str, "relevant": [id, ...], "kind": str
    (optional), "filters": {key: value} (optional)}``; ids are strings as ``memtui records
    --json`` prints them (a number is taken as its decimal string).
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise QuestionsError(
            f"{label} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    if not isinstance(data, list) or not data:
        raise QuestionsError(f"{label} must be a non-empty JSON list of questions")
    return [_question(item, n, label) for n, item in enumerate(data, start=1)]


def _question(item: Any, n: int, label: str) -> Question:
    where = f"{label}, question {n}"
    if not isinstance(item, dict):
        raise QuestionsError(f"{where}: each question is an object with question and relevant")
    unknown = sorted(set(item) - {"question", "relevant", "kind", "filters"})
    if unknown:
        raise QuestionsError(
            f"{where}: unknown field {unknown[0]!r} (fields: question, relevant, kind, filters)"
        )
    text = item.get("question")
    if not isinstance(text, str) or not text.strip():
        raise QuestionsError(f"{where}: 'question' must be a non-empty string")
    if "relevant" not in item:
        raise QuestionsError(f"{where}: no 'relevant' list (the ids that answer it)")
    relevant = item["relevant"]
    if not isinstance(relevant, list) or not relevant:
        raise QuestionsError(f"{where}: 'relevant' must be a non-empty list of record ids")
    ids = []
    for rid in relevant:
        if isinstance(rid, bool) or not isinstance(rid, str | int) or str(rid).strip() == "":
            raise QuestionsError(f"{where}: a relevant id must be a string (or a number)")
        ids.append(str(rid))
    kind = item.get("kind")
    if kind is not None and not isinstance(kind, str):
        raise QuestionsError(f"{where}: 'kind' must be a string")
    filters = item.get("filters") or {}
    if not isinstance(filters, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in filters.items()
    ):
        raise QuestionsError(f"{where}: 'filters' must be an object of string values")
    return Question(text=text, relevant=tuple(dict.fromkeys(ids)), kind=kind, filters=filters)
