"""SIGKILL in the middle of a scope forget: all or nothing, and the file stays consistent."""

import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest

from memtui.core.check import check_database
from memtui.core.corpus import prepare_corpus
from memtui.core.embed import HashEmbedder
from memtui.core.store import MemoryStore

SCOPE_SIZE = 10_000
WORKER = """
import sys
from memtui.core.store import MemoryStore
store = MemoryStore(sys.argv[1], operator="crash-test")
print("ready", flush=True)
store.forget_scope(engagement="big", reason="crash test")
print("done", flush=True)
"""


@pytest.fixture(scope="module")
def base_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("crash") / "base.db"
    rng = random.Random(3)
    words = ["alpha", "bravo", "nginx", "banner", "port", "host", "login", "token"]
    rows = [
        {
            "tier": "episodic",
            "record_type": "observation",
            "content": " ".join(rng.choice(words) for _ in range(8)) + f" item{i}",
            "engagement": "big" if i < SCOPE_SIZE else "other",
        }
        for i in range(SCOPE_SIZE + 500)
    ]
    with MemoryStore(path, embedder=HashEmbedder(32)) as store:
        store.ingest(prepare_corpus(rows))
    return path


def _kill_at_random(path, delay):
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return proc.returncode


def _assert_all_or_nothing(path):
    report = check_database(path)
    assert report.ok, [f.message for f in report.findings]
    with MemoryStore(path, read_only=True) as store:
        left = store.query("SELECT count(*) FROM records WHERE engagement = 'big'")[0][0]
        others = store.query("SELECT count(*) FROM records WHERE engagement = 'other'")[0][0]
        events = [e for e in store.audit_events() if e["action"] == "forget-scope"]
        vectors = store.vector_count()
    assert others == 500
    if left == SCOPE_SIZE:
        assert events == [] and vectors == SCOPE_SIZE + 500
        return "nothing"
    assert left == 0, f"partial forget: {left} of {SCOPE_SIZE} left"
    assert len(events) == 1 and events[0]["details"]["count"] == SCOPE_SIZE
    assert vectors == 500
    return "everything"


def _run(base_db, tmp_path, rounds, seed):
    rng = random.Random(seed)
    outcomes = []
    for round_number in range(rounds):
        path = tmp_path / f"round{round_number}.db"
        shutil.copy(base_db, path)
        _kill_at_random(path, rng.uniform(0.0, 0.6))
        outcomes.append(_assert_all_or_nothing(path))
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(f"{path}{suffix}"):
                os.remove(f"{path}{suffix}")
    return outcomes


def test_sigkill_mid_scope_forget_is_all_or_nothing(base_db, tmp_path):
    outcomes = _run(base_db, tmp_path, rounds=6, seed=20261130)
    assert set(outcomes) <= {"nothing", "everything"}


@pytest.mark.soak
def test_sigkill_mid_scope_forget_soak(base_db, tmp_path):
    outcomes = _run(base_db, tmp_path, rounds=40, seed=7)
    assert "nothing" in outcomes and "everything" in outcomes
