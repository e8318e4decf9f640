"""The store's vectors as one float32 matrix, for the vector lane (docs/design.md section 4).

Decoding a million vectors from SQLite blobs takes seconds, so the matrix is
built once and kept:

- in memory, per open store, for as long as the vectors do not change;
- on disk, for a store with at least ``FILE_CACHE_MIN_VECTORS`` vectors, as
  a memory-mapped ``.npy`` file in the ``vectors`` folder of the user's memtui
  cache folder (``$MEMTUI_CACHE_DIR``, else ``$XDG_CACHE_HOME/memtui``, else
  ``~/.cache/memtui``), so that the next process maps it in instead of
  decoding again. The rows are decoded straight into a temporary file, which
  is mapped at once (page cache is cheaper than fresh memory for a million
  rows); a background thread syncs it and publishes it under its name (the
  store's close, and the process's exit, wait for it: no temporary matrix is
  left behind).

A cached matrix is current only for the identity it was built at: the
database's ``database_id``, its ``vectors_generation`` (bumped by a trigger on
every vector write or delete, by any writer), the highest vector record id and
the recorded embedder. A stale copy is never used; it is deleted and rebuilt,
lazily, by the first vector search that needs it (never at start-up).

Forget means gone (docs/design.md section 3), without a rebuild. Inside the
forget's transaction, ``erase`` overwrites the forgotten rows of every on-disk
copy (one still being published included) and of the in-memory copy with
zeros, syncs the files, and takes the sidecar down, so that nothing trusts the
copies until the forget commits (a rollback leaves them to be rebuilt). After
the commit, ``carry_over`` zeroes any copy published meanwhile, then, if the
cache was current just before the forget, publishes a new sidecar for the
identity after it that lists the forgotten rows as removed (their bytes are
zeros; the vector lane never returns them), and keeps the in-memory copy the
same way. A cache that was not current is dropped, as before. Every other
vector write (ingest, a record with a vector, reindex) still makes the cache
stale.

numpy is imported only when a matrix is built or loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtui.config import current
from memtui.core.cancel import stop_if

if TYPE_CHECKING:
    from memtui.core.store import MemoryStore

FILE_CACHE_MIN_VECTORS = 50_000
"""Stores with fewer vectors keep their matrix in memory only."""

CACHE_DIR_ENV = "MEMTUI_CACHE_DIR"
BUILD_CHUNK = 4096  # rows per read: small enough for the allocator to reuse its buffers
_HEADER_BYTES = 128  # a .npy v1.0 header padded to a fixed size, written before the rows
_NPY_MAGIC = b"\x93NUMPY\x01\x00"

_MEMORY: weakref.WeakKeyDictionary[Any, VectorMatrix] = weakref.WeakKeyDictionary()


@dataclass
class VectorMatrix:
    """Every stored vector of one database, rows in record id order.

    ``bad`` maps the record ids whose stored blob does not have ``dim`` floats
    to the number of floats it has; those rows are not in the matrix.
    ``removed`` lists, ascending, the rows of records forgotten since the
    matrix was built: their values and norms are zeros, and they are never a
    result (their ids stay in ``ids``, which stays ascending).
    """

    ids: Any  # int64 array, ascending
    matrix: Any  # float32 array (len(ids), dim); a read-only memory map when from file
    norms: Any  # float32 array: each row's Euclidean norm
    dim: int
    name: str
    identity: tuple[Any, ...] | None
    source: str  # "memory" (an array), "file" (mapped from a cache file)
    bad: dict[int, int] = field(default_factory=dict)
    path: Path | None = None
    removed: Any = None  # int64 array of row indices, ascending; None: no row removed

    def __len__(self) -> int:
        return int(len(self.ids))

    def live_ids(self) -> Any:
        """``ids`` without the removed rows' ids."""
        if self.removed is None or not len(self.removed):
            return self.ids
        import numpy as np

        return np.delete(self.ids, self.removed)


def cache_dir() -> Path:
    """Where cached matrices go: the ``vectors`` folder of memtui's cache folder.

    That is $MEMTUI_CACHE_DIR, else $XDG_CACHE_HOME/memtui, else ~/.cache/memtui
    (foreign-store indexes sit beside it, in ``sources``).
    """
    return current().vectors_cache


def cache_stem(store: MemoryStore) -> str | None:
    """The file-name stem of this database's cache files; None for an in-memory store."""
    if store.path is None:
        return None
    where = str(Path(store.path).resolve())
    return "vectors-" + hashlib.sha256(where.encode("utf-8")).hexdigest()[:24]


def identity(store: MemoryStore) -> tuple[Any, ...] | None:
    """What a cached matrix must match to be current; None when the file cannot say."""
    values = {
        key: value
        for key, value in store.query(
            "SELECT key, value FROM meta WHERE key IN "
            "('vectors_generation', 'database_id', 'embedder_name', 'embedder_dim')"
        )
    }
    if "vectors_generation" not in values or "embedder_name" not in values:
        return None
    top = store.query("SELECT max(record_id) FROM vectors")[0][0]
    return (
        values.get("database_id"),
        int(values["vectors_generation"]),
        top,
        values["embedder_name"],
        int(values["embedder_dim"]),
    )


def cache_files(store: MemoryStore) -> list[Path]:
    """Every cache file of this database now on disk."""
    stem = cache_stem(store)
    folder = cache_dir()
    if stem is None or not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.name.startswith(stem))


def load(
    store: MemoryStore,
    cancelled: Callable[[], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> VectorMatrix | None:
    """The current matrix of ``store``'s vectors (None: no embedder recorded).

    In order: the in-memory copy, the on-disk copy, a fresh build from the
    database (into a cache file for a big store). A stale copy is discarded.
    A build reports ``progress(read up to record id, highest record id)``
    after each chunk, checks ``cancelled()`` between chunks and raises
    ``Cancelled``, leaving no file behind.
    """
    recorded = store.recorded_embedder()
    if recorded is None:
        return None
    current = identity(store)
    held = _MEMORY.get(store)
    if held is not None and current is not None and held.identity != current:
        # A forget may have carried the copy over since ``current`` was read.
        current = identity(store)
        held = _MEMORY.get(store)
    if held is not None and current is not None and held.identity == current:
        return held
    if held is not None and _MEMORY.get(store) is held:
        _MEMORY.pop(store, None)
    loaded = _load_file(store, current) if current is not None else None
    if loaded is None:
        loaded = _build(store, recorded["name"], recorded["dim"], current, cancelled, progress)
    if loaded.identity is not None:
        _MEMORY[store] = loaded
    return loaded


def invalidate(store: MemoryStore, forgotten: Any = (), *, empty_now: bool = True) -> bool:
    """Drop every cached copy of ``store``'s vectors; True when no cache file is left.

    Rows of ``forgotten`` record ids in an on-disk copy are first overwritten
    with zeros and synced to disk, so that their bytes do not linger in the
    blocks the file frees. The files are then renamed out of the cache at
    once and deleted by a background thread: freeing a big file's blocks takes
    a noticeable fraction of a second, and they no longer hold forgotten data.
    With ``empty_now=False`` that thread waits for ``empty_trash()``, so that
    a forget does not compete with its own checkpoint for the disk.
    """
    _MEMORY.pop(store, None)
    with _FILE_LOCK:
        return _invalidate_files(store, forgotten, empty_now)


def _invalidate_files(store: MemoryStore, forgotten: Any, empty_now: bool) -> bool:
    files = cache_files(store)
    if not files:
        return True
    wanted = [int(i) for i in forgotten]
    if wanted:
        import numpy as np

        _zero_rows(files, np.unique(np.asarray(wanted, dtype=np.int64)))
    _trash(files)
    if empty_now:
        empty_trash()
    return not cache_files(store)


@dataclass
class Erasure:
    """What ``erase`` did inside a forget's transaction, for ``carry_over`` after it."""

    forgotten: Any  # int64 record ids, ascending
    before: tuple[Any, ...] | None  # the identity just before the delete
    after: tuple[Any, ...] | None  # the identity once the forget is committed
    held: VectorMatrix | None  # the in-memory copy, its forgotten rows zeroed, if current
    sidecar: dict[str, Any] | None  # the on-disk sidecar ``erase`` took down
    erased: bool | None  # forgotten rows zero in every cache file; None: there was none


def erase(store: MemoryStore, forgotten: Any, before: tuple[Any, ...] | None) -> Erasure:
    """Inside a forget's transaction, after the delete: zero the forgotten rows everywhere.

    ``before`` is ``identity(store)`` read in the same transaction before the
    delete. Every cache file of the database (one still being published by
    this process included) gets the forgotten rows (and their norms)
    overwritten with zeros, synced; so does the in-memory copy, which is
    dropped instead if it cannot be (a read-only map of a file not zeroed).
    The sidecar is taken down and the in-memory copy marked current for no
    identity, so that until ``carry_over`` nothing trusts the copies: if the
    transaction rolls back they are rebuilt, never used without the rows.
    Files whose rows cannot be told apart are erased whole (``_leftovers``):
    a matrix not yet published (being built, or left by a process that died
    before publishing it) and the trash. ``erased`` (for the audit) says
    whether every forgotten row of every cache file, and of the copy this
    process maps, now reads as zeros (None: the database had no cache file).
    """
    import numpy as np

    targets = np.unique(np.asarray(list(forgotten), dtype=np.int64))
    after = identity(store)
    with _FILE_LOCK:
        files = cache_files(store)
        side = _read_sidecar(store)
        if side is not None:
            _take_down_sidecar(store)
        failed = _zero_rows(files, targets) if len(targets) else []
        leftovers = _leftovers(store)
        failed += [p for p in leftovers if not _shred(p)]
        held = _MEMORY.pop(store, None)
        kept = None
        held_erased = True
        if held is not None:
            current = before is not None and held.identity == before
            held.identity = None  # trusted again only by carry_over, after the commit
            held_erased = _erase_held(held, targets)
            if held_erased and current:
                kept = held
        erased = None if not files and not leftovers else not failed and held_erased
    return Erasure(targets, before, after, kept, side, erased)


def carry_over(store: MemoryStore, erasure: Erasure) -> bool:
    """After the forget committed: keep the cache current without a rebuild.

    First the forgotten rows are zeroed again in every cache file (one
    published by another process while the forget committed holds them).
    Then, if the cache was current just before the forget and nothing else
    has written since, the in-memory copy and the on-disk sidecar are
    republished for the identity after the forget, with the forgotten rows
    listed as removed; otherwise every cache file is dropped, as for a stale
    cache. Returns whether a copy was carried over (in memory or on disk).
    """
    now = identity(store)
    current = erasure.before is not None and erasure.after is not None and now == erasure.after
    with _FILE_LOCK:
        files = cache_files(store)
        failed = _zero_rows(files, erasure.forgotten) if len(erasure.forgotten) else []
        carried = False
        held = erasure.held
        if held is not None and current:
            held.identity = now
            if _MEMORY.get(store) is None:
                _MEMORY[store] = held
            carried = True
        side = _read_sidecar(store) or erasure.sidecar
        if (
            current
            and side is not None
            and tuple(side.get("identity", ())) == tuple(erasure.before)
            and (cache_dir() / str(side.get("matrix"))) not in failed
            and _republish(store, side, erasure.forgotten, now)
        ):
            return True
        # Not current, or no usable sidecar: drop every cache file but the
        # one this process is still publishing for the carried-over copy.
        keep = {held.path} if carried and held is not None and held.path in _PENDING else set()
        _trash([p for p in cache_files(store) if p not in keep])
        return carried


def _erase_held(held: VectorMatrix, targets: Any) -> bool:
    """Zero the forgotten rows of an in-memory copy and mark them removed.

    False when its rows cannot be zeroed: a read-only map of a file that
    still holds them (the caller drops it).
    """
    import numpy as np

    rows = _rows_of(held.ids, targets)
    if len(rows):
        matrix = held.matrix
        if held.source == "memory":
            if not matrix.flags.writeable:
                return False
            matrix[rows] = 0.0
        elif not _rows_are_zero(matrix, rows):  # a map of a file _zero_rows zeroed reads zeros
            return False
        norms = held.norms
        if not norms.flags.writeable:
            norms = norms.copy()
        norms[rows] = 0.0
        held.norms = norms
        previous = held.removed if held.removed is not None else np.zeros(0, dtype=np.int64)
        held.removed = np.union1d(previous, rows).astype(np.int64)
    if held.bad:
        gone = set(targets.tolist())
        held.bad = {k: v for k, v in held.bad.items() if k not in gone}
    return True


def _rows_of(ids: Any, targets: Any) -> Any:
    """The rows of the ascending ``ids`` that hold one of the ascending ``targets``."""
    import numpy as np

    if not len(ids) or not len(targets):
        return np.zeros(0, dtype=np.int64)
    where = np.searchsorted(ids, targets)
    inside = where < len(ids)
    where = where[inside]
    return where[ids[where] == targets[inside]].astype(np.int64)


def _rows_are_zero(matrix: Any, rows: Any) -> bool:
    """Whether every byte of ``rows`` of ``matrix`` is zero (-0.0 is not)."""
    for start in range(0, len(rows), BUILD_CHUNK):
        if _nonzero_rows(matrix[rows[start : start + BUILD_CHUNK]]).any():
            return False
    return True


def _nonzero_rows(values: Any) -> Any:
    """Over the rows of a float32 array (or the values of a vector): any byte not zero."""
    import numpy as np

    bits = np.ascontiguousarray(values).view(np.uint32)
    return (bits != 0).reshape(len(bits), -1).any(axis=1)


def _read_sidecar(store: MemoryStore) -> dict[str, Any] | None:
    stem = cache_stem(store)
    if stem is None:
        return None
    try:
        info = json.loads((cache_dir() / f"{stem}.json").read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def _take_down_sidecar(store: MemoryStore) -> None:
    stem = cache_stem(store)
    if stem is not None:
        try:
            (cache_dir() / f"{stem}.json").unlink()
        except OSError:
            pass


def _leftovers(store: MemoryStore) -> list[Path]:
    """This database's cache files whose rows a forget cannot find, so erases whole.

    A temporary matrix that this process is not publishing (one being built
    here or in another process, whose rows are not all written yet, or one a
    process left when it died before publishing it: its ids were never
    written) and the trash (files moved out of the cache, waiting to be
    deleted). Every such matrix was read before the forget committed: its
    identity is no longer current, so it would never be published anyway.
    """
    stem = cache_stem(store)
    folder = cache_dir()
    if stem is None or not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        name = path.name
        if name.startswith(_TRASH):
            name = name[len(_TRASH) :].partition("-")[2]
        elif ".tmp-" not in name or path in _PENDING:
            continue
        if name.startswith(stem):
            found.append(path)
    return sorted(found)


def _shred(path: Path) -> bool:
    """Overwrite the whole file with zeros, sync it, and delete it; True when done.

    A builder or publisher of this file (in this process or another) finds
    it gone and publishes nothing.
    """
    zeros = bytes(1 << 20)
    try:
        with path.open("r+b") as handle:
            size = handle.seek(0, 2)
            handle.seek(0)
            for start in range(0, size, len(zeros)):
                handle.write(zeros[: min(len(zeros), size - start)])
            handle.flush()
            os.fsync(handle.fileno())
        path.unlink()
    except FileNotFoundError:
        return True  # deleted meanwhile (by its own process)
    except OSError:
        return False
    return True


def _write_sidecar(folder: Path, stem: str, sidecar: dict[str, Any]) -> Path:
    side = folder / f"{stem}.json"
    tmp_side = folder / f"{stem}.json.tmp-{secrets.token_hex(4)}"
    tmp_side.write_text(json.dumps(sidecar))
    os.replace(tmp_side, side)
    return side


def _republish(
    store: MemoryStore, side: dict[str, Any], forgotten: Any, now: tuple[Any, ...]
) -> bool:
    """Publish ``side``'s files again for identity ``now``, the forgotten rows removed.

    The matrix, ids and norms files stay as they are (their forgotten rows
    already zeroed); a new removed-rows file and sidecar are written, and
    the files no longer referenced are moved out. False when its files
    cannot be read.
    """
    import numpy as np

    stem = cache_stem(store)
    folder = cache_dir()
    assert stem is not None
    try:
        names = [str(side[k]) for k in ("matrix", "ids", "norms")]
        if not all((folder / n).is_file() for n in names):
            return False
        ids = np.load(folder / side["ids"])
        previous = (
            np.load(folder / side["removed"])
            if side.get("removed")
            else np.zeros(0, dtype=np.int64)
        )
        rows = np.union1d(previous.astype(np.int64), _rows_of(ids, forgotten)).astype(np.int64)
        gone = set(forgotten.tolist())
        tag = hashlib.sha256(repr(now).encode()).hexdigest()[:12]
        removed_path = folder / f"{stem}-{tag}.removed.npy"
        _save_atomic(removed_path, rows)
        sidecar = dict(side)
        sidecar["identity"] = list(now)
        sidecar["removed"] = removed_path.name
        sidecar["bad"] = [[k, v] for k, v in side.get("bad", []) if k not in gone]
        kept = _write_sidecar(folder, stem, sidecar)
    except (OSError, ValueError, KeyError, TypeError):
        return False
    keep = {folder / n for n in names} | {removed_path, kept}
    _trash([p for p in cache_files(store) if p not in keep and ".tmp-" not in p.name])
    return True


def _trash(paths: list[Path]) -> None:
    """Move ``paths`` out of the cache at once; ``empty_trash`` deletes them later."""
    for path in paths:
        trash = path.with_name(f"{_TRASH}{secrets.token_hex(6)}-{path.name}")
        try:
            os.replace(path, trash)
        except FileNotFoundError:
            continue
        except OSError:
            try:
                path.unlink()
            except OSError:
                continue


def empty_trash() -> None:
    """Delete, in a background thread, the cache files ``invalidate`` renamed away."""
    _delete_later(_leftover_trash(cache_dir()))


_TRASH = "trash-"


def _leftover_trash(folder: Path) -> list[Path]:
    """Trash files another process renamed but did not get to delete."""
    try:
        return [p for p in folder.iterdir() if p.name.startswith(_TRASH)]
    except OSError:
        return []


def _delete_later(paths: list[Path]) -> None:
    def delete() -> None:
        for path in paths:
            try:
                path.unlink()
            except OSError:
                pass

    if paths:
        # Not a daemon: the process exits only once its trash is deleted.
        threading.Thread(target=delete, name="memtui-cache-trash").start()


# ---------------------------------------------------------------- build


def _build(
    store: MemoryStore,
    name: str,
    dim: int,
    current: tuple[Any, ...] | None,
    cancelled: Callable[[], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> VectorMatrix:
    """Decode the vectors table into a matrix; for a big file store, into the cache file.

    Reads in keyset chunks, each fetched whole, so no read transaction stays
    open. If the vectors change while they are read, they are read again (up
    to three times); a copy whose identity cannot be pinned is used once and
    not kept. A big store's rows are written straight to a temporary file in
    the cache folder and mapped (cheaper than fresh memory for a million
    rows); a background thread then syncs it and publishes it under its name.
    """
    for _attempt in range(3):
        if current is None:
            break
        writer = None
        stem = cache_stem(store)
        top = store.query("SELECT max(record_id) FROM vectors")[0][0] or 0
        if stem is not None and top >= FILE_CACHE_MIN_VECTORS:
            try:
                writer = _MatrixWriter(cache_dir(), stem, dim)
            except OSError:
                writer = None  # no writable cache folder: keep the matrix in memory
        try:
            ids, norms, rows, bad = _read_vectors(store, dim, writer, cancelled, progress)
            after = identity(store)
            if after == current:
                if writer is None:
                    return VectorMatrix(ids, rows, norms, dim, name, current, "memory", bad)
                mapped = writer.finish(ids)
                if mapped is None:  # a forget erased it: read again
                    continue
                built = VectorMatrix(ids, mapped, norms, dim, name, current, "file", bad)
                built.path = writer.tmp
                _publish_later(store, built, writer)
                return built
        except BaseException:
            if writer is not None:
                writer.abandon()
            raise
        if writer is not None:
            writer.abandon()
        current = after
    ids, norms, rows, bad = _read_vectors(store, dim, None, cancelled, progress)
    return VectorMatrix(ids, rows, norms, dim, name, None, "memory", bad)


def _read_vectors(
    store: MemoryStore,
    dim: int,
    writer: _MatrixWriter | None,
    cancelled: Callable[[], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Any, Any, Any, dict[int, int]]:
    """``(ids, norms, rows, bad)`` from the vectors table, rows in record id order.

    With a ``writer`` the rows go to its file (``rows`` is None); else into one
    preallocated matrix.
    """
    import numpy as np

    top = int(store.query("SELECT max(record_id) FROM vectors")[0][0] or 0)
    capacity = max(top, 1)
    matrix = np.empty((capacity, dim), dtype="<f4") if writer is None else None
    ids = np.empty(capacity, dtype=np.int64)
    norms = np.empty(capacity, dtype=np.float32)
    bad: dict[int, int] = {}
    width = dim * 4
    count = 0
    last = 0
    first = True
    while True:
        stop_if(cancelled)
        if first:
            rows = store.query_tuples(
                "SELECT record_id, vector FROM vectors ORDER BY record_id LIMIT ?", (BUILD_CHUNK,)
            )
            first = False
        else:
            rows = store.query_tuples(
                "SELECT record_id, vector FROM vectors WHERE record_id > ? "
                "ORDER BY record_id LIMIT ?",
                (last, BUILD_CHUNK),
            )
        if not rows:
            break
        last = rows[-1][0]
        if progress is not None:
            progress(min(int(last), top), top)
        chunk_ids = [r[0] for r in rows]
        blobs = [r[1] for r in rows]
        if any(len(b) != width for b in blobs):
            for record_id, blob in rows:
                if len(blob) != width:
                    bad[int(record_id)] = len(blob) // 4
            kept = [r for r in rows if len(r[1]) == width]
            chunk_ids = [r[0] for r in kept]
            blobs = [r[1] for r in kept]
        if not chunk_ids:
            continue
        block = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(-1, dim)
        end = count + len(chunk_ids)
        if end > capacity:  # rows past the highest id seen at the start: grow
            capacity = max(2 * capacity, end)
            ids = np.concatenate([ids[:count], np.empty(capacity - count, dtype=np.int64)])
            norms = np.concatenate([norms[:count], np.empty(capacity - count, np.float32)])
            if matrix is not None:
                matrix = np.concatenate(
                    [matrix[:count], np.empty((capacity - count, dim), dtype="<f4")]
                )
        ids[count:end] = chunk_ids
        norms[count:end] = np.sqrt(np.einsum("ij,ij->i", block, block))
        if writer is not None:
            writer.write(block)
        else:
            matrix[count:end] = block
        count = end
    ids, norms = ids[:count].copy(), norms[:count].copy()
    if matrix is not None:
        matrix = matrix[:count]
    return ids, norms, matrix, bad


# Publishing a cache file and invalidating the cache never overlap in this
# process: a forget (which holds the store's lock) waits for a file being
# published, then zeroes its own rows in it; the publisher never waits long
# for the store's lock while it holds this one.
_FILE_LOCK = threading.Lock()
_WRITERS: list[threading.Thread] = []
_PENDING: dict[Path, Any] = {}  # temporary matrix files of this process -> their ids


def _publish_later(store: MemoryStore, built: VectorMatrix, writer: _MatrixWriter) -> None:
    target = weakref.ref(store)
    _PENDING[writer.tmp] = built.ids

    def publish() -> None:
        try:
            owner = target()
            if owner is None:
                writer.abandon()
            else:
                _publish(owner, built, writer)
        except Exception:  # noqa: BLE001 - a cache is optional; the mapped copy still works
            writer.abandon()  # never left behind unpublished (a closed store, a full disk)
        finally:
            _PENDING.pop(writer.tmp, None)

    # Not a daemon: the process exits only once the file is published or deleted.
    thread = threading.Thread(target=publish, name="memtui-vector-cache")
    _WRITERS[:] = [t for t in _WRITERS if t.is_alive()] + [thread]
    thread.start()


def wait_for_writes(timeout: float | None = None) -> None:
    """Wait until cache files being published in the background are (a store's close)."""
    for thread in list(_WRITERS):
        thread.join(timeout)


def _publish(store: MemoryStore, built: VectorMatrix, writer: _MatrixWriter) -> None:
    """Sync the temporary file and publish it, if the vectors are still the same."""
    writer.sync()  # on disk before it gets a name other processes trust
    for _attempt in range(100):
        with _FILE_LOCK:
            # A writer holding the store's lock may be waiting for this lock (a
            # forget): never wait long for the store's lock here.
            if store.lock.acquire(timeout=0.05):
                try:
                    current = identity(store)
                finally:
                    store.lock.release()
                if built.identity is None or current != built.identity:
                    writer.abandon()  # changed meanwhile: publish nothing
                    return
                path = writer.publish(
                    built.ids, built.norms, built.identity, built.name, built.bad, built.removed
                )
                if path is not None:
                    built.path = path
                return
        time.sleep(0.02)  # let the store's writer take the file lock
    writer.abandon()


class _MatrixWriter:
    """Streams matrix rows into a temporary ``.npy`` file, then publishes the cache."""

    def __init__(self, folder: Path, stem: str | None, dim: int) -> None:
        assert stem is not None
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.stem = stem
        self.dim = dim
        self.rows = 0
        token = f"{os.getpid()}-{secrets.token_hex(4)}"
        self.tmp = folder / f"{stem}.tmp-{token}.npy"
        self.handle = self.tmp.open("wb")
        self.handle.write(b"\0" * _HEADER_BYTES)

    def write(self, block: Any) -> None:
        self.handle.write(memoryview(block).cast("B"))
        self.rows += len(block)

    def finish(self, ids: Any) -> Any:
        """Complete the file (header, flushed) and map it, read-only; None when a
        forget erased it meanwhile."""
        import numpy as np

        self.handle.seek(0)
        self.handle.write(_npy_header((self.rows, self.dim)))
        self.handle.close()
        try:
            return np.load(self.tmp, mmap_mode="r")
        except FileNotFoundError:
            return None

    def sync(self) -> None:
        fd = os.open(self.tmp, os.O_RDONLY)
        try:
            os.fsync(fd)  # so that a forget's zeroing later syncs one page, not the file
        finally:
            os.close(fd)

    def publish(
        self,
        ids: Any,
        norms: Any,
        ident: tuple[Any, ...],
        name: str,
        bad: dict[int, int],
        removed: Any = None,
    ) -> Path | None:
        """Move the synced file into place with its ids, norms, removed rows and sidecar.

        None when the temporary file is gone (a forget took it meanwhile).
        """
        tag = hashlib.sha256(repr(ident).encode()).hexdigest()[:12]
        base = self.folder / f"{self.stem}-{tag}"
        matrix_path = Path(f"{base}.f32.npy")
        ids_path = Path(f"{base}.ids.npy")
        norms_path = Path(f"{base}.norms.npy")
        removed_path = Path(f"{base}.removed.npy") if removed is not None else None
        _save_atomic(ids_path, ids)
        _save_atomic(norms_path, norms)
        if removed_path is not None:
            _save_atomic(removed_path, removed)
        try:
            os.replace(self.tmp, matrix_path)
        except FileNotFoundError:
            ids_path.unlink(missing_ok=True)
            norms_path.unlink(missing_ok=True)
            if removed_path is not None:
                removed_path.unlink(missing_ok=True)
            return None
        sidecar = {
            "identity": list(ident),
            "name": name,
            "dim": self.dim,
            "rows": self.rows,
            "matrix": matrix_path.name,
            "ids": ids_path.name,
            "norms": norms_path.name,
            "bad": [[k, v] for k, v in sorted(bad.items())],
        }
        if removed_path is not None:
            sidecar["removed"] = removed_path.name
        side = _write_sidecar(self.folder, self.stem, sidecar)
        keep = {matrix_path, ids_path, norms_path, side, removed_path}
        stale = [
            p
            for p in self.folder.iterdir()
            if p.name.startswith(self.stem) and p not in keep and ".tmp-" not in p.name
        ]
        for path in stale:  # an older generation's files: out of the cache, deleted later
            try:
                os.replace(path, path.with_name(f"{_TRASH}{secrets.token_hex(6)}-{path.name}"))
            except OSError:
                pass
        if stale:
            empty_trash()
        return matrix_path

    def abandon(self) -> None:
        try:
            if not self.handle.closed:
                self.handle.close()
        finally:
            self.tmp.unlink(missing_ok=True)


def _npy_header(shape: tuple[int, int]) -> bytes:
    text = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape!r}, }}"
    room = _HEADER_BYTES - len(_NPY_MAGIC) - 2
    body = text.ljust(room - 1) + "\n"
    if len(body) != room:
        raise ValueError(f"matrix shape {shape} does not fit the fixed .npy header")
    return _NPY_MAGIC + room.to_bytes(2, "little") + body.encode("latin-1")


def _save_atomic(path: Path, array: Any) -> None:
    import numpy as np

    tmp = path.with_name(f"{path.name}.tmp-{secrets.token_hex(4)}")
    with tmp.open("wb") as handle:
        np.save(handle, array)
    os.replace(tmp, path)


# ---------------------------------------------------------------- load


def _load_file(store: MemoryStore, current: tuple[Any, ...]) -> VectorMatrix | None:
    import numpy as np

    stem = cache_stem(store)
    if stem is None:
        return None
    folder = cache_dir()
    side = folder / f"{stem}.json"
    try:
        info = json.loads(side.read_text())
    except (OSError, ValueError):
        return None
    if tuple(info.get("identity", ())) != tuple(current):
        fresh = identity(store)  # a forget may have carried it over since ``current``
        if fresh is None or tuple(info.get("identity", ())) != tuple(fresh):
            invalidate(store)  # stale: its database has changed since
            return None
        current = fresh
    try:
        matrix = np.load(folder / info["matrix"], mmap_mode="r")
        ids = np.load(folder / info["ids"])
        norms = np.load(folder / info["norms"])
        removed = np.load(folder / info["removed"]) if info.get("removed") else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if (
        matrix.ndim != 2
        or matrix.shape != (len(ids), info["dim"])
        or norms.shape != (len(ids),)
        or matrix.dtype != np.dtype("<f4")
    ):
        return None
    if removed is not None and (
        removed.ndim != 1
        or removed.dtype.kind not in "iu"
        or (len(removed) and (removed.min() < 0 or removed.max() >= len(ids)))
    ):
        return None
    bad = {int(k): int(v) for k, v in info.get("bad", [])}
    return VectorMatrix(
        ids,
        matrix,
        norms,
        int(info["dim"]),
        info["name"],
        current,
        "file",
        bad,
        folder / info["matrix"],
        None if removed is None else removed.astype(np.int64),
    )


def _zero_rows(files: list[Path], targets: Any) -> list[Path]:
    """Overwrite the rows of the ascending ``targets`` record ids with zeros, in place.

    In every matrix file of ``files`` (a published one, whose norms are
    zeroed too, and one this process is still publishing), synced to disk.
    Rows already zero are not written again. Returns the matrix files whose
    rows could not be zeroed.
    """
    import numpy as np

    failed: list[Path] = []
    for matrix_path in files:
        norms_path = None
        if matrix_path in _PENDING:  # being published by this process
            ids = _PENDING[matrix_path]
        elif matrix_path.name.endswith(".f32.npy"):
            base = str(matrix_path)[: -len(".f32.npy")]
            norms_path = Path(base + ".norms.npy")
            try:
                ids = np.load(Path(base + ".ids.npy"))
            except FileNotFoundError:
                continue  # its files were moved out meanwhile: not a cache file any more
            except (OSError, ValueError):
                failed.append(matrix_path)
                continue
        else:
            continue
        rows = _rows_of(ids, targets)
        if not len(rows):
            continue
        if not _zero_file_rows(matrix_path, rows):
            failed.append(matrix_path)
        if norms_path is not None:
            _zero_file_rows(norms_path, rows)
    return failed


def _zero_file_rows(path: Path, rows: Any) -> bool:
    """Zero ``rows`` (ascending) of the ``.npy`` file at ``path`` and sync; True when done."""
    import numpy as np

    try:
        mapped = np.load(path, mmap_mode="r+")
    except FileNotFoundError:
        return True  # gone meanwhile: no copy left there
    except (OSError, ValueError):
        return False
    try:
        if len(rows) and int(rows[-1]) >= len(mapped):
            return False
        dirty = False
        for start in range(0, len(rows), BUILD_CHUNK):
            chunk = rows[start : start + BUILD_CHUNK]
            nonzero = _nonzero_rows(mapped[chunk])
            if nonzero.any():
                mapped[chunk[nonzero]] = 0
                dirty = True
        if dirty:
            mapped.flush()
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)  # on the file's blocks before the forget reports success
            finally:
                os.close(fd)
    except OSError:
        return False
    finally:
        del mapped
    return True
