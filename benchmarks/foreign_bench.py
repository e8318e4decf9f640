"""What the benchmarks of foreign stores (Chroma, LanceDB folders) share: interleaved
timing of memtui against its baseline, memtui's keyword lane against raw FTS5 on the
same index, and the table they print (each figure, its baseline, the ratio, the target).
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memtui.core.search import index_tokens, match_expression, sanitize_query
from memtui.core.search.keyword import keyword_lane
from memtui.core.store import FTS_TABLE
from memtui.sources import open_source

POOL = 100
RAW_FTS = (
    f"SELECT rowid, bm25({FTS_TABLE}) FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ? "
    f"ORDER BY bm25({FTS_TABLE}) LIMIT {POOL}"
)
RARE_RUNS = 200
"""Runs of a query that takes microseconds: a median of a few would move with every
hiccup of a shared machine."""


@dataclass
class Row:
    """One figure: memtui's median beside its baseline's, in seconds, and its target."""

    what: str
    ours: float
    base: float
    baseline: str
    target: str = "-"
    met: bool | None = None

    @property
    def ratio(self) -> float | None:
        return self.ours / self.base if self.base else None


def within(seconds: float) -> Callable[[Row], bool]:
    """A target of at most ``seconds``."""
    return lambda row: row.ours <= seconds


def at_most_times(ratio: float) -> Callable[[Row], bool]:
    """A target of at most ``ratio`` times the baseline."""
    return lambda row: row.ratio is not None and row.ratio <= ratio


def with_target(row: Row, target: str, check: Callable[[Row], bool]) -> Row:
    row.target = target
    row.met = check(row)
    return row


def timed(fn: Callable[..., Any], *args: Any) -> float:
    started = time.perf_counter()
    fn(*args)
    return time.perf_counter() - started


def interleaved(
    cases: Sequence[Any],
    ours: Callable[[Any], Any],
    base: Callable[[Any], Any],
    repeats: int,
) -> tuple[float, float]:
    """Medians (seconds) of ``ours(case)`` and ``base(case)`` over every case and repeat,
    alternating which runs first, after one warm-up run of each."""
    mine: list[float] = []
    theirs: list[float] = []
    for case in cases:
        ours(case)
        base(case)
    for repeat in range(repeats):
        for case in cases:
            if repeat % 2:
                mine.append(timed(ours, case))
                theirs.append(timed(base, case))
            else:
                theirs.append(timed(base, case))
                mine.append(timed(ours, case))
    return statistics.median(mine), statistics.median(theirs)


def keyword_rows(
    source: Any, queries: dict[str, str], repeats: int, rare_runs: int = RARE_RUNS
) -> list[Row]:
    """memtui's keyword lane on its index of the store against raw FTS5 top-100 by
    ``bm25()`` on the same index (its own read-only connection), per query class."""
    index = source.index.store()
    raw = sqlite3.connect(f"file:{source.index.path}?mode=ro", uri=True)
    rows = []
    try:
        for name, query in queries.items():
            match = match_expression(index_tokens(index, sanitize_query(query)))
            matched = keyword_lane(index, match, None, POOL)[2]
            runs = repeats if matched > POOL else max(repeats, rare_runs)
            ours, base = interleaved(
                [match],
                lambda m: keyword_lane(index, m, None, POOL),
                lambda m: raw.execute(RAW_FTS, (m,)).fetchall(),
                runs,
            )
            rows.append(
                with_target(
                    Row(
                        f"keyword lane, {name} ({matched:,} match)",
                        ours,
                        base,
                        "raw FTS5 top-100 by bm25()",
                    ),
                    "<= 1.3x",
                    at_most_times(1.3),
                )
            )
    finally:
        raw.close()
    return rows


def print_rows(rows: Sequence[Row]) -> None:
    print(
        f"{'what':50} {'memtui':>10} {'baseline':>10} {'ratio':>8} {'target':>9} {'met':>4}"
        "  baseline is"
    )
    for row in rows:
        ratio = f"{row.ratio:.2f}x" if row.ratio is not None else "-"
        met = "-" if row.met is None else ("yes" if row.met else "no")
        base = f"{row.base * 1000:8.2f}ms" if row.base else f"{'-':>10}"
        print(
            f"{row.what:50} {row.ours * 1000:8.2f}ms {base} {ratio:>8} {row.target:>9} {met:>4}"
            f"  {row.baseline}"
        )


def first_screen_row(
    folder: Any, cache: Any, raw: Callable[[], Any], baseline: str, repeats: int
) -> Row:
    """What the app shows first (open, the tier counts live and with hidden, 100 rows)
    against ``raw``, a new connection's count and first rows."""

    def first_screen(_case: Any) -> None:
        with open_source(folder, cache_root=cache) as source:
            source.tier_counts()
            source.tier_counts(include_hidden=True)
            source.page(limit=100)

    ours, base = interleaved([None], first_screen, lambda _c: raw(), repeats)
    row = Row("first screen (open, tier counts, 100 rows)", ours, base, baseline)
    return with_target(row, "< 1 s", within(1.0))
