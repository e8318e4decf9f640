"""Helpers for driving the app headless: tests, screenshots and the tmux-free checks.

Not imported by the app itself.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from textual.app import App
from textual.pilot import Pilot

from memtui.core.corpus import load_corpus
from memtui.core.embed import HashEmbedder
from memtui.core.store import MemoryStore

FIXED_NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
SAMPLE_CORPUS = Path(__file__).resolve().parents[2] / "sample_corpus" / "memory-corpus.json"


def fixed_clock() -> datetime:
    return FIXED_NOW


def build_sample_db(
    path: Path, *, clock: Callable[[], datetime] = fixed_clock, corpus: Path = SAMPLE_CORPUS
) -> Path:
    """A database at ``path`` loaded from the sample corpus with the hash embedder."""
    with MemoryStore(path, clock=clock, embedder=HashEmbedder(), operator="tester") as store:
        store.ingest(load_corpus(corpus), source=corpus.name)
    return path


async def settle(pilot: Pilot, rounds: int = 8) -> None:
    """Wait until no worker is running and every message they posted is handled."""
    app = pilot.app
    for _ in range(rounds):
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        if not any(worker.is_running for worker in app.workers):
            await pilot.pause()
            if not any(worker.is_running for worker in app.workers):
                return


def screen_text(app: App, width: int | None = None) -> str:
    """The current screen as plain text (what a terminal would show, without colour)."""
    size = app.size
    console = Console(
        width=width or size.width,
        height=size.height,
        record=True,
        file=io.StringIO(),
        color_system=None,
        legacy_windows=False,
    )
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    console.print(update)
    return console.export_text()
