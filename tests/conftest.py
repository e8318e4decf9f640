"""Shared fixtures: a fixed clock and real databases built in a temporary folder."""

from __future__ import annotations

import gc
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
import textual.constants
from click.testing import CliRunner
from hypothesis import settings

from memtui.core.corpus import load_corpus
from memtui.core.embed import HashEmbedder
from memtui.core.store import MemoryStore

# Property tests draw the same examples on every run, so a red run reproduces.
settings.register_profile("memtui", derandomize=True, deadline=None)
settings.load_profile("memtui")

# No test looks at an animation, and under Pilot each one (a page-down's scroll, a tab's
# underline) is waited out frame by frame. Textual reads the variable when it is first
# imported, which a plugin may have done already: the constant too, for the apps made here.
os.environ["TEXTUAL_ANIMATIONS"] = "none"
textual.constants.TEXTUAL_ANIMATIONS = "none"  # type: ignore[misc]

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_CORPUS = ROOT / "sample_corpus" / "memory-corpus.json"
NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def fixed_clock() -> datetime:
    return NOW


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: half again as many workers as cores. Most app tests spend part of
    their time waiting on the event loop, so a third worker on two cores keeps both busy
    (measured on two idle cores: 3 workers 3:44, 2 workers 4:25)."""
    return max(2, (os.cpu_count() or 1) * 3 // 2)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After each test, collect its garbage and freeze what is left, so that the next
    tests' collections do not walk it again. Each app test leaves some 15,000 of Textual's
    cache objects alive; a worker's heap grew to half a million objects, and the full
    collections that walked them cost a quarter of the app tests' CPU."""
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked ``starts_first`` run first, the rest in their order: a long test
    handed out last (pytest-xdist gives out the tests in this order) keeps one worker
    busy while the others have finished."""
    items.sort(key=lambda item: item.get_closest_marker("starts_first") is None)


@pytest.fixture(autouse=True)
def private_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own cache, data and config folders, never the operator's.

    ``MEMTUI_CACHE_DIR`` is unset, so memtui's caches (vector matrices, foreign stores'
    keyword indexes) go to ``tmp_path / "cache" / "memtui"``; ``memtui demo`` and the
    Qdrant shadow folders to ``tmp_path / "data"``. A test may still point one of them
    elsewhere with ``monkeypatch``.
    """
    monkeypatch.delenv("MEMTUI_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


@pytest.fixture
def clock():
    return fixed_clock


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def store(db_path: Path):
    with MemoryStore(db_path, clock=fixed_clock, operator="tester") as opened:
        yield opened


@pytest.fixture
def sample_db(tmp_path: Path) -> Path:
    """A file database loaded from the sample corpus with the hash embedder."""
    path = tmp_path / "sample.db"
    with MemoryStore(path, clock=fixed_clock, embedder=HashEmbedder(), operator="tester") as loader:
        loader.ingest(load_corpus(SAMPLE_CORPUS), source="memory-corpus.json")
    return path


@pytest.fixture
def sample_store(sample_db: Path):
    with MemoryStore(sample_db, clock=fixed_clock, operator="tester") as opened:
        yield opened


def one_error_line(result) -> str:
    """The single line a failed command printed; no traceback, non-zero exit."""
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.fixture
def runner(monkeypatch):
    """A CLI runner with a pinned clock and operator, wide enough for tables."""
    monkeypatch.setenv("MEMTUI_NOW", "2026-11-30T12:00:00Z")
    monkeypatch.setenv("MEMTUI_OPERATOR", "cli-tester")
    monkeypatch.setenv("COLUMNS", "200")
    return CliRunner()


@pytest.fixture
def cli_db(runner, tmp_path):
    """The sample corpus ingested through the CLI."""
    from memtui.cli import main

    db = tmp_path / "cli.db"
    result = runner.invoke(main, ["ingest", str(SAMPLE_CORPUS), "--db", str(db)])
    assert result.exit_code == 0, result.output
    return db


def vector_pool_row_by_row(store, query_vector, pool_size):
    """The vector lane's pool, row by row: the live records with a vector and a positive
    cosine, best first, ties by id (what the lane must give, bit for bit)."""
    from memtui.core.search import cosine
    from memtui.core.store import unpack_vector

    where, params = store.scope_clause({}, alias="r")
    rows = store.query(
        "SELECT v.record_id, v.vector FROM vectors AS v JOIN records AS r ON r.id = v.record_id "
        f"WHERE {where}",
        params,
    )
    scored = [(rid, cosine(query_vector, unpack_vector(blob))) for rid, blob in rows]
    scored = sorted(((r, s) for r, s in scored if s > 0), key=lambda item: (-item[1], item[0]))
    return scored[:pool_size]
