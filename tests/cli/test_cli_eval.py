"""``memtui eval`` end to end on the sample corpus and its labelled questions: the JSON
recomputes from its own ranked ids, each question runs the search ``memtui search``
runs, the sweep, the misses explained, and bad input refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, one_error_line

from memtui.cli import main
from memtui.core.evaluation import Question, score, summarize

QUESTIONS = ROOT / "sample_corpus" / "questions.json"
NOW = ["--now", "2026-11-30T12:00:00Z"]


def evaluated(runner, db, *args: str) -> dict:
    result = runner.invoke(main, ["eval", str(db), str(QUESTIONS), "--json", *NOW, *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_every_figure_recomputes_from_the_ranked_ids(runner, cli_db):
    data = evaluated(runner, cli_db)
    labels = json.loads(QUESTIONS.read_text())
    assert data["k"] == 3
    assert data["weights"] == {"keyword": 0.3, "vector": 0.7}
    assert set(data) == {"k", "weights", "keyword_only", "questions", "summary"}
    assert [q["question"] for q in data["questions"]] == [q["question"] for q in labels]
    scores = []
    for reported, label in zip(data["questions"], labels, strict=True):
        assert set(reported) == {
            "question",
            "kind",
            "ranked",
            "first_relevant_rank",
            "precision_at_k",
            "recall_at_k",
            "reciprocal_rank",
        }
        assert len(reported["ranked"]) >= 3
        question = Question(label["question"], tuple(label["relevant"]), label["kind"])
        again = score(question, reported["ranked"], 3)
        assert again.to_dict() == reported
        scores.append(again)
    assert summarize(scores).to_dict() == data["summary"]


def test_paraphrases_are_recalled_far_less_than_direct_questions(runner, cli_db):
    """The textbook's finding, on the sample corpus with the hashing embedder (which
    keeps vocabulary, not meaning): pinned so a ranking change shows here."""
    by_kind = evaluated(runner, cli_db)["summary"]["by_kind"]
    assert by_kind["direct"]["count"] == by_kind["paraphrase"]["count"] == 8
    assert by_kind["direct"]["recall_at_k"] == pytest.approx(0.729, abs=5e-4)
    assert by_kind["paraphrase"]["recall_at_k"] == pytest.approx(0.0625)
    assert by_kind["direct"]["mrr"] == pytest.approx(0.9375)


def test_each_question_ranks_as_memtui_search_does(runner, cli_db):
    data = evaluated(runner, cli_db, "--weights", "0.6,0.4")
    assert data["weights"] == {"keyword": 0.6, "vector": 0.4}
    for reported in data["questions"][:3] + data["questions"][-2:]:
        result = runner.invoke(
            main,
            ["search", str(cli_db), reported["question"], "--json", "--weights", "0.6,0.4", *NOW],
        )
        assert result.exit_code == 0, result.output
        ranked = [r["id"] for r in json.loads(result.output)["results"]]
        assert ranked == reported["ranked"]


def test_keyword_only_and_k(runner, cli_db):
    data = evaluated(runner, cli_db, "--keyword-only", "--k", "5")
    assert data["keyword_only"] is True and data["k"] == 5
    first = data["questions"][0]
    assert first["precision_at_k"] * 5 == pytest.approx(len(set(first["ranked"][:5]) & {"1", "19"}))


def test_sweep_reports_keyword_only_and_eleven_weight_pairs_and_the_best(runner, cli_db):
    data = evaluated(runner, cli_db, "--sweep")
    sweep = data["sweep"]
    assert [s["weights"] for s in sweep] == ["keyword-only"] + [
        [i / 10, round(1 - i / 10, 10)] for i in range(11)
    ]
    best = max(
        enumerate(sweep),
        key=lambda e: (e[1]["summary"]["recall_at_k"], e[1]["summary"]["mrr"], -e[0]),
    )[1]
    assert data["best"] == best["weights"]
    at_default = next(s for s in sweep if s["weights"] == [0.3, 0.7])
    assert at_default["summary"] == data["summary"]


def test_text_output_explains_each_miss(runner, cli_db):
    result = runner.invoke(main, ["eval", str(cli_db), str(QUESTIONS), "--sweep", *NOW])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "direct       precision@K 0.500  recall@K 0.729  MRR 0.938  (8 questions)" in out
    assert "miss: question 9: the product lookup can make the backend database pause" in out
    assert "relevant 1: not returned; terms in it: the; not in it: product, lookup" in out
    assert "miss: question 10: anyone can list the whole API schema" in out
    assert "adds up: yes" in out  # the breakdown of a relevant record returned below K
    assert "sweep (best by recall@3, then MRR)" in out
    assert "0.0 / 1.0  best" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("[{", "is not valid JSON"),
        ('[{"question": "sql injection"}]', "question 1: no 'relevant' list"),
        (
            '[{"question": "sql", "relevant": ["1"]}, {"question": "xss", "relevant": ["999"]}]',
            "question 2: relevant id '999' is not in",
        ),
        (
            '[{"question": "sql", "relevant": ["1"], "filters": {"colour": "red"}}]',
            "question 1: ",
        ),
        ('[{"question": "!!!", "relevant": ["1"]}]', "question 1: no word to search for"),
    ],
)
def test_bad_input_is_one_line_and_nothing_runs(runner, cli_db, tmp_path, content, message):
    path = tmp_path / "questions.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    result = runner.invoke(main, ["eval", str(cli_db), str(path), *NOW])
    line = one_error_line(result)
    assert message in line
    if "colour" in (content or ""):
        assert "colour" in line


def test_an_id_with_control_characters_is_named_escaped(runner, cli_db, tmp_path):
    path = tmp_path / "q.json"
    path.write_text(json.dumps([{"question": "sql", "relevant": ["x\x1b[31m"]}]))
    line = one_error_line(runner.invoke(main, ["eval", str(cli_db), str(path), *NOW]))
    assert "\x1b" not in line
    assert Path(path).exists()
