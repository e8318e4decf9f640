"""SIGKILL in the middle of a foreign forget: the next open clears memtui's cached copy,
a retry says the forget already happened, and a 0-byte audit log left by a kill reads
as an empty one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import ROOT, one_error_line
from fixtures.sources_support import CANARY, LANGGRAPH_VECTORS, copy_fixture, occurrences

from memtui.cli import main
from memtui.sources import open_source
from memtui.sources.cache import cache_path_for

TARGET = "lg:memories.user-1/canary"
NOW = "2026-11-30T12:00:30Z"
# The child builds the cached index (a search), then forgets. The store connection's
# trace callback sees each statement as it starts: the child says when the forget's
# store transaction begins or when its COMMIT has returned (the next statement
# starts), then waits there for the parent's SIGKILL, so the kill lands at that
# moment inside the forget: after the intent event, before the outcome event.
WORKER = """
import sys
from memtui.sources import open_source
source = open_source(sys.argv[1], allow_writes=True, now=sys.argv[3], operator="crash-test")
source.search("zqxjvortex")
state = {"committed": False}

def trace(sql):
    if state["committed"] or (sql == "BEGIN IMMEDIATE" and sys.argv[2] == "begin"):
        print("stopped", flush=True)
        sys.stdin.readline()  # blocks until the parent kills this process
    if sql == "COMMIT":
        state["committed"] = True

source._conn.set_trace_callback(trace)
print("ready", flush=True)
source.forget(sys.argv[4], reason="crash test")
print("done", flush=True)
"""


@pytest.fixture(autouse=True)
def wide_output(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")


@pytest.fixture
def store(tmp_path):
    return copy_fixture(LANGGRAPH_VECTORS, tmp_path / "store")


def kill_inside_forget(path, moment):
    """Run a forget of TARGET in a child and SIGKILL it at ``moment`` (``begin``: the
    store transaction starts; ``committed``: the store's change has committed)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(path), moment, NOW, TARGET],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout.readline().strip() == "ready"
    assert proc.stdout.readline().strip() == "stopped"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdin.close()
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("command", [["records"], ["info"]])
def test_the_next_open_purges_the_cached_copy_of_a_record_the_killed_forget_removed(store, command):
    kill_inside_forget(store, "committed")
    cache = cache_path_for("langgraph", store)
    assert occurrences(store, CANARY)["word"] == 0  # the store's change committed
    assert occurrences(cache, CANARY)["word"] >= 1  # the killed forget left its cached copy
    result = CliRunner().invoke(main, [*command, str(store), "--now", NOW])
    assert result.exit_code == 0, result.output
    assert occurrences(cache, CANARY) == {"word": 0, "tail": 0}
    with open_source(store, now=NOW) as source:
        assert [e["record_ids"] for e in source.interrupted_forgets()] == [[TARGET]]
        assert source.search(CANARY).results == []


def test_a_retried_forget_says_the_killed_forget_already_happened(store):
    kill_inside_forget(store, "committed")
    result = CliRunner().invoke(
        main, ["forget", str(store), TARGET, "--reason", "again", "--allow-writes", "--yes"]
    )
    line = one_error_line(result)
    assert line.startswith(f"Error: {TARGET} is already forgotten: the forget of audit event #1 ")
    assert "interrupted before its outcome event" in line
    assert occurrences(cache_path_for("langgraph", store), CANARY) == {"word": 0, "tail": 0}
    with open_source(store, now=NOW) as source:
        assert [e["action"] for e in source.audit_events()] == ["forget-intent"]


def test_a_forget_killed_before_the_store_changed_is_simply_done_again(store):
    kill_inside_forget(store, "begin")
    cache = cache_path_for("langgraph", store)
    assert occurrences(store, CANARY)["word"] >= 1  # nothing was changed
    result = CliRunner().invoke(main, ["records", str(store), "--now", NOW])
    assert result.exit_code == 0 and CANARY in result.output
    assert occurrences(cache, CANARY)["word"] >= 1  # a live record keeps its cached copy
    again = CliRunner().invoke(
        main, ["forget", str(store), TARGET, "--reason", "again", "--allow-writes", "--yes"]
    )
    assert again.exit_code == 0, again.output
    assert "erasure verified (audit events #2 intent, #3 outcome)" in again.output
    assert occurrences(store, CANARY) == {"word": 0, "tail": 0}
    assert occurrences(cache, CANARY) == {"word": 0, "tail": 0}


def test_a_zero_byte_audit_log_left_by_a_kill_reads_as_an_empty_log(store):
    audit = store.parent / (store.name + ".memtui-audit.db")
    audit.write_bytes(b"")  # what a kill between SQLite's create and its first write leaves
    runner = CliRunner()
    for command in (["info"], ["audit"], ["audit", "verify"], ["records"]):
        result = runner.invoke(main, [*command, str(store)])
        assert result.exit_code == 0, (command, result.output)
        assert "ingest" not in result.output and "0 bytes" not in result.output
    assert (
        "audit chain verified: 0 events"
        in runner.invoke(main, ["audit", "verify", str(store)]).output
    )
    forget = runner.invoke(
        main, ["forget", str(store), TARGET, "--reason", "r", "--allow-writes", "--yes"]
    )
    assert forget.exit_code == 0, forget.output
    assert "erasure verified (audit events #1 intent, #2 outcome)" in forget.output
    verify = runner.invoke(main, ["audit", "verify", str(store)])
    assert verify.exit_code == 0 and "audit chain verified: 2 events" in verify.output
