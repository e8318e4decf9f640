"""The Eval tab: a questions file run on the store exactly as ``memtui eval`` runs it.

A path box on top; the summary (P@K, R@K, MRR per kind, the weights); a table of the
questions (hit or miss at K, first relevant rank, the figures); ``enter`` on one shows
its ranked results, the relevant ones marked, each with its score breakdown. ``[`` and
``]`` move weight between the lanes and run every question again, ``=`` restores the
default weights. Each run goes through ``memtui.eval_run.run`` (the command's own) in
a worker that a newer run cancels between questions (and inside a search).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import RenderableType
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widget import Widget
from textual.widgets import DataTable, Input, Label, Static
from textual.worker import Worker, get_current_worker

from memtui.core.arithmetic import lane_places
from memtui.core.cancel import Cancelled
from memtui.core.evaluation import DEFAULT_K, Question, QuestionScore, QuestionsError
from memtui.eval_run import (
    Place,
    Run,
    Setting,
    base_request,
    check_against,
    read_questions,
    relevant_places,
    result_id,
    run,
)
from memtui.render import escape_controls, safe_text
from memtui.sources.base import MemorySource, SourceRecord
from memtui.tui.base import Pane
from memtui.tui.breakdown import render_breakdown
from memtui.tui.eval_format import (
    MIN_QUESTION_WIDTH,
    QUESTION_COLUMNS,
    detail,
    question_cells,
    question_heading,
    results_group,
    summary_text,
)
from memtui.tui.format import layout_columns
from memtui.tui.messages import QuestionChosen
from memtui.tui.search_results import id_width
from memtui.tui.search_status import DEFAULT_KEYWORD_TENTHS, weights_from_tenths
from memtui.tui.search_view import COMPACT_BELOW_HEIGHT

K = DEFAULT_K
"""The tab scores at ``memtui eval``'s default K."""
IDLE_HINT = "enter: a question's results · [ ] move weight (every question runs again) · = defaults"


class PathInput(Input):
    """The questions file's path: ``enter`` runs it; ``escape`` leaves for the questions."""

    BINDINGS = [
        Binding(
            "enter",
            "submit",
            "Run questions",
            tooltip="Read the questions file and run every question on this store",
            id="eval.path.run",
        ),
        Binding(
            "escape",
            "leave",
            "Leave box",
            key_display="esc",
            tooltip="Leave the path box for the questions (the digit keys switch tabs again)",
            id="eval.path.leave",
        ),
    ]

    running = False
    """Set by the Eval tab: while questions run, escape stops them instead (its binding)."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "leave":
            return not self.running
        return True

    def action_leave(self) -> None:
        self.screen.query_one(QuestionTable).focus()


class QuestionTable(DataTable):
    """The questions in file order; ``enter`` (or a click) shows one's ranked results."""

    BINDINGS = [
        Binding(
            "enter",
            "choose",
            "Results",
            tooltip="Show the question's ranked results (relevant ones marked) and breakdowns",
            id="eval.questions.results",
        ),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scores: list[QuestionScore] = []

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "choose":
            return True if self.scores else None
        return True

    def action_choose(self) -> None:
        if self.scores and 0 <= self.cursor_row < len(self.scores):
            self.post_message(QuestionChosen(self.cursor_row))

    @on(DataTable.RowSelected)
    def _clicked(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_choose()

    def show(self, scores: list[QuestionScore]) -> None:
        """The questions' rows (the cursor stays on its row); the question column takes
        the width the others leave."""
        self.scores = list(scores)
        row = self.cursor_row
        width = self.scrollable_content_region.width or self.size.width or 100
        columns, question_width = layout_columns(QUESTION_COLUMNS, width, MIN_QUESTION_WIDTH)
        self.clear(columns=True)
        for column in columns:
            label = f"top {K}" if column.key == "top" else column.label
            self.add_column(label, width=column.width, key=column.key)
        self.add_column("question", width=question_width, key="question")
        for n, scored in enumerate(self.scores, start=1):
            cells = question_cells(n, scored, question_width)
            self.add_row(*[cells[c.key] for c in columns], cells["question"], key=str(n))
        if self.scores:
            self.move_cursor(row=min(max(row, 0), len(self.scores) - 1), animate=False)
        self.refresh_bindings()


class EvalPane(Pane):
    """The path box, the summary, the questions and one question's results."""

    BINDINGS = [
        Binding(
            "left_square_bracket",
            "shift_weight(1)",
            "+keyword",
            key_display="[",
            tooltip="Move 0.1 of weight to the keyword lane and run every question again",
            id="eval.weight.keyword",
        ),
        Binding(
            "right_square_bracket",
            "shift_weight(-1)",
            "+vector",
            key_display="]",
            tooltip="Move 0.1 of weight to the vector lane and run every question again",
            id="eval.weight.vector",
        ),
        Binding(
            "equals_sign",
            "reset_weights",
            "Defaults",
            key_display="=",
            tooltip="Restore the default weights and run every question again",
            id="eval.weight.defaults",
        ),
        Binding(
            "escape",
            "stop",
            "Stop",
            tooltip="Stop the questions running (the figures shown stay those of the last run)",
            id="eval.stop",
        ),
    ]

    def __init__(
        self,
        source: MemorySource,
        *,
        embedder: Any = None,
        questions: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(source, **kwargs)
        self.embedder = embedder
        self.prefilled = questions or ""
        """The path the app was started with (``--questions``): run when first shown."""
        self.keyword_tenths = DEFAULT_KEYWORD_TENTHS
        self.path: Path | None = None
        self.questions: list[Question] = []
        self.result: Run | None = None
        """The last run shown (its weights are the summary's)."""
        self.running = False
        self.progress: tuple[int, int] | None = None
        self.error: str | None = None
        self.note: str | None = None
        self.chosen: int | None = None
        """The question whose results the detail shows."""
        self._generation = 0
        self._started = False
        self._detail_shown: int | None = None
        """The question whose results the detail shows now (None: a note)."""

    # -- layout

    def compose(self) -> ComposeResult:
        with Horizontal(id="eval-bar"):
            yield Label("questions", classes="field-label")
            yield PathInput(
                value=self.prefilled,
                placeholder="a questions file (JSON, as memtui eval reads it); enter runs it",
                id="eval-path",
            )
        yield Static(id="eval-status")
        yield Static(id="eval-summary")
        table = QuestionTable(id="eval-questions", cursor_type="row")
        table.border_title = "questions"
        yield table
        with VerticalScroll(id="eval-detail") as box:
            box.can_focus = True
            box.border_title = "a question's results"
            yield Static(
                Text("enter on a question shows its ranked results.", style="dim"),
                id="eval-detail-body",
            )

    @property
    def table(self) -> QuestionTable:
        return self.query_one(QuestionTable)

    @property
    def path_box(self) -> PathInput:
        return self.query_one(PathInput)

    def on_mount(self) -> None:
        if not self.query(QuestionTable):
            return  # the app closed while this (lazily mounted) tab was mounting
        self._show_status()

    def main_widget(self) -> Widget:
        return self.table if self.table.scores else self.path_box

    def tab_shown(self) -> None:
        super().tab_shown()
        if self.prefilled and not self._started:  # --questions FILE: run when first shown
            self._start(self.prefilled)

    def on_resize(self) -> None:
        compact = self.app.size.height < COMPACT_BELOW_HEIGHT
        self.path_box.compact = compact
        self.set_class(compact, "-compact")
        self.call_after_refresh(self._show_status)
        if self.result is not None:
            self.call_after_refresh(self.table.show, self.result.scores)

    # -- running

    @on(Input.Submitted, "#eval-path")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            self.notify("Type the path of a questions file.", severity="warning", timeout=3)
            return
        self._start(text)

    def _start(self, text: str) -> None:
        """Read the file at ``text`` and run it (a bad file: one line, nothing run)."""
        self._started = True
        self.path = Path(text)
        self.questions = []
        self.result = None
        self.chosen = None
        self.query_one("#eval-summary", Static).update("")
        self.table.show([])
        self._show_detail_note("enter on a question shows its ranked results.")
        self._run(focus=True)

    def _run(self, *, focus: bool = False) -> None:
        assert self.path is not None
        self._generation += 1
        self.running, self.progress, self.error, self.note = True, None, None, None
        self.path_box.running = True
        self.refresh_bindings()
        self._show_status()
        questions = list(self.questions) or None
        self._evaluate(self._generation, self.path, questions, self.keyword_tenths, focus)

    @work(thread=True, exclusive=True, group="eval", exit_on_error=False, name="Evaluating")
    def _evaluate(
        self,
        generation: int,
        path: Path,
        questions: list[Question] | None,
        keyword_tenths: int,
        focus: bool,
    ) -> None:
        source = self.source
        worker = get_current_worker()

        def progress(done: int, total: int) -> None:
            self.app.call_from_thread(self._show_progress, generation, done, total)

        try:
            if questions is None:
                questions = read_questions(path)
                check_against(source, questions, str(path))
            weights = None
            if keyword_tenths != DEFAULT_KEYWORD_TENTHS:
                shares = weights_from_tenths(keyword_tenths)
                weights = (shares["keyword"], shares["vector"])
            result = run(
                source,
                questions,
                Setting(weights, False),
                k=K,
                base=base_request(K, embedder=self.embedder),
                cancelled=lambda: worker.is_cancelled,
                progress=progress,
            )
        except QuestionsError as exc:
            self.app.call_from_thread(self._failed, generation, str(exc))
            return
        except Cancelled:
            return  # a newer run (another weight), or escape: nothing of this one is shown
        self.app.call_from_thread(self._apply, generation, questions, result, focus)

    def _show_progress(self, generation: int, done: int, total: int) -> None:
        if generation == self._generation and self.running:
            self.progress = (done, total)
            self._show_status()

    def _failed(self, generation: int, error: str) -> None:
        if generation != self._generation:
            return
        self._stopped_running()
        self.error = error
        self.questions, self.result = [], None
        self.query_one("#eval-summary", Static).update("")
        self.table.show([])
        self._show_status()

    def worker_failed(self, worker: Worker) -> None:
        if worker.group == "eval":
            self._stopped_running()
            self.error = f"the questions could not run: {worker.error}"
            self._show_status()

    def _stopped_running(self) -> None:
        self.running = False
        self.path_box.running = False
        self.refresh_bindings()

    def _apply(self, generation: int, questions: list[Question], result: Run, focus: bool) -> None:
        if generation != self._generation:
            return
        self._stopped_running()
        self.questions, self.result = questions, result
        self.stale = False
        self.query_one("#eval-summary", Static).update(summary_text(result, K))
        self.table.show(result.scores)
        self._show_status()
        if self.chosen is not None:
            self._load_detail(self._generation, self.chosen)
        if focus and (self.path_box.has_focus or self.app.focused is None):
            self.table.focus()

    def action_stop(self) -> None:
        if not self.running:
            return
        self.workers.cancel_group(self, "eval")
        self._generation += 1  # whatever the stopped worker still sends is dropped
        self._stopped_running()
        self.note = "stopped" + (
            ": the figures shown are those of the last run" if self.result else ""
        )
        self._show_status()

    def reload(self) -> None:
        """The store changed (F5, a change made here): read the file again and run it."""
        if self.path is not None and (self.result is not None or self.running):
            self.questions = []
            self._run()

    def database_changed(self, shown: bool) -> None:
        """Another process wrote: the figures stay (F5 re-runs) and the status says so."""
        if self.result is not None:
            self.note = "the store changed since this run: F5 (or ctrl+r) runs it again"
            self._show_status()

    # -- weights

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("shift_weight", "reset_weights"):
            return True if self.questions else None
        if action == "stop":
            return self.running
        return True

    def action_shift_weight(self, tenths: int) -> None:
        if not self.questions:
            return
        fallback = self.result.responses[0].trace.fallback if self.result else None
        if fallback:
            self.notify_once(
                "The vector lane did not run for these questions, so weights cannot move: "
                + escape_controls(str(fallback)),
                title="Keyword only",
                severity="warning",
                markup=False,
                timeout=5,
            )
            return
        new = min(10, max(0, self.keyword_tenths + tenths))
        if new == self.keyword_tenths:
            self.notify_once("The weights are already at the end of their range.", timeout=2)
            return
        self.keyword_tenths = new
        self._run()

    def action_reset_weights(self) -> None:
        if not self.questions:
            return
        self.keyword_tenths = DEFAULT_KEYWORD_TENTHS
        self._run()

    # -- one question's results

    @on(QuestionChosen)
    def _chosen(self, message: QuestionChosen) -> None:
        message.stop()
        if self.result is None or not 0 <= message.index < len(self.result.scores):
            return
        self.chosen = message.index
        self._show_detail_note(f"reading question {message.index + 1}'s results…")
        self._load_detail(self._generation, message.index)

    @work(thread=True, exclusive=True, group="eval-detail", exit_on_error=False, name="Explaining")
    def _load_detail(self, generation: int, index: int) -> None:
        result = self.result
        if result is None:
            return
        source = self.source
        scored, response = result.scores[index], result.responses[index]
        places = relevant_places(source, scored, response)
        records = source.get_many([result_id(r) for r in response.results])
        trace = response.trace
        explanations: dict[str, dict[str, Any]] = {}
        if trace.terms and not trace.keyword_lane_error:
            for item in response.results:
                if get_current_worker().is_cancelled:
                    return
                explanations[result_id(item)] = source.explain(
                    scored.question.text, result_id(item)
                )
        self.app.call_from_thread(
            self._show_detail, generation, index, result, places, records, explanations
        )

    def _show_detail(
        self,
        generation: int,
        index: int,
        result: Run,
        places: list[Place],
        records: dict[str, SourceRecord],
        explanations: dict[str, dict[str, Any]],
    ) -> None:
        if generation != self._generation or result is not self.result or index != self.chosen:
            return
        scored, response = result.scores[index], result.responses[index]
        box = self.query_one("#eval-detail", VerticalScroll)
        width = max(box.scrollable_content_region.width - 1, 20)
        candidates = response.candidates or response.results
        digits = lane_places(candidates, response.trace.pools)
        breakdowns: dict[str, RenderableType] = {
            result_id(item): render_breakdown(
                item, response.trace, explanations.get(result_id(item)), digits, width
            )
            for item in response.results
        }
        shown_ids = id_width([result_id(item) for item in response.results])
        heading = question_heading(index + 1, scored, K, places)
        body = results_group(response, scored, records, breakdowns, shown_ids)
        again = self._detail_shown == index  # the same question at other weights
        self._detail_shown = index
        box.border_title = f"question {index + 1}: its ranked results"
        self.query_one("#eval-detail-body", Static).update(detail(heading, body))
        if not again:
            box.scroll_home(animate=False)

    def _show_detail_note(self, note: str) -> None:
        self._detail_shown = None
        self.query_one("#eval-detail", VerticalScroll).border_title = "a question's results"
        self.query_one("#eval-detail-body", Static).update(Text(note, style="dim"))

    # -- status line

    def _show_status(self) -> None:
        self.query_one("#eval-status", Static).update(self.status_text())

    def status_text(self) -> Text:
        """One line: the error, the run in progress, a note, or what the keys do."""
        if self.error is not None:
            return safe_text(self.error, style="bold red")
        wanted = weights_from_tenths(self.keyword_tenths)
        at = f"keyword {wanted['keyword']:g} / vector {wanted['vector']:g}"
        if self.running:
            done, total = self.progress or (0, 0)
            counted = f" {done}/{total}" if total else ""
            return Text(f"running the questions at {at}…{counted}   esc stops", style="dim")
        if self.note is not None:
            return safe_text(self.note, style="yellow")
        if self.result is None:
            return Text("Type the path of a questions file and press enter.", style="dim")
        return Text(IDLE_HINT, style="dim")
