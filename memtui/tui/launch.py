"""Starting the app: open the store first, so opening errors stay one-line CLI errors."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from memtui.config import current
from memtui.core.store import MemoryStore, MemoryStoreError
from memtui.sources.base import MemorySource


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
    busy = current().busy_timeout_ms
    return MemoryStore(path, read_only=read_only, clock=clock, busy_timeout_ms=busy)


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
    options: Mapping[str, Any] | None = None,
    questions: str | None = None,
) -> None:
    """Open the store at ``path`` (or a Qdrant server) and run the app until the operator quits.

    Every store opens as a ``MemorySource`` in the one app: a memtui database with
    every native feature, any other store through its adapter (read-only unless
    ``allow_writes``). ``options`` are one kind of store's (``open_source``). The
    settings are the command's (``memtui.config.current``); the keymap file is read
    first, so a bad one stops the start before anything opens. ``questions``: a
    questions file for the Eval tab (run when the tab is first shown).
    """
    from memtui.tui.keymap import load_keymap

    config = current()
    keymap = load_keymap(config.keymap_path)
    options = {k: v for k, v in (options or {}).items() if v is not None}
    opening: dict[str, Any] = dict(
        read_only=read_only,
        allow_writes=allow_writes,
        audit_db=audit_db,
        now=now,
        clock=clock,
        operator=operator,
    )
    from memtui.sources.qdrant import CollectionChoiceError

    try:
        source = open_app_source(path, **opening, options=options)
    except CollectionChoiceError as several:
        if not several.collections:
            raise
        name = pick_collection(several, keymap)
        if name is None:
            return  # the operator quit the picker
        options = {**options, "collection": name}
        source = open_app_source(path, **opening, options=options)
    app = None
    try:
        from memtui.tui.app import make_app

        app = make_app(
            source,
            operator=operator,
            embedder=embedder,
            reopen=lambda: open_app_source(path, **opening, options=options),
            poll_interval=config.poll_interval,
            questions=questions,
        )
        app.set_keymap(keymap)
        app.run()
    finally:
        # The app's source: the one it reopened, if the file was replaced under it.
        (source if app is None else app.source).close()


def pick_collection(several: Any, keymap: dict[str, str] | None = None) -> str | None:
    """Ask the operator which collection to open (``CollectionChoiceError``'s list), with
    the keymap file's keys (its ``picker.*`` ids)."""
    from memtui.tui.collection_picker import CollectionPicker

    picker = CollectionPicker(several.where, several.collections)
    picker.set_keymap(keymap or {})
    return picker.run()


def open_app_source(
    path: str | Path | None,
    *,
    read_only: bool = False,
    allow_writes: bool = False,
    clock: Callable[[], datetime] | None = None,
    options: Mapping[str, Any] | None = None,
    **opening: Any,
) -> MemorySource:
    """Any store memtui recognizes, behind ``MemorySource`` (foreign ones read-only by default).

    A memtui database opens with the app's short busy timeout (``Config.busy_timeout_ms``);
    a path that does not exist is an error, never a new empty file.
    """
    from memtui.sources.detect import names_remote_store, names_url_store, recognize

    if path is not None and not names_remote_store(options) and not names_url_store(path):
        path = Path(path)
        if not path.exists():
            open_app_store(path, read_only=read_only, clock=clock)  # raises "no database at"
        if recognize(path)[0] == "memtui":
            from memtui.sources.native import NativeSource

            return NativeSource(open_app_store(path, read_only=read_only, clock=clock))
    from memtui.sources import open_source

    return open_source(
        path,
        read_only=True if read_only else None,
        allow_writes=allow_writes and not read_only,
        clock=clock,
        options=options,
        **opening,
    )
