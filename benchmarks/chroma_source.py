"""A Chroma folder as memtui reads it: ``python -m benchmarks.chroma_source --documents 100000``.

chromadb writes a folder of N documents (a deterministic 32-dim hashing embedding, no
model; ``--folder DIR`` keeps it there and reuses it), then each figure is set
beside a baseline measured in the same run on the same file, interleaved: the
first screen (open, the tier counts, 100 rows: what the app shows before the
scopes are counted) beside a new connection's raw SQL for the same count and rows;
the scope facets beside the raw ``GROUP BY``; a page beside the raw keyset query;
memtui's keyword lane beside raw FTS5 top-100 on memtui's own index of the folder;
a keyword search end to end (the lane, the 100 results' documents read back from
``chroma.sqlite3``) beside raw FTS5 plus the raw read of those documents; the
vectors read from the HNSW segment's files (what the first vector search pays,
Chroma having purged its queue) beside a raw read of those files' bytes; the
vector lane beside raw numpy (``M @ q`` and ``argpartition``) over the same
matrix; a verified forget (through chromadb, then the queue rows, the full-text merge,
VACUUM and the byte scan of the folder) beside chromadb's own
``collection.delete`` on a copy, which leaves the text behind.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from benchmarks.baselines import numpy_cosine_top
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
from memtui.core import vector_cache
from memtui.core.embed import HashEmbedder
from memtui.core.search import index_tokens, match_expression, sanitize_query
from memtui.core.search.vector import vector_lane
from memtui.sources import open_source

COLLECTION = "bench_memory"
#: 32 by default (``--dims``), not 8: at 8 dimensions the hashing vectors of these
#: documents collide (329 distinct vectors among 100,000), and the lane's exact recount of
#: the ~1,000 rows tied at its pool's edge, not the product, is what would be timed
DIMS = 32


class HashEmbedding:
    """chromadb's embedding-function protocol over memtui's hashing embedder."""

    def __init__(self, dims: int = DIMS) -> None:
        self._embedder = HashEmbedder(dims)

    def __call__(self, input: list[str]) -> list[list[float]]:  # noqa: A002 - chromadb's name
        return [self._embedder.embed_one(text) for text in input]

    @staticmethod
    def name() -> str:
        return "memtui-hash"

    def get_config(self) -> dict[str, Any]:
        return {"dims": self._embedder.dim}

    def is_legacy(self) -> bool:
        return False


def client(folder: Path) -> Any:
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(
        path=str(folder), settings=Settings(anonymized_telemetry=False)
    )


def document(n: int) -> str:
    return f"memory {n} about topic{n % 97} with word{n % 1013} and tag{n % 31}"


def build(folder: Path, count: int, dims: int = DIMS) -> float:
    started = time.perf_counter()
    handle = client(folder)
    try:
        collection = handle.get_or_create_collection(
            COLLECTION, embedding_function=HashEmbedding(dims)
        )
        for start in range(0, count, 5000):
            numbers = range(start, min(count, start + 5000))
            collection.add(
                ids=[f"d{n}" for n in numbers],
                documents=[document(n) for n in numbers],
                metadatas=[{"user_id": f"user{n % 50}"} for n in numbers],
            )
    finally:
        handle.close()
    return time.perf_counter() - started


SCOPE_KEYS = ("user_id", "agent_id", "run_id", "session_id")


def queries(count: int) -> dict[str, str]:
    """A 2-term query matching about 3% of the documents, and one of one document's
    rarest words (a handful at any size)."""
    k = count // 3
    return {"2 terms, common": "memory tag3", "2 terms, rare": f"topic{k % 97} word{k % 1013}"}


def folder_for(where: Path, count: int, dims: int = DIMS) -> tuple[Path, float | None]:
    """The folder of ``count`` documents under ``where``, written unless it is there
    (None: reused)."""
    folder = where / f"chroma-{count}-{dims}d"
    done = where / f"chroma-{count}-{dims}d.complete"
    if done.exists():
        return folder, None
    shutil.rmtree(folder, ignore_errors=True)
    wrote = build(folder, count, dims)
    done.write_text("written by benchmarks.chroma_source\n", encoding="ascii")
    return folder, wrote


def ro(sqlite: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{sqlite}?mode=ro", uri=True)


def raw_rows(conn: sqlite3.Connection, after: int) -> list[Any]:
    """A keyset page of 100 documents with their metadata, the plainest SQL."""
    rows = conn.execute(
        "SELECT e.id, e.embedding_id, e.seq_id, e.created_at FROM embeddings AS e "
        "JOIN segments AS s ON s.id = e.segment_id AND s.scope = 'METADATA' "
        "WHERE e.id > ? ORDER BY e.id LIMIT 100",
        (after,),
    ).fetchall()
    marks = ",".join("?" * len(rows))
    conn.execute(
        "SELECT id, key, string_value, int_value, float_value, bool_value "
        f"FROM embedding_metadata WHERE id IN ({marks})",
        [r[0] for r in rows],
    ).fetchall()
    return rows


def raw_first_screen(sqlite: Path) -> None:
    conn = ro(sqlite)
    try:
        conn.execute("SELECT count(*) FROM embeddings").fetchall()
        raw_rows(conn, 0)
    finally:
        conn.close()


def raw_facets(conn: sqlite3.Connection) -> None:
    marks = ",".join("?" * len(SCOPE_KEYS))
    conn.execute("SELECT count(*) FROM embeddings").fetchall()
    conn.execute(
        "SELECT key, string_value, count(*) FROM embedding_metadata "
        f"WHERE key IN ({marks}) AND string_value IS NOT NULL GROUP BY key, string_value",
        SCOPE_KEYS,
    ).fetchall()


def raw_search(
    index: sqlite3.Connection, chroma: sqlite3.Connection, segment: str, match: str
) -> None:
    """Raw FTS5 top-100 on memtui's index, then those documents' rows from the folder."""
    ids = [
        str(r[0]).partition(":")[2]
        for r in index.execute(
            f"SELECT r.source_id FROM ({RAW_FTS}) AS f JOIN records AS r ON r.id = f.rowid",
            (match,),
        ).fetchall()
    ]
    marks = ",".join("?" * len(ids))
    rows = chroma.execute(
        f"SELECT id, created_at FROM embeddings WHERE segment_id = ? AND embedding_id IN ({marks})",
        [segment, *ids],
    ).fetchall()
    chroma.execute(
        f"SELECT id, key, string_value FROM embedding_metadata WHERE id IN ({marks})",
        [r[0] for r in rows],
    ).fetchall()


def measure(
    folder: Path,
    count: int,
    repeats: int,
    cache: Path,
    rare_runs: int = RARE_RUNS,
    dims: int = DIMS,
) -> list[Row]:
    sqlite = folder / "chroma.sqlite3"
    rows: list[Row] = []

    rows.append(
        first_screen_row(
            folder,
            cache,
            lambda: raw_first_screen(sqlite),
            "new connection: count(*) + 100 rows",
            repeats,
        )
    )
    conn = ro(sqlite)
    with open_source(folder, cache_root=cache) as source:
        ours, base = interleaved(
            [None], lambda _c: source.facets(), lambda _c: raw_facets(conn), repeats
        )
        rows.append(
            with_target(
                Row("scope facets (the tree's counts)", ours, base, "count(*) + GROUP BY"),
                "< 300 ms",
                within(0.3),
            )
        )
        key = count // 2
        after = f"chroma:d{key}"
        middle = int(
            conn.execute(
                "SELECT id FROM embeddings WHERE embedding_id = ?", (f"d{key}",)
            ).fetchone()[0]
        )
        ours, base = interleaved(
            [None],
            lambda _c: source.page(after=after, limit=100),
            lambda _c: raw_rows(conn, middle),
            repeats,
        )
        rows.append(
            with_target(
                Row("page of 100 after the middle", ours, base, "raw keyset page + metadata"),
                "< 50 ms",
                within(0.05),
            )
        )
        build = timed(source.build_index)
        segment = conn.execute("SELECT id FROM segments WHERE scope = 'METADATA'").fetchone()[0]
        rows.extend(keyword_rows(source, queries(count), repeats, rare_runs))
        index = ro(Path(source.index.path))
        try:
            for name, query in queries(count).items():
                match = match_expression(index_tokens(source.index.store(), sanitize_query(query)))
                ours, base = interleaved(
                    [match],
                    lambda _m, q=query: source.search(q, keyword_only=True, limit=100),
                    lambda m: raw_search(index, conn, segment, m),
                    repeats if name.endswith("common") else max(repeats, rare_runs),
                )
                rows.append(
                    Row(
                        f"keyword search, {name}, 100 results",
                        ours,
                        base,
                        "raw FTS5 top-100 + their rows from chroma.sqlite3",
                    )
                )
        finally:
            index.close()
        rows.extend(vector_rows(source, folder, repeats, dims))
        rows.append(Row("memtui's index, first build", build, 0.0, "-"))
    conn.close()
    return rows


def vector_only(folder: Path, repeats: int, cache: Path, dims: int = DIMS) -> list[Row]:
    """``--vector-only``: the index built, then the vector rows alone."""
    with open_source(folder, cache_root=cache) as source:
        build = timed(source.build_index)
        rows = vector_rows(source, folder, repeats, dims)
    return [*rows, Row("memtui's index, first build", build, 0.0, "-")]


def vector_rows(source: Any, folder: Path, repeats: int, dims: int = DIMS) -> list[Row]:
    """The vectors read from the HNSW files (each ``cache_vectors`` reads them again) beside
    a raw read of the segment's files; the lane beside raw numpy on memtui's matrix."""

    segment = next(p for p in folder.iterdir() if (p / "header.bin").is_file())
    names = ("header.bin", "data_level0.bin", "length.bin", "index_metadata.pickle")
    files = [segment / name for name in names if (segment / name).is_file()]
    ours, base = interleaved(
        [None],
        lambda _c: source.cache_vectors(),
        lambda _c: [path.read_bytes() for path in files],
        max(1, min(repeats, 3)),
    )
    count = len(source.cache_vectors())
    read = Row(
        f"vectors read from the HNSW files ({count:,})",
        ours,
        base,
        "raw read of the segment's files",
    )
    return [read, *lane_rows(source, repeats, dims)]


def lane_rows(source: Any, repeats: int, dims: int) -> list[Row]:
    """The lane beside raw numpy on memtui's matrix, for a text query (whose hashing vector
    ties hundreds of documents at the pool's edge: the lane scores each of them exactly
    and orders them by id, a stable ranking numpy's top 100 does not give) and for a
    random query (no ties: the product and its top 100 alone)."""
    import numpy as np

    index = source.index.store()
    cached = vector_cache.load(index)
    text = [float(x) for x in HashEmbedder(dims).embed_one("memory about topic7 and tag3")]
    noise = np.random.default_rng(7).normal(size=dims).astype(np.float32).tolist()
    rows = []
    for what, query in (("a text query", text), ("a random query", noise)):
        vector_lane(index, query, None, 100)  # the matrix is built once, then kept
        ours, base = interleaved(
            [None],
            lambda _c, q=query: vector_lane(index, q, None, 100),
            lambda _c, q=query: numpy_cosine_top(cached.matrix, cached.norms, q, 100),
            repeats,
        )
        row = Row(
            f"vector lane, top 100 by cosine, {what}",
            ours,
            base,
            "numpy M @ q / norms + argpartition, same matrix",
        )
        rows.append(with_target(row, "<= 1.3x", at_most_times(1.3)))
    return rows


def forget_rows(folder: Path, work: Path, cache: Path) -> list[Row]:
    ours = work / "forget"
    theirs = work / "plain"
    shutil.copytree(folder, ours)
    shutil.copytree(folder, theirs)
    with open_source(ours, allow_writes=True, cache_root=cache) as source:
        started = time.perf_counter()
        outcome = source.forget("chroma:d17", reason="benchmark", operator="bench")
        forget = time.perf_counter() - started
        assert outcome.verified, outcome
    started = time.perf_counter()
    handle = client(theirs)
    try:
        handle.get_collection(COLLECTION, embedding_function=None).delete(ids=["d17"])
    finally:
        handle.close()
    plain = time.perf_counter() - started
    return [Row("forget, verified", forget, plain, "chromadb's delete (leaves the text)")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.chroma_source")
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--folder", type=Path, help="keep the written folder here and reuse it on later runs"
    )
    parser.add_argument(
        "--rare-runs", type=int, default=RARE_RUNS, help="runs per rare query at least"
    )
    parser.add_argument(
        "--dims", type=int, default=DIMS, help="dimension of the hashing vectors chromadb stores"
    )
    parser.add_argument(
        "--vector-only",
        action="store_true",
        help="only the vectors read from the HNSW files and the vector lane beside raw numpy",
    )
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory(prefix="memtui-chroma-bench-") as tmp:
        work = Path(tmp)
        folder, wrote = folder_for(args.folder or work, args.documents, args.dims)
        cache = work / "cache"
        if args.vector_only:
            rows = vector_only(folder, args.repeats, cache, args.dims)
        else:
            rows = measure(folder, args.documents, args.repeats, cache, args.rare_runs, args.dims)
            rows += forget_rows(folder, work, cache)
        size = (folder / "chroma.sqlite3").stat().st_size
    made = "reused" if wrote is None else f"written by chromadb in {wrote:.1f} s"
    print(
        f"Chroma folder: {args.documents} documents x {args.dims} dims {made}; chroma.sqlite3 "
        f"{size / 1e6:.1f} MB; medians of {args.repeats} (rare queries: {args.rare_runs})"
    )
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
