"""``memtui check`` on the store's file, run in a child process (never in the app's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memtui.core.store import MemoryStoreError

CHECK_SCRIPT = """
import json, sys
from memtui.core.check import check_database
def store_kind(path):
    from memtui.sources.detect import recognize
    return recognize(path)[0]
print(json.dumps(check_database(sys.argv[1], store_kind=store_kind).to_dict()))
"""
CHECK_TIMEOUT = 600.0


def run_check(
    path: Path, started: Callable[[subprocess.Popen[str]], None] | None = None
) -> dict[str, Any]:
    """``memtui check`` on ``path`` in a child process; its report as a dict.

    Never in the app's own process: the check opens and closes the database file with
    ordinary file calls, and closing any descriptor of a file cancels every POSIX lock
    the process holds on it, the app's SQLite locks included. Another process closing
    its connection could then delete the WAL and shared-memory files that the app
    still uses, and writes would stop being coordinated.
    """
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    process = subprocess.Popen(
        [sys.executable, "-c", CHECK_SCRIPT, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    if started is not None:
        started(process)
    try:
        out, err = process.communicate(timeout=CHECK_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise MemoryStoreError(
            f"memtui check did not finish in {CHECK_TIMEOUT:.0f} s; run memtui check DB"
        ) from None
    if process.returncode != 0:
        lines = (err or "").strip().splitlines()
        last = lines[-1] if lines else f"exit status {process.returncode}"
        raise MemoryStoreError(f"memtui check could not run: {last}")
    return json.loads(out)
