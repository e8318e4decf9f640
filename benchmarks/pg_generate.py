"""Synthetic LangGraph ``PostgresStore`` databases for the Postgres benchmark.

The schema is LangGraph's own: ``PostgresStore.setup()`` runs once with an index of
384 dimensions (every migration, its HNSW index included). The HNSW index is then
dropped, the rows bulk-loaded with ``COPY`` (the store as text, the vectors in
binary), and the index made again from its own definition after the load (with
``maintenance_work_mem`` raised), which is much faster than growing it row by row.

Items (fixed seed): 5-20 words each from a Zipf vocabulary; namespaces
``memories.user-NNN`` (some deeper: ``memories.user-NNN.work``), ``notes.team-N``,
``profiles.user-NNN`` and ``sessions.s-NNN`` (with a TTL, every other one
expired); one 384-dim unit vector per item (field ``text``).

A generated database carries a comment naming its format, size and seed: a
later run with the same finds it and reuses it.
"""

from __future__ import annotations

import json
import struct
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import psycopg

DIM = 384
FORMAT_VERSION = 1
NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
EXPIRED = datetime(2020, 1, 1, tzinfo=UTC)
LIVE_UNTIL = datetime(2100, 1, 1, tzinfo=UTC)
VOCAB_SIZE = 5000
CHUNK = 20_000
TIERS = (("memories", 0.55), ("notes", 0.15), ("profiles", 0.15), ("sessions", 0.15))
_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass
class Generated:
    url: str
    items: int
    reused: bool
    seconds: float
    load_seconds: float
    hnsw_seconds: float


def comment_for(items: int, seed: int) -> str:
    return f"memtui-bench langgraph v{FORMAT_VERSION} items={items} seed={seed} dims={DIM}"


def database_url(server_url: str, name: str) -> str:
    head, _, query = server_url.partition("?")
    base = head.rsplit("/", 1)[0]
    return f"{base}/{name}" + (f"?{query}" if query else "")


def vocabulary(rng: np.random.Generator) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = {"".join(rng.choice(letters, size=int(rng.integers(3, 10)))) for _ in range(VOCAB_SIZE)}
    return sorted(words)


def namespace(n: int, tier: str) -> str:
    if tier == "memories":
        user = f"memories.user-{n % 50:03d}"
        return f"{user}.work" if n % 7 == 0 else user
    if tier == "notes":
        return f"notes.team-{n % 5}"
    if tier == "profiles":
        return f"profiles.user-{n % 50:03d}"
    return f"sessions.s-{n % 200:03d}"


def tiers_of(items: int, rng: np.random.Generator) -> list[str]:
    names = [t for t, _ in TIERS]
    shares = np.array([s for _, s in TIERS])
    return [names[i] for i in rng.choice(len(names), size=items, p=shares / shares.sum())]


def texts(items: int, rng: np.random.Generator) -> list[str]:
    vocab = vocabulary(rng)
    ranks = np.arange(1, len(vocab) + 1, dtype=float)
    weights = 1.0 / ranks
    weights /= weights.sum()
    lengths = rng.integers(5, 21, size=items)
    picks = rng.choice(len(vocab), size=int(lengths.sum()), p=weights)
    out: list[str] = []
    at = 0
    for length in lengths:
        out.append(" ".join(vocab[i] for i in picks[at : at + length]))
        at += int(length)
    return out


def _binary_vectors(rows: list[tuple[str, str]], matrix: np.ndarray, stamp: int) -> bytes:
    """One binary COPY stream of ``store_vectors`` (prefix, key, field_name, embedding,
    created_at, updated_at): pgvector's binary form is int16 dims, int16 0, float4s."""
    head = struct.pack(">hh", DIM, 0)
    big = matrix.astype(">f4")
    time_bytes = struct.pack(">iq", 8, stamp)
    parts = [b"PGCOPY\n\xff\r\n\x00", struct.pack(">ii", 0, 0)]
    field = b"text"
    for (prefix, key), vector in zip(rows, big, strict=True):
        p, k = prefix.encode(), key.encode()
        parts.append(
            struct.pack(">hi", 6, len(p))
            + p
            + struct.pack(">i", len(k))
            + k
            + struct.pack(">i", len(field))
            + field
            + struct.pack(">i", 4 + 4 * DIM)
            + head
            + vector.tobytes()
            + time_bytes
            + time_bytes
        )
    parts.append(struct.pack(">h", -1))
    return b"".join(parts)


def _setup(url: str) -> None:
    """LangGraph's own ``setup()`` (every migration), with an index of ``DIM``."""
    from langgraph.store.postgres import PostgresStore

    def embed(texts: list[str]) -> list[list[float]]:
        return [[0.0] * DIM for _ in texts]

    index = {"dims": DIM, "embed": embed, "fields": ["text"]}
    with PostgresStore.from_conn_string(url, index=index) as store:  # type: ignore[arg-type]
        store.setup()


def build_memory_mb(items: int) -> int:
    """``maintenance_work_mem`` for the HNSW build: room for the whole graph (about
    3 KB an item at 384 dimensions, m 16), at least 1 GB. A graph that outgrows it
    is finished by inserting element by element on disk, many times slower (pgvector
    says so in a notice)."""
    return max(1024, items * 3 // 1000)


def find_or_make(
    server_url: str, items: int, seed: int = 7, *, regenerate: bool = False, log: Any = print
) -> Generated:
    """The database of ``items`` items (made when missing or of another format)."""
    name = f"memtui_bench_lg_{items}_s{seed}"
    url = database_url(server_url, name)
    wanted = comment_for(items, seed)
    with psycopg.connect(server_url, autocommit=True) as admin:
        row = admin.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            (name,),
        ).fetchone()
        if row is not None and str(row[0] or "").startswith(wanted + ";") and not regenerate:
            load, hnsw = (float(v) for v in str(row[0]).rsplit(";", 1)[1].split(","))
            return Generated(url, items, True, 0.0, load, hnsw)
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    started = time.perf_counter()
    _setup(url)
    rng = np.random.default_rng(seed)
    tiers = tiers_of(items, rng)
    words = texts(items, rng)
    keys = [(namespace(n, tier), f"item-{n:07d}") for n, tier in enumerate(tiers)]
    stamp = int((NOW - _PG_EPOCH).total_seconds() * 1_000_000)
    with psycopg.connect(url) as conn:
        index_def = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'store_vectors_embedding_idx'"
        ).fetchone()[0]
        conn.execute("DROP INDEX store_vectors_embedding_idx")
        load_started = time.perf_counter()
        with conn.cursor().copy(
            "COPY store (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes) "
            "FROM STDIN"
        ) as copy:
            for n, ((prefix, key), text) in enumerate(zip(keys, words, strict=True)):
                moment = NOW - timedelta(minutes=items - n)
                expires = ttl = None
                if prefix.startswith("sessions."):
                    expires, ttl = (EXPIRED if n % 2 else LIVE_UNTIL), 60
                value = json.dumps({"text": text, "n": n})
                copy.write_row((prefix, key, value, moment, moment, expires, ttl))
        for start in range(0, items, CHUNK):
            count = min(CHUNK, items - start)
            matrix = rng.standard_normal((count, DIM)).astype(np.float32)
            matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
            with conn.cursor().copy(
                "COPY store_vectors (prefix, key, field_name, embedding, created_at, updated_at) "
                "FROM STDIN (FORMAT BINARY)"
            ) as copy:
                copy.write(_binary_vectors(keys[start : start + count], matrix, stamp))
        conn.commit()
        load_seconds = time.perf_counter() - load_started
        log(f"  loaded {items} items in {load_seconds:.1f}s; building the HNSW index")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"SET maintenance_work_mem = '{build_memory_mb(items)}MB'")
        conn.execute("SET max_parallel_maintenance_workers = 1")
        hnsw_started = time.perf_counter()
        conn.execute(index_def)
        hnsw_seconds = time.perf_counter() - hnsw_started
        conn.execute("VACUUM ANALYZE store")
        conn.execute("VACUUM ANALYZE store_vectors")
        times = f"{load_seconds:.2f},{hnsw_seconds:.2f}"
        conn.execute(f"COMMENT ON DATABASE \"{name}\" IS '{wanted};{times}'")
    return Generated(url, items, False, time.perf_counter() - started, load_seconds, hnsw_seconds)
