"""The retrieval figures of ``memtui eval`` on hand-worked cases, and the questions file's
validation: every figure is a function of the ranked ids, the labels and K."""

from __future__ import annotations

import pytest

from memtui.core.evaluation import (
    Question,
    QuestionsError,
    best_of,
    parse_questions,
    score,
    summarize,
    sweep_weights,
)


def q(*relevant: str, kind: str | None = None) -> Question:
    return Question(text="a question", relevant=tuple(relevant), kind=kind)


def test_first_relevant_at_rank_two_gives_reciprocal_rank_one_half():
    s = score(q("b"), ["a", "b", "c"], k=3)
    assert s.first_relevant_rank == 2
    assert s.reciprocal_rank == 0.5
    assert s.precision_at_k == pytest.approx(1 / 3)
    assert s.recall_at_k == 1.0
    assert s.hit


def test_two_relevant_one_in_the_top_three_gives_recall_one_half():
    s = score(q("a", "z"), ["a", "b", "c", "z"], k=3)
    assert s.recall_at_k == 0.5
    assert s.precision_at_k == pytest.approx(1 / 3)
    assert s.first_relevant_rank == 1 and s.reciprocal_rank == 1.0


def test_a_relevant_record_below_k_counts_for_the_rank_not_for_precision_or_recall():
    s = score(q("d"), ["a", "b", "c", "d"], k=3)
    assert (s.first_relevant_rank, s.reciprocal_rank) == (4, 0.25)
    assert (s.precision_at_k, s.recall_at_k) == (0.0, 0.0)
    assert not s.hit


def test_none_returned_gives_no_rank_and_zeros():
    s = score(q("x"), [], k=3)
    assert s.first_relevant_rank is None
    assert (s.precision_at_k, s.recall_at_k, s.reciprocal_rank) == (0.0, 0.0, 0.0)
    assert s.to_dict()["first_relevant_rank"] is None


def test_precision_divides_by_k_even_when_fewer_are_returned():
    assert score(q("a"), ["a"], k=3).precision_at_k == pytest.approx(1 / 3)
    assert score(q("a", "b"), ["a", "b"], k=2).precision_at_k == 1.0


def test_k_must_be_positive():
    with pytest.raises(ValueError):
        score(q("a"), ["a"], k=0)


def test_summary_means_overall_and_by_kind():
    scores = [
        score(q("a", kind="direct"), ["a", "b", "c"], k=3),  # RR 1, R 1, P 1/3
        score(q("b", kind="direct"), ["a", "b", "c"], k=3),  # RR 1/2, R 1, P 1/3
        score(q("z", kind="paraphrase"), ["a", "b", "c", "z"], k=3),  # RR 1/4, R 0, P 0
        score(q("a"), ["c", "b", "a"], k=3),  # no kind: overall only; RR 1/3
    ]
    summary = summarize(scores)
    assert summary.count == 4
    assert summary.mrr == pytest.approx((1 + 0.5 + 0.25 + 1 / 3) / 4)
    assert summary.recall_at_k == pytest.approx(3 / 4)
    assert summary.precision_at_k == pytest.approx((1 / 3 + 1 / 3 + 0 + 1 / 3) / 4)
    assert list(summary.by_kind) == ["direct", "paraphrase"]
    assert summary.by_kind["direct"].mrr == pytest.approx(0.75)
    assert summary.by_kind["paraphrase"].recall_at_k == 0.0
    assert summary.by_kind["paraphrase"].count == 1
    out = summary.to_dict()
    assert set(out) == {"precision_at_k", "recall_at_k", "mrr", "count", "by_kind"}
    assert set(out["by_kind"]["direct"]) == {"precision_at_k", "recall_at_k", "mrr", "count"}


def test_empty_summary_is_zero_not_an_error():
    assert summarize([]).to_dict() == {
        "precision_at_k": 0.0,
        "recall_at_k": 0.0,
        "mrr": 0.0,
        "count": 0,
    }


def test_sweep_weights_go_from_all_vector_to_all_keyword_in_tenths():
    pairs = sweep_weights()
    assert len(pairs) == 11
    assert pairs[0] == (0.0, 1.0) and pairs[-1] == (1.0, 0.0)
    assert pairs[3] == (0.3, 0.7)
    assert all(abs(kw + vec - 1) < 1e-12 for kw, vec in pairs)


def test_best_is_by_recall_then_mrr_first_among_equals():
    def summary(*pairs):
        return summarize([score(q(rel), ranked, k=1) for rel, ranked in pairs])

    low = summary(("a", ["b", "a"]))  # R 0, RR 0.5
    high_recall = summary(("a", ["a"]))  # R 1, RR 1
    same_recall_lower_mrr = summarize([score(q("a", "b"), ["a", "c", "b"], k=1)])  # R 0.5, RR 1
    assert best_of([("low", low), ("high", high_recall), ("tie", high_recall)]) == "high"
    assert best_of([("half", same_recall_lower_mrr), ("low", low)]) == "half"
    assert best_of([]) is None


def test_parse_questions_reads_ids_as_strings_and_keeps_kind_and_filters():
    questions = parse_questions(
        '[{"question": "sql", "relevant": [1, "2", 1], "kind": "direct",'
        ' "filters": {"engagement": "acme"}}]'
    )
    assert questions == [Question("sql", ("1", "2"), "direct", {"engagement": "acme"})]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[", "is not valid JSON (line 1, column 2"),
        ("{}", "must be a non-empty JSON list"),
        ("[]", "must be a non-empty JSON list"),
        ('["sql"]', "question 1: each question is an object"),
        ('[{"question": "sql"}]', "question 1: no 'relevant' list"),
        ('[{"question": "sql", "relevant": []}]', "'relevant' must be a non-empty list"),
        ('[{"question": "", "relevant": ["1"]}]', "'question' must be a non-empty string"),
        ('[{"question": "a", "relevant": [true]}]', "a relevant id must be a string"),
        ('[{"question": "a", "relevant": ["1"], "kind": 3}]', "'kind' must be a string"),
        ('[{"question": "a", "relevant": ["1"], "filters": [1]}]', "'filters' must be an object"),
        ('[{"question": "a", "relevant": ["1"], "rel": 1}]', "unknown field 'rel'"),
    ],
)
def test_bad_questions_files_are_named_in_one_line(text, message):
    with pytest.raises(QuestionsError) as caught:
        parse_questions(text, label="q.json")
    assert message in str(caught.value)
    assert str(caught.value).startswith("q.json")
    assert "\n" not in str(caught.value)
