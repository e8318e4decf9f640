"""memtui's full-text index over a foreign store, cached in the user's cache folder.

A foreign store has no FTS5 index of its own (or none memtui can rank with),
so memtui builds one: a ``MemoryStore`` file (records + FTS5 + vectors) in
``$XDG_CACHE_HOME/memtui/sources/`` (else ``~/.cache/memtui/sources/``), never
beside or inside the store. ``hybrid_search`` and ``explain_keyword`` run on it
unchanged, so results carry the native breakdown.

- One cache file per store, keyed by the store's identity: its resolved path
  and inode (a store moved or replaced gets a new cache).
- Rebuilt when the store changes: the source gives a cheap fingerprint (file
  sizes and mtimes, row counts and max rowids) recorded in the cache.
- ``$MEMTUI_CACHE_DIR`` moves it (to ``$MEMTUI_CACHE_DIR/sources``).
- The cache holds only what search needs: each record's searchable text, its
  tier, type and scope, its hidden flag and expiry (mapped so the native strict
  rule ``expires_at > now`` gives the source's own rule), and the store's own
  vectors. Metadata (and so secrets) stays in the store.
- Source ids map to cache rows in a side table, ``source_ids``; rows are
  written in source-id order, so ties break the same way in both.
- A forget purges the cache's copy with the native erasure (row, FTS postings
  merged away, vector, secure_delete, WAL truncated).
- ``memtui cache list`` / ``memtui cache clear`` list and remove them.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from memtui.config import current
from memtui.core.store import MemoryStore
from memtui.sources.base import Progress, SourceError, unknown_filter_error

CACHE_FORMAT = "1"
CACHE_TIER = "knowledge"  # every cached row; the source's tier is kept in ``engagement``
VECTOR_EMBEDDER_PREFIX = "store-vectors"

FilterSql = Callable[[str, Any, str], tuple[str, list[Any]]]


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


@dataclass(frozen=True)
class CacheRow:
    """What the cache keeps of one source record."""

    source_id: str
    tier: str
    record_type: str
    content: str
    scope: dict[str, Any]
    hidden: bool
    expires_at: str | None  # already mapped to the native strict rule
    vector: bytes | None = None  # little-endian float32


def _scope_text(scope: Mapping[str, Any]) -> dict[str, Any]:
    """Scope values as text (filters compare text); a list (tags) stays a list of text."""
    out: dict[str, Any] = {}
    for key, value in scope.items():
        if value is None:
            out[key] = None
        elif isinstance(value, list | tuple):
            out[key] = [str(v) for v in value]
        else:
            out[key] = str(value)
    return out


class CacheStore(MemoryStore):
    """A ``MemoryStore`` whose filters are the source's own scope keys."""

    def __init__(
        self,
        path: Path,
        *,
        allowed: frozenset[str],
        filter_sql: FilterSql | None,
        clock: Callable[[], datetime],
        read_only: bool = False,
    ) -> None:
        self._allowed = allowed
        self._filter_sql = filter_sql
        super().__init__(path, clock=clock, read_only=read_only, operator="memtui-cache")

    def scope_clause(  # type: ignore[override]
        self,
        filters: dict[str, Any] | None,
        *,
        include_refuted: bool = False,
        include_expired: bool = False,
        alias: str = "",
    ) -> tuple[str, list[Any]]:
        prefix = f"{alias}." if alias else ""
        clauses: list[str] = []
        params: list[Any] = []
        for key, value in (filters or {}).items():
            if key not in self._allowed:
                raise unknown_filter_error(key, self._allowed)
            if key == "tier":
                column = f"{prefix}engagement"
            elif key == "record_type":
                column = f"{prefix}record_type"
            else:
                # The key is allowlisted; it still goes into the JSON path quoted.
                quoted = key.replace('"', '""')
                column = f"json_extract({prefix}metadata, '$.scope.\"{quoted}\"')"
            if value is None:
                clauses.append(f"{column} IS NULL")
                continue
            if self._filter_sql is not None:
                custom = self._filter_sql(key, value, column)
                if custom is not None:
                    clauses.append(custom[0])
                    params.extend(custom[1])
                    continue
            clauses.append(f"{column} = ?")
            params.append(str(value))
        live, live_params = super().scope_clause(
            None, include_refuted=include_refuted, include_expired=include_expired, alias=alias
        )
        clauses.append(live)
        params.extend(live_params)
        return " AND ".join(clauses), params

    # -- building and maintenance (memtui-internal writes to the cache file)

    def ensure_side_table(self) -> None:
        with self._write():
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS source_ids ("
                "cache_id INTEGER PRIMARY KEY, source_id TEXT NOT NULL UNIQUE)"
            )

    def set_meta(self, values: Mapping[str, str]) -> None:
        with self._write():
            self._conn.executemany(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", list(values.items())
            )

    def meta(self) -> dict[str, str]:
        return {k: v for k, v in self.query("SELECT key, value FROM meta")}

    def load(self, rows: Sequence[CacheRow], progress: Progress | None = None) -> None:
        """Ingest rows (already in source-id order), their vectors and the id map."""
        prepared = [
            {
                "tier": CACHE_TIER,
                "record_type": row.record_type or "record",
                "content": row.content or "",
                "engagement": row.tier,
                "metadata": {"scope": _scope_text(row.scope)},
                "refuted": row.hidden,
                "expires_at": row.expires_at,
            }
            for row in rows
        ]
        ids = self.ingest(prepared, source="memtui source cache", progress=progress)
        dims = {len(r.vector) // 4 for r in rows if r.vector}
        with self._write():
            self._conn.executemany(
                "INSERT INTO source_ids (cache_id, source_id) VALUES (?, ?)",
                zip(ids, (r.source_id for r in rows), strict=True),
            )
            if len(dims) == 1:
                dim = dims.pop()
                self._conn.executemany(
                    "INSERT OR REPLACE INTO vectors (record_id, vector) VALUES (?, ?)",
                    [
                        (cache_id, row.vector)
                        for cache_id, row in zip(ids, rows, strict=True)
                        if row.vector and len(row.vector) == dim * 4
                    ],
                )
                self._conn.executemany(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                    [
                        ("embedder_name", f"{VECTOR_EMBEDDER_PREFIX}-{dim}"),
                        ("embedder_dim", str(dim)),
                    ],
                )

    def replace_vectors(self, vectors: Mapping[str, bytes]) -> int:
        """Make these records' cached vectors the ones given (a record with a vector per
        field: the one that counts for the next search); returns how many changed."""
        found = self.cache_ids(vectors)
        current = dict(
            self._conn.execute(
                "SELECT record_id, vector FROM vectors "
                "WHERE record_id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(found.values())),),
            ).fetchall()
        )
        changed = [
            (cache_id, vectors[source_id])
            for source_id, cache_id in found.items()
            if current.get(cache_id) != vectors[source_id]
        ]
        if changed:
            with self._write():
                self._conn.executemany(
                    "INSERT OR REPLACE INTO vectors (record_id, vector) VALUES (?, ?)", changed
                )
        return len(changed)

    def cache_ids(self, source_ids: Iterable[str]) -> dict[str, int]:
        ids = list(source_ids)
        out: dict[str, int] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for cache_id, source_id in self.query(
                f"SELECT cache_id, source_id FROM source_ids WHERE source_id IN ({marks})", chunk
            ):
                out[source_id] = cache_id
        return out

    def source_ids_of(self, cache_ids: Iterable[int]) -> dict[int, str]:
        ids = [int(i) for i in cache_ids]
        out: dict[int, str] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for cache_id, source_id in self.query(
                f"SELECT cache_id, source_id FROM source_ids WHERE cache_id IN ({marks})", chunk
            ):
                out[cache_id] = source_id
        return out

    def purge(self, source_id: str, *, reason: str, operator: str | None) -> dict[str, bool]:
        """Erase one source record's copy (row, postings, vector, id map); verified."""
        found = self.cache_ids([source_id])
        if source_id not in found:
            return {"cache_gone": True}
        cache_id = found[source_id]
        with self._write():
            self._conn.execute("DELETE FROM source_ids WHERE cache_id = ?", (cache_id,))
        verified = self.forget(cache_id, reason=reason, operator=operator)
        return {"cache_gone": bool(verified) and self.get(cache_id) is None}

    def update_row(self, row: CacheRow) -> None:
        """Bring one cached row in line with the store (state, expiry, text)."""
        found = self.cache_ids([row.source_id])
        if row.source_id not in found:
            return
        with self._write():
            self._conn.execute(
                "UPDATE records SET refuted = ?, expires_at = ?, metadata = ?, engagement = ?, "
                "record_type = ? WHERE id = ?",
                (
                    int(row.hidden),
                    row.expires_at,
                    json.dumps({"scope": _scope_text(row.scope)}, sort_keys=True),
                    row.tier,
                    row.record_type,
                    found[row.source_id],
                ),
            )
            current = self._conn.execute(
                "SELECT content FROM records WHERE id = ?", (found[row.source_id],)
            ).fetchone()
            if current is not None and current[0] != row.content:
                self._conn.execute(
                    "UPDATE records SET content = ? WHERE id = ?",
                    (row.content, found[row.source_id]),
                )
                self._conn.execute("INSERT INTO records_fts(records_fts) VALUES ('optimize')")
        self.checkpoint()


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
    """The cached index of one store: open it fresh, rebuild it when the store moved on."""

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
        self._store: CacheStore | None = None

    def _open(self, path: Path) -> CacheStore:
        return CacheStore(
            path, allowed=self._allowed, filter_sql=self._filter_sql, clock=self._clock
        )

    def status(self) -> dict[str, Any]:
        ready = False
        if self.path.exists():
            try:
                store = self._store or self._open(self.path)
                self._store = store
                ready = store.meta().get("source_fingerprint") == self._fingerprint()
            except Exception:  # an unreadable cache is simply not ready: it is rebuilt
                ready = False
        return {"ready": ready, "where": str(self.path)}

    def store(self, progress: Progress | None = None) -> CacheStore:
        """The cache, rebuilt first if missing or stale."""
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
        """Remove the cached index (and its WAL): the next search builds it again."""
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
        for suffix in ("", "-wal", "-shm"):
            Path(str(building) + suffix).unlink(missing_ok=True)
        total = max(self._count(), 1)
        rows: list[CacheRow] = []
        for row in self._rows():
            rows.append(row)
            if progress and len(rows) % 500 == 0:
                progress(len(rows), total * 2)
        rows.sort(key=lambda r: r.source_id)
        fd = os.open(building, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)
        store = self._open(building)
        try:
            store.ensure_side_table()

            def step(done: int, _total: int) -> None:
                if progress:
                    progress(len(rows) + done, len(rows) * 2 or 1)

            store.load(rows, progress=step)
            identity = store_identity(self.store_path)
            store.set_meta(
                {
                    "cache_format": CACHE_FORMAT,
                    "source_kind": self.kind,
                    "source_path": identity["path"],
                    "source_inode": str(identity["inode"]),
                    "source_fingerprint": fingerprint,
                    "built_at": store.now_text(),
                }
            )
            store.checkpoint()
        finally:
            store.close()
        os.replace(building, self.path)
        for suffix in ("-wal", "-shm"):
            Path(str(building) + suffix).unlink(missing_ok=True)
        self._store = self._open(self.path)
        if progress:
            progress(total * 2, total * 2)

    def refresh(self, fingerprint: str) -> None:
        """After memtui changed the store itself (and the cache with it): mark it current."""
        if self._store is not None:
            self._store.set_meta({"source_fingerprint": fingerprint})

    def current(self) -> CacheStore | None:
        """The open cache if there is one (fresh or not), without rebuilding."""
        if self._store is None and self.path.exists():
            try:
                self._store = self._open(self.path)
            except Exception:
                return None
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def fingerprint_text(parts: Any) -> str:
    return json.dumps(parts, sort_keys=True, default=str)


def require_cache_dir_writable(root: Path) -> None:
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SourceError(f"cannot create memtui's cache folder {root}: {exc.strerror}") from None
