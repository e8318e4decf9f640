"""A Qdrant local folder: its layout, whether an agent holds it, and one collection's
``storage.sqlite`` read (and written) without qdrant-client."""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memtui.sources.base import FileIdentity, SourceError
from memtui.sources.foreign import BYTE_CHECK_LIMIT, CHECKPOINT_RETRIES, forgotten_bytes_gone
from memtui.sources.qdrant.collections import CollectionInfo, classify, vector_config
from memtui.sources.qdrant.lock import folder_write_lock
from memtui.sources.qdrant.points import PointData, decode_point, normalize_pid
from memtui.sources.safe_pickle import (
    PickleLimitError,
    StoredPointStruct,
    UnsafePickleError,
    admitted_names,
    load_plain,
    load_point,
)

META_FILE = "meta.json"
STORAGE_FILE = "storage.sqlite"
BUSY_TIMEOUT_MS = 2000


def is_qdrant_folder(path: Path) -> bool:
    return (path / META_FILE).is_file() and (path / "collection").is_dir()


def find_qdrant_folder(path: Path) -> Path | None:
    """The Qdrant folder at ``path``, or the ``qdrant`` folder inside it (``outputs/``)."""
    if not path.is_dir():
        return None
    if is_qdrant_folder(path):
        return path
    inner = path / "qdrant"
    if is_qdrant_folder(inner):
        return inner
    return None


def read_meta(folder: Path) -> dict[str, Any]:
    try:
        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(f"cannot read {folder / META_FILE}: {exc}") from None
    except ValueError as exc:
        raise SourceError(f"{folder / META_FILE} is not valid JSON: {exc}") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("collections", {}), dict):
        raise SourceError(f"{folder / META_FILE} is not a Qdrant meta.json (no collections)")
    return meta


def collection_path(folder: Path, name: str) -> Path:
    """``collection/<name>``, refusing a name that points outside the folder (as the client)."""
    base = (folder / "collection").resolve()
    path = (base / name).resolve()
    if path == base or base not in path.parents:
        raise SourceError(f"collection name {name!r} points outside {folder}; refused")
    return folder / "collection" / name


def sqlite_uri(path: Path, **params: str) -> str:
    from urllib.parse import quote

    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{quote(str(path.resolve()), safe='/')}?{query}"


def stat_key(path: Path) -> list[Any] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return [stat.st_size, stat.st_mtime_ns]


class FolderBackend:
    """One collection of a Qdrant local folder, read (and written) without qdrant-client."""

    kind = "folder"

    def __init__(self, folder: Path, info: CollectionInfo, *, writable: bool) -> None:
        self.folder = folder
        self.info = info
        self.writable = writable
        self.storage = collection_path(folder, info.name) / STORAGE_FILE
        self.immutable = False
        self.conn: sqlite3.Connection | None = None
        self.identity = FileIdentity.of(self.storage)  # before it is opened
        #: one line per point the last load refused (the others were read)
        self.refused: list[str] = []
        if self.storage.exists():
            self.conn = self._connect()

    def _connect(self) -> sqlite3.Connection:
        try:
            if self.writable:
                conn = sqlite3.connect(
                    sqlite_uri(self.storage, mode="rw"),
                    uri=True,
                    isolation_level=None,
                    check_same_thread=False,
                )
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA secure_delete = ON")
            else:
                conn = sqlite3.connect(
                    sqlite_uri(self.storage, mode="ro"),
                    uri=True,
                    isolation_level=None,
                    check_same_thread=False,
                )
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA query_only = ON")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError as exc:
            if not self.writable and "locked" in str(exc):
                return self._connect_immutable()
            raise SourceError(f"cannot open {self.storage}: {exc}") from None
        except sqlite3.Error as exc:
            raise SourceError(f"cannot open {self.storage}: {exc}") from None
        return conn

    def _connect_immutable(self) -> sqlite3.Connection:
        """A writer keeps the file locked: read it as it is on disk (no locks at all)."""
        self.immutable = True
        conn = sqlite3.connect(
            sqlite_uri(self.storage, mode="ro", immutable="1"),
            uri=True,
            isolation_level=None,
            check_same_thread=False,
        )
        conn.execute("PRAGMA query_only = ON")
        return conn

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if self.conn is None:
            return []
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if not self.writable and not self.immutable and "locked" in str(exc):
                self.conn.close()
                self.conn = self._connect_immutable()
                return self.conn.execute(sql, params).fetchall()
            raise SourceError(f"reading {self.storage} failed: {exc}") from None
        except sqlite3.DatabaseError as exc:
            raise SourceError(f"reading {self.storage} failed: {exc}") from None

    def state_key(self) -> Any:
        return [stat_key(self.storage), stat_key(self.folder / META_FILE)]

    def load(self) -> list[PointData]:
        """Every point, decoded by the restricted unpickler; the newest row of an id wins."""
        if self.conn is None:
            return []
        if "points" not in {r[0] for r in self.query("SELECT name FROM sqlite_master")}:
            raise SourceError(f"{self.storage} has no points table: not a Qdrant collection")
        # One statement: a consistent snapshot, and the shared lock a running agent's
        # writer waits on is held only while the rows are fetched (~0.15 s at 10k x 384),
        # not while they are decoded.
        rows = self.query("SELECT rowid, id, point FROM points ORDER BY rowid DESC")
        seen: dict[int | str, PointData] = {}
        order: list[PointData] = []
        self.refused = []
        for rowid, key, blob in rows:
            point = self._decode(rowid, key, blob)
            if point is None:
                continue
            if point.pid in seen:  # an older copy (legacy key spelling): the newest wins
                kept = seen[point.pid]
                kept.rowids = (*kept.rowids, rowid)
                continue
            point.rowids = (rowid,)
            seen[point.pid] = point
            order.append(point)
        return order

    def _decode(self, rowid: int, key: Any, blob: Any) -> PointData | None:
        """The point of a row; None for one refused by the unpickler's bounds (noted)."""
        if not isinstance(blob, bytes | bytearray | memoryview):
            raise SourceError(f"{self.storage}: row {rowid} holds no pickled point")
        try:
            obj = load_point(bytes(blob))
        except PickleLimitError as exc:
            self.refused.append(
                f"refused point row {rowid}: its pickle {exc.reason} (collection "
                f"{self.info.name}); the rest of the collection is read (the row is left as it is)"
            )
            return None
        except UnsafePickleError as exc:
            raise SourceError(
                f"refused to read {self.storage}: point row {rowid} is a pickle that loads "
                f"{exc.module}.{exc.name}, which is not a Qdrant point class (memtui admits only "
                f"{admitted_names()}); nothing in it was run. This folder may have been tampered "
                "with: do not open it with qdrant-client"
            ) from None
        except Exception as exc:  # a truncated or corrupt pickle
            raise SourceError(
                f"{self.storage}: point row {rowid} is not a readable pickled point "
                f"({type(exc).__name__}: {exc})"
            ) from None
        if not isinstance(obj, StoredPointStruct):
            raise SourceError(
                f"{self.storage}: point row {rowid} holds a {type(obj).__name__}, not a PointStruct"
            )
        try:
            return decode_point(obj, self.info.vector_name)
        except ValueError as exc:
            raise SourceError(f"{self.storage}: point row {rowid}: {exc}") from None

    def key_pid(self, key: Any) -> int | str | None:
        try:
            return normalize_pid(load_plain(base64.b64decode(str(key), validate=True)))
        except (UnsafePickleError, ValueError, binascii.Error, EOFError, TypeError):
            return None
        except Exception:
            return None

    def delete(self, point: PointData) -> dict[str, Any]:
        """Delete every row of the point (the client's key and any legacy copies)."""
        assert self.conn is not None and self.writable
        conn = self.conn
        rowids = set(point.rowids)
        for rowid, key in conn.execute("SELECT rowid, id FROM points").fetchall():
            if self.key_pid(key) == point.pid:
                rowids.add(rowid)
        conn.execute("BEGIN IMMEDIATE")
        try:
            deleted = 0
            for rowid in sorted(rowids):
                deleted += conn.execute("DELETE FROM points WHERE rowid = ?", (rowid,)).rowcount
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        left = [r[0] for r in conn.execute("SELECT rowid FROM points").fetchall() if r[0] in rowids]
        return {"rows_deleted": deleted, "point_gone": not left}

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    # -- what the source asks of its backend (``memtui.sources.qdrant.backend``)

    rereads = True
    """The folder is read again whenever its files change."""
    forget_where = "storage.sqlite (then VACUUM)"

    @property
    def connection(self) -> sqlite3.Connection | None:
        return self.conn

    def watched(self, opened: list[FileIdentity]) -> list[FileIdentity]:
        """The folder (as the source opened it) and ``storage.sqlite``."""
        return opened if self.identity is None else [*opened, self.identity]

    def collections(self) -> list[CollectionInfo]:
        return folder_collections(self.folder)[0]

    def label(self, location: Path, kind_label: str) -> str:
        return f"{location.name}/{self.info.name} ({kind_label})"

    def writer(self) -> contextlib.AbstractContextManager[None]:
        return folder_write_lock(self.folder)

    def notes(self) -> list[str]:
        """What the summary says first about how the file was read."""
        if not self.immutable:
            return []
        return [
            "storage.sqlite was locked by a writer: read as it is on disk (immutable), "
            "it may be a moment old"
        ]

    def storage_notes(self, counts: dict[str, Any]) -> list[str]:
        """Free pages that may still hold points deleted earlier (counted in ``counts``)."""
        if self.conn is None:
            return []
        free = self.query("PRAGMA freelist_count")[0][0]
        if not free:
            return []
        counts["free_pages"] = free
        return [
            f"{free} free page(s) in storage.sqlite may still hold points deleted earlier "
            "(a memtui forget vacuums the file)"
        ]

    def add_probes(self, plan: dict[str, list[bytes]], probes: Sequence[bytes]) -> None:
        """Bytes a forget checks are gone from ``storage.sqlite`` afterwards."""
        plan.setdefault(str(self.storage), []).extend(p for p in probes if len(p) >= 8)

    def purge(
        self, plan: Mapping[str, Sequence[bytes]], value_columns: Sequence[tuple[str, str]]
    ) -> tuple[dict[str, bool], dict[str, Any]]:
        """VACUUM ``storage.sqlite`` after a forget and check its bytes (``purge_sqlite``)."""
        if self.conn is None:
            return {}, {}
        return purge_sqlite(self.conn, self.storage, plan.get(str(self.storage), []), value_columns)


def purge_sqlite(
    conn: sqlite3.Connection,
    path: Path,
    probes: Sequence[bytes],
    value_columns: Sequence[tuple[str, str]],
) -> tuple[dict[str, bool], dict[str, Any]]:
    """VACUUM a file memtui deleted from, truncate its WAL, and check that ``probes`` (the
    forgotten bytes) are gone beyond the live values of ``value_columns``; checks and
    details are named after the file."""
    checks: dict[str, bool] = {}
    details: dict[str, Any] = {}
    name = path.name
    try:
        conn.execute("VACUUM")
        details[f"{name}_vacuumed"] = True
    except sqlite3.OperationalError as exc:
        details[f"{name}_vacuumed"] = False
        details[f"{name}_vacuum_problem"] = str(exc)
        checks[f"{name}_vacuumed"] = False
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    if str(mode).lower() == "wal":
        truncated = False
        for attempt in range(CHECKPOINT_RETRIES):
            if conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0:
                truncated = True
                break
            time.sleep(0.05 * (attempt + 1))
        checks[f"{name}_wal_truncated"] = truncated
    details[f"{name}_free_pages_after"] = conn.execute("PRAGMA freelist_count").fetchone()[0]
    useful = [p for p in probes if p and len(p) >= 8]
    if useful:
        parts = [Path(str(path) + s) for s in ("", "-wal", "-journal")]
        size = sum(p.stat().st_size for p in parts if p.exists())
        if size <= BYTE_CHECK_LIMIT:
            data = b"".join(p.read_bytes() for p in parts if p.exists())
            checks[f"{name}_bytes_gone"] = forgotten_bytes_gone(
                conn, data, useful, list(value_columns)
            )
        else:
            details[f"{name}_bytes_check"] = f"skipped: over {BYTE_CHECK_LIMIT} bytes"
    return checks, details


def folder_collections(folder: Path) -> tuple[list[CollectionInfo], dict[str, str]]:
    """Every collection of a folder, from meta.json and a read-only count of its points."""
    meta = read_meta(folder)
    out: list[CollectionInfo] = []
    for name, config in sorted(meta.get("collections", {}).items()):
        vector_name, dim, distance, names = vector_config(config)
        sparse = tuple(sorted((config or {}).get("sparse_vectors") or {}))
        points: int | None = 0
        sample: tuple[str, ...] = ()
        try:
            storage = collection_path(folder, name) / STORAGE_FILE
        except SourceError:
            continue
        if storage.exists():
            points, sample = _count_and_sample(storage, vector_name)
        out.append(
            CollectionInfo(
                name=name,
                points=points,
                dim=dim,
                distance=distance,
                vector_name=vector_name,
                vector_names=names,
                sparse=sparse,
                kind=classify(name, sample),
                sample_keys=sample,
            )
        )
    aliases = meta.get("aliases") or {}
    return out, {str(k): str(v) for k, v in aliases.items()} if isinstance(aliases, dict) else {}


def _count_and_sample(storage: Path, vector_name: str | None) -> tuple[int | None, tuple[str, ...]]:
    try:
        conn = sqlite3.connect(sqlite_uri(storage, mode="ro"), uri=True)
    except sqlite3.Error:
        return None, ()
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        count = conn.execute("SELECT count(*) FROM points").fetchone()[0]
        row = conn.execute("SELECT point FROM points ORDER BY rowid LIMIT 1").fetchone()
    except sqlite3.Error:
        return None, ()
    finally:
        conn.close()
    sample: tuple[str, ...] = ()
    if row and isinstance(row[0], bytes):
        try:
            obj = load_point(row[0])
            if isinstance(obj, StoredPointStruct) and isinstance(obj.fields.get("payload"), dict):
                sample = tuple(sorted(str(k) for k in obj.fields["payload"]))
        except Exception:  # refused or corrupt: reported when the collection is opened
            sample = ()
    return count, sample
