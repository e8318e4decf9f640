"""What a forget with proof costs in a LangGraph ``PostgresStore``:
``python -m benchmarks.pg_erasure --sizes 10000,50000``.

Starts a private Postgres (pgserver, with pgvector) in a temporary folder, loads N
items (COPY, seeded: 384-dim vectors, an HNSW index built after the load) and times
memtui's ``forget`` of one item (delete, vacuum, page overwrite, file check, audit)
beside the raw baseline on the same server: ``DELETE`` of another item's rows and a
plain ``VACUUM`` of both tables, which leaves the bytes behind.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

DIMS = 384
WORDS = [f"w{n:04d}" for n in range(5000)]


def load(conn: Any, count: int, seed: int = 11) -> None:
    """``count`` items in ``store`` and one vector each in ``store_vectors`` (COPY), then
    the HNSW index LangGraph builds (cosine)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    words = np.array(WORDS)
    conn.execute("DROP INDEX IF EXISTS store_vectors_embedding_idx")
    batch = 20000
    for start in range(0, count, batch):
        n = min(batch, count - start)
        picks = words[rng.integers(0, len(WORDS), size=(n, 12))]
        vectors = rng.standard_normal((n, DIMS), dtype=np.float32)
        store, vecs = io.StringIO(), io.StringIO()
        for i in range(n):
            number = start + i
            prefix, key = f"users.u{number % 997}", f"m{number:07d}"
            text = f"note {number:07d}: " + " ".join(picks[i])
            store.write(f'{prefix}\t{key}\t{{"text": "{text}"}}\n')
            vector = "[" + ",".join(f"{v:.6g}" for v in vectors[i]) + "]"
            vecs.write(f"{prefix}\t{key}\ttext\t{vector}\n")
        with conn.cursor() as cursor:
            with cursor.copy("COPY store (prefix, key, value) FROM STDIN") as copy:
                copy.write(store.getvalue())
            with cursor.copy(
                "COPY store_vectors (prefix, key, field_name, embedding) FROM STDIN"
            ) as copy:
                copy.write(vecs.getvalue())
    conn.execute("SET maintenance_work_mem = '2GB'")
    conn.execute(
        "CREATE INDEX store_vectors_embedding_idx ON store_vectors "
        "USING hnsw (embedding vector_cosine_ops)"
    )
    conn.execute("VACUUM (ANALYZE) store, store_vectors")
    conn.execute("CHECKPOINT")


def item(count: int, n: int) -> tuple[str, str]:
    return f"users.u{n % 997}", f"m{n:07d}"


def raw_forget(conn: Any, prefix: str, key: str, options: str = "") -> float:
    began = time.perf_counter()
    conn.execute("DELETE FROM store_vectors WHERE prefix = %s AND key = %s", (prefix, key))
    conn.execute("DELETE FROM store WHERE prefix = %s AND key = %s", (prefix, key))
    conn.execute(f"VACUUM {options} store, store_vectors")
    return time.perf_counter() - began


def index_holds_unit_vector(conn: Any, prefix: str, key: str) -> int:
    """How often the HNSW index's files hold the item's unit vector (``VectorProbe.raws``):
    1 when the normalized probe matches what pgvector wrote."""
    from memtui.sources.postgres.erasure import VectorProbe, count_near

    (values,) = conn.execute(
        "SELECT embedding::real[] FROM store_vectors WHERE prefix = %s AND key = %s",
        (prefix, key),
    ).fetchone()
    unit = VectorProbe("store_vectors", "embedding", tuple(values)).heads()[-1]
    root = Path(conn.execute("SHOW data_directory").fetchone()[0])
    (path,) = conn.execute("SELECT pg_relation_filepath('store_vectors_embedding_idx')").fetchone()
    conn.execute("CHECKPOINT")
    return count_near(root / path, unit)


def run_size(server: Any, count: int, repeats: int) -> dict[str, Any]:
    import psycopg
    from langgraph.store.postgres import PostgresStore

    from memtui.sources import open_source
    from memtui.sources.base import encode_id

    name = f"bench_{count}"
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    head, _, query = server.get_uri().partition("?")
    url = f"{head.rsplit('/', 1)[0]}/{name}?{query}"
    index = {"dims": DIMS, "embed": lambda texts: [[0.0] * DIMS for _ in texts], "fields": ["text"]}
    with PostgresStore.from_conn_string(url, index=index) as store:  # type: ignore[arg-type]
        store.setup()
    began = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        load(conn, count)
        loaded = time.perf_counter() - began
        raws = [raw_forget(conn, *item(count, count // 2 + r)) for r in range(repeats)]
        raws_on = [
            raw_forget(conn, *item(count, count // 3 + r), "(INDEX_CLEANUP ON)")
            for r in range(repeats)
        ]
        unit_found = index_holds_unit_vector(conn, *item(count, 7))
    times, outcomes = [], []
    for r in range(repeats):
        prefix, key = item(count, 7 + r * 101)
        with open_source(url, allow_writes=True, operator="bench") as source:
            began = time.perf_counter()
            outcome = source.forget(encode_id("lg", prefix, key), reason="benchmark")
            times.append(time.perf_counter() - began)
            outcomes.append(outcome)
            if os.environ.get("PG_ERASURE_DEBUG"):
                print(outcome.checks, source.audit_events(limit=1)[0]["details"], flush=True)
    return {
        "items": count,
        "load_s": loaded,
        "raw_s": statistics.median(raws),
        "raw_on_s": statistics.median(raws_on),
        "unit_vector_in_index": unit_found,
        "forget_s": statistics.median(times),
        "forget_all_s": times,
        "verified": [o.verified for o in outcomes],
        "failed": [sorted(k for k, v in o.checks.items() if not v) for o in outcomes],
        "remarks": [o.remark for o in outcomes],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,50000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    import pgserver

    folder = Path(tempfile.mkdtemp(prefix="memtui-pgbench-"))
    os.environ.setdefault("XDG_DATA_HOME", str(folder / "data-home"))
    server = pgserver.get_server(folder / "pg", cleanup_mode="delete")
    try:
        print(
            "items    load s   raw DELETE+VACUUM s   +INDEX_CLEANUP ON s   memtui forget s"
            "   ratio  ratio(ON)  verified"
        )
        for size in (int(s) for s in args.sizes.split(",")):
            row = run_size(server, size, args.repeats)
            print(
                f"{row['items']:>8} {row['load_s']:8.1f} {row['raw_s']:21.3f} "
                f"{row['raw_on_s']:21.3f} {row['forget_s']:17.3f} "
                f"{row['forget_s'] / row['raw_s']:6.1f}x {row['forget_s'] / row['raw_on_s']:9.1f}x"
                f"  {row['verified']}  (unit vector found in the index: "
                f"{row['unit_vector_in_index']})",
                flush=True,
            )
            for times, failed, remark in zip(
                row["forget_all_s"], row["failed"], row["remarks"], strict=True
            ):
                print(f"         forget {times:.3f} s failed={failed} remark={remark}")
    finally:
        server.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
