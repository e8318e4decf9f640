"""memtui on a LangGraph ``PostgresStore`` at scale, beside raw SQL on the same server.

``python -m benchmarks.postgres --sizes 10000,50000,200000 --repeats 3``

Without ``--server-url`` a private server (pgserver's Postgres 16 + pgvector) is
started in ``--out-dir`` and kept there; the databases are made by
``benchmarks.pg_generate`` (LangGraph's own ``setup()``, ``COPY``, HNSW after the
load) and reused by a later run. For each size, memtui's operation (through
``PostgresSource``'s public methods, as the app and the CLI call them) and the
plainest SQL that reads the same rows are timed alternately; the table gives the
medians, their ratio and the target:

- first screen: open the store, its tier facets and its first page of 200;
- page of 200: a keyset page from the middle;
- tier facets: items per tier (``tier_counts``) and per namespace (``facets``), each
  read afresh (``reread`` first: the change probe and the one scan the views share);
- vector lane: the lane (pool 100) with the HNSW index, and with index scans off
  (``enable_indexscan``) against the raw ``ORDER BY embedding <=> q LIMIT k``;
- keyword index: the first build (rows/s) against reading every row, and the
  refresh after 1,000 changes (750 updates, 250 deletes, put back after);
- forget (``--skip-forget`` skips it): one item put by the benchmark, forgotten.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from benchmarks import pg_generate as gen
from memtui.core.embed import HashEmbedder
from memtui.sources import open_source
from memtui.sources.postgres.vectors import vector_text

DEFAULT_OUT = Path(tempfile.gettempdir()) / "memtui-bench-pg"
POOL = 100
PAGE = 200
CHANGES = 1000
READ_ALL = "SELECT prefix, key, value FROM store"
MARK = "now() - interval '10 seconds'"
QUERIES = ("coffee trip booked", "billing service notes", "dark mode editor")


@dataclass
class Row:
    name: str
    ours: list[float] = field(default_factory=list)
    base: list[float] = field(default_factory=list)
    target: str = ""
    met: bool | None = None
    note: str = ""

    def median(self, which: str) -> float | None:
        values = getattr(self, which)
        return statistics.median(values) if values else None

    @property
    def ratio(self) -> float | None:
        ours, base = self.median("ours"), self.median("base")
        return ours / base if ours and base else None


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def alternate(row: Row, ours: Callable[[], Any], base: Callable[[], Any], repeats: int) -> Row:
    """Run memtui's and the baseline's operation alternately (load hits both alike)."""
    for _ in range(repeats):
        row.ours.append(timed(ours))
        row.base.append(timed(base))
    return row


@contextlib.contextmanager
def server(url: str | None, out_dir: Path) -> Iterator[str]:
    if url:
        yield url
        return
    import pgserver

    folder = out_dir / "pgdata"
    folder.mkdir(parents=True, exist_ok=True)
    pg = pgserver.get_server(folder, cleanup_mode=None)
    yield pg.get_uri()


def raw(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url, autocommit=True)


def measure(url: str, items: int, repeats: int, forget: bool, out_dir: Path) -> list[Row]:
    embedder = HashEmbedder(gen.DIM)
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=out_dir))
    rows: list[Row] = []
    try:
        rows += browse_rows(url, repeats, cache)
        rows += index_rows(url, items, repeats, cache)
        rows += vector_rows(url, embedder, repeats, cache)
        if forget:
            rows.append(forget_row(url, cache, repeats))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return rows


def opened(url: str, cache: Path, **options: Any) -> Any:
    return open_source(url, cache_root=cache, audit_db=cache / "audit.db", **options)


def browse_rows(url: str, repeats: int, cache: Path) -> list[Row]:
    conn = raw(url)

    def first_screen_ours() -> None:
        with opened(url, cache) as source:
            source.tier_counts()
            source.facets()
            source.page(limit=PAGE)

    def first_screen_raw() -> None:
        with raw(url) as c:
            c.execute(
                "SELECT split_part(prefix, '.', 1), count(*) FROM store "
                "WHERE expires_at IS NULL OR expires_at > now() GROUP BY 1"
            ).fetchall()
            c.execute(
                "SELECT prefix, count(*) FROM store "
                "WHERE expires_at IS NULL OR expires_at > now() GROUP BY 1"
            ).fetchall()
            c.execute(
                "SELECT prefix, key, value FROM store WHERE expires_at IS NULL OR "
                "expires_at > now() ORDER BY prefix, key LIMIT %s",
                (PAGE + 1,),
            ).fetchall()

    out = [
        alternate(Row("first screen", target="< 1 s"), first_screen_ours, first_screen_raw, repeats)
    ]
    middle = conn.execute(
        "SELECT prefix, key FROM store ORDER BY prefix, key OFFSET (SELECT count(*) / 2 FROM store)"
        " LIMIT 1"
    ).fetchone()
    assert middle is not None
    after = f"lg:{middle[0]}/{middle[1]}"
    with opened(url, cache) as source:
        cursor = source.page(limit=1).records[0].id
        assert cursor.startswith("lg:")
        out.append(
            alternate(
                Row("page of 200", target="< 50 ms"),
                lambda: source.page(after=after, limit=PAGE),
                lambda: conn.execute(
                    "SELECT prefix, key, value, created_at, updated_at, expires_at FROM store "
                    "WHERE (expires_at IS NULL OR expires_at > now()) AND (prefix, key) > (%s, %s)"
                    " ORDER BY prefix, key LIMIT %s",
                    (middle[0], middle[1], PAGE + 1),
                ).fetchall(),
                repeats,
            )
        )
        out.append(
            alternate(
                Row("tier facets", target="< 300 ms"),
                lambda: cold(source, source.tier_counts),
                lambda: conn.execute(
                    "SELECT split_part(prefix, '.', 1), count(*) FROM store "
                    "WHERE expires_at IS NULL OR expires_at > now() GROUP BY 1"
                ).fetchall(),
                repeats,
            )
        )
        out.append(
            alternate(
                Row("namespace facets", target="< 300 ms"),
                lambda: cold(source, source.facets),
                lambda: conn.execute(
                    "SELECT prefix, count(*) FROM store "
                    "WHERE expires_at IS NULL OR expires_at > now() GROUP BY 1"
                ).fetchall(),
                repeats,
            )
        )
    conn.close()
    return out


def cold(source: Any, read: Any) -> Any:
    """``read()`` as F5 runs it: nothing kept (``reread``), so the change probe runs
    and the counts are read again; the views after it share what it read."""
    source.reread()
    return read()


def index_rows(url: str, items: int, repeats: int, cache: Path) -> list[Row]:
    conn = raw(url)
    build = Row("keyword index build", target=">= 30k rows/s")
    for n in range(repeats):
        root = cache / f"build-{n}"
        with opened(url, root) as source:
            build.ours.append(timed(source.index.store))
        shutil.rmtree(root, ignore_errors=True)
        build.base.append(timed(lambda: conn.execute(READ_ALL).fetchall()))
    ours = build.median("ours") or 0.0
    build.note = f"{items / ours:,.0f} rows/s" if ours else ""
    build.met = bool(ours) and items / ours >= 30_000
    refresh = Row("refresh after 1,000 changes", target="< 1 s")
    root = cache / "refresh"
    with opened(url, root) as source:
        source.index.store()
        for n in range(repeats):
            conn.execute(
                "CREATE TEMP TABLE IF NOT EXISTS gone_s AS SELECT * FROM store WHERE false;"
                "CREATE TEMP TABLE IF NOT EXISTS gone_v AS SELECT * FROM store_vectors WHERE false"
            )
            picked = f"SELECT prefix, key FROM store ORDER BY md5(key || '{n}') LIMIT {CHANGES}"
            conn.execute(
                f"WITH p AS ({picked}) UPDATE store s SET value = jsonb_set(s.value, '{{text}}', "
                "to_jsonb((s.value->>'text') || ' revised')), updated_at = now() "
                f"FROM (SELECT * FROM p LIMIT {CHANGES * 3 // 4}) AS q "
                "WHERE s.prefix = q.prefix AND s.key = q.key"
            )
            deleted = f"SELECT * FROM ({picked}) AS p OFFSET {CHANGES * 3 // 4}"
            conn.execute(
                "TRUNCATE gone_s, gone_v;"
                "INSERT INTO gone_s SELECT s.* FROM store s "
                f"JOIN ({deleted}) d USING (prefix, key);"
                "INSERT INTO gone_v SELECT v.* FROM store_vectors v "
                "JOIN gone_s USING (prefix, key);"
                "DELETE FROM store s USING gone_s g WHERE s.prefix = g.prefix AND s.key = g.key"
            )
            refresh.ours.append(timed(source.index.store))
            refresh.base.append(
                timed(
                    lambda: (
                        conn.execute(
                            f"SELECT prefix, key, value FROM store WHERE updated_at > {MARK}"
                        ).fetchall(),
                        conn.execute("SELECT prefix, count(*) FROM store GROUP BY 1").fetchall(),
                    )
                )
            )
            sync = source.index.last_sync
            refresh.note = sync.line() if sync is not None else ""
            conn.execute(
                "INSERT INTO store SELECT * FROM gone_s;"
                "INSERT INTO store_vectors SELECT * FROM gone_v"
            )
            source.index.store()
    conn.close()
    return [build, refresh]


def vector_rows(url: str, embedder: Any, repeats: int, cache: Path) -> list[Row]:
    from memtui.core.search import SearchRequest

    conn = raw(url)
    vectors = [vector_text([float(v) for v in embedder([q])[0]]) for q in QUERIES]

    def raw_nearest(vector: str) -> None:
        with conn.transaction():
            conn.execute(f"SET LOCAL hnsw.ef_search = {POOL}")
            conn.execute(
                "SELECT v.prefix, v.key, v.embedding <=> %s::vector FROM store_vectors v "
                "JOIN store s ON s.prefix = v.prefix AND s.key = v.key "
                "WHERE s.expires_at IS NULL OR s.expires_at > now() "
                "ORDER BY v.embedding <=> %s::vector LIMIT %s",
                (vector, vector, POOL),
            ).fetchall()

    out: list[Row] = []
    for label, target, exact in (
        ("vector lane (HNSW)", "< 50 ms", False),
        ("vector lane (exact scan)", "<= 1.3x raw", True),
    ):
        row = Row(label, target=target)
        if exact:
            conn.execute(f'ALTER DATABASE "{conn.info.dbname}" SET enable_indexscan = off')
            conn.close()
            conn = raw(url)
        try:
            with opened(url, cache) as source:
                index = source.index.store()
                for vector, query in zip(vectors, QUERIES, strict=True):
                    query_vector = embedder([query])[0]
                    alternate(
                        row,
                        lambda q=query_vector, ix=index: ix.database_vector_lane(q, {}, POOL, None),
                        lambda v=vector: raw_nearest(v),
                        repeats,
                    )
                lane = index.database_vector_lane(embedder([QUERIES[0]])[0], {}, POOL, None)
                response = source.search(
                    SearchRequest(query=QUERIES[0], embedder=embedder, pool_size=POOL)
                )
                found = sum(1 for r in response.candidates if r.trace.vector.raw)
                row.note = f"{lane.note}; pool {found}/{POOL}"
        finally:
            if exact:
                conn.execute(f'ALTER DATABASE "{conn.info.dbname}" RESET enable_indexscan')
        out.append(row)
    conn.close()
    return out


def put_forget_items(conn: psycopg.Connection[Any], keys: Sequence[str]) -> None:
    """Items under ``bench.forget``, each with a random unit vector of its own, as the
    generated items have (it goes into the HNSW index like any other; a vector sharing a
    run of components with a live one in the same block could not be proved gone)."""
    import numpy as np

    rng = np.random.default_rng(len(keys))
    for key in keys:
        vector = rng.standard_normal(gen.DIM)
        conn.execute(
            "INSERT INTO store (prefix, key, value) VALUES ('bench.forget', %s, "
            "jsonb_build_object('text', %s::text))",
            (key, f"a note the benchmark forgets, {key}"),
        )
        conn.execute(
            "INSERT INTO store_vectors (prefix, key, field_name, embedding) "
            "VALUES ('bench.forget', %s, 'text', %s::vector)",
            (key, vector_text(vector / np.linalg.norm(vector))),
        )


def forget_row(url: str, cache: Path, repeats: int) -> Row:
    """memtui's forget of one item (its purge and every check) against the same erasure in
    plain SQL: ``DELETE`` of another item's rows and ``VACUUM (INDEX_CLEANUP ON)`` of both
    tables (pgvector's HNSW vacuum, which reads the whole index, is in both), alternately."""
    conn = raw(url)
    conn.execute("DELETE FROM store_vectors WHERE prefix = 'bench.forget'")
    conn.execute("DELETE FROM store WHERE prefix = 'bench.forget'")
    keys = [(f"ours-{n}", f"raw-{n}") for n in range(repeats)]
    put_forget_items(conn, [k for pair in keys for k in pair])
    conn.execute("VACUUM (INDEX_CLEANUP ON) store, store_vectors")
    row = Row("forget one item (verified)", target="< 1 s")
    verified = []
    with opened(url, cache, allow_writes=True, operator="benchmark") as source:
        source.index.store()
        for ours, theirs in keys:
            began = time.perf_counter()
            outcome = source.forget(f"lg:bench.forget/{ours}", reason="benchmark")
            row.ours.append(time.perf_counter() - began)
            verified.append(outcome.verified)

            def plain(key: str = theirs) -> None:
                conn.execute(
                    "DELETE FROM store_vectors WHERE prefix = 'bench.forget' AND key = %s", (key,)
                )
                conn.execute("DELETE FROM store WHERE prefix = 'bench.forget' AND key = %s", (key,))
                conn.execute("VACUUM (INDEX_CLEANUP ON) store, store_vectors")

            row.base.append(timed(plain))
    conn.close()
    row.note = f"raw: DELETE + VACUUM (INDEX_CLEANUP ON); verified {sum(verified)}/{len(verified)}"
    return row


def judge(row: Row) -> None:
    ours, ratio = row.median("ours"), row.ratio
    if row.met is not None or ours is None:
        return
    if row.target.startswith("< "):
        number, unit = row.target[2:].split()
        limit = float(number) * (1.0 if unit == "s" else 0.001)
        row.met = ours < limit
    elif row.target.startswith("<= ") and row.target.endswith("x raw") and ratio is not None:
        row.met = ratio <= float(row.target[3:].split("x")[0])


def fmt(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def render(rows: Sequence[Row], items: int, header: str) -> str:
    lines = [
        f"== {items:,} items ({header})",
        f"{'measure':<30} {'memtui':>10} {'raw SQL':>10} {'ratio':>7}  {'target':<14} ok    note",
    ]
    for row in rows:
        judge(row)
        ok = "-" if row.met is None else ("PASS" if row.met else "FAIL")
        ratio = f"{row.ratio:.2f}x" if row.ratio else "-"
        lines.append(
            f"{row.name:<30} {fmt(row.median('ours')):>10} {fmt(row.median('base')):>10} "
            f"{ratio:>7}  {row.target:<14} {ok:<5} {row.note}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.postgres",
        description="memtui on a LangGraph PostgresStore beside raw SQL on the same server.",
    )
    parser.add_argument("--sizes", default="10000", help="comma-separated item counts")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--server-url", help="a server to use (default: start one)")
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--skip-forget", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    if not sizes or min(sizes) < 100 or args.repeats < 1:
        parser.error("sizes must be at least 100 and repeats at least 1")
    out_dir = args.out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    with server(args.server_url, out_dir) as url:
        for items in sizes:
            made = gen.find_or_make(url, items, args.seed, regenerate=args.regenerate)
            how = "reused" if made.reused else f"generated in {made.seconds:.1f}s"
            header = f"{how}; load {made.load_seconds:.1f}s, HNSW build {made.hnsw_seconds:.1f}s"
            rows = measure(made.url, items, args.repeats, not args.skip_forget, out_dir)
            print(render(rows, items, header), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
