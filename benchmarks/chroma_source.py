"""A Chroma folder as memtui reads it: ``python -m benchmarks.chroma_source --documents 100000``.

chromadb writes a folder of N documents (a deterministic hashing embedding, no
model), then each figure is set beside a baseline measured in the same run on
the same file: the first screen and a page beside the raw SQL that reads the
same rows from ``chroma.sqlite3``; the keyword lane beside a raw FTS5 query on
memtui's own index of the folder; a verified forget (through chromadb, then the
queue rows, the full-text merge, VACUUM and the byte scan of the folder) beside
chromadb's own ``collection.delete`` on a copy, which leaves the text behind.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memtui.core.embed import HashEmbedder
from memtui.sources import open_source

COLLECTION = "bench_memory"
DIMS = 8


class HashEmbedding:
    """chromadb's embedding-function protocol over memtui's hashing embedder."""

    def __init__(self) -> None:
        self._embedder = HashEmbedder(DIMS)

    def __call__(self, input: list[str]) -> list[list[float]]:  # noqa: A002 - chromadb's name
        return [self._embedder.embed_one(text) for text in input]

    @staticmethod
    def name() -> str:
        return "memtui-hash"

    def get_config(self) -> dict[str, Any]:
        return {}

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


def build(folder: Path, count: int) -> float:
    started = time.perf_counter()
    handle = client(folder)
    try:
        collection = handle.get_or_create_collection(COLLECTION, embedding_function=HashEmbedding())
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


def timed(fn: Callable[[], Any], repeats: int) -> float:
    """The median of ``repeats`` runs, in seconds."""
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def raw_page(sqlite: Path, after: int) -> list[Any]:
    conn = sqlite3.connect(f"file:{sqlite}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT e.id, e.embedding_id FROM embeddings AS e JOIN segments AS s "
            "ON s.id = e.segment_id AND s.scope = 'METADATA' WHERE e.id > ? ORDER BY e.id "
            "LIMIT 100",
            (after,),
        ).fetchall()
        marks = ",".join("?" * len(rows))
        conn.execute(
            f"SELECT id, key, string_value FROM embedding_metadata WHERE id IN ({marks})",
            [r[0] for r in rows],
        ).fetchall()
        return rows
    finally:
        conn.close()


def raw_fts(index: Path, query: str) -> list[Any]:
    conn = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    try:
        return conn.execute(
            "SELECT rowid FROM records_fts WHERE records_fts MATCH ? ORDER BY bm25(records_fts) "
            "LIMIT 100",
            (query,),
        ).fetchall()
    finally:
        conn.close()


def measure(folder: Path, count: int, repeats: int, cache: Path) -> list[tuple[str, float, float]]:
    sqlite = folder / "chroma.sqlite3"
    rows: list[tuple[str, float, float]] = []

    def first_screen() -> None:
        with open_source(folder, cache_root=cache) as source:
            source.facets()
            source.page(limit=100)

    rows.append(
        (
            "first screen (open, facets, 100 rows)",
            timed(first_screen, repeats),
            timed(lambda: raw_page(sqlite, 0), repeats),
        )
    )
    with open_source(folder, cache_root=cache) as source:
        middle = source.page(limit=100).next_cursor
        key = count // 2
        after = f"chroma:d{key}"
        rows.append(
            (
                "page after the middle",
                timed(lambda: source.page(after=after, limit=100), repeats),
                timed(lambda: raw_page(sqlite, key), repeats),
            )
        )
        assert middle is not None
        started = time.perf_counter()
        source.build_index()
        build = time.perf_counter() - started
        index = Path(source.index.path)
        query = "topic5 word7"
        rows.append(
            (
                "keyword lane, 2 terms",
                timed(lambda: source.search(query, keyword_only=True, limit=100), repeats),
                timed(lambda: raw_fts(index, '"topic5" "word7"'), repeats),
            )
        )
        rows.append(("memtui's index, first build", build, 0.0))
    return rows


def forget_rows(folder: Path, work: Path, cache: Path) -> list[tuple[str, float, float]]:
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
    return [("forget, verified (vs chromadb's delete)", forget, plain)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.chroma_source")
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory(prefix="memtui-chroma-bench-") as tmp:
        work = Path(tmp)
        folder = work / "chroma"
        wrote = build(folder, args.documents)
        cache = work / "cache"
        rows = measure(folder, args.documents, args.repeats, cache)
        rows += forget_rows(folder, work, cache)
        size = (folder / "chroma.sqlite3").stat().st_size
    print(
        f"Chroma folder: {args.documents} documents written by chromadb in {wrote:.1f} s; "
        f"chroma.sqlite3 {size / 1e6:.1f} MB; median of {args.repeats}"
    )
    print(f"{'what':44} {'memtui':>10} {'baseline':>10} {'ratio':>8}")
    for what, ours, base in rows:
        ratio = f"{ours / base:.1f}x" if base else "-"
        print(f"{what:44} {ours * 1000:8.1f}ms {base * 1000:8.1f}ms {ratio:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
