"""The Eval tab: its figures are ``memtui eval --json``'s at the same weights, a bad
file is one line with nothing run, a newer run cancels the one still going, and a
question's results mark the relevant records and carry their breakdowns."""

from __future__ import annotations

import io
import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console
from rich.text import Text
from textual.widgets import Static
from textual.worker import WorkerState

from memtui.cli import main
from memtui.core.evaluation import Question, score
from memtui.core.store import MemoryStore
from memtui.eval_run import Run, Setting
from memtui.tui.app import make_app
from memtui.tui.eval_format import (
    HIT,
    MISS,
    RELEVANT_MARK,
    question_cells,
    summary_text,
)
from memtui.tui.eval_view import EvalPane, QuestionTable
from memtui.tui.testing import build_sample_db, fixed_clock, screen_text, settle, wait_for

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = ROOT / "sample_corpus" / "questions.json"
SIZE = (120, 40)
FIGURES = re.compile(
    r"^\s*(\S+)\s+precision@K (\d\.\d{3})  recall@K (\d\.\d{3})  MRR (\d\.\d{3})  "
    r"\((\d+) questions?\)"
)
COLUMNS = ("n", "kind", "top", "rank", "p", "r", "rr", "question")


@pytest.fixture(scope="module")
def sample_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One sample database for the module: the tab only reads it."""
    return build_sample_db(tmp_path_factory.mktemp("eval") / "sample.db")


def cli_eval(db: Path, *args: str) -> dict[str, Any]:
    """``memtui eval DB QUESTIONS --json`` as the command line runs it."""
    result = CliRunner().invoke(
        main,
        ["eval", str(db), str(QUESTIONS), "--json", "--now", "2026-11-30T12:00:00Z", *args],
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def expected_summary(data: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """The summary lines' figures as the tab must print them (three places)."""

    def line(summary: dict[str, Any]) -> tuple[str, ...]:
        return (
            f"{summary['precision_at_k']:.3f}",
            f"{summary['recall_at_k']:.3f}",
            f"{summary['mrr']:.3f}",
            str(summary["count"]),
        )

    out = {"all": line(data["summary"])}
    out.update({kind: line(s) for kind, s in data["summary"]["by_kind"].items()})
    return out


def expected_rows(data: dict[str, Any]) -> list[list[str]]:
    return [
        [
            str(n),
            q["kind"] or "",
            HIT if q["recall_at_k"] > 0 else MISS,
            str(q["first_relevant_rank"]) if q["first_relevant_rank"] else "not returned",
            f"{q['precision_at_k']:.3f}",
            f"{q['recall_at_k']:.3f}",
            f"{q['reciprocal_rank']:.3f}",
            q["question"],
        ]
        for n, q in enumerate(data["questions"], start=1)
    ]


def shown_summary(app) -> tuple[str, dict[str, tuple[str, ...]]]:
    """The summary as it is on screen: its first line and each figures line."""
    lines = screen_text(app).splitlines()
    figures = {}
    for line in lines:
        found = FIGURES.match(line)
        if found:
            figures[found.group(1)] = found.groups()[1:]
    header = next(line.strip() for line in lines if " questions, K = " in line)
    return header, figures


def shown_rows(app) -> list[list[str]]:
    """Every row the questions table holds, cell by cell (the question cut to fit)."""
    table = app.query_one(QuestionTable)
    rows = []
    for index in range(table.row_count):
        rows.append([cell.plain.rstrip("…") for cell in table.get_row_at(index)])
    return rows


def assert_agrees(app, data: dict[str, Any]) -> None:
    """Every figure of the tab is the command's: header, summary lines, each row."""
    header, figures = shown_summary(app)
    weights = data["weights"]
    assert header == (
        f"{len(data['questions'])} questions, K = {data['k']}, weights keyword "
        f"{weights['keyword']:g} / vector {weights['vector']:g}"
    )
    assert figures == expected_summary(data)
    rows = shown_rows(app)
    expected = expected_rows(data)
    assert len(rows) == len(expected) == 16
    for row, want in zip(rows, expected, strict=True):
        assert row[:-1] == want[:-1]
        assert want[-1].startswith(row[-1]) and len(row[-1]) >= 20  # cut to fit, at most


async def run_questions(pilot, path: Path | str) -> None:
    box = pilot.app.query_one("#eval-path")
    box.value = str(path)
    box.focus()
    await pilot.press("enter")
    await settle(pilot)


def status(app) -> str:
    return str(app.query_one("#eval-status").render())


async def test_the_tab_shows_the_commands_figures_at_every_weight(sample_path: Path):
    at_default = cli_eval(sample_path)
    at_02 = cli_eval(sample_path, "--weights", "0.2,0.8")
    at_10 = cli_eval(sample_path, "--weights", "1.0,0.0")
    assert expected_summary(at_10) != expected_summary(at_default)  # the test can tell
    bad = sample_path.parent / "bad.json"
    bad.write_text('[{"question": "graphql", "relevant": ["12"]},]')
    refused = CliRunner().invoke(main, ["eval", str(sample_path), str(bad)])
    assert refused.exit_code == 1
    with MemoryStore(sample_path, clock=fixed_clock, operator="tester") as store:
        app = make_app(store, check_on_start=False, poll_interval=None)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("5")
            await settle(pilot)
            pane = app.query_one(EvalPane)
            assert app.focused is pane.path_box
            # A bad file: the command's one line, nothing run, nothing shown.
            await run_questions(pilot, bad)
            assert status(app) == refused.output.strip().removeprefix("Error: ")
            assert pane.result is None and app.query_one(QuestionTable).row_count == 0
            assert " questions, K = " not in screen_text(app)

            await run_questions(pilot, QUESTIONS)
            assert app.focused is app.query_one(QuestionTable)
            assert_agrees(app, at_default)
            await pilot.press("right_square_bracket")  # 0.2 / 0.8
            await settle(pilot)
            assert_agrees(app, at_02)
            # Eight more steps at once (as fast as keys can come): each run cancels the
            # one before it, and only the last one's figures show.
            before = set(app.workers)
            for _ in range(8):
                pane.action_shift_weight(1)
            runs = [w for w in app.workers if w.group == "eval" and w not in before]
            await settle(pilot)
            assert len(runs) == 8
            assert [w.is_cancelled for w in runs] == [True] * 7 + [False]
            assert_agrees(app, at_10)
            await pilot.press("equals_sign")
            await settle(pilot)
            assert_agrees(app, at_default)
            # A question's results follow the weights, where the reader had scrolled to.
            app.query_one(QuestionTable).move_cursor(row=9)  # the tenth, without 9 keys
            await pilot.press("enter")
            await settle(pilot)
            box = app.query_one("#eval-detail")
            box.scroll_to(y=20, animate=False)
            await settle(pilot)
            assert "× 0.3 = " in detail_text(app) and "× 0.2 = " not in detail_text(app)
            await pilot.press("right_square_bracket")
            await settle(pilot)
            assert "× 0.2 = " in detail_text(app) and box.scroll_y == 20


def detail_text(app) -> str:
    """The detail's whole content (scrolled or not) as the terminal would show it."""
    body = app.query_one("#eval-detail-body", Static)
    console = Console(width=116, record=True, file=io.StringIO())
    console.print(body.content)
    return console.export_text()


async def test_results_of_a_question_and_a_run_cancelled_or_stopped(
    sample_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Question 10 (a paraphrase) misses: relevant 12 is at rank 7, 32 not returned; its
    results mark 12 and each carry a breakdown. Then a run held at its first search is
    cancelled by the next key, and escape stops that one: the figures shown stay those
    of the last run that finished."""
    with MemoryStore(sample_path, clock=fixed_clock, operator="tester") as store:
        app = make_app(store, check_on_start=False, poll_interval=None, questions=str(QUESTIONS))
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("5")  # --questions: it runs when first shown
            await settle(pilot)
            pane = app.query_one(EvalPane)
            assert pane.path_box.value == str(QUESTIONS)
            first = pane.result
            assert first is not None and len(first.scores) == 16
            app.query_one(QuestionTable).move_cursor(row=9)  # the tenth, without 9 keys
            await pilot.press("enter")
            await settle(pilot)
            assert "question 10: its ranked results" in screen_text(app)
            text = detail_text(app)
            assert f"{RELEVANT_MARK} relevant 12: rank 7; terms in it: the, schema, on" in text
            assert f"{RELEVANT_MARK} relevant 32: not returned;" in text
            lines = text.splitlines()
            lines = lines[next(i for i, line in enumerate(lines) if "marks a relevant" in line) :]
            response = first.responses[9]
            for result in response.results:
                pattern = rf"^[ {RELEVANT_MARK}] +{result.rank} \d\.\d{{4}} "
                line = next(line for line in lines if re.search(pattern, line))
                assert line.startswith(RELEVANT_MARK) == (result.id in {"12", "32"}), line
                assert f"#{result.id}" in line
            assert text.count("adds up") == len(response.results) == 10

            gate, held = threading.Event(), threading.Event()
            search = app.source.search

            def held_search(request):
                held.set()
                gate.wait(10)
                return search(request)

            monkeypatch.setattr(app.source, "search", held_search)
            await pilot.press("right_square_bracket")
            await wait_for(pilot, held.is_set, what="the run to start its first search")
            running = [w for w in app.workers if w.group == "eval" and w.is_running]
            assert len(running) == 1
            assert "running the questions at keyword 0.2 / vector 0.8" in status(app)
            held.clear()
            await pilot.press("right_square_bracket")  # 0.1 / 0.9: the 0.2 run is cancelled
            assert running[0].is_cancelled
            await wait_for(pilot, held.is_set, what="the newer run to start")
            await pilot.press("escape")
            assert "stopped" in status(app)
            gate.set()
            await settle(pilot)
            assert running[0].state is WorkerState.CANCELLED
            assert pane.result is first  # neither run's figures replaced the shown ones
            assert shown_summary(app)[0].endswith("weights keyword 0.3 / vector 0.7")
            assert "the figures shown are those of the last run" in status(app)
            # Another process wrote: the figures stay, the status line says so (F5 re-runs).
            app.database_changed()
            await settle(pilot)
            assert pane.result is first
            assert "the store changed since this run: F5" in status(app)


def test_rows_and_summary_render_the_figures_and_inert_text():
    """The pure renderers: figures at three places, "not returned", and hostile text
    (markup, an escape sequence) shown as written, never interpreted."""
    hostile = Question("[bold red]drop[/] \x1b[31mtables", ("1", "2"), kind="[i]k\x07")
    missed = score(hostile, ["9", "8", "7"], 3)
    hit = score(Question("graphql introspection", ("12",), kind="direct"), ["4", "12"], 3)
    cells = question_cells(2, missed)
    assert [cells[key].plain for key in COLUMNS] == [
        "2",
        "[i]k\\x07",
        MISS,
        "not returned",
        "0.000",
        "0.000",
        "0.000",
        "[bold red]drop[/] \\x1b[31mtables",
    ]
    assert [question_cells(1, hit)[key].plain for key in COLUMNS[2:7]] == [
        HIT,
        "2",
        "0.333",
        "1.000",
        "0.500",
    ]
    run = Run(Setting(None, False), [hit, missed], [], {"keyword": 0.3, "vector": 0.7}, False)
    text = summary_text(run, 3)
    assert isinstance(text, Text)
    assert text.plain.splitlines() == [
        "2 questions, K = 3, weights keyword 0.3 / vector 0.7",
        "all          precision@K 0.167  recall@K 0.500  MRR 0.250  (2 questions)",
        "[i]k\\x07     precision@K 0.000  recall@K 0.000  MRR 0.000  (1 question)",
        "direct       precision@K 0.333  recall@K 1.000  MRR 0.500  (1 question)",
    ]  # the kinds in sorted order, as the command prints them


def test_questions_option_and_the_demo_fill_in_the_path_box(sample_path: Path, monkeypatch):
    """``memtui STORE --questions FILE`` hands FILE to the Eval tab; ``memtui demo`` hands
    it the sample questions."""
    from memtui.tui.app import MemtuiApp

    seen: list[str | None] = []
    monkeypatch.setattr(MemtuiApp, "run", lambda self: seen.append(self.questions))
    monkeypatch.setenv("XDG_DATA_HOME", str(sample_path.parent / "data"))
    runner = CliRunner()
    opened = runner.invoke(main, [str(sample_path), "--questions", "my-questions.json"])
    assert opened.exit_code == 0, opened.output
    demo = runner.invoke(main, ["demo", "--db", str(sample_path.parent / "demo.db")])
    assert demo.exit_code == 0, demo.output
    assert seen == ["my-questions.json", str(QUESTIONS)]


def test_a_questions_heading_is_inert_and_says_where_each_relevant_record_is():
    from memtui.eval_run import Place
    from memtui.tui.eval_format import question_heading

    question = Question("[link=x]why[/link]\u202e\x1b]8;;", ("a\x1bb", "7"), kind="direct")
    scored = score(question, ["7", "1"], 3)
    places = [
        Place("a\x1bb", None, [], ["why"], {}),
        Place("7", 1, ["why"], [], {}),
    ]
    text = question_heading(4, scored, 3, places).plain
    assert "\x1b" not in text and "\u202e" not in text
    assert text.splitlines() == [
        f"question 4  direct  {HIT} at K = 3  ·  first relevant rank 1",
        "[link=x]why[/link]\\u202e\\x1b]8;;",
        f"{RELEVANT_MARK} relevant a\\x1bb: not returned; terms in it: none; not in it: why",
        f"{RELEVANT_MARK} relevant 7: rank 1; terms in it: why",
    ]
