"""The Done criterion at scale: a Qdrant folder with 10,000 Cyber-AutoAgent-shaped points
(384 dims) written by qdrant-client; ``records --limit 20`` and the first search (the
cached index built with progress). Soak: building the folder alone takes ~20 s here.
Timings are printed (``-s``), never asserted.
"""

from __future__ import annotations

import random
import time
import uuid

import pytest
from click.testing import CliRunner

from memtui.cli import main

N = 10_000
DIMS = 384
WORDS = (
    "sql injection xss csrf login admin session token waf bypass port ssh tls header cookie "
    "redirect upload path traversal"
).split()
CATEGORIES = ("observation", "knowledge", "finding", "finding_candidate", "objective_result")


def build(path, n=N, dims=DIMS):
    from qdrant_client import QdrantClient, models

    rng = random.Random(7)
    client = QdrantClient(path=str(path))
    client.create_collection(
        "cyber_autoagent_memories",
        vectors_config=models.VectorParams(size=dims, distance=models.Distance.COSINE),
    )
    batch = []
    for i in range(n):
        op = f"OP_{i % 20:03d}"
        category = CATEGORIES[i % len(CATEGORIES)]
        text = " ".join(rng.choice(WORDS) for _ in range(20)) + f" item{i}"
        batch.append(
            models.PointStruct(
                id=str(uuid.UUID(int=i + 1)),
                vector=[rng.random() for _ in range(dims)],
                payload={
                    "memory": text,
                    "metadata": {"category": category, "operation_id": op},
                    "created_at": "2026-11-30T10:00:00",
                    "operation_id": op,
                    "target_values": [f"https://t{i % 5}.example"],
                    "user_id": f'"cyber-agent-{op}"',
                    "agent_id": "cyber-agent",
                    "active": i % 50 != 0,
                },
            )
        )
        if len(batch) == 500:
            client.upsert("cyber_autoagent_memories", batch)
            batch = []
    client.close()
    return path


@pytest.mark.soak
def test_ten_thousand_points(tmp_path):
    folder = build(tmp_path / "qdrant")
    runner = CliRunner()
    started = time.perf_counter()
    result = runner.invoke(main, ["records", str(folder), "--limit", "20", "--json"])
    records_s = time.perf_counter() - started
    assert result.exit_code == 0, result.output
    started = time.perf_counter()
    result = runner.invoke(main, ["search", str(folder), "sql injection admin", "--json"])
    first_search_s = time.perf_counter() - started
    assert result.exit_code == 0, result.output
    assert "indexing" in result.stderr
    started = time.perf_counter()
    runner.invoke(main, ["search", str(folder), "sql injection admin", "--embedder", "hash-384"])
    second_search_s = time.perf_counter() - started
    print(
        f"\n10k x {DIMS}: records --limit 20 {records_s:.2f} s; first search (index build) "
        f"{first_search_s:.2f} s; next search with hash-384 {second_search_s:.2f} s"
    )
