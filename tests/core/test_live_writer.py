"""A live agent writing beside memtui: nothing is lost on either side."""

import subprocess
import sys
import time

import pytest

from memtui.core.store import MemoryStore

WRITER = """
import sys, time
from memtui.core.store import MemoryStore, MemoryStoreError
store = MemoryStore(sys.argv[1], operator="agent")
deadline = time.monotonic() + float(sys.argv[2])
written = 0
print("ready", flush=True)
while time.monotonic() < deadline or written < 40:
    store.add_record(tier="working", record_type="observation",
                     content=f"agent observation {written}", engagement="live")
    written += 1
    if written % 25 == 0:
        try:
            store.record_success(profile_hash="a:b:c:d", tool=f"tool{written % 7}",
                                 endpoint=f"/api/{written}/x", param="q")
        except MemoryStoreError:
            pass  # the operator refuted this tactic: refusing is the agent's correct answer
print(written, flush=True)
"""


def _run_beside_writer(db_path, seconds):
    """Run the agent and the operator side by side for ``seconds``, and on a busy
    machine until each has done its part: 40 writes, a seen commit, a forget."""
    with MemoryStore(db_path, operator="tester") as store:
        store.add_record(tier="knowledge", record_type="reference", content="seed")
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db_path), str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout.readline().strip() == "ready"
        forgotten = refuted = 0
        versions = {store.data_version()}
        deadline = time.monotonic() + seconds
        give_up = deadline + 60
        while time.monotonic() < give_up and (
            time.monotonic() < deadline or len(versions) < 2 or forgotten < 1
        ):
            versions.add(store.data_version())
            page = store.fetch(engagement="live", limit=5)
            if len(page) >= 5:
                assert store.forget(page[0].id, reason="live test") in (True, False)
                forgotten += 1
            tactics = store.fetch(record_type="tactic", limit=1)
            if tactics:
                store.refute(tactics[0].id, reason="live test")
                refuted += 1
            time.sleep(0.05)
        written = int(proc.stdout.readline())
        assert proc.wait(timeout=30) == 0
        observations = store.query("SELECT count(*) FROM records WHERE engagement = 'live'")[0][0]
        assert observations == written - forgotten
        actions = [e["action"] for e in store.audit_events()]
        assert actions.count("forget") == forgotten and actions.count("refute") == refuted
        assert store.verify_audit() is None
        assert len(versions) > 1, "data_version must change when the agent commits"
        index = store.query("SELECT count(*) FROM records_fts_docsize")[0][0]
        assert index == store.record_count()
    return written, forgotten


def test_writer_and_operator_lose_nothing(tmp_path):
    written, forgotten = _run_beside_writer(tmp_path / "live.db", seconds=3)
    assert written >= 40 and forgotten >= 1


@pytest.mark.soak
def test_writer_and_operator_lose_nothing_soak(tmp_path):
    _run_beside_writer(tmp_path / "live.db", seconds=60)
