"""A LanceDB table as memtui reads it: ``python -m benchmarks.lancedb_source --rows 100000``.

The real ``lancedb`` writes a crewAI-shaped ``memories`` table of N rows (crewAI 1.x's
columns, deterministic hashing vectors, no model; ``--folder DIR`` keeps it there and
reuses it), in batches of 10,000 as an agent's writes and crewAI's compaction leave
them. Each figure is set beside a baseline measured in the same run on the same
table, interleaved: the first screen (open, the tier counts, 100 rows) beside a raw
``lance.dataset`` open, ``count_rows`` and the first 100 rows; the scope facets
beside a pyarrow ``group_by`` of the scope columns; a page beside a raw
offset/limit read; memtui's keyword lane beside raw FTS5 top-100 on memtui's own
index of the table; a keyword search end to end beside raw FTS5 plus a lance read
of those rows; the vector lane beside lance's own exact nearest-neighbour scan
(``nearest``, no index, k 100); a get beside a lance filter on ``id``; a verified
forget (delete, fragments rewritten, old versions removed, every file checked)
beside lancedb's own ``delete`` on a copy, which leaves the row in its file.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from benchmarks.foreign_bench import (
    RARE_RUNS,
    RAW_FTS,
    Row,
    at_most_times,
    first_screen_row,
    interleaved,
    keyword_rows,
    print_rows,
    timed,
    with_target,
    within,
)
from memtui.core.embed import HashEmbedder
from memtui.core.search import index_tokens, match_expression, sanitize_query
from memtui.core.search.vector import vector_lane
from memtui.sources import open_source

TABLE = "memories"
DIMS = 32
BATCH = 10_000
SCOPE_COLUMNS = ["scope", "categories_str", "source"]
CATEGORIES = ("notes", "deploy", "research", "ops", "people")


def memory_id(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def content(n: int) -> str:
    return f"memory {n} about topic{n % 97} with word{n % 1013} and tag{n % 31}"


def crewai_row(n: int, embed: HashEmbedder) -> dict[str, Any]:
    """One row as crewAI 1.x's ``LanceDBStorage`` writes it."""
    text = content(n)
    return {
        "id": memory_id(n),
        "content": text,
        "scope": f"/crew/team{n % 20}",
        "categories_str": json.dumps([CATEGORIES[n % 5], CATEGORIES[(n // 5) % 5]]),
        "metadata_str": json.dumps({"agent": f"agent-{n % 8}"}),
        "importance": 0.5 + (n % 500) / 1000,
        "created_at": f"2026-11-{1 + n % 28:02d}T10:{n % 60:02d}:00",
        "last_accessed": "2026-11-30T12:00:00",
        "source": "task" if n % 5 else "user",
        "private": n % 10 == 0,
        "vector": [float(x) for x in embed.embed_one(text)],
    }


def build(folder: Path, count: int) -> float:
    import lancedb

    started = time.perf_counter()
    embed = HashEmbedder(DIMS)
    db = lancedb.connect(str(folder))
    table = None
    for start in range(0, count, BATCH):
        rows = [crewai_row(n, embed) for n in range(start, min(count, start + BATCH))]
        if table is None:
            table = db.create_table(TABLE, rows)
        else:
            table.add(rows)
    return time.perf_counter() - started


def folder_for(where: Path, count: int) -> tuple[Path, float | None]:
    """The database of ``count`` rows under ``where``, written unless it is there (None:
    reused)."""
    folder = where / f"lancedb-{count}"
    done = where / f"lancedb-{count}.complete"
    if done.exists():
        return folder, None
    shutil.rmtree(folder, ignore_errors=True)
    wrote = build(folder, count)
    done.write_text("written by benchmarks.lancedb_source\n", encoding="ascii")
    return folder, wrote


def queries(count: int) -> dict[str, str]:
    """A 2-term query matching about 3% of the rows, and one of one row's rarest words."""
    k = count // 3
    return {"2 terms, common": "memory tag3", "2 terms, rare": f"topic{k % 97} word{k % 1013}"}


def dataset(folder: Path) -> Any:
    import lance

    return lance.dataset(str(folder / f"{TABLE}.lance"))


def raw_first_screen(folder: Path) -> None:
    data = dataset(folder)
    data.count_rows()
    data.to_table(limit=100)


def raw_facets(data: Any) -> None:
    import pyarrow as pa  # type: ignore[import-untyped]

    table = data.to_table(columns=SCOPE_COLUMNS)
    for column in SCOPE_COLUMNS:
        pa.table({column: table.column(column)}).group_by(column).aggregate([([], "count_all")])


def raw_search(index: Any, data: Any, match: str) -> None:
    """Raw FTS5 top-100 on memtui's index, then those rows read from the table by id."""
    ids = [
        str(r[0]).partition(":")[2]
        for r in index.execute(
            f"SELECT r.source_id FROM ({RAW_FTS}) AS f JOIN records AS r ON r.id = f.rowid",
            (match,),
        ).fetchall()
    ]
    if ids:
        quoted = ", ".join(f"'{i}'" for i in ids)
        data.to_table(filter=f"id IN ({quoted})")


def measure(
    folder: Path, count: int, repeats: int, cache: Path, rare_runs: int = RARE_RUNS
) -> list[Row]:
    import sqlite3

    rows: list[Row] = []

    rows.append(
        first_screen_row(
            folder,
            cache,
            lambda: raw_first_screen(folder),
            "lance.dataset + count_rows + 100 rows",
            repeats,
        )
    )
    data = dataset(folder)
    with open_source(folder, cache_root=cache) as source:

        def first_facets(_case: Any) -> None:
            # a first look: the snapshot keeps its counts until the table changes
            source._current()._facets = None
            source.facets()

        ours, base = interleaved([None], first_facets, lambda _c: raw_facets(data), repeats)
        rows.append(
            with_target(
                Row("scope facets (the tree's counts)", ours, base, "pyarrow group_by per column"),
                "< 300 ms",
                within(0.3),
            )
        )
        middle = f"lance:{memory_id(count // 2 - 1)}"  # ids sort as their numbers
        ours, base = interleaved(
            [None],
            lambda _c: source.page(after=middle, limit=100),
            lambda _c: data.to_table(offset=count // 2, limit=100),
            repeats,
        )
        rows.append(
            with_target(
                Row("page of 100 after the middle", ours, base, "lance offset/limit read"),
                "< 50 ms",
                within(0.05),
            )
        )
        key = memory_id(count // 3)
        ours, base = interleaved(
            [None],
            lambda _c: source.get(f"lance:{key}"),
            lambda _c: data.to_table(filter=f"id = '{key}'"),
            repeats,
        )
        rows.append(
            with_target(
                Row("get one row by id", ours, base, "lance filter id = ..."),
                "< 50 ms",
                within(0.05),
            )
        )
        build = timed(source.build_index)
        rows.extend(keyword_rows(source, queries(count), repeats, rare_runs))
        index = sqlite3.connect(f"file:{source.index.path}?mode=ro", uri=True)
        try:
            for name, query in queries(count).items():
                match = match_expression(index_tokens(source.index.store(), sanitize_query(query)))
                ours, base = interleaved(
                    [match],
                    lambda _m, q=query: source.search(q, keyword_only=True, limit=100),
                    lambda m: raw_search(index, data, m),
                    repeats if name.endswith("common") else max(repeats, rare_runs),
                )
                rows.append(
                    Row(
                        f"keyword search, {name}, 100 results",
                        ours,
                        base,
                        "raw FTS5 top-100 + a lance read of those rows",
                    )
                )
        finally:
            index.close()
        rows.append(vector_row(source, data, repeats))
        rows.append(Row("memtui's index, first build", build, 0.0, "-"))
    return rows


def vector_row(source: Any, data: Any, repeats: int) -> Row:
    """The vector lane on the table's own vectors (memtui's matrix of them) beside lance's
    exact nearest-neighbour scan of the same column."""
    import numpy as np

    embed = HashEmbedder(DIMS)
    query = [float(x) for x in embed.embed_one("deploy window for topic7")]
    index = source.index.store()
    vector_lane(index, query, None, 100)  # the matrix is built once, then kept
    q = np.asarray(query, dtype=np.float32)
    ours, base = interleaved(
        [None],
        lambda _c: vector_lane(index, query, None, 100),
        lambda _c: data.to_table(
            columns=["id", "_distance"],
            nearest={"column": "vector", "q": q, "k": 100, "metric": "cosine", "use_index": False},
        ),
        repeats,
    )
    return with_target(
        Row("vector lane, top 100 by cosine", ours, base, "lance nearest, exact, k 100"),
        "<= 1.3x",
        at_most_times(1.3),
    )


def forget_rows(folder: Path, work: Path, cache: Path, count: int) -> list[Row]:
    import lancedb

    ours = work / "forget"
    theirs = work / "plain"
    shutil.copytree(folder, ours)
    shutil.copytree(folder, theirs)
    key = memory_id(count // 2)
    with open_source(ours, allow_writes=True, cache_root=cache) as source:
        started = time.perf_counter()
        outcome = source.forget(f"lance:{key}", reason="benchmark", operator="bench")
        forget = time.perf_counter() - started
        assert outcome.verified, outcome
    started = time.perf_counter()
    lancedb.connect(str(theirs)).open_table(TABLE).delete(f"id = '{key}'")
    plain = time.perf_counter() - started
    return [Row("forget, verified", forget, plain, "lancedb's delete (leaves the row on file)")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lancedb_source")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--folder", type=Path, help="keep the written database here and reuse it on later runs"
    )
    parser.add_argument("--skip-forget", action="store_true")
    parser.add_argument(
        "--rare-runs", type=int, default=RARE_RUNS, help="runs per rare query at least"
    )
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory(prefix="memtui-lancedb-bench-") as tmp:
        work = Path(tmp)
        folder, wrote = folder_for(args.folder or work, args.rows)
        cache = work / "cache"
        rows = measure(folder, args.rows, args.repeats, cache, args.rare_runs)
        if not args.skip_forget:
            rows += forget_rows(folder, work, cache, args.rows)
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    made = "reused" if wrote is None else f"written by lancedb in {wrote:.1f} s"
    print(
        f"LanceDB table {TABLE}: {args.rows} crewAI rows x {DIMS} dims {made}; "
        f"{size / 1e6:.1f} MB; medians of {args.repeats} (rare queries: {args.rare_runs})"
    )
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
