"""The search trace, pinned: ``to_dict()`` gives the data the trace held as a plain
dict before it was typed, for real searches on the sample corpus and on every source.

``tests/fixtures/search_traces.json`` was written from the dict trace; a search here
must give the same data, keys in the same order, and the same ``--json`` output.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from conftest import ROOT, SAMPLE_CORPUS, fixed_clock
from test_sources_contract import CASES, make_store, opened

from memtui.core.corpus import load_corpus
from memtui.core.embed import HashEmbedder
from memtui.core.search import hybrid_search, rerank
from memtui.core.store import MemoryStore

GOLDEN = ROOT / "tests" / "fixtures" / "search_traces.json"
#: kinds added after the trace was typed (nothing to compare with; a Chroma folder's
#: times are also those of its writing, at test time)
NEWER_THAN_THE_PIN = {"chroma", "lancedb"}


def plain(trace: Any) -> Any:
    return trace.to_dict()


def shape(response: Any) -> dict[str, Any]:
    """Everything a response says, as plain data."""

    def result(item: Any) -> dict[str, Any]:
        return {
            "id": getattr(item, "id", None),
            "record_id": item.record_id,
            "rank": item.rank,
            "score": item.score,
            "keyword_score": item.keyword_score,
            "vector_score": item.vector_score,
            "created_at": item.created_at,
            "expires_at": item.expires_at,
            "trace": plain(item.trace),
        }

    return {
        "trace": plain(response.trace),
        "results": [result(r) for r in response.results],
        "candidates": [result(r) for r in response.candidates[len(response.results) :]],
    }


class _Failing:
    """An embedder of the right dimension whose every call fails."""

    name = "failing-embedder"

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def __call__(self, texts: Any) -> list[list[float]]:
        raise RuntimeError("no model here")


def native_scenarios(tmp_path: Path) -> dict[str, Any]:
    tmp_path.mkdir(parents=True)
    path = tmp_path / "sample.db"
    with MemoryStore(path, clock=fixed_clock, embedder=HashEmbedder(), operator="t") as loader:
        loader.ingest(load_corpus(SAMPLE_CORPUS), source="memory-corpus.json")
    out: dict[str, Any] = {}
    with MemoryStore(path, clock=fixed_clock, operator="t") as store:
        hybrid = hybrid_search(store, "sql injection items api")
        out["hybrid"] = shape(hybrid)
        out["rerank"] = shape(rerank(hybrid, (0.5, 0.5)))
        out["keyword_only"] = shape(hybrid_search(store, "sql injection", keyword_only=True))
        out["any_terms"] = shape(
            hybrid_search(store, "heron payload api", any_terms=True, limit=3, pool_size=5)
        )
        out["filtered"] = shape(hybrid_search(store, "api", filters={"tier": "episodic"}))
        out["empty"] = shape(hybrid_search(store, "!!! ..."))
        out["no_match"] = shape(hybrid_search(store, "qwphlumbixzz"))
        out["embedder_mismatch"] = shape(hybrid_search(store, "api", embedder=HashEmbedder(8)))
        out["weights"] = shape(hybrid_search(store, "api", weights={"keyword": 1, "vector": 0}))
    return out


def source_scenarios(tmp_path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for case in CASES:
        if case.name in NEWER_THAN_THE_PIN:
            continue
        path = make_store(case, tmp_path / case.name)
        with opened(case, path, read_only=True) as source:
            out[f"{case.name}:plain"] = shape(source.search(case.query))
            out[f"{case.name}:embedder"] = shape(source.search(case.query, embedder=case.embedder))
            out[f"{case.name}:wrong-dim"] = shape(
                source.search(case.query, embedder=HashEmbedder(9))
            )
            out[f"{case.name}:keyword-only"] = shape(
                source.search(case.query, embedder=case.embedder, keyword_only=True)
            )
            if case.embedder is not None:
                failing = _Failing(case.embedder.dim)
                out[f"{case.name}:failing"] = shape(source.search(case.query, embedder=failing))
    return out


def cli_scenarios(tmp_path: Path, runner: Any) -> dict[str, Any]:
    from memtui.cli import main

    tmp_path.mkdir(parents=True)
    path = tmp_path / "cli.db"
    with MemoryStore(path, clock=fixed_clock, embedder=HashEmbedder(), operator="t") as loader:
        loader.ingest(load_corpus(SAMPLE_CORPUS), source="memory-corpus.json")
    mem0 = make_store(next(c for c in CASES if c.name == "mem0"), tmp_path / "mem0")
    runs = {
        "native": [str(path), "sql injection items api", "--json", "--explain"],
        "native-keyword": [str(path), "sql injection", "--json", "--keyword-only"],
        "mem0": [str(mem0), "passport", "--json", "--embedder", "hash-8"],
    }
    out = {}
    for name, args in runs.items():
        result = runner.invoke(main, ["search", *args])
        assert result.exit_code == 0, result.output
        out[name] = result.output
    return out


def everything(tmp_path: Path, runner: Any) -> dict[str, Any]:
    return {
        "native": native_scenarios(tmp_path / "native"),
        "sources": source_scenarios(tmp_path / "sources"),
        "cli": cli_scenarios(tmp_path / "cli", runner),
    }


_INDEX_FILE = re.compile(r"/[^\"\n]*/memtui/sources/([a-z0-9-]+)-[0-9a-f]{24}\.db")


def without_paths(text: str) -> Any:
    """The data with each foreign index's file (a temporary folder's) named alike."""
    return json.loads(_INDEX_FILE.sub(r"<cache>/\1.db", text))


def test_the_trace_gives_the_data_it_gave_as_a_dict(tmp_path, runner):
    golden = without_paths(GOLDEN.read_text(encoding="utf-8"))
    found = without_paths(json.dumps(everything(tmp_path, runner)))
    for part in ("native", "sources", "cli"):
        assert list(found[part]) == list(golden[part])
        for name, data in golden[part].items():
            assert found[part][name] == data, (part, name)
            assert json.dumps(found[part][name]) == json.dumps(data), (part, name)
