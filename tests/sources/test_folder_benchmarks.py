"""The Chroma and LanceDB benchmarks run end to end on a tiny store, so they cannot rot.

No timing is asserted: only that the library writes the store, that every row of the
benchmark's table is printed with its figure, and that a second run reuses the store.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest
from conftest import ROOT

SHARED_ROWS = (
    "first screen (open, tier counts, 100 rows)",
    "scope facets (the tree's counts)",
    "page of 100 after the middle",
    "keyword lane, 2 terms, common",
    "keyword lane, 2 terms, rare",
    "keyword search, 2 terms, common, 100 results",
    "keyword search, 2 terms, rare, 100 results",
    "memtui's index, first build",
    "forget, verified",
)
LANCEDB_ROWS = ("get one row by id", "vector lane, top 100 by cosine")
CHROMA_ROWS = (
    "vectors read from the HNSW files",
    "vector lane, top 100 by cosine, a text query",
    "vector lane, top 100 by cosine, a random query",
)


def _bench(name: str, library: str) -> Any:
    pytest.importorskip(library)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(f"benchmarks.{name}")


def _assert_every_row(out: str, rows: tuple[str, ...]) -> None:
    lines = out.splitlines()
    for name in rows:
        row = next((line for line in lines if line.startswith(name)), None)
        assert row is not None, name
        assert "ms" in row, row


def _tiny(size_flag: str, folder: Any) -> list[str]:
    return [size_flag, "200", "--repeats", "1", "--rare-runs", "1", "--folder", str(folder)]


def test_the_chroma_benchmark_runs_at_a_tiny_size(tmp_path, capsys):
    bench = _bench("chroma_source", "chromadb")
    args = _tiny("--documents", tmp_path)
    assert bench.main(args) == 0
    out = capsys.readouterr().out
    assert "Chroma folder: 200 documents x 32 dims written by chromadb" in out
    _assert_every_row(out, SHARED_ROWS + CHROMA_ROWS)
    assert bench.main(args) == 0
    assert "Chroma folder: 200 documents x 32 dims reused" in capsys.readouterr().out


def test_the_lancedb_benchmark_runs_at_a_tiny_size(tmp_path, capsys):
    bench = _bench("lancedb_source", "lancedb")
    args = _tiny("--rows", tmp_path)
    assert bench.main(args) == 0
    out = capsys.readouterr().out
    assert "200 crewAI rows x 32 dims written by lancedb" in out
    _assert_every_row(out, SHARED_ROWS + LANCEDB_ROWS)
    assert bench.dataset(tmp_path / "lancedb-200").count_rows() == 200
    assert bench.main(args) == 0
    assert "200 crewAI rows x 32 dims reused" in capsys.readouterr().out


def test_the_chroma_benchmark_can_run_its_vector_rows_alone(tmp_path, capsys):
    bench = _bench("chroma_source", "chromadb")
    assert bench.main([*_tiny("--documents", tmp_path), "--vector-only"]) == 0
    out = capsys.readouterr().out
    _assert_every_row(out, (*CHROMA_ROWS, "memtui's index, first build"))
    assert "keyword" not in out and "forget" not in out
