"""Starting the app: open the store first, so opening errors stay one-line CLI errors."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from memtui.core.store import MemoryStore, MemoryStoreError
from memtui.sources.base import MemorySource

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
    path: str | Path | None,
    *,
    read_only: bool = False,
    operator: str | None = None,
    clock: Callable[[], datetime] | None = None,
    allow_writes: bool = False,
    audit_db: Path | None = None,
    now: str | None = None,
    embedder: Any = None,
    **qdrant: Any,
) -> None:
    """Open the store at ``path`` (or a Qdrant server) and run the app until the operator quits.

    A memtui database opens in the full app; any other store memtui recognizes
    opens through its ``MemorySource`` adapter (read-only unless ``allow_writes``).
    """
    qdrant = {k: v for k, v in qdrant.items() if v is not None}
    if path is not None and not qdrant.get("qdrant_url"):
        path = Path(path)
        if not path.exists():
            open_app_store(path, read_only=read_only, clock=clock)  # raises "no database at"
        from memtui.sources.detect import recognize

        kind, _schema, _version = recognize(path)
        if kind == "memtui":
            store = open_app_store(path, read_only=read_only, clock=clock)
            try:
                from memtui.tui.app import make_app

                app = make_app(store, operator=operator, db_label=path.name)
                app.run()
            finally:
                store.close()
            return
    source = open_app_source(
        path,
        read_only=read_only,
        allow_writes=allow_writes,
        audit_db=audit_db,
        now=now,
        clock=clock,
        operator=operator,
        **qdrant,
    )
    try:
        from memtui.tui.source_app import make_source_app

        make_source_app(source, operator=operator, embedder=embedder).run()
    finally:
        source.close()


def open_app_source(
    path: str | Path | None,
    *,
    read_only: bool = False,
    allow_writes: bool = False,
    clock: Callable[[], datetime] | None = None,
    **options: Any,
) -> MemorySource:
    """Any store memtui recognizes, behind ``MemorySource`` (foreign ones read-only by default)."""
    from memtui.sources import open_source

    return open_source(
        path,
        read_only=True if read_only else None,
        allow_writes=allow_writes and not read_only,
        clock=clock,
        **options,
    )


def app_for_source(source: MemorySource | MemoryStore, **kwargs: Any) -> Any:
    """The app for an open source: the full app on a memtui database, else ``SourceApp``.

    A ``MemoryStore`` (or a ``NativeSource``) gets ``MemtuiApp`` with every native feature.
    """
    from memtui.sources.native import NativeSource

    if isinstance(source, NativeSource):
        source = source.store
    if isinstance(source, MemoryStore):
        from memtui.tui.app import make_app

        kwargs.pop("embedder", None)
        return make_app(source, **kwargs)
    from memtui.tui.source_app import make_source_app

    return make_source_app(source, **kwargs)
