"""What the erasure guarantee costs: ``python -m benchmarks.erasure_cost --records 100000``.

Builds a database of N short records, then times memtui's ``forget`` (delete,
FTS5 'optimize', secure_delete, audit event, WAL truncate, verification) beside
a baseline measured in the same run on a copy of the same file: a plain
``DELETE`` through the index trigger with a commit, which leaves copies behind.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from memtui.core.corpus import prepare_corpus
from memtui.core.store import MemoryStore

WORDS = [f"w{n:05d}" for n in range(20000)]


def build(path: Path, count: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    rows = [
        {
            "tier": "episodic",
            "record_type": "observation",
            "content": " ".join(rng.choices(WORDS, weights, k=rng.randint(5, 20))),
            "engagement": f"e{i % 50}",
        }
        for i in range(count)
    ]
    with MemoryStore(path) as store:
        store.ingest(prepare_corpus(rows))


def time_forget(path: Path, ids: list[int]) -> list[float]:
    out = []
    with MemoryStore(path, operator="bench") as store:
        for record_id in ids:
            start = time.perf_counter()
            assert store.forget(record_id, reason="benchmark")
            out.append(time.perf_counter() - start)
    return out


def time_plain_delete(path: Path, ids: list[int]) -> list[float]:
    out = []
    conn = sqlite3.connect(path, isolation_level=None)
    for record_id in ids:
        start = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DELETE FROM records WHERE id = ?", (record_id,))
        conn.execute("COMMIT")
        out.append(time.perf_counter() - start)
    conn.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder) / "base.db"
        build(base, args.records)
        rng = random.Random(11)
        ids = rng.sample(range(1, args.records + 1), args.repeats)
        ours, theirs = Path(folder) / "ours.db", Path(folder) / "plain.db"
        shutil.copy(base, ours)
        shutil.copy(base, theirs)
        forget = time_forget(ours, ids)
        plain = time_plain_delete(theirs, ids)
    med_f, med_p = statistics.median(forget), statistics.median(plain)
    print(f"records: {args.records}, forgets: {args.repeats}, sqlite {sqlite3.sqlite_version}")
    print(f"{'operation':<44}{'median ms':>12}{'max ms':>10}")
    ours_label, base_label = "memtui forget (erasure verified)", "baseline: plain DELETE + commit"
    print(f"{ours_label:<44}{med_f * 1000:>12.1f}{max(forget) * 1000:>10.1f}")
    print(f"{base_label:<44}{med_p * 1000:>12.1f}{max(plain) * 1000:>10.1f}")
    print(f"ratio: {med_f / med_p:.1f}x the plain delete")


if __name__ == "__main__":
    main()
