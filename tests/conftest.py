"""Shared fixtures: a fixed clock and real databases built in a temporary folder."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import settings

from memtui.core.corpus import load_corpus
from memtui.core.embed import HashEmbedder
from memtui.core.store import MemoryStore

# Property tests draw the same examples on every run, so a red run reproduces.
settings.register_profile("memtui", derandomize=True, deadline=None)
settings.load_profile("memtui")

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_CORPUS = ROOT / "sample_corpus" / "memory-corpus.json"
NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def fixed_clock() -> datetime:
    return NOW


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
