"""The benchmark harness runs end to end on a small database, so it cannot rot.

No timing is asserted here: only that every table row is produced.
"""

import importlib
import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT


def _rows():
    """The harness's row list (``benchmarks`` is a top-level folder, not an installed package)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module("benchmarks.harness").ROWS


def _run(out_dir, *extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--records",
            "1500",
            "--repeats",
            "1",
            "--queries",
            "2",
            "--out-dir",
            str(out_dir),
            *extra,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.starts_first
def test_the_harness_prints_every_row_and_reuses_its_database(tmp_path, capsys):
    ROWS = _rows()
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "## 1,500 records x 384 dims" in out
    for _key, label in ROWS:
        assert f"| {label} |" in out, label
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == len(ROWS) + 1  # and the header
    assert "generating 1,500 records" in done.stderr
    saved = json.loads((tmp_path / "results-1500-seed20261130.json").read_text())
    assert [row["key"] for row in saved["rows"]] == [key for key, _ in ROWS]
    assert all(row["ours"] for row in saved["rows"])
    # App start: fresh processes of memtui's app and of a minimal Textual app, each to
    # its first screen (one run each at --repeats 1); present and positive, never timed.
    start = next(row for row in saved["rows"] if row["key"] == "app_start")
    assert not start["extra"]["errors"], start["extra"]["errors"]
    assert len(start["ours"]) == len(start["base"]) == 1
    assert all(ms > 0 for ms in start["ours"] + start["base"])
    assert start["extra"]["screen"]["tiers"] > 0 and start["extra"]["screen"]["rows"] > 0
    assert list(tmp_path.glob("*.db")) == [tmp_path / "bench-1500-seed20261130-v1.db"]

    # A second run reuses the file (checked in-process: a second full run cost 9 s).
    database = tmp_path / "bench-1500-seed20261130-v1.db"
    written = database.stat().st_mtime_ns
    path, info = importlib.import_module("benchmarks.harness").prepare(
        1500, 20261130, tmp_path, False
    )
    assert path == database and database.stat().st_mtime_ns == written
    assert info["records"] == 1500 and info["complete"]
    assert "reusing" in capsys.readouterr().err


def test_the_vector_baseline_ranks_by_cosine():
    """The vector lane's baseline (the harness's and the Chroma benchmark's) is raw numpy's
    cosine top 100, not the top dot products."""
    import numpy as np

    from memtui.core.search import cosine

    _rows()  # puts the benchmarks folder on the path
    baselines = importlib.import_module("benchmarks.baselines")
    rng = np.random.default_rng(4)
    matrix = rng.standard_normal((400, 16)) * rng.uniform(0.1, 10.0, (400, 1))
    matrix = matrix.astype(np.float32)
    norms = np.linalg.norm(matrix, axis=1).astype(np.float32)
    query = rng.standard_normal(16).tolist()
    exact = [cosine(query, row.tolist()) for row in matrix]
    want = sorted(range(len(exact)), key=lambda r: -exact[r])[:10]
    top, scores = baselines.numpy_cosine_top(matrix, norms, query, k=10)
    assert top.tolist() == want
    assert np.allclose(scores, [exact[r] for r in want], atol=1e-5)
    dots = matrix @ np.asarray(query, dtype=np.float32)
    assert np.argsort(-dots)[:10].tolist() != want  # the rows' lengths change the ranking
