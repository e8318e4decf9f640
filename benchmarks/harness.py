"""memtui at scale, beside a raw baseline: ``python -m benchmarks --records 1000000``.

For each size, a synthetic database (``benchmarks.generate``, fixed seed) is
generated once into ``--out-dir`` and reused by later runs of the same size
and seed. Every memtui figure is printed beside a baseline measured in the
same run, on the same file and the same connection settings, and the ratio:

- ingest: ``MemoryStore.ingest`` against raw ``executemany`` + FTS5
  ``rebuild`` + raw vector inserts into a fresh file of the same schema
  (measured when the file is generated; later runs print those figures);
- keyword lane: ``keyword_lane`` (pool, normalization, excluded counts)
  against ``SELECT rowid, bm25(records_fts) FROM records_fts WHERE records_fts
  MATCH ? ORDER BY bm25(records_fts) LIMIT 100``;
- vector lane: ``vector_lane`` against raw numpy's top 100 by cosine on the same
  matrix and the norms stored with it (the product with the unit query divided by
  the norms, ``argpartition``, the 100 sorted);
- app start: a fresh ``python`` running memtui's app headless to its first
  useful screen against one running a minimal Textual app (a ``DataTable`` and
  a ``Footer``) to its first frame (``benchmarks.app_start``);
- search in the app: from the key to the frame that shows the results (or a
  breakdown) against the calls the app's worker makes (``benchmarks.app_search``);
- everything else against the plainest SQL that reads the same rows.

Medians and 95th percentiles are over ``--repeats`` runs of ``--queries``
queries per class, memtui and baseline interleaved so that background load
hits both alike. Timings are wall-clock on warm caches.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import app_search, app_start
from benchmarks import generate as gen
from benchmarks.baselines import numpy_cosine_top
from memtui.core import vector_cache, vector_matrix
from memtui.core.search import (
    explain_keyword,
    hybrid_search,
    index_tokens,
    match_expression,
    sanitize_query,
)
from memtui.core.search.embedding import embed_query
from memtui.core.search.keyword import keyword_lane
from memtui.core.search.vector import vector_lane
from memtui.core.store import FTS_TABLE, MemoryStore, _canonical

DEFAULT_OUT = Path("/tmp/memtui-bench")
POOL = 100
PAGE = 50
COMMON_RANKS = (5, 30)  # frequency ranks of "common" words (in 4–20% of records)
RARE_RANKS = (2000, 8000)  # and of "rare" ones (in about 0.02–0.1%)
RAW_FTS = (
    f"SELECT rowid, bm25({FTS_TABLE}) FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ? "
    f"ORDER BY bm25({FTS_TABLE}) LIMIT {POOL}"
)

# Every row of a size's table, in order: (key, label). The smoke test checks them all.
ROWS: tuple[tuple[str, str], ...] = (
    ("ingest", "ingest (records/s)"),
    ("open", "open + tier counts + first page"),
    ("app_start", "app start to first useful screen"),
    ("tier_counts", "tier counts (live)"),
    ("scope_counts", "scope counts, one tier (live)"),
    ("scope_facets", "scope counts, every tier (the tree)"),
    ("page", "keyset page of 50"),
    ("kw_1_common", "keyword lane, 1 term, common"),
    ("kw_1_rare", "keyword lane, 1 term, rare"),
    ("kw_2_common", "keyword lane, 2 terms, common"),
    ("kw_2_rare", "keyword lane, 2 terms, rare"),
    ("kw_3_common", "keyword lane, 3 terms, common"),
    ("kw_3_rare", "keyword lane, 3 terms, rare"),
    ("vec_build", "vector cache: build from SQLite"),
    ("vec_load", "vector cache: map the file + 1st search"),
    ("vec_lane", "vector lane (cached matrix)"),
    ("hybrid_2_common", "hybrid search, 2 terms, common"),
    ("hybrid_2_rare", "hybrid search, 2 terms, rare"),
    ("app_search", "app: search, 2 terms common, enter to results on screen"),
    ("app_breakdown", "app: expand a breakdown, enter to BM25 terms on screen"),
    ("explain", "explain_keyword, one result"),
    ("priors", "profile_priors"),
    ("learned", "learned_tactics"),
    ("negative", "negative_evidence"),
    ("host", "host_history"),
    ("host_big", "host_history, big engagement: first 100 + count"),
    ("forget", "forget one record (verified)"),
    ("forget_cached", "forget, vector cache on disk"),
    ("forget_scope", "forget_scope, big engagement"),
    ("rss_browse", "resident memory: browse (MB)"),
    ("rss_vectors", "resident memory: + vector search (MB)"),
)
LABELS = dict(ROWS)


@dataclass
class Row:
    key: str
    ours: list[float]
    base: list[float]
    baseline: str
    unit: str = "ms"  # ms | MB | rec/s
    target: str = ""
    met: bool | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return LABELS[self.key]

    def median(self, values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    def p95(self, values: list[float]) -> float | None:
        if not values:
            return None
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]

    @property
    def ratio(self) -> float | None:
        ours, base = self.median(self.ours), self.median(self.base)
        if ours is None or base is None or base == 0 or ours == 0:
            return None
        return ours / base


# ------------------------------------------------------------------ helpers


def _timed(fn: Callable[..., Any], *args: Any) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def _interleaved(
    cases: Sequence[Any],
    ours: Callable[[Any], Any],
    base: Callable[[Any], Any],
    repeats: int,
) -> tuple[list[float], list[float]]:
    """Milliseconds of ``ours(case)`` and ``base(case)``, alternating which runs first."""
    mine: list[float] = []
    theirs: list[float] = []
    for case in cases:  # warm-up, not measured
        ours(case)
        base(case)
    for repeat in range(repeats):
        for case in cases:
            if repeat % 2:
                mine.append(_timed(ours, case) * 1000)
                theirs.append(_timed(base, case) * 1000)
            else:
                theirs.append(_timed(base, case) * 1000)
                mine.append(_timed(ours, case) * 1000)
    return mine, theirs


def _remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _copy_db(src: Path, dst: Path) -> None:
    _remove_db(dst)
    shutil.copyfile(src, dst)


def _raw_connection(path: Path, *, read_only: bool = True) -> sqlite3.Connection:
    """A plain connection with the settings MemoryStore uses, for the baselines."""
    mode = "ro" if read_only else "rw"
    conn = sqlite3.connect(f"file:{path}?mode={mode}", uri=True, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def _progress(label: str) -> Callable[[int, int], None]:
    state = {"last": -1.0}

    def report(done: int, total: int) -> None:
        share = done / total if total else 1.0
        if share - state["last"] >= 0.1 or done == total:
            state["last"] = share
            print(f"  {label}: {done:,}/{total:,}", file=sys.stderr, flush=True)

    return report


# ------------------------------------------------------------------ generation


def prepare(records: int, seed: int, out_dir: Path, regenerate: bool) -> tuple[Path, dict]:
    """The generated database for this size and seed (made now, or reused), and its sidecar."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = gen.database_path(out_dir, records, seed)
    info = None if regenerate else gen.read_sidecar(path)
    if info is not None and info.get("complete"):
        print(f"reusing {path}", file=sys.stderr)
        return path, info
    print(f"generating {records:,} records into {path}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    data = gen.generate(records, seed)
    generated = time.perf_counter() - started
    ours = gen.build_database(path, data, progress=_progress("memtui ingest"))
    raw = _raw_ingest(out_dir / f"raw-ingest-{records}-seed{seed}.db", data)
    vocab_path = Path(f"{path}.vocab.txt")
    vocab_path.write_text("\n".join(data.vocabulary) + "\n")
    info = {
        "complete": True,
        "records": records,
        "seed": seed,
        "format": gen.FORMAT_VERSION,
        "generated_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "generate_seconds": generated,
        "ingest": {"memtui_seconds": ours, "raw_seconds": raw},
        "queries": _pick_queries(data, seed),
        "profile": _busiest_profile(data),
        "file_bytes": path.stat().st_size,
    }
    gen.write_sidecar(path, info)
    return path, info


def _raw_ingest(path: Path, data: gen.Dataset) -> float:
    """Seconds for raw executemany + FTS5 rebuild + raw vector inserts, same schema."""
    _remove_db(path)
    MemoryStore(path).close()  # the same schema, empty
    rows = [
        (
            r["tier"],
            r["record_type"],
            r["content"],
            r.get("profile_hash"),
            r.get("engagement"),
            r.get("run_id"),
            r.get("tool_name"),
            r.get("url_pattern"),
            r.get("signature"),
            _canonical(r.get("metadata") or {}),
            1 if r.get("refuted") else 0,
            r["created_at"],
            r.get("expires_at"),
        )
        for r in data.rows
    ]
    conn = _raw_connection(path, read_only=False)
    conn.execute("PRAGMA journal_mode = WAL")
    try:
        start = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DROP TRIGGER records_ai")  # bulk rows are indexed by one rebuild
        conn.executemany(
            "INSERT INTO records (tier, record_type, content, profile_hash, engagement, "
            "run_id, tool_name, url_pattern, signature, metadata, refuted, created_at, "
            "expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        conn.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')")
        conn.execute("DROP TRIGGER vectors_generation_ai")
        matrix = data.vectors
        conn.executemany(
            "INSERT INTO vectors (record_id, vector) VALUES (?, ?)",
            ((i + 1, bytes(matrix[i])) for i in range(len(matrix))),
        )
        conn.execute("COMMIT")
        elapsed = time.perf_counter() - start
    finally:
        conn.close()
        _remove_db(path)
    return elapsed


def _pick_queries(data: gen.Dataset, seed: int) -> dict[str, list[str]]:
    """Queries of 1, 2 and 3 words, common and rare, chosen by frequency rank."""
    rng = random.Random(seed)
    vocab = data.vocabulary
    common = list(range(*COMMON_RANKS))
    rare_lo, rare_hi = RARE_RANKS
    out: dict[str, list[str]] = {}
    out["1_common"] = [vocab[r] for r in rng.sample(common, 8)]
    out["1_rare"] = [vocab[r] for r in rng.sample(range(rare_lo, rare_hi), 8)]
    out["2_common"] = [" ".join(vocab[r] for r in rng.sample(common, 2)) for _ in range(8)]
    out["3_common"] = [" ".join(vocab[r] for r in rng.sample(common, 3)) for _ in range(8)]
    for terms in (2, 3):
        found: list[str] = []
        offsets = data.offsets
        for _attempt in range(200_000):
            i = rng.randrange(len(offsets) - 1)
            ranks = sorted(
                {int(r) for r in data.word_ids[offsets[i] : offsets[i + 1]]}
                & set(range(rare_lo, rare_hi))
            )
            if len(ranks) >= terms:
                found.append(" ".join(vocab[r] for r in rng.sample(ranks, terms)))
                if len(found) == 8:
                    break
        while len(found) < 8:  # a tiny corpus: fall back to rare words that co-occur less
            found.append(" ".join(vocab[r] for r in rng.sample(range(rare_lo, rare_hi), terms)))
        out[f"{terms}_rare"] = found
    return out


def _busiest_profile(data: gen.Dataset) -> str:
    counts: dict[str, int] = {}
    for row in data.rows:
        if row["record_type"] == "tactic":
            counts[row["profile_hash"]] = counts.get(row["profile_hash"], 0) + 1
    return max(sorted(counts), key=lambda p: counts[p])


# ------------------------------------------------------------------ measuring


def measure(path: Path, info: dict, repeats: int, queries: int, forget: bool) -> list[Row]:
    records = info["records"]
    rows: list[Row] = []
    ingest = info["ingest"]
    rows.append(
        Row(
            "ingest",
            [records / ingest["memtui_seconds"]],
            [records / ingest["raw_seconds"]],
            "raw executemany + FTS5 rebuild + vectors",
            unit="rec/s",
            target=">= 0.8x raw",
            note=f"1 run each, when generated ({info['generated_at']})",
            extra=ingest,
        )
    )
    cases = {k: v[:queries] for k, v in info["queries"].items()}
    embedder = gen.BenchEmbedder()
    store = MemoryStore(path, read_only=True, clock=gen.clock)
    raw = _raw_connection(path)
    try:
        rows += _browse_rows(path, store, raw, repeats)
        rows += _keyword_rows(store, raw, cases, repeats)
        rows += _vector_rows(store, embedder, cases, repeats)
        rows += _hybrid_rows(store, raw, embedder, cases, repeats)
        rows += _app_search_rows(store, embedder, cases, repeats)
        rows += _explain_and_lane_rows(store, raw, info, cases, repeats)
    finally:
        store.close()
        raw.close()
    rows.append(_app_start_row(path, repeats))
    if forget:
        rows += _forget_rows(path, records, repeats)
    rows += _memory_rows(path, info)
    for row in rows:
        _judge(row, records)
    order = [key for key, _ in ROWS]
    return sorted(rows, key=lambda row: order.index(row.key))


def _browse_rows(
    path: Path, store: MemoryStore, raw: sqlite3.Connection, repeats: int
) -> list[Row]:
    out = []

    def open_ours(_: Any) -> None:
        with MemoryStore(path, read_only=True, clock=gen.clock) as opened:
            opened.tier_counts()
            opened.fetch(limit=PAGE)

    def open_raw(_: Any) -> None:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.execute("SELECT tier, count(*) FROM records GROUP BY tier").fetchall()
        conn.execute("SELECT * FROM records ORDER BY id LIMIT ?", (PAGE,)).fetchall()
        conn.close()

    ours, base = _interleaved([0], open_ours, open_raw, max(3, repeats))
    out.append(Row("open", ours, base, "sqlite3.connect + GROUP BY tier + 50 rows"))

    def uncached(count: Any) -> Any:
        """A count as a first look pays for it: the store keeps its totals until the
        database changes, and a benchmark repeating the same count must not time that."""

        def run(arg: Any) -> Any:
            store.clear_count_cache()
            return count(arg)

        return run

    ours, base = _interleaved(
        [0],
        uncached(lambda _: store.tier_counts()),
        lambda _: raw.execute("SELECT tier, count(*) FROM records GROUP BY tier").fetchall(),
        max(3, repeats),
    )
    out.append(Row("tier_counts", ours, base, "GROUP BY tier, no live rule"))

    def every_scope_raw(_: Any) -> None:
        for key in ("profile_hash", "engagement"):
            sql = f"SELECT tier, {key}, count(*) FROM records GROUP BY tier, {key}"
            raw.execute(sql).fetchall()

    ours, base = _interleaved(
        [0], uncached(lambda _: store.scope_facets()), every_scope_raw, max(3, repeats)
    )
    out.append(
        Row("scope_facets", ours, base, "GROUP BY tier, profile + tier, engagement; no live rule")
    )

    def scope_raw(tier: str) -> None:
        for key in ("profile_hash", "engagement"):
            raw.execute(
                f"SELECT {key}, count(*) FROM records WHERE tier = ? GROUP BY {key}", (tier,)
            ).fetchall()

    ours, base = _interleaved(
        ["episodic", "longterm"],
        uncached(lambda t: store.scope_counts(t)),
        scope_raw,
        max(3, repeats),
    )
    out.append(Row("scope_counts", ours, base, "GROUP BY profile, engagement; no live rule"))
    top = store.query("SELECT max(id) FROM records")[0][0]
    rng = random.Random(4)
    starts = [rng.randrange(max(1, top - PAGE)) for _ in range(20)]
    ours, base = _interleaved(
        starts,
        lambda after: store.fetch(limit=PAGE, after_id=after),
        lambda after: raw.execute(
            "SELECT * FROM records WHERE id > ? ORDER BY id LIMIT ?", (after, PAGE)
        ).fetchall(),
        repeats,
    )
    out.append(Row("page", ours, base, "SELECT * WHERE id > ? LIMIT 50"))
    return out


RARE_RUNS = 200
"""Runs per rare query at least: one takes tens of microseconds, so a median of a
few runs moves with every hiccup of a shared machine, and 200 cost a few ms."""


def _keyword_rows(
    store: MemoryStore, raw: sqlite3.Connection, cases: dict, repeats: int
) -> list[Row]:
    out = []
    for terms in (1, 2, 3):
        for kind in ("common", "rare"):
            matches = [
                match_expression(index_tokens(store, sanitize_query(q)))
                for q in cases[f"{terms}_{kind}"]
            ]
            ours, base = _interleaved(
                matches,
                lambda m: keyword_lane(store, m, None, POOL),
                lambda m: raw.execute(RAW_FTS, (m,)).fetchall(),
                repeats if kind == "common" else max(repeats, RARE_RUNS),
            )
            sizes = [keyword_lane(store, m, None, POOL)[2] for m in matches]
            out.append(
                Row(
                    f"kw_{terms}_{kind}",
                    ours,
                    base,
                    "raw FTS5 top-100 by bm25()",
                    note=f"matches per query: median {int(statistics.median(sizes)):,}",
                )
            )
    return out


def _vector_rows(store: MemoryStore, embedder: Any, cases: dict, repeats: int) -> list[Row]:
    out = []
    vector_cache.invalidate(store)
    query = embedder(["cache"])[0]
    start = time.perf_counter()
    built = vector_cache.load(store)
    build = (time.perf_counter() - start) * 1000
    assert built is not None
    start = time.perf_counter()
    vector_cache.wait_for_writes()
    written = (time.perf_counter() - start) * 1000
    files = vector_cache.cache_files(store)
    raw_decode = _timed(lambda: _raw_decode(store, built.dim)) * 1000
    out.append(
        Row(
            "vec_build",
            [build],
            [raw_decode],
            "read every blob + np.frombuffer",
            note=f"{len(built):,} x {built.dim}; then the file "
            f"({sum(p.stat().st_size for p in files) / 1e6:,.0f} MB) is written and synced "
            f"in the background: {written / 1000:.1f} s more",
        )
    )
    loads, bases = [], []
    matrix_file = built.path
    for _ in range(max(1, min(repeats, 3))):
        vector_matrix.HELD.pop(store, None)
        start = time.perf_counter()
        vector_cache.load(store)
        vector_lane(store, query, None, POOL)
        loads.append((time.perf_counter() - start) * 1000)
        if matrix_file is not None:
            start = time.perf_counter()
            mapped = np.load(matrix_file, mmap_mode="r")
            norms = _norms_beside(matrix_file, built.norms)
            _numpy_top(mapped, norms, query)
            bases.append((time.perf_counter() - start) * 1000)
    out.append(Row("vec_load", loads, bases, "np.load(mmap) + raw cosine top-100"))
    cached = vector_cache.load(store)
    assert cached is not None
    vectors = [embedder([q])[0] for group in cases.values() for q in group][: 4 * len(cases)]
    ours, base = _interleaved(
        vectors,
        lambda v: vector_lane(store, v, None, POOL),
        lambda v: _numpy_top(cached.matrix, cached.norms, v),
        repeats,
    )
    out.append(Row("vec_lane", ours, base, "numpy M @ q / norms + argpartition, same matrix"))
    return out


def _raw_decode(store: MemoryStore, dim: int) -> Any:
    blobs = [r[0] for r in store.query("SELECT vector FROM vectors ORDER BY record_id")]
    return np.frombuffer(b"".join(blobs), dtype="<f4").reshape(-1, dim)


def _numpy_top(matrix: Any, norms: Any, query: Any, k: int = POOL) -> Any:
    """Raw numpy's top ``k`` rows by cosine (``baselines.numpy_cosine_top``)."""
    return numpy_cosine_top(matrix, norms, query, k)[0]


def _norms_beside(matrix_file: Any, fallback: Any) -> Any:
    """The norms file published beside a cache's matrix file (``fallback`` when there is
    none: a matrix not yet published)."""
    beside = Path(str(matrix_file).removesuffix(".f32.npy") + ".norms.npy")
    return np.load(beside) if beside.is_file() else fallback


def _hybrid_rows(
    store: MemoryStore, raw: sqlite3.Connection, embedder: Any, cases: dict, repeats: int
) -> list[Row]:
    out = []
    cached = vector_cache.load(store)
    for kind in ("common", "rare"):
        queries = cases[f"2_{kind}"]
        ours, base = _interleaved(
            queries,
            lambda q: hybrid_search(store, q, embedder=embedder),
            lambda q: (
                raw.execute(
                    RAW_FTS, (match_expression(index_tokens(store, sanitize_query(q))),)
                ).fetchall(),
                _numpy_top(cached.matrix, cached.norms, embedder([q])[0]),
            ),
            repeats,
        )
        out.append(
            Row(
                f"hybrid_2_{kind}",
                ours,
                base,
                "raw FTS5 top-100 + raw numpy cosine top-100",
                extra={"breakdown_ms": _breakdown(store, embedder, queries, repeats)},
            )
        )
    return out


def _app_search_rows(store: MemoryStore, embedder: Any, cases: dict, repeats: int) -> list[Row]:
    """What an operator waits for in the app: see ``benchmarks.app_search``."""
    timed = app_search.measure(store, embedder, cases["2_common"], repeats)
    shown = timed["results_shown"]
    return [
        Row(
            "app_search",
            timed["search"],
            timed["search_base"],
            "the search worker's calls (source.search + get_many)",
            note=f"headless {app_search.SIZE[0]}x{app_search.SIZE[1]}, "
            f"{min(shown, default=0)}-{max(shown, default=0)} results on screen",
        ),
        Row(
            "app_breakdown",
            timed["breakdown"],
            timed["breakdown_base"],
            "the explanation worker's call (source.explain)",
            note=f"{len(timed['breakdown'])} expansions of the first result the keyword lane found",
        ),
    ]


def _breakdown(store: MemoryStore, embedder: Any, queries: list[str], repeats: int) -> dict:
    parts: dict[str, list[float]] = {
        "sanitize + tokenize": [],
        "keyword lane": [],
        "query embedding": [],
        "vector lane": [],
        "merge + rest": [],
    }
    for _ in range(repeats):
        for query in queries:
            start = time.perf_counter()
            hybrid_search(store, query, embedder=embedder)
            total = time.perf_counter() - start
            t0 = time.perf_counter()
            terms = index_tokens(store, sanitize_query(query))
            t1 = time.perf_counter()
            keyword_lane(store, match_expression(terms), None, POOL)
            t2 = time.perf_counter()
            vector, _reason, _name = embed_query(store, query, embedder)
            t3 = time.perf_counter()
            vector_lane(store, vector, None, POOL)
            t4 = time.perf_counter()
            parts["sanitize + tokenize"].append((t1 - t0) * 1000)
            parts["keyword lane"].append((t2 - t1) * 1000)
            parts["query embedding"].append((t3 - t2) * 1000)
            parts["vector lane"].append((t4 - t3) * 1000)
            parts["merge + rest"].append(max(0.0, (total - (t4 - t0)) * 1000))
    return {name: statistics.median(values) for name, values in parts.items()}


def _explain_and_lane_rows(
    store: MemoryStore, raw: sqlite3.Connection, info: dict, cases: dict, repeats: int
) -> list[Row]:
    from memtui.core.lanes import (
        host_history,
        host_history_count,
        learned_tactics,
        negative_evidence,
        profile_priors,
    )

    out = []
    pairs = []
    for query in cases["2_common"] + cases["1_rare"]:
        terms = index_tokens(store, sanitize_query(query))
        lane, _excluded, _matched = keyword_lane(store, match_expression(terms), None, POOL)
        for record_id in list(lane.raw)[:3]:
            pairs.append((query, record_id, match_expression(terms, any_terms=True)))
    ours, base = _interleaved(
        pairs,
        lambda p: explain_keyword(store, p[0], p[1]),
        lambda p: raw.execute(
            f"SELECT bm25({FTS_TABLE}) FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ? AND rowid = ?",
            (p[2], p[1]),
        ).fetchall(),
        repeats,
    )
    out.append(Row("explain", ours, base, "FTS5 bm25() of that one row"))
    profile = info["profile"]
    profiles = [profile] + [
        r[0]
        for r in store.query(
            "SELECT DISTINCT profile_hash FROM records WHERE record_type = 'tactic' "
            "AND profile_hash != ? ORDER BY profile_hash LIMIT 2",
            (profile,),
        )
    ]

    def tools_raw(p: str) -> None:
        raw.execute(
            "SELECT tool_name, sum(json_extract(metadata, '$.total_successes')), "
            "sum(json_extract(metadata, '$.total_attempts')) FROM records "
            "WHERE record_type = 'tactic' AND profile_hash = ? GROUP BY tool_name",
            (p,),
        ).fetchall()

    ours, base = _interleaved(profiles, lambda p: profile_priors(store, p), tools_raw, repeats)
    out.append(Row("priors", ours, base, "one profile's counts by tool, no pooling"))
    ours, base = _interleaved(
        profiles,
        lambda p: learned_tactics(store, p),
        lambda p: raw.execute(
            "SELECT * FROM records WHERE record_type = 'tactic' AND profile_hash = ?", (p,)
        ).fetchall(),
        repeats,
    )
    out.append(Row("learned", ours, base, "SELECT * tactics of the profile"))
    ours, base = _interleaved(profiles, lambda p: negative_evidence(store, p), tools_raw, repeats)
    out.append(Row("negative", ours, base, "one profile's counts by tool, no pooling"))
    engagements = ["eng-00001", "eng-00002", "eng-00003"]
    ours, base = _interleaved(
        engagements,
        lambda e: host_history(store, e, current_run=f"{e}-r2"),
        lambda e: raw.execute(
            "SELECT * FROM records WHERE engagement = ? AND record_type = 'finding'", (e,)
        ).fetchall(),
        repeats,
    )
    out.append(Row("host", ours, base, "SELECT * findings of the engagement"))
    # What the Lanes tab reads for the big engagement: its first 100 findings, and how many.
    big = [gen.BIG_ENGAGEMENT]
    finding = "FROM records WHERE engagement = ? AND record_type = 'finding'"
    ours, base = _interleaved(
        big,
        lambda e: (host_history(store, e, limit=100), host_history_count(store, e)),
        lambda e: (
            raw.execute(f"SELECT * {finding} LIMIT 100", (e,)).fetchall(),
            raw.execute(f"SELECT count(*) {finding}", (e,)).fetchall(),
        ),
        repeats,
    )
    total = host_history_count(store, gen.BIG_ENGAGEMENT)
    out.append(
        Row(
            "host_big",
            ours,
            base,
            "SELECT * findings LIMIT 100 + count(*)",
            note=f"{gen.BIG_ENGAGEMENT}: {total:,} findings listed, most severe first",
        )
    )
    return out


def _app_start_row(path: Path, repeats: int) -> Row:
    """Fresh interpreters to the first useful screen: memtui's app and a minimal one."""
    result = app_start.measure(str(path), repeats, now=gen.NOW.isoformat())
    breakdown = result.get("breakdown", {})
    notes = [
        f"{len(result['memtui'])} + {len(result['minimal'])} fresh processes (after one "
        f"warm-up each), alternating, headless {app_start.SIZE[0]}x{app_start.SIZE[1]}, "
        "from the parent's clock before the start to the frame that shows the screen"
    ]
    if result["screen"]:
        screen = result["screen"]
        notes.append(f"memtui's first screen: {screen['tiers']} tiers, {screen['rows']} rows")
    if "minimal" in breakdown:
        parts = ", ".join(f"{k} {v:.0f}" for k, v in breakdown["minimal"].items())
        notes.append(f"minimal app (medians, ms): {parts}")
    notes += [f"FAILED: {error}" for error in result["errors"]]
    return Row(
        "app_start",
        result["memtui"],
        result["minimal"],
        "minimal Textual app (DataTable+Footer)",
        note="; ".join(notes),
        extra={
            "errors": result["errors"],
            "screen": result["screen"],
            **({"breakdown_ms": breakdown["memtui"]} if "memtui" in breakdown else {}),
            **({"baseline_breakdown_ms": breakdown["minimal"]} if "minimal" in breakdown else {}),
        },
    )


def _forget_rows(path: Path, records: int, repeats: int) -> list[Row]:
    ours_path = path.with_name(path.stem + "-forget-memtui.db")
    base_path = path.with_name(path.stem + "-forget-raw.db")
    out = []
    try:
        _copy_db(path, ours_path)
        _copy_db(path, base_path)
        rng = random.Random(17)
        victims = rng.sample(range(2, records + 1), max(3, repeats) + 1)
        store = MemoryStore(ours_path, clock=gen.clock, operator="bench")
        base = _raw_connection(base_path, read_only=False)
        ours_ms, base_ms, verified = [], [], []
        try:
            for record_id in victims[:-1]:
                start = time.perf_counter()
                verified.append(store.forget(record_id, reason="benchmark"))
                ours_ms.append((time.perf_counter() - start) * 1000)
                base_ms.append(_timed(lambda rid=record_id: _plain_delete(base, rid)) * 1000)
            out.append(
                Row(
                    "forget",
                    ours_ms,
                    base_ms,
                    "DELETE + COMMIT (leaves copies)",
                    note=f"erasure verified: {all(verified)}",
                )
            )
            vector_cache.load(store)  # the app has searched: a cache file is on disk
            vector_cache.wait_for_writes()
            files_before = len(vector_cache.cache_files(store))
            start = time.perf_counter()
            ok = store.forget(victims[-1], reason="benchmark")
            cached_ms = (time.perf_counter() - start) * 1000
            plain_ms = _timed(lambda: _plain_delete(base, victims[-1])) * 1000
            out.append(
                Row(
                    "forget_cached",
                    [cached_ms],
                    [plain_ms],
                    "DELETE + COMMIT (leaves copies)",
                    note=f"verified: {ok}; cache files {files_before} -> "
                    f"{len(vector_cache.cache_files(store))}",
                )
            )
            big = gen.BIG_ENGAGEMENT
            count = store.query("SELECT count(*) FROM records WHERE engagement = ?", (big,))[0][0]
            start = time.perf_counter()
            store.forget_scope(engagement=big, reason="benchmark")
            scope_ms = (time.perf_counter() - start) * 1000
            event = store.audit_events(limit=1)[0]
            erased = all(event["details"]["erasure"].values())

            def scope_raw() -> None:
                base.execute("BEGIN IMMEDIATE")
                base.execute("DELETE FROM records WHERE engagement = ?", (big,))
                base.execute("COMMIT")

            out.append(
                Row(
                    "forget_scope",
                    [scope_ms],
                    [_timed(scope_raw) * 1000],
                    "DELETE WHERE engagement + COMMIT",
                    note=f"{count:,} records, one purge; erasure "
                    f"{'verified' if erased else 'NOT verified'}",
                )
            )
        finally:
            store.close()
            base.close()
    finally:
        _remove_db(ours_path)
        _remove_db(base_path)
    return out


def _plain_delete(conn: sqlite3.Connection, record_id: int) -> None:
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("DELETE FROM records WHERE id = ?", (record_id,))
    conn.execute("COMMIT")


_RSS_SNIPPET = """
import json, sys
def rss():
    out = {}
    for line in open('/proc/self/status'):
        key, _, value = line.partition(':')
        if key in ('VmHWM', 'VmRSS', 'RssAnon', 'RssFile'):
            out[key] = int(value.split()[0]) / 1024
    return out
path, mode = sys.argv[1], sys.argv[2]
if mode == 'memtui-browse' or mode == 'memtui-vectors':
    from benchmarks.generate import clock, BenchEmbedder
    from memtui.core.records import TIERS
    from memtui.core.store import MemoryStore
    store = MemoryStore(path, read_only=True, clock=clock)
    for flags in ({}, {'include_refuted': True, 'include_expired': True}):
        store.tier_counts(**flags)
        for tier in TIERS:
            store.scope_counts(tier, **flags)
    for tier in (None,) + TIERS:
        last = None
        for _ in range(400):
            page = store.fetch(limit=50, after_id=last, **({'tier': tier} if tier else {}))
            if not page:
                break
            last = page[-1].id
    if mode == 'memtui-vectors':
        from memtui.core.search import hybrid_search
        hybrid_search(store, 'cache warm', embedder=BenchEmbedder())
elif mode == 'raw-browse' or mode == 'raw-vectors':
    import sqlite3
    conn = sqlite3.connect(f'file:{path}?mode=ro', uri=True)
    conn.execute('SELECT tier, count(*) FROM records GROUP BY tier').fetchall()
    for tier in ('working', 'episodic', 'longterm', 'knowledge'):
        for key in ('profile_hash', 'engagement'):
            conn.execute(f'SELECT {key}, count(*) FROM records WHERE tier = ? GROUP BY {key}',
                         (tier,)).fetchall()
    for tier in (None, 'working', 'episodic', 'longterm', 'knowledge'):
        last = 0
        for _ in range(400):
            if tier:
                page = conn.execute('SELECT * FROM records WHERE tier = ? AND id > ? '
                                    'ORDER BY id LIMIT 50', (tier, last)).fetchall()
            else:
                page = conn.execute('SELECT * FROM records WHERE id > ? ORDER BY id LIMIT 50',
                                    (last,)).fetchall()
            if not page:
                break
            last = page[-1][0]
    if mode == 'raw-vectors':
        import numpy as np
        matrix = np.load(sys.argv[3], mmap_mode='r')
        norms = np.load(sys.argv[4])
        unit = np.full(matrix.shape[1], matrix.shape[1] ** -0.5, dtype=np.float32)
        scores = matrix @ unit
        scores /= norms
        np.argpartition(-scores, 100)
print(json.dumps(rss()))
"""


def _rss(path: Path, mode: str, *extra: str) -> dict[str, float]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(
        [sys.executable, "-c", _RSS_SNIPPET, str(path), mode, *extra],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _memory_rows(path: Path, info: dict) -> list[Row]:
    ours = _rss(path, "memtui-browse")
    base = _rss(path, "raw-browse")
    rows = [
        Row(
            "rss_browse",
            [ours["VmHWM"]],
            [base["VmHWM"]],
            "python + sqlite3, same reads",
            unit="MB",
            target="< 300 MB",
            note=f"peak; anon {ours['RssAnon']:.0f} MB, file {ours['RssFile']:.0f} MB at exit",
            extra={"memtui": ours, "raw": base},
        )
    ]
    with MemoryStore(path, read_only=True, clock=gen.clock) as store:
        cached = vector_cache.load(store)
        vector_cache.wait_for_writes()
        matrix_file = str(cached.path) if cached is not None and cached.path else ""
    norms_file = matrix_file.removesuffix(".f32.npy") + ".norms.npy" if matrix_file else ""
    ours_v = _rss(path, "memtui-vectors")
    base_v = (
        _rss(path, "raw-vectors", matrix_file, norms_file)
        if norms_file and Path(norms_file).is_file()
        else {"VmHWM": 0.0}
    )
    rows.append(
        Row(
            "rss_vectors",
            [ours_v["VmHWM"]],
            [base_v["VmHWM"]],
            "+ numpy on the mapped matrix",
            unit="MB",
            note=f"peak; anon {ours_v['RssAnon']:.0f} MB, file-backed (the mapped matrix, "
            f"shared, reclaimable) {ours_v['RssFile']:.0f} MB at exit",
            extra={"memtui": ours_v, "raw": base_v},
        )
    )
    return rows


# ------------------------------------------------------------------ targets


def _judge(row: Row, records: int) -> None:
    median = row.median(row.ours)
    ratio = row.ratio
    key = row.key
    if key == "ingest":
        # throughput: memtui records/s over raw records/s
        row.met = ratio is not None and ratio >= 0.8
    elif key.startswith("kw_") or key == "vec_lane":
        row.target = "<= 1.3x"
        row.met = ratio is not None and ratio <= 1.3
    elif key.startswith("hybrid_2") or key == "app_search":
        row.target = "< 250 ms"
        row.met = median is not None and median < 250
    elif key == "explain":
        row.target = "< 50 ms"
        row.met = median is not None and median < 50
    elif key in ("priors", "learned", "negative", "host", "host_big"):
        row.target = "< 200 ms"
        row.met = median is not None and median < 200
    elif key in ("tier_counts", "scope_counts"):
        row.target = "< 100 ms"
        row.met = median is not None and median < 100
    elif key == "scope_facets":
        row.target = "< 300 ms"
        row.met = median is not None and median < 300
    elif key == "page":
        row.target = "< 1 ms"
        row.met = median is not None and median < 1
    elif key in ("forget", "forget_cached"):
        limit = 250 if records <= 100_000 else 1000
        row.target = f"< {limit} ms" if limit < 1000 else "< 1 s"
        row.met = median is not None and median < limit
    elif key == "vec_load":
        row.target = "< 1 s"
        row.met = median is not None and median < 1000
    elif key == "app_start":
        row.target = "< 700 ms, <= 2.5x"
        row.met = median is not None and median < 700 and ratio is not None and ratio <= 2.5
    elif key == "rss_browse":
        row.met = median is not None and median < 300


# ------------------------------------------------------------------ output


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "rec/s":
        return f"{value:,.0f}"
    if unit == "MB":
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def render(rows: list[Row], records: int, header: dict) -> str:
    lines = [
        f"## {records:,} records x {gen.DIM} dims  ({header['when']}; SQLite "
        f"{sqlite3.sqlite_version}; Python {platform.python_version()}; numpy {np.__version__}; "
        f"{os.cpu_count()} cores; {header['file_mb']:,.0f} MB file)",
        "",
        "| measure | unit | memtui median | memtui p95 | baseline | baseline median "
        "| baseline p95 | ratio | target | met |",
        "|---|---|--:|--:|---|--:|--:|--:|---|---|",
    ]
    for row in rows:
        ratio = row.ratio
        if row.key == "ingest" and ratio is not None:
            ratio_text = f"{ratio:.2f}x speed"
        else:
            ratio_text = "-" if ratio is None else f"{ratio:.2f}x"
        met = "-" if row.met is None else ("yes" if row.met else "NO")
        lines.append(
            f"| {row.label} | {row.unit} | {_fmt(row.median(row.ours), row.unit)} "
            f"| {_fmt(row.p95(row.ours), row.unit)} | {row.baseline} "
            f"| {_fmt(row.median(row.base), row.unit)} | {_fmt(row.p95(row.base), row.unit)} "
            f"| {ratio_text} | {row.target or '-'} | {met} |"
        )
    lines.append("")
    for row in rows:
        if row.note:
            lines.append(f"- {row.label}: {row.note}")
    for row in rows:
        if "breakdown_ms" in row.extra:
            parts = ", ".join(f"{k} {v:.1f} ms" for k, v in row.extra["breakdown_ms"].items())
            lines.append(f"- {row.label}, breakdown (medians): {parts}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="memtui at scale beside raw SQLite/numpy baselines.",
        epilog=textwrap.dedent(
            """\
            Generated databases are reused from --out-dir for the same size and seed.
            Example: python -m benchmarks --sizes 10000,100000 --repeats 5
            """
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--records", type=int, help="one size, e.g. 1000000")
    parser.add_argument("--sizes", help="comma-separated sizes, e.g. 10000,100000")
    parser.add_argument("--repeats", type=int, default=5, help="runs per query (default 5)")
    parser.add_argument("--queries", type=int, default=5, help="queries per class (default 5)")
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT, help="generated databases")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--regenerate", action="store_true", help="ignore a reusable file")
    parser.add_argument("--skip-forget", action="store_true", help="no destructive runs")
    args = parser.parse_args(argv)
    if args.sizes:
        sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    else:
        sizes = [args.records or 10_000]
    if any(s < 100 for s in sizes) or args.repeats < 1 or args.queries < 1:
        parser.error("sizes must be at least 100; repeats and queries at least 1")
    out_dir = args.out_dir.resolve()
    os.environ[vector_cache.CACHE_DIR_ENV] = str(out_dir / "vector-cache")
    # Measure the on-disk cache at every size (a real store keeps small matrices in memory).
    vector_cache.FILE_CACHE_MIN_VECTORS = 0
    results = []
    for size in sizes:
        path, info = prepare(size, args.seed, out_dir, args.regenerate)
        rows = measure(path, info, args.repeats, args.queries, not args.skip_forget)
        header = {
            "when": datetime.now(UTC).strftime("%Y-%m-%d"),
            "file_mb": path.stat().st_size / 1e6,
        }
        text = render(rows, size, header)
        print(text, flush=True)
        results.append({"records": size, "rows": [asdict(r) for r in rows], "header": header})
        (out_dir / f"results-{size}-seed{args.seed}.json").write_text(
            json.dumps(results[-1], indent=2, default=str) + "\n"
        )
    return 0
