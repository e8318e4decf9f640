"""Starting the app: open the store first, so opening errors stay one-line CLI errors."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from memtui.core.store import MemoryStore, MemoryStoreError

APP_BUSY_TIMEOUT_MS = 1000
"""How long one try of a change waits for another process's write lock inside SQLite.

Short, so that the app says "database busy — retrying (k/N)" within a second instead of
waiting silently; the app retries a bounded number of times (``memtui.tui.app``).
Reads do not wait on writers in WAL mode, so browsing is unaffected.
"""


def open_app_store(
    path: str | Path,
    *,
    read_only: bool = False,
    clock: Callable[[], datetime] | None = None,
) -> MemoryStore:
    """Open an existing memtui database for the app; raises ``MemoryStoreError``.

    The app never creates a database: a mistyped path is an error, not a new empty file.
    """
    path = Path(path)
    if not path.exists():
        raise MemoryStoreError(
            f"no database at {path}; check the path (memtui ingest CORPUS --db {path} creates one)"
        )
    return MemoryStore(path, read_only=read_only, clock=clock, busy_timeout_ms=APP_BUSY_TIMEOUT_MS)


def run_app(
    path: str | Path,
    *,
    read_only: bool = False,
    operator: str | None = None,
    clock: Callable[[], datetime] | None = None,
) -> None:
    """Open the database at ``path`` and run the app on it until the operator quits."""
    store = open_app_store(path, read_only=read_only, clock=clock)
    try:
        from memtui.tui.app import make_app

        app = make_app(store, operator=operator, db_label=Path(path).name)
        app.run()
    finally:
        store.close()
