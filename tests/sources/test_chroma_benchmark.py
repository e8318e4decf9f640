"""The Chroma benchmark runs end to end on a tiny folder, so it cannot rot.

No timing is asserted: only that chromadb writes the folder and that every row of the
benchmark's table is printed, each with its figure.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest
from conftest import ROOT

pytest.importorskip("chromadb")

ROWS = (
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


def _module(name: str) -> Any:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(name)


def test_the_benchmark_runs_at_a_tiny_size(tmp_path, capsys):
    bench = _module("benchmarks.chroma_source")
    args = ["--documents", "200", "--repeats", "1", "--rare-runs", "1", "--folder", str(tmp_path)]
    assert bench.main(args) == 0
    out = capsys.readouterr().out
    assert "Chroma folder: 200 documents written by chromadb" in out
    lines = out.splitlines()
    for name in ROWS:
        row = next((line for line in lines if line.startswith(name)), None)
        assert row is not None, name
        assert "ms" in row
    assert bench.main(args) == 0
    assert "Chroma folder: 200 documents reused" in capsys.readouterr().out
