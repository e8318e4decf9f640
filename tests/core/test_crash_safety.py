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
# The child says when the forget's write transaction begins, when its COMMIT
# starts, and when it has returned (the next statement runs): the connection's
# trace callback sees each statement as it starts. So the parent kills inside
# the transaction, or after it, instead of guessing when it runs.
WORKER = """
import sys
from memtui.core.store import MemoryStore
store = MemoryStore(sys.argv[1], operator="crash-test")
state = {"committing": False}

def trace(sql):
    if state["committing"]:
        state["committing"] = False
        print("committed", flush=True)
    if sql == "BEGIN IMMEDIATE":
        print("begin", flush=True)
    elif sql == "COMMIT":
        state["committing"] = True
        print("commit", flush=True)

store.connection.set_trace_callback(trace)
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


def _start(path):
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    assert proc.stdout.readline().strip() == "begin"
    return proc


def _kill(proc, delay, *, after_commit=False):
    """SIGKILL ``delay`` seconds after the transaction began (or after its COMMIT
    returned); returns whether the COMMIT had started by then."""
    if after_commit:
        assert proc.stdout.readline().strip() == "commit"
        assert proc.stdout.readline().strip() == "committed"
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    said = proc.stdout.read().split()
    return after_commit or "commit" in said


@pytest.fixture(scope="module")
def transaction_seconds(base_db, tmp_path_factory):
    """How long the forget's transaction runs here, from BEGIN to COMMIT (measured once)."""
    path = tmp_path_factory.mktemp("timing") / "timing.db"
    shutil.copy(base_db, path)
    proc = _start(path)
    began = time.monotonic()
    assert proc.stdout.readline().strip() == "commit"
    seconds = time.monotonic() - began
    assert proc.stdout.readline().strip() == "committed"
    assert proc.stdout.readline().strip() == "done"
    proc.wait()
    return seconds


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


def _run(base_db, tmp_path, seconds, *, inside, after, seed):
    """``inside`` kills at seeded moments within the transaction's measured span,
    ``after`` kills at seeded moments after its COMMIT returned; all or nothing each time."""
    rng = random.Random(seed)
    plan = [False] * inside + [True] * after
    rng.shuffle(plan)
    outcomes = []
    for round_number, after_commit in enumerate(plan):
        path = tmp_path / f"round{round_number}.db"
        shutil.copy(base_db, path)
        proc = _start(path)
        delay = rng.uniform(0.0, 0.05) if after_commit else rng.uniform(0.05, 0.6) * seconds
        committing = _kill(proc, delay, after_commit=after_commit)
        outcome = _assert_all_or_nothing(path)
        if not committing:
            # Killed before its COMMIT began: the forget was interrupted.
            assert outcome == "nothing", (round_number, delay)
        if after_commit:
            assert outcome == "everything", (round_number, delay)
        outcomes.append((outcome, committing))
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(f"{path}{suffix}"):
                os.remove(f"{path}{suffix}")
    return outcomes


def test_sigkill_mid_scope_forget_is_all_or_nothing(base_db, tmp_path, transaction_seconds):
    outcomes = _run(base_db, tmp_path, transaction_seconds, inside=5, after=2, seed=20261130)
    interrupted = [o for o, committing in outcomes if not committing]
    assert len(interrupted) >= 3, outcomes  # the kills do land inside the forget
    assert {o for o, _ in outcomes} == {"nothing", "everything"}


@pytest.mark.soak
def test_sigkill_mid_scope_forget_soak(base_db, tmp_path, transaction_seconds):
    outcomes = _run(base_db, tmp_path, transaction_seconds, inside=30, after=10, seed=7)
    assert sum(1 for _, committing in outcomes if not committing) >= 10
    assert {o for o, _ in outcomes} == {"nothing", "everything"}
