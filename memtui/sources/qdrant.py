"""Qdrant collections as memory sources: local folders (read without the client) and servers.

A Qdrant **local folder** (what ``QdrantClient(path=...)`` writes) holds
``meta.json`` (collection configs, aliases) and one ``collection/<name>/
storage.sqlite`` per collection: ``points(id TEXT PRIMARY KEY, point BLOB)``,
``id`` base64(pickle(point id)), ``point`` a pickled ``PointStruct``.

Reading a folder (no client, no lock, nothing run):

- ``storage.sqlite`` is opened read-only (SQLite URI ``mode=ro``; when a writer
  keeps it locked past the busy timeout, ``immutable=1``), and every point is
  decoded with ``memtui.sources.safe_pickle``: only the point model's classes
  are admitted (mapped to inert stand-ins), so a crafted point is refused with
  an error naming what it tried to load, and nothing in it runs. qdrant-client
  is not needed for this. A point that would cost more than a point can (a
  list inside itself, nested too deep, a "billion laughs") is refused alone,
  named in one line (``refused``), and the rest of the collection is read.
- The folder's ``.lock`` is never taken for reading. Whether a running agent
  holds it is read from ``/proc/locks`` (Linux): then the folder opens
  read-only, with the note "the agent is live", and memtui refuses to write.
- Nothing is written: not ``meta.json``, not ``.lock``, not the SQLite files
  (no journal, no WAL), not beside the folder. The keyword index lives in
  memtui's cache folder and the audit log is created only by a write.

Writing a folder (``--allow-writes``, agent not running): memtui takes the
folder's ``.lock`` exactly as qdrant-client does (exclusive, non-blocking: it
fails while an agent holds it, and an agent cannot start while memtui writes),
deletes the point's row(s) from ``storage.sqlite`` directly with
``secure_delete`` on, runs ``VACUUM`` so no free page keeps the point, and
checks the file's bytes. It does not delete through qdrant-client: the client
would unpickle every stored point with the unrestricted ``pickle.loads`` (the
very hole the reader avoids) and hold all of them in memory (10k x 1024 dims:
3.8 s, 850 MB), and its delete leaves the point's bytes in free pages anyway.
The client itself reads ``storage.sqlite`` afresh on its next open, so the
point is simply gone for it.

A Qdrant **server** (``--qdrant-url URL [--api-key K]``) is opened through
qdrant-client (``pip install 'memtui[qdrant]'``); a forget deletes through the
client (``wait=True``) and checks that the point is gone; the server's own
storage is the server's to compact.

Which collection: ``--collection NAME`` (an alias works too); else
Cyber-AutoAgent's ``cyber_autoagent_memories`` or mem0's ``mem0`` when
present; else the only collection; else a ``CollectionChoiceError`` listing
every collection with its point count and dimension (the app shows a picker).
"""

from __future__ import annotations

import base64
import binascii
import bisect
import contextlib
import hashlib
import json
import math
import os
import re
import sqlite3
import sys
import time
import uuid
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memtui.config import current
from memtui.core.records import format_timestamp
from memtui.core.secrets import is_secret_key
from memtui.sources.base import (
    DEFAULT_PAGE_SIZE,
    FIELD_SEPARATOR,
    DetailSection,
    FileIdentity,
    Page,
    SourceError,
    SourceRecord,
    SourceSummary,
    TierFacet,
    check_limit,
    decode_id,
    encode_id,
)
from memtui.sources.cache import FilterSql, cache_root, fingerprint_text
from memtui.sources.foreign import (
    BYTE_CHECK_LIMIT,
    CHECKPOINT_RETRIES,
    ForeignSqliteSource,
    forgotten_bytes_gone,
)
from memtui.sources.safe_pickle import (
    PickleLimitError,
    StoredPointStruct,
    StoredSparseVector,
    UnsafePickleError,
    admitted_names,
    load_plain,
    load_point,
)

ID_PREFIX = "qd"
INSTALL_HINT = "pip install 'memtui[qdrant]'"
META_FILE = "meta.json"
LOCK_FILE = ".lock"
STORAGE_FILE = "storage.sqlite"
CAA_COLLECTION = "cyber_autoagent_memories"
MEM0_COLLECTION = "mem0"
WEB_CACHE_PATTERN = re.compile(r"^cyber_autoagent_web_search_cache_(\d+)_([0-9a-f]{16})$")
TEXT_KEYS = ("memory", "data", "text", "content", "page_content", "document", "query")
BUSY_TIMEOUT_MS = 2000
#: refused points named one by one in the summary (the rest are counted)
SHOWN_REFUSALS = 3
LOAD_BATCH = 512

Clock = Callable[[], datetime]


# ---------------------------------------------------------------- errors


class CollectionChoiceError(SourceError):
    """The store holds several collections and none was named: pick one.

    ``collections`` lists them (``CollectionInfo``) for a picker.
    """

    def __init__(self, where: str, collections: Sequence[CollectionInfo]) -> None:
        self.where = where
        self.collections = list(collections)
        listed = "; ".join(c.describe() for c in self.collections) or "none"
        if self.collections:
            message = (
                f"{where} holds {len(self.collections)} Qdrant collections; pick one with "
                f"--collection NAME: {listed}"
            )
        else:
            message = f"{where} holds no Qdrant collection"
        super().__init__(message)


def client_missing_error(what: str) -> SourceError:
    return SourceError(f"{what} needs qdrant-client, which is not installed: {INSTALL_HINT}")


# ---------------------------------------------------------------- folder layout


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


def _vector_config(config: Any) -> tuple[str | None, int | None, str | None, tuple[str, ...]]:
    """(dense vector name, its size, distance, every dense name) from a collection config."""
    vectors = config.get("vectors") if isinstance(config, dict) else None
    if isinstance(vectors, dict) and "size" in vectors:
        return "", _int(vectors.get("size")), _str(vectors.get("distance")), ("",)
    if isinstance(vectors, dict) and vectors:
        names = tuple(sorted(str(k) for k in vectors))
        chosen = "" if "" in vectors else names[0]
        params = vectors.get(chosen) or {}
        size = _int(params.get("size")) if isinstance(params, dict) else None
        distance = _str(params.get("distance")) if isinstance(params, dict) else None
        return chosen, size, distance, names
    return None, None, None, ()


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# ---------------------------------------------------------------- collections


@dataclass(frozen=True)
class CollectionInfo:
    """One collection: name, point count, dense vector size and distance, and what it holds."""

    name: str
    points: int | None
    dim: int | None
    distance: str | None
    vector_name: str | None = ""
    vector_names: tuple[str, ...] = ()
    sparse: tuple[str, ...] = ()
    kind: str = "qdrant"
    sample_keys: tuple[str, ...] = ()

    def describe(self) -> str:
        points = "?" if self.points is None else str(self.points)
        dims = "?" if self.dim is None else str(self.dim)
        label = KIND_LABELS.get(self.kind, "Qdrant collection")
        return f"{self.name} ({points} points, {dims} dims, {self.distance or '?'}; {label})"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "points": self.points,
            "dims": self.dim,
            "distance": self.distance,
            "kind": self.kind,
            "label": KIND_LABELS.get(self.kind, "Qdrant collection"),
        }


KIND_LABELS = {
    "cyber-autoagent": "Cyber-AutoAgent memories",
    "cyber-web-cache": "Cyber-AutoAgent web-search cache",
    "mem0": "mem0 memories",
    "mem0-entities": "mem0 entity index",
    "qdrant": "Qdrant collection",
}


def classify(name: str, sample_keys: Iterable[str] = ()) -> str:
    """What a collection holds, by its name first and its payload keys second."""
    keys = set(sample_keys)
    if name == CAA_COLLECTION:
        return "cyber-autoagent"
    if WEB_CACHE_PATTERN.match(name):
        return "cyber-web-cache"
    if name == MEM0_COLLECTION:
        return "mem0"
    if name.endswith(("_entities", "-entities")):
        return "mem0-entities"
    if {"memory", "target_values", "operation_id"} <= keys:
        return "cyber-autoagent"
    if {"query", "result", "result_count", "expires_at"} <= keys:
        return "cyber-web-cache"
    if {"data", "hash"} <= keys:
        return "mem0"
    return "qdrant"


def choose_collection(
    collections: Sequence[CollectionInfo],
    wanted: str | None,
    where: str,
    aliases: Mapping[str, str],
) -> CollectionInfo:
    by_name = {c.name: c for c in collections}
    if wanted:
        name = aliases.get(wanted, wanted) if wanted not in by_name else wanted
        if name in by_name:
            return by_name[name]
        listed = "; ".join(c.describe() for c in collections) or "none"
        raise SourceError(f"{where} has no collection {wanted!r}; it holds: {listed}")
    for preferred in (CAA_COLLECTION, MEM0_COLLECTION):
        if preferred in by_name:
            return by_name[preferred]
    if len(collections) == 1:
        return collections[0]
    raise CollectionChoiceError(where, collections)


# ---------------------------------------------------------------- points


@dataclass
class PointData:
    """One decoded point: id, payload, and its dense vector as little-endian float32."""

    pid: int | str
    payload: dict[str, Any]
    vector: bytes | None
    dims: int | None
    dense_names: tuple[str, ...] = ()
    sparse_names: tuple[str, ...] = ()
    rowids: tuple[int, ...] = ()


def normalize_pid(value: Any) -> int | str:
    """A point id as Qdrant normalizes it: an unsigned int, or a canonical UUID string."""
    if isinstance(value, bool):
        raise ValueError("a point id is an unsigned integer or a UUID")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return str(uuid.UUID(value))
        except ValueError:
            return value
    if isinstance(value, uuid.UUID):
        return str(value)
    raise ValueError(f"a point id is an unsigned integer or a UUID, not {type(value).__name__}")


def record_id_of(pid: int | str) -> str:
    return encode_id(ID_PREFIX, str(pid))


def pid_of(record_id: str) -> int | str | None:
    parts = decode_id(ID_PREFIX, str(record_id), 1)
    if parts is None or not parts[0]:
        return None
    text = parts[0]
    if text.isdigit():
        return int(text)
    try:
        return str(uuid.UUID(text))
    except ValueError:
        return text


def _pack(values: Any) -> tuple[bytes, int] | None:
    if not isinstance(values, list | tuple) or not values:
        return None
    try:
        packed = array("f", values)  # refuses anything but numbers (in C, fast)
    except (TypeError, OverflowError):
        return None
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes(), len(values)


def json_safe(value: Any) -> Any:
    """A payload value as JSON (sets and tuples become lists, other objects their repr)."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    return repr(value)


def decode_point(obj: Any, vector_name: str | None) -> PointData:
    """A point from the restricted unpickler's stand-in (or a client ``Record``)."""
    if isinstance(obj, StoredPointStruct):
        fields = obj.fields
        raw_id, raw_vector, raw_payload = (
            fields.get("id"),
            fields.get("vector"),
            fields.get("payload"),
        )
    else:  # a qdrant-client Record / PointStruct from a server
        raw_id = getattr(obj, "id", None)
        raw_vector = getattr(obj, "vector", None)
        raw_payload = getattr(obj, "payload", None)
    pid = normalize_pid(raw_id)
    payload = json_safe(raw_payload) if isinstance(raw_payload, dict) else {}
    dense: dict[str, Any] = {}
    sparse: list[str] = []
    if isinstance(raw_vector, dict):
        for name, value in raw_vector.items():
            if isinstance(value, StoredSparseVector) or hasattr(value, "indices"):
                sparse.append(str(name))
            else:
                dense[str(name)] = value
    elif raw_vector is not None:
        dense[""] = raw_vector
    chosen = vector_name if vector_name in dense else ("" if "" in dense else None)
    if chosen is None and len(dense) == 1:
        chosen = next(iter(dense))
    packed = _pack(dense.get(chosen)) if chosen is not None else None
    return PointData(
        pid=pid,
        payload=payload,
        vector=packed[0] if packed else None,
        dims=packed[1] if packed else None,
        dense_names=tuple(sorted(dense)),
        sparse_names=tuple(sorted(sparse)),
    )


# ---------------------------------------------------------------- liveness


def lock_holders(lock_path: Path) -> list[int] | None:
    """Pids holding a lock on ``lock_path`` per ``/proc/locks``; None when it cannot be told."""
    try:
        stat = lock_path.stat()
    except FileNotFoundError:
        return []
    except OSError:
        return None
    try:
        text = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    wanted = (os.major(stat.st_dev), os.minor(stat.st_dev), stat.st_ino)
    holders: list[int] = []
    for line in text.splitlines():
        parts = line.split()
        if "->" in parts:  # a waiting request, not a held lock
            continue
        for index, part in enumerate(parts):
            if part.count(":") == 2 and index > 0:
                major, minor, inode = part.split(":")
                try:
                    found = (int(major, 16), int(minor, 16), int(inode))
                except ValueError:
                    break
                if found == wanted:
                    try:
                        holders.append(int(parts[index - 1]))
                    except ValueError:
                        holders.append(-1)
                break
    return holders


@contextlib.contextmanager
def folder_write_lock(folder: Path) -> Iterator[None]:
    """Hold the folder's ``.lock`` as qdrant-client does (exclusive, non-blocking)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        raise SourceError(
            "writing a Qdrant folder needs POSIX file locks (fcntl); use a Qdrant server"
        ) from None
    path = folder / LOCK_FILE
    try:
        if not path.exists():
            path.write_text("tmp lock file", encoding="ascii")  # what the client writes
        handle = open(path, "r+")  # noqa: SIM115 - held for the block
    except OSError as exc:
        raise SourceError(f"cannot take {path} for writing: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise SourceError(
                f"the agent is live: another process holds {path}; memtui will not write to "
                "this folder while it runs (stop the agent first, or use its Qdrant server)"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    finally:
        handle.close()


def _uri(path: Path, **params: str) -> str:
    from urllib.parse import quote

    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{quote(str(path.resolve()), safe='/')}?{query}"


def stat_key(path: Path) -> list[Any] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return [stat.st_size, stat.st_mtime_ns]


# ---------------------------------------------------------------- folder reader


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
                    _uri(self.storage, mode="rw"),
                    uri=True,
                    isolation_level=None,
                    check_same_thread=False,
                )
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA secure_delete = ON")
            else:
                conn = sqlite3.connect(
                    _uri(self.storage, mode="ro"),
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
            _uri(self.storage, mode="ro", immutable="1"),
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


def folder_collections(folder: Path) -> tuple[list[CollectionInfo], dict[str, str]]:
    """Every collection of a folder, from meta.json and a read-only count of its points."""
    meta = read_meta(folder)
    out: list[CollectionInfo] = []
    for name, config in sorted(meta.get("collections", {}).items()):
        vector_name, dim, distance, names = _vector_config(config)
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
        conn = sqlite3.connect(_uri(storage, mode="ro"), uri=True)
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


# ---------------------------------------------------------------- server


def make_client(url: str, api_key: str | None, timeout: int | None = None) -> Any:
    """A ``QdrantClient`` for a server (kept as a function so tests can point it elsewhere)."""
    try:
        from qdrant_client import QdrantClient
    except ImportError:
        raise client_missing_error("opening a Qdrant server") from None
    kwargs: dict[str, Any] = {"url": url}
    if api_key:
        kwargs["api_key"] = api_key
    if timeout:
        kwargs["timeout"] = timeout
    try:
        return QdrantClient(**kwargs)
    except Exception as exc:
        raise SourceError(f"cannot connect to the Qdrant server at {url}: {exc}") from None


def safe_url(url: str) -> str:
    """The URL without credentials (it names the store in labels and audit events)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        parts = parts._replace(netloc=host)
    return urlunsplit(parts)


class ServerBackend:
    """One collection of a Qdrant server, through qdrant-client."""

    kind = "server"

    def __init__(
        self, client: Any, url: str, info: CollectionInfo | None = None, *, owns_client: bool
    ) -> None:
        self.client = client
        self.owns_client = owns_client  # a client handed in by the caller stays open
        self.url = safe_url(url)
        self.info = info  # set once chosen
        self._snapshot: Any = None

    def collections(self) -> list[CollectionInfo]:
        try:
            names = sorted(c.name for c in self.client.get_collections().collections)
        except Exception as exc:
            raise SourceError(f"cannot list the collections of {self.url}: {exc}") from None
        out: list[CollectionInfo] = []
        for name in names:
            try:
                described = self.client.get_collection(name)
            except Exception as exc:
                raise SourceError(
                    f"cannot describe collection {name} on {self.url}: {exc}"
                ) from None
            params = described.config.params
            vectors = params.vectors
            config: dict[str, Any]
            if vectors is None:
                config = {}
            elif hasattr(vectors, "size"):
                config = {"vectors": {"size": vectors.size, "distance": _distance(vectors)}}
            else:
                config = {
                    "vectors": {
                        k: {"size": v.size, "distance": _distance(v)} for k, v in vectors.items()
                    }
                }
            vector_name, dim, distance, dense = _vector_config(config)
            sparse = tuple(sorted((params.sparse_vectors or {}).keys()))
            sample: tuple[str, ...] = ()
            try:
                points, _ = self.client.scroll(name, limit=1, with_payload=True, with_vectors=False)
                if points and isinstance(points[0].payload, dict):
                    sample = tuple(sorted(points[0].payload))
            except Exception:
                sample = ()
            count = described.points_count
            out.append(
                CollectionInfo(
                    name=name,
                    points=count if isinstance(count, int) else None,
                    dim=dim,
                    distance=distance,
                    vector_name=vector_name,
                    vector_names=dense,
                    sparse=sparse,
                    kind=classify(name, sample),
                    sample_keys=sample,
                )
            )
        return out

    def aliases(self) -> dict[str, str]:
        try:
            return {a.alias_name: a.collection_name for a in self.client.get_aliases().aliases}
        except Exception:
            return {}

    def load(self) -> list[PointData]:
        assert self.info is not None
        out: list[PointData] = []
        offset = None
        while True:
            try:
                points, offset = self.client.scroll(
                    self.info.name,
                    limit=LOAD_BATCH,
                    offset=offset,
                    with_payload=True,
                    with_vectors=True,
                )
            except Exception as exc:
                raise SourceError(
                    f"reading collection {self.info.name} on {self.url} failed: {exc}"
                ) from None
            out.extend(decode_point(p, self.info.vector_name) for p in points)
            if offset is None:
                break
        digest = hashlib.sha256()
        for point in sorted(out, key=lambda p: str(p.pid)):
            digest.update(json.dumps([str(point.pid), point.payload], sort_keys=True).encode())
            digest.update(point.vector or b"")
        self._snapshot = [len(out), digest.hexdigest()]
        return out

    def state_key(self) -> Any:
        return self._snapshot

    def delete(self, point: PointData) -> dict[str, Any]:
        assert self.info is not None
        from qdrant_client.http import models

        try:
            self.client.delete(
                self.info.name,
                points_selector=models.PointIdsList(points=[point.pid]),
                wait=True,
            )
            left = self.client.retrieve(self.info.name, ids=[point.pid], with_payload=False)
        except Exception as exc:
            raise SourceError(f"deleting the point on {self.url} failed: {exc}") from None
        return {"point_gone": not left}

    def close(self) -> None:
        if self.owns_client:
            with contextlib.suppress(Exception):
                self.client.close()


def _distance(params: Any) -> str | None:
    value = getattr(params, "distance", None)
    return getattr(value, "value", None) or (str(value) if value is not None else None)


# ---------------------------------------------------------------- the source


def text_fields(value: Any) -> list[str]:
    """Every string in a JSON value, depth first, leaving out secret-named fields."""
    out: list[str] = []
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if not is_secret_key(str(key)):
                out.extend(text_fields(item))
    elif isinstance(value, list):
        for item in value:
            out.extend(text_fields(item))
    return out


def payload_text(value: Any) -> str | None:
    """A scalar payload value as a scope value is typed (``true``, ``7``, ``alice``);
    None for a list, an object or nothing."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return None


def epoch_text(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    try:
        return format_timestamp(datetime.fromtimestamp(float(value), UTC))
    except (OverflowError, OSError, ValueError):
        return None


@dataclass
class _Snapshot:
    records: list[SourceRecord] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    by_id: dict[str, SourceRecord] = field(default_factory=dict)
    points: dict[str, PointData] = field(default_factory=dict)
    key: Any = None


class QdrantSource(ForeignSqliteSource):
    """A Qdrant collection (local folder or server) behind the ``MemorySource`` interface.

    Subclasses map a collection's payloads onto tiers and scopes
    (``record_from_point``); this class handles reading, paging, facets,
    freshness, the cached index, and the forget protocol.
    """

    kind = "qdrant"
    kind_label = "Qdrant collection"
    tiers = ("points",)
    scope_keys: tuple[str, ...] = ()
    #: scope keys whose value is a list (a filter matches any element)
    list_scope_keys: tuple[str, ...] = ()
    hidden_state = "expired"
    id_prefix = ID_PREFIX
    write_capabilities = frozenset({"forget", "forget_scope"})
    _held = False
    """While True the snapshot is not re-read (a scope forget deletes point after point)."""

    def __init__(
        self,
        location: Path,
        *,
        backend: FolderBackend | ServerBackend,
        info: CollectionInfo,
        live_holders: list[int] | None = None,
        read_only: bool = True,
        clock: Clock | None = None,
        operator: str | None = None,
        audit_db: str | Path | None = None,
        cache_root: Path | None = None,
        notes: Sequence[str] = (),
    ) -> None:
        self.backend = backend
        self.info = info
        self.live_holders = live_holders
        self._open_notes = list(notes)
        self._snap = _Snapshot()
        self._probe_plan: dict[str, list[bytes]] = {}
        super().__init__(
            location,
            read_only=read_only,
            clock=clock,
            operator=operator,
            audit_db=audit_db,
            cache_root=cache_root,
        )
        if isinstance(backend, ServerBackend):
            # No file of the store's to watch: the server names the collection on every
            # request, so a change and its check reach the collection that has the name now.
            self.opened_files = []
        elif backend.identity is not None:
            self.opened_files.append(backend.identity)
        self._reload()

    # -- connection (the backend owns it)

    def _connect(self) -> Any:
        return self.backend.conn if isinstance(self.backend, FolderBackend) else None

    def _columns(self) -> dict[str, list[str]]:
        return {}

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if not isinstance(self.backend, FolderBackend):
            return []
        with self._lock:
            return self.backend.query(sql, params)

    def close(self) -> None:
        with self._lock:
            self.backend.close()
        self.index.close()
        self.audit.close()

    # -- what it is

    @property
    def is_server(self) -> bool:
        return isinstance(self.backend, ServerBackend)

    @property
    def folder(self) -> Path | None:
        return self.backend.folder if isinstance(self.backend, FolderBackend) else None

    @property
    def live(self) -> bool:
        return bool(self.live_holders)

    def audit_source(self) -> dict[str, Any]:
        return {**super().audit_source(), "collection": self.info.name}

    @property
    def label(self) -> str:
        if isinstance(self.backend, ServerBackend):
            return f"{self.info.name} @ {self.backend.url} ({self.kind_label})"
        return f"{self.path.name}/{self.info.name} ({self.kind_label})"

    @property
    def expiry_rule(self) -> str:
        return "no expiry: a point is live until it is deleted"

    def has_vectors(self) -> bool:
        return self.info.dim is not None

    def vector_dim(self) -> int | None:
        return self.info.dim

    def read_only_message(self) -> str:
        if self.live:
            return (
                f"{self.label} is open read-only: the agent is live (process "
                f"{', '.join(str(p) for p in self.live_holders or [])} holds "
                f"{self.path / LOCK_FILE}); memtui will not write to a folder an agent is using "
                "- stop the agent first, or point memtui at its Qdrant server"
            )
        return super().read_only_message()

    def summary(self) -> SourceSummary:
        base = super().summary()
        notes = list(base.notes)
        counts = dict(base.counts)
        head: list[str] = []
        if self.live:
            head.append(
                "the agent is live: read-only (a running client holds the folder's .lock; "
                "memtui reads storage.sqlite without taking it)"
            )
        refused = self.refused
        head.extend(refused[:SHOWN_REFUSALS])
        if len(refused) > SHOWN_REFUSALS:
            head.append(
                f"and {len(refused) - SHOWN_REFUSALS} more refused points "
                "(memtui records names each, on stderr)"
            )
        if isinstance(self.backend, FolderBackend) and self.backend.immutable:
            head.append(
                "storage.sqlite was locked by a writer: read as it is on disk (immutable), "
                "it may be a moment old"
            )
        counts["points"] = len(self._snap.points)
        info = self.info
        notes.append(
            f"collection {info.name}: {len(self._snap.points)} points, "
            f"{info.dim if info.dim is not None else '?'} dims, {info.distance or '?'}"
            + (f", sparse: {', '.join(info.sparse)}" if info.sparse else "")
        )
        if isinstance(self.backend, FolderBackend) and self.backend.conn is not None:
            free = self.backend.query("PRAGMA freelist_count")[0][0]
            if free:
                counts["free_pages"] = free
                notes.append(
                    f"{free} free page(s) in storage.sqlite may still hold points deleted earlier "
                    "(a memtui forget vacuums the file)"
                )
        notes.extend(self._open_notes)
        return SourceSummary(
            kind=base.kind,
            label=base.label,
            path=base.path,
            read_only=base.read_only,
            counts=counts,
            notes=head + notes,
        )

    @property
    def refused(self) -> list[str]:
        """One line per point memtui refused to read (the rest of the collection is read)."""
        self._current()
        return list(self.backend.refused) if isinstance(self.backend, FolderBackend) else []

    def collections(self) -> list[CollectionInfo]:
        """Every collection of the store (for a picker)."""
        if isinstance(self.backend, FolderBackend):
            return folder_collections(self.backend.folder)[0]
        return self.backend.collections()

    # -- mapping (subclasses)

    def record_from_point(self, point: PointData) -> SourceRecord:
        payload = point.payload
        text = ""
        for key in TEXT_KEYS:
            if isinstance(payload.get(key), str):
                text = payload[key]
                break
        if not text:
            text = FIELD_SEPARATOR.join(text_fields(payload))
        created = payload.get("created_at")
        return SourceRecord(
            id=record_id_of(point.pid),
            tier="points",
            record_type="point",
            content=text,
            scope={},
            created_at=created if isinstance(created, str) else epoch_text(created),
            expires_at=None,
            state="live",
            metadata={"point_id": point.pid, "payload": payload, **self.embedding_meta(point)},
        )

    def embedding_meta(self, point: PointData) -> dict[str, Any]:
        info: dict[str, Any] = {"dims": point.dims}
        if point.dense_names not in ((), ("",)):
            info["dense"] = list(point.dense_names)
        if point.sparse_names:
            info["sparse"] = list(point.sparse_names)
        return {"embedding": info}

    def prepare(self, points: Mapping[str, PointData]) -> None:
        """Called after the points are read and before they are mapped (mem0: its history)."""

    def extra_records(self, points: Mapping[str, PointData]) -> list[SourceRecord]:
        """Records that are not points (mem0: deleted memories still readable in history)."""
        return []

    def state_key(self) -> Any:
        return self.backend.state_key()

    #: the open options this kind of collection takes (``memory_mode``, ``mem0_history``)
    option_names: tuple[str, ...] = ()

    @classmethod
    def options_from(cls, options: Mapping[str, Any], *, folder: Path | None) -> dict[str, Any]:
        """The source's own keyword arguments; an option for another kind is refused."""
        for name, value in options.items():
            if value is not None and name not in cls.option_names:
                raise SourceError(
                    f"--{name.replace('_', '-')} does not apply to {cls.kind_label} collections"
                )
        return {k: v for k, v in options.items() if k in cls.option_names}

    # -- loading and freshness

    def _reload(self) -> None:
        with self._lock:
            key = self.state_key()
            points = self.backend.load()
            by_point = {record_id_of(p.pid): p for p in points}
            self.prepare(by_point)
            records = [self.record_from_point(p) for p in points]
            records.extend(self.extra_records(by_point))
            records.sort(key=lambda r: r.id)
            self._snap = _Snapshot(
                records=records,
                ids=[r.id for r in records],
                by_id={r.id: r for r in records},
                points=by_point,
                key=key if not self.is_server else self.state_key(),
            )

    def _current(self) -> _Snapshot:
        with self._lock:
            if not self.is_server and not self._held and self.state_key() != self._snap.key:
                self._reload()
            return self._snap

    def refresh(self) -> None:
        """Read the collection again (a server is read once per open otherwise)."""
        self._reload()

    # -- filters

    def effective_filters(self, filters: Mapping[str, Any] | None) -> dict[str, Any]:
        """The filters after the source's own rule (Cyber-AutoAgent's memory mode)."""
        return self.check_filters(filters)

    def _matches(self, record: SourceRecord, filters: Mapping[str, Any]) -> bool:
        for key, value in filters.items():
            if key == "tier":
                have: Any = record.tier
            elif key == "record_type":
                have = record.record_type
            else:
                have = record.scope.get(key)
            if isinstance(have, list):
                wanted = value if isinstance(value, list | tuple | set) else [value]
                if value is None:
                    if have:
                        return False
                elif not set(map(str, have)) & set(map(str, wanted)):
                    return False
            elif value is None:
                if have is not None:
                    return False
            elif isinstance(value, list | tuple | set):
                if str(have) not in {str(v) for v in value} or have is None:
                    return False
            elif have is None or str(have) != str(value):
                return False
        return True

    def _select(
        self, filters: Mapping[str, Any] | None, include_hidden: bool, start: int = 0
    ) -> Iterator[SourceRecord]:
        checked = self.effective_filters(filters)
        records = self._current().records
        for stored in records[start:]:
            record = self.restate(stored)
            if not include_hidden and record.state != "live":
                continue
            if self._matches(record, checked):
                yield record

    def cache_filter_sql(self) -> FilterSql:
        list_keys = set(self.list_scope_keys)

        def custom(key: str, value: Any, column: str) -> tuple[str, list[Any]] | None:
            values = list(value) if isinstance(value, list | tuple | set) else None
            if key in list_keys:
                wanted = [str(v) for v in (values if values is not None else [value])]
                marks = ",".join("?" * len(wanted)) or "NULL"
                return (
                    f"EXISTS (SELECT 1 FROM json_each(coalesce({column}, '[]')) "
                    f"WHERE json_each.value IN ({marks}))",
                    wanted,
                )
            if values is not None:
                marks = ",".join("?" * len(values)) or "NULL"
                return f"{column} IN ({marks})", [str(v) for v in values]
            return None

        return custom  # type: ignore[return-value]

    # -- reading

    def record_count(self) -> int:
        return len(self._current().records)

    def fingerprint(self) -> str:
        snap = self._current()
        return fingerprint_text([self.kind, self.info.name, snap.key, len(snap.records)])

    def facets(
        self, filters: Mapping[str, Any] | None = None, *, include_hidden: bool = False
    ) -> list[TierFacet]:
        tiers: dict[str, int] = {}
        scopes: dict[str, dict[str, dict[str, int]]] = {}
        for record in self._select(filters, include_hidden):
            tiers[record.tier] = tiers.get(record.tier, 0) + 1
            bucket = scopes.setdefault(record.tier, {})
            for key in self.scope_keys:
                value = record.scope.get(key)
                values = value if isinstance(value, list) else [value]
                for item in dict.fromkeys(str(v) for v in values if v is not None):
                    counts = bucket.setdefault(key, {})
                    counts[item] = counts.get(item, 0) + 1
        order = {t: i for i, t in enumerate(self.tiers)}
        return [
            TierFacet(
                tier=tier,
                count=tiers[tier],
                scopes={k: dict(sorted(v.items())) for k, v in sorted(scopes[tier].items())},
            )
            for tier in sorted(tiers, key=lambda t: (order.get(t, len(order)), t))
        ]

    def page(
        self,
        filters: Mapping[str, Any] | None = None,
        *,
        after: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        include_hidden: bool = False,
    ) -> Page:
        limit = check_limit(limit)
        snap = self._current()
        start = 0
        if after:
            if pid_of(after) is None:
                raise SourceError(f"cursor {after!r} is not a {self.kind_label} record id")
            start = bisect.bisect_right(snap.ids, after)
        found: list[SourceRecord] = []
        for record in self._select(filters, include_hidden, start):
            found.append(record)
            if len(found) > limit:
                break
        more = len(found) > limit
        records = found[:limit]
        return Page(records=records, next_cursor=records[-1].id if more and records else None)

    def _canonical(self, record_id: str) -> str | None:
        pid = pid_of(record_id)
        return None if pid is None else record_id_of(pid)

    def restate(self, record: SourceRecord) -> SourceRecord:
        """The record with its state as of now (a collection whose expiry moves with time)."""
        return record

    def get(self, record_id: str) -> SourceRecord | None:
        key = self._canonical(record_id)
        record = None if key is None else self._current().by_id.get(key)
        return None if record is None else self.restate(record)

    def id_hint(self, record_id: str) -> str | None:
        """A bare point id (``7``, a UUID), as Qdrant and mem0 name a point: say its id."""
        if pid_of(record_id) is not None:
            return None
        text = str(record_id).strip()
        try:
            candidate = record_id_of(normalize_pid(int(text) if text.isdigit() else text))
        except ValueError:
            candidate = None
        if candidate is not None and self.get(candidate) is not None:
            return f"memtui's id of point {text} is {candidate}"
        return (
            f"a {self.kind_label} record's id is {ID_PREFIX}:POINT_ID, as `memtui records` lists it"
        )

    def get_many(self, record_ids: Iterable[str]) -> dict[str, SourceRecord]:
        snap = self._current()
        out: dict[str, SourceRecord] = {}
        for record_id in record_ids:
            key = self._canonical(record_id)
            if key is not None and key in snap.by_id:
                out[key] = self.restate(snap.by_id[key])
        return out

    def point(self, record_id: str) -> PointData | None:
        key = self._canonical(record_id)
        return None if key is None else self._current().points.get(key)

    def notes(self, record: SourceRecord) -> str:
        return f"point {record.metadata.get('point_id')}"

    def detail(self, record_id: str) -> list[DetailSection]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        from memtui.core.secrets import mask_metadata

        point = self.point(record_id)
        sections = []
        if point is not None:
            sections.append(
                DetailSection(
                    title="payload (full JSON, secrets masked)",
                    columns=("json",),
                    rows=[(json.dumps(mask_metadata(point.payload), indent=2, sort_keys=True),)],
                )
            )
            sections.append(
                DetailSection(
                    title="stored embedding",
                    columns=("collection", "dims", "dense names", "sparse names"),
                    rows=[
                        (
                            self.info.name,
                            point.dims,
                            ", ".join(n or "(unnamed)" for n in point.dense_names),
                            ", ".join(point.sparse_names),
                        )
                    ],
                )
            )
        sections.append(self.history_section(record.id))
        return sections

    # -- search (the cached index; the vectors are the collection's own)

    def cache_vectors(self) -> dict[str, bytes]:
        dim = self.info.dim
        return {
            record_id: point.vector
            for record_id, point in self._current().points.items()
            if point.vector is not None and (dim is None or point.dims == dim)
        }

    def search(self, query: str, **kwargs: Any) -> Any:
        kwargs["filters"] = self.effective_filters(kwargs.get("filters"))
        response = super().search(query, **kwargs)
        response.trace["source"]["collection"] = self.info.name
        return response

    # -- forget

    def _require_writable(self) -> None:
        if self.read_only:
            raise SourceError(self.read_only_message())

    def _writer(self) -> contextlib.AbstractContextManager[None]:
        if isinstance(self.backend, FolderBackend):
            return folder_write_lock(self.backend.folder)
        return contextlib.nullcontext()

    def forget(self, record_id: str, *, reason: str, operator: str | None = None) -> Any:
        self._require_writable()
        with self._writer():
            self._current()  # what is on disk now, under the lock (re-read if it changed)
            return super().forget(record_id, reason=reason, operator=operator)

    def forget_preview(self, record_id: str) -> dict[str, Any]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        where = "the server" if self.is_server else "storage.sqlite (then VACUUM)"
        return {
            "records": [record.id],
            "rule": f"The point (payload and vectors) is deleted from {where}.",
            "counts": {"points": 1},
        }

    def _delete_point(self, point: PointData, record: SourceRecord) -> dict[str, bool]:
        """Delete the point in the backend; returns checks.

        The byte check looks for what is the point's own: its id and its text
        (payload values shared with other points, such as an operation id, stay).
        """
        result = self.backend.delete(point)
        checks = {"point_gone": bool(result.get("point_gone"))}
        probes = [str(point.pid).encode("utf-8")]
        if record.content:
            probes.append(record.content.encode("utf-8")[:256])
        if isinstance(self.backend, FolderBackend):
            self._probe_plan[str(self.backend.storage)] = [p for p in probes if len(p) >= 8]
        return checks

    def record_value_columns(self) -> list[tuple[str, str]]:
        return [("points", "point")]  # a local folder's storage.sqlite: one pickle a point

    def _apply_forget(self, record: SourceRecord) -> dict[str, Any]:
        self._probe_plan = {}
        point = self.point(record.id)
        if point is None:
            raise SourceError(f"no point with id {record.id}")
        checks = self._delete_point(point, record)
        return {
            "removed": [record.id],
            "checks": checks,
            "probes": [],
            "details": {"collection": self.info.name, "backend": self.backend.kind},
        }

    # -- forget a whole scope

    @property
    def payload_scopes(self) -> bool:
        """Whether a scope is a top-level payload ``KEY=VALUE`` (a collection memtui maps
        to no scope keys of its own, such as a plain Qdrant collection)."""
        return not self.scope_keys

    def check_scope_key(self, key: str) -> None:
        if not self.payload_scopes:
            super().check_scope_key(key)
        elif not key.strip():
            raise SourceError("name a payload key of the points: --scope KEY=VALUE")

    def scope_records(self, key: str, value: str) -> list[SourceRecord]:
        snap = self._current()
        if self.payload_scopes:
            return [
                self.restate(record)
                for record in snap.records
                if record.id in snap.points
                and payload_text(snap.points[record.id].payload.get(key)) == value
            ]
        return [
            record
            for record in (self.restate(r) for r in snap.records)
            if self._matches(record, {key: value})
        ]

    def _apply_forget_many(self, records: Sequence[SourceRecord]) -> dict[str, Any]:
        """Each point deleted in turn from the snapshot read before the first (the file
        changes under it), and every point's bytes kept for the one check after."""
        plans: dict[str, list[bytes]] = {}

        def apply(record: SourceRecord) -> dict[str, Any]:
            applied = self._apply_forget(record)
            for path, probes in self._probe_plan.items():
                plans.setdefault(path, []).extend(probes)
            return applied

        self._held = True
        try:
            applied = self._forget_each(records, apply)
        finally:
            self._held = False
        self._probe_plan = plans
        return applied

    def _purge_connection(self, conn: sqlite3.Connection, path: Path, probes: Sequence[bytes]):
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
                    conn, data, useful, self.record_value_columns()
                )
            else:
                details[f"{name}_bytes_check"] = f"skipped: over {BYTE_CHECK_LIMIT} bytes"
        return checks, details

    def _purge_file(self, probes: Sequence[bytes]) -> tuple[dict[str, bool], dict[str, Any]]:
        checks: dict[str, bool] = {}
        details: dict[str, Any] = {}
        if isinstance(self.backend, FolderBackend) and self.backend.conn is not None:
            c, d = self._purge_connection(
                self.backend.conn,
                self.backend.storage,
                self._probe_plan.get(str(self.backend.storage), []),
            )
            checks.update(c)
            details.update(d)
        elif self.is_server:
            details["server_storage"] = (
                "not byte-checked: the server compacts its own segments (the point is deleted "
                "and no longer retrievable)"
            )
        extra_checks, extra_details = self._purge_extra()
        checks.update(extra_checks)
        details.update(extra_details)
        self._reload()
        return checks, details

    def _purge_extra(self) -> tuple[dict[str, bool], dict[str, Any]]:
        """Purge other files the forget changed (mem0's history)."""
        return {}, {}


# ---------------------------------------------------------------- opening


def _server_anchor(url: str, collection: str | None, root: Path | None) -> Path:
    """A folder in memtui's cache naming the server (the cache and audit key on it)."""
    key = hashlib.sha256(f"{safe_url(url)}\0{collection or ''}".encode()).hexdigest()[:16]
    anchor = (root or cache_root()) / "servers" / key
    anchor.mkdir(parents=True, exist_ok=True)
    info = anchor / "server.json"
    if not info.exists():
        info.write_text(json.dumps({"url": safe_url(url), "collection": collection}) + "\n")
    return anchor


def server_audit_path(url: str, collection: str) -> Path:
    """Default audit log of a server collection: in the user's data folder."""
    key = hashlib.sha256(f"{safe_url(url)}\0{collection}".encode()).hexdigest()[:16]
    folder = current().data_dir / "audit"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"qdrant-{collection[:40]}-{key}.memtui-audit.db"


def source_class(kind: str) -> type[QdrantSource]:
    if kind == "cyber-autoagent":
        from memtui.sources.cyber_autoagent import CyberAutoAgentSource

        return CyberAutoAgentSource
    if kind == "cyber-web-cache":
        from memtui.sources.cyber_autoagent import WebSearchCacheSource

        return WebSearchCacheSource
    if kind == "mem0":
        from memtui.sources.mem0 import Mem0Source

        return Mem0Source
    if kind == "mem0-entities":
        return Mem0EntitiesSource
    return QdrantSource


class Mem0EntitiesSource(QdrantSource):
    kind = "mem0-entities"
    kind_label = "mem0 entity index (Qdrant)"


def open_qdrant_folder(
    path: Path,
    *,
    collection: str | None = None,
    read_only: bool = True,
    options: Mapping[str, Any] | None = None,
    **common: Any,
) -> QdrantSource:
    """Open one collection of the Qdrant local folder at (or inside) ``path``."""
    folder = find_qdrant_folder(path)
    if folder is None:
        raise SourceError(f"{path} is not a Qdrant local folder (no meta.json + collection/)")
    collections, aliases = folder_collections(folder)
    info = choose_collection(collections, collection, str(folder), aliases)
    holders = lock_holders(folder / LOCK_FILE)
    notes: list[str] = []
    if holders is None:
        notes.append("whether an agent holds the folder's .lock cannot be told on this system")
    writable = not read_only and not holders
    cls = source_class(info.kind)
    backend = FolderBackend(folder, info, writable=writable)
    try:
        return cls(
            folder,
            backend=backend,
            info=info,
            live_holders=holders,
            read_only=not writable,
            notes=notes,
            **cls.options_from(options or {}, folder=folder),
            **common,
        )
    except BaseException:
        backend.close()
        raise


def open_qdrant_server(
    url: str,
    *,
    api_key: str | None = None,
    collection: str | None = None,
    client: Any = None,
    read_only: bool = True,
    options: Mapping[str, Any] | None = None,
    cache_root: Path | None = None,
    audit_db: str | Path | None = None,
    **common: Any,
) -> QdrantSource:
    """Open one collection of a Qdrant server through qdrant-client.

    ``client`` may be a ready ``QdrantClient`` (e.g. ``QdrantClient(":memory:")``).
    """
    owns = client is None
    if client is None:
        client = make_client(url, api_key)
    backend = ServerBackend(client, url, owns_client=owns)
    try:
        collections = backend.collections()
        info = choose_collection(collections, collection, backend.url, backend.aliases())
        backend.info = info
        anchor = _server_anchor(url, info.name, cache_root)
        cls = source_class(info.kind)
        return cls(
            anchor,
            backend=backend,
            info=info,
            live_holders=[],
            read_only=read_only,
            cache_root=cache_root,
            audit_db=audit_db or server_audit_path(url, info.name),
            **cls.options_from(options or {}, folder=None),
            **common,
        )
    except BaseException:
        backend.close()
        raise
