"""Retrieval by embedder on the sample questions: ``python -m benchmarks.semantic_eval``.

The sample corpus is ingested once per embedder (a fixed clock, as ``memtui demo``
and the tests build it): the built-in hashing embedder, ``hash-256``, the baseline
measured in the same run, and ``minilm`` (all-MiniLM-L6-v2, the ``semantic``
extra). Each store then answers ``sample_corpus/questions.json`` through the
function ``memtui eval`` runs (``memtui.eval_run.run``, the store's
recorded embedder embedding the queries), keyword only, hybrid at the default
weights, and vector only (weights 0 / 1). The table gives recall@K and MRR on the
direct questions, the paraphrases and all, each embedder's rows beside the
baseline's; a second table times the embedding beside the baseline's. Without the
extra, MiniLM's rows are left out and one line says how to install it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memtui.core.corpus import load_corpus
from memtui.core.embed import Embedder, EmbedderUnavailable, resolve_embedder
from memtui.core.evaluation import DEFAULT_K, Question, Summary
from memtui.core.search import SearchRequest
from memtui.core.search.request import DEFAULT_LIMIT
from memtui.core.store import MemoryStore
from memtui.eval_run import Run, Setting, check_against, read_questions, run
from memtui.sources import open_source

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "sample_corpus" / "memory-corpus.json"
QUESTIONS = ROOT / "sample_corpus" / "questions.json"
NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
BASELINE = "hash-256"
EMBEDDERS = (BASELINE, "minilm")
SETTINGS = (
    ("keyword only", Setting(None, True)),
    ("hybrid, default weights", Setting(None, False)),
    ("vector only (0 / 1)", Setting((0.0, 1.0), False)),
)
KINDS = ("direct", "paraphrase")


@dataclass
class Measured:
    """One embedder's store: how long its vectors took, and each setting's run."""

    name: str
    load_s: float
    ingest_s: float
    runs: list[tuple[str, Run, float]]
    """(setting, its run, the mean seconds of one search)"""


def _clock() -> datetime:
    return NOW


def measure(spec: str, folder: Path, questions: Sequence[Question], k: int, label: str) -> Measured:
    """Ingest the sample corpus with ``spec`` and run the questions every way."""
    embedder = resolve_embedder(spec)
    assert embedder is not None
    started = time.perf_counter()
    embedder(["load the model before the clock starts"])
    load_s = time.perf_counter() - started
    path = folder / f"sample-{spec}.db"
    rows = load_corpus(CORPUS)
    started = time.perf_counter()
    with MemoryStore(path, clock=_clock, embedder=embedder, operator="bench") as store:
        store.ingest(rows, source=CORPUS.name)
    ingest_s = time.perf_counter() - started
    base = SearchRequest("", limit=max(k, DEFAULT_LIMIT))
    runs = []
    with open_source(path, read_only=True, now=NOW.isoformat()) as source:
        check_against(source, questions, label)
        for setting_label, setting in SETTINGS:
            started = time.perf_counter()
            done = run(source, questions, setting, k=k, base=base)
            runs.append((setting_label, done, (time.perf_counter() - started) / len(questions)))
    return Measured(_name(embedder), load_s, ingest_s, runs)


def _name(embedder: Embedder) -> str:
    return embedder.name


def _cells(summary: Summary) -> list[str]:
    cells = []
    for kind in KINDS:
        part = summary.by_kind.get(kind)
        cells += [f"{part.recall_at_k:.3f}", f"{part.mrr:.3f}"] if part else ["-", "-"]
    return cells + [f"{summary.recall_at_k:.3f}", f"{summary.mrr:.3f}"]


def _delta(summary: Summary, base: Summary) -> str:
    """Recall and MRR on all questions against the baseline's same setting."""
    return (
        f"{summary.recall_at_k - base.recall_at_k:+.3f} / {summary.mrr - base.mrr:+.3f}"
        if summary is not base
        else "baseline"
    )


def quality_table(measured: Sequence[Measured], k: int, count: int) -> list[str]:
    lines = [
        f"## Retrieval on the sample questions: {count} questions, K = {k}",
        "",
        f"| embedder | lanes | direct R@{k} | direct MRR | paraphrase R@{k} | "
        f"paraphrase MRR | all R@{k} | all MRR | all vs {measured[0].name} (R / MRR) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    baseline = {label: r.summary for label, r, _ in measured[0].runs}
    keyword = measured[0].runs[0]
    lines.append(f"| none | {keyword[0]} | " + " | ".join(_cells(keyword[1].summary)) + " | - |")
    for m in measured:
        for label, r, _times in m.runs[1:]:
            summary = r.summary
            base = baseline[label] if m is not measured[0] else summary
            cells = _cells(summary) + [_delta(summary, base)]
            lines.append(f"| {m.name} | {label} | " + " | ".join(cells) + " |")
    return lines


def timing_table(measured: Sequence[Measured], records: int) -> list[str]:
    base = measured[0]
    lines = [
        "## Embedding cost (wall clock, this machine)",
        "",
        f"| embedder | first call (load) | ingest {records} records | "
        f"ingest vs {base.name} | one hybrid search (mean) | search vs {base.name} |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for m in measured:
        search, base_search = m.runs[1][2], base.runs[1][2]
        lines.append(
            f"| {m.name} | {m.load_s * 1000:.0f} ms | {m.ingest_s * 1000:.0f} ms | "
            f"{m.ingest_s / base.ingest_s:.1f}x | {search * 1000:.1f} ms | "
            f"{search / base_search:.1f}x |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.semantic_eval")
    parser.add_argument(
        "--embedders",
        default=",".join(EMBEDDERS),
        help=f"comma-separated, the first is the baseline (default {','.join(EMBEDDERS)})",
    )
    parser.add_argument("--k", type=int, default=DEFAULT_K)
    args = parser.parse_args(argv)
    specs = [s.strip() for s in args.embedders.split(",") if s.strip()]
    questions = read_questions(QUESTIONS)
    skipped: list[str] = []
    measured: list[Measured] = []
    with tempfile.TemporaryDirectory(prefix="memtui-semantic-eval-") as tmp:
        for spec in specs:
            try:
                measured.append(measure(spec, Path(tmp), questions, args.k, QUESTIONS.name))
            except EmbedderUnavailable as exc:
                skipped.append(f"{spec} skipped: {exc}")
    if not measured:
        print("\n".join(skipped), file=sys.stderr)
        return 1
    records = len(load_corpus(CORPUS))
    print(f"sample corpus: {records} records; {datetime.now(UTC):%Y-%m-%d}")
    print()
    print("\n".join(quality_table(measured, args.k, len(questions))))
    print()
    print("\n".join(timing_table(measured, records)))
    for line in skipped:
        print()
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
