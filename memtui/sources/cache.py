"""Where memtui keeps its index of each foreign store, and when it rebuilds it.

A foreign store's keyword and vector index (``memtui.sources.foreign_index``) is
a file in ``$XDG_CACHE_HOME/memtui/sources/`` (else ``~/.cache/memtui/sources/``),
never beside or inside the store; ``$MEMTUI_CACHE_DIR`` moves it (to
``$MEMTUI_CACHE_DIR/sources``).

- One file per store, keyed by the store's identity: its resolved path and
  inode (a store moved or replaced gets a new index).
- Rebuilt when the store changes: the source gives a cheap fingerprint (file
  sizes and mtimes, row counts and max rowids) recorded in the file; and when
  the file is of another format (``CACHE_FORMAT``: an older memtui's) or
  cannot be read.
- Built beside its final name and moved into place, so that a reader never
  sees half an index: written without a journal or syncs, synced to disk, then
  moved (a build that fails is removed; one killed leaves a ``.building`` file that
  is never read, and ``memtui cache clear`` removes).
- ``memtui cache list`` / ``memtui cache clear`` list and remove them.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import struct
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from memtui.config import current
from memtui.sources.foreign_index import (
    CACHE_FORMAT,
    VECTOR_EMBEDDER_PREFIX,
    CacheRow,
    FilterSql,
    ForeignIndex,
)
from memtui.sources.shapes import Progress, SourceError

__all__ = [
    "CACHE_FORMAT",
    "VECTOR_EMBEDDER_PREFIX",
    "CacheRow",
    "FilterSql",
    "ForeignIndex",
    "SourceIndex",
    "cache_path_for",
    "cache_root",
    "clear_caches",
    "file_fingerprint",
    "fingerprint_text",
    "list_caches",
    "require_cache_dir_writable",
    "second_half",
    "store_identity",
    "unpack_f32",
]


def cache_root() -> Path:
    """The folder holding every cached index (not created here).

    ``$MEMTUI_CACHE_DIR/sources``, else ``$XDG_CACHE_HOME/memtui/sources``, else
    ``~/.cache/memtui/sources`` (beside the core's vector matrix cache).
    """
    return current().sources_cache


def store_identity(path: Path) -> dict[str, Any]:
    resolved = path.resolve()
    stat = resolved.stat()
    return {"path": str(resolved), "device": stat.st_dev, "inode": stat.st_ino}


def cache_path_for(kind: str, path: Path, root: Path | None = None) -> Path:
    identity = store_identity(path)
    key = hashlib.sha256(
        f"{kind}\0{identity['path']}\0{identity['device']}\0{identity['inode']}".encode()
    ).hexdigest()[:24]
    return (root or cache_root()) / f"{kind}-{key}.db"


def file_fingerprint(path: Path) -> list[Any]:
    """Size and mtime of a SQLite file and its WAL: changes whenever a write lands."""
    parts: list[Any] = []
    for suffix in ("", "-wal"):
        part = Path(str(path) + suffix)
        try:
            stat = part.stat()
        except FileNotFoundError:
            parts.append(None)
            continue
        parts.append([stat.st_size, stat.st_mtime_ns])
    return parts


def list_caches(root: Path | None = None) -> list[dict[str, Any]]:
    """Every cached index: file, size, the store it indexes, rows, when built."""
    folder = root or cache_root()
    out: list[dict[str, Any]] = []
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.db")):
        info: dict[str, Any] = {"cache": str(path), "bytes": _size(path)}
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
                info["rows"] = conn.execute("SELECT count(*) FROM records").fetchone()[0]
            finally:
                conn.close()
            info.update(
                {
                    "source": meta.get("source_path"),
                    "kind": meta.get("source_kind"),
                    "built_at": meta.get("built_at"),
                    "source_exists": bool(meta.get("source_path"))
                    and Path(meta["source_path"]).exists(),
                }
            )
        except sqlite3.Error as exc:
            info["problem"] = str(exc)
        out.append(info)
    return out


def clear_caches(root: Path | None = None) -> list[Path]:
    """Remove every cached index (and its WAL and shared-memory files)."""
    folder = root or cache_root()
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    for path in sorted(folder.iterdir()):
        if path.is_file() and (
            path.suffix == ".db" or path.name.endswith((".db-wal", ".db-shm", ".building"))
        ):
            path.unlink(missing_ok=True)
            if path.suffix == ".db":
                removed.append(path)
    return removed


def _size(path: Path) -> int:
    total = 0
    for suffix in ("", "-wal"):
        part = Path(str(path) + suffix)
        if part.exists():
            total += part.stat().st_size
    return total


def unpack_f32(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


class SourceIndex:
    """The index of one store: open it fresh, rebuild it when the store moved on."""

    def __init__(
        self,
        *,
        kind: str,
        store_path: Path,
        allowed: frozenset[str],
        filter_sql: FilterSql | None,
        clock: Callable[[], datetime],
        fingerprint: Callable[[], str],
        rows: Callable[[], Iterable[CacheRow]],
        count: Callable[[], int],
        root: Path | None = None,
    ) -> None:
        self.kind = kind
        self.store_path = store_path
        self._allowed = allowed
        self._filter_sql = filter_sql
        self._clock = clock
        self._fingerprint = fingerprint
        self._rows = rows
        self._count = count
        self.root = root or cache_root()
        self.path = cache_path_for(kind, store_path, self.root)
        self._store: ForeignIndex | None = None

    def _open(self, path: Path, *, create: bool = False) -> ForeignIndex:
        """The index at ``path``; ``StaleIndex`` (or a SQLite error) when the file is not
        an index of this format."""
        return ForeignIndex(
            path,
            allowed=self._allowed,
            filter_sql=self._filter_sql,
            clock=self._clock,
            create=create,
        )

    def status(self) -> dict[str, Any]:
        ready = False
        if self.path.exists():
            try:
                store = self._store or self._open(self.path)
                self._store = store
                ready = store.meta().get("source_fingerprint") == self._fingerprint()
            except Exception:  # an unreadable index is simply not ready: it is rebuilt
                ready = False
        return {"ready": ready, "where": str(self.path)}

    def store(self, progress: Progress | None = None) -> ForeignIndex:
        """The index, rebuilt first if missing, stale or of another format."""
        fingerprint = self._fingerprint()
        if self._store is None and self.path.exists():
            try:
                self._store = self._open(self.path)
            except Exception:
                self.discard()
        if self._store is not None:
            try:
                fresh = self._store.meta().get("source_fingerprint") == fingerprint
            except sqlite3.Error:
                fresh = False
            if fresh:
                return self._store
        self._rebuild(fingerprint, progress)
        assert self._store is not None
        return self._store

    def discard(self) -> None:
        """Remove the index (and its WAL): the next search builds it again."""
        if self._store is not None:
            self._store.close()
            self._store = None
        for suffix in ("", "-wal", "-shm"):
            Path(str(self.path) + suffix).unlink(missing_ok=True)

    def _rebuild(self, fingerprint: str, progress: Progress | None) -> None:
        self.discard()
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            os.chmod(self.root, 0o700)
        except OSError:
            pass
        building = self.path.with_name(self.path.name + f".{os.getpid()}.building")
        _remove_file(building)
        total = max(self._count(), 1)
        fd = os.open(building, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)
        try:
            store = self._open(building, create=True)
            try:
                with store.building():
                    self._fill(store, total, progress)
                    identity = store_identity(self.store_path)
                    store.set_meta(
                        {
                            "source_kind": self.kind,
                            "source_path": identity["path"],
                            "source_inode": str(identity["inode"]),
                            "source_fingerprint": fingerprint,
                            "built_at": store.now_text(),
                        }
                    )
            finally:
                store.close()
            _sync_file(building)
        except BaseException:
            _remove_file(building)  # half written (no journal): never opened again
            raise
        os.replace(building, self.path)
        _remove_file(building)  # what is left of it beside the moved file
        self._store = self._open(self.path)
        if progress:
            progress(total * 2, total * 2)

    def _fill(self, store: ForeignIndex, total: int, progress: Progress | None) -> None:
        """Read every row of the store (``total``, about, for the progress) and write them
        into the new index, in source-id order."""
        rows: list[CacheRow] = []
        for row in self._rows():
            rows.append(row)
            if progress and len(rows) % 500 == 0:
                progress(len(rows), total * 2)
        rows.sort(key=lambda r: r.source_id)
        store.load(rows, progress=second_half(progress, len(rows)))

    def refresh(self, fingerprint: str) -> None:
        """After memtui changed the store itself (and the index with it): mark it current."""
        if self._store is not None:
            self._store.set_meta({"source_fingerprint": fingerprint})

    def current(self) -> ForeignIndex | None:
        """The open index if there is one (fresh or not), without rebuilding; a file that
        is not an index of this format is removed (nothing would purge its copies)."""
        if self._store is None and self.path.exists():
            try:
                self._store = self._open(self.path)
            except Exception:
                self.discard()
                return None
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def second_half(progress: Progress | None, rows: int) -> Progress | None:
    """A load's progress as the second half of a build's (the read was the first)."""
    if progress is None:
        return None
    return lambda done, _total: progress(rows + done, rows * 2 or 1)


def _remove_file(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def _sync_file(path: Path) -> None:
    """The file's pages on disk before it is moved into place (a build writes it without
    syncs: ``ForeignIndex.building``)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fingerprint_text(parts: Any) -> str:
    return json.dumps(parts, sort_keys=True, default=str)


def require_cache_dir_writable(root: Path) -> None:
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SourceError(f"cannot create memtui's cache folder {root}: {exc.strerror}") from None
