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
lazily, by the first vector search that needs it (never at start-up). The
identity is read again only once the data may have changed (the token of
``SearchIndex.derived``: another connection's commit, this one's writes), so
searches in a row between two writes check the copy once.

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

import json
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from memtui.core.cancel import stop_if
from memtui.core.index import SearchIndex
from memtui.core.vector_erasure import Erasure, carry_over, erase
from memtui.core.vector_files import MatrixWriter, empty_trash, trash, zero_rows
from memtui.core.vector_matrix import (
    CACHE_DIR_ENV,
    FILE_LOCK,
    HELD,
    PENDING,
    VectorMatrix,
    cache_dir,
    cache_files,
    cache_stem,
    identity,
)

FILE_CACHE_MIN_VECTORS = 50_000
"""Stores with fewer vectors keep their matrix in memory only."""

BUILD_CHUNK = 4096  # rows per read: small enough for the allocator to reuse its buffers

__all__ = [
    "BUILD_CHUNK",
    "CACHE_DIR_ENV",
    "FILE_CACHE_MIN_VECTORS",
    "Erasure",
    "VectorMatrix",
    "cache_dir",
    "cache_files",
    "cache_stem",
    "carry_over",
    "empty_trash",
    "erase",
    "identity",
    "invalidate",
    "load",
    "wait_for_writes",
]


def load(
    store: SearchIndex,
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
    # One slot per state of the data (``derived``: a new, empty one whenever the data
    # may have changed): the copy that state was checked against, so that searches in
    # a row check the copy once, not at each search.
    checked = store.derived(CHECKED, _empty_slot)
    held = checked[0]
    if held is not None and HELD.get(store) is held:
        return held
    recorded = store.recorded_embedder()
    if recorded is None:
        return None
    current = identity(store)
    held = HELD.get(store)
    if held is not None and current is not None and held.identity != current:
        # A forget may have carried the copy over since ``current`` was read.
        current = identity(store)
        held = HELD.get(store)
    if held is not None and current is not None and held.identity == current:
        checked[0] = held
        return held
    if held is not None and HELD.get(store) is held:
        HELD.pop(store, None)
    loaded = _load_file(store, current) if current is not None else None
    if loaded is None:
        loaded = _build(store, recorded["name"], recorded["dim"], current, cancelled, progress)
    if loaded.identity is not None:
        HELD[store] = loaded
        checked[0] = loaded
    return loaded


CHECKED = "vector matrix checked"
"""The ``derived`` name of the slot holding the copy checked current for the data's state."""


def _empty_slot(_store: SearchIndex) -> list[VectorMatrix | None]:
    return [None]


def invalidate(store: SearchIndex, forgotten: Any = (), *, empty_now: bool = True) -> bool:
    """Drop every cached copy of ``store``'s vectors; True when no cache file is left.

    Rows of ``forgotten`` record ids in an on-disk copy are first overwritten
    with zeros and synced to disk, so that their bytes do not linger in the
    blocks the file frees. The files are then renamed out of the cache at
    once and deleted by a background thread: freeing a big file's blocks takes
    a noticeable fraction of a second, and they no longer hold forgotten data.
    With ``empty_now=False`` that thread waits for ``empty_trash()``, so that
    a forget does not compete with its own checkpoint for the disk.
    """
    HELD.pop(store, None)
    with FILE_LOCK:
        return _invalidate_files(store, forgotten, empty_now)


def _invalidate_files(store: SearchIndex, forgotten: Any, empty_now: bool) -> bool:
    files = cache_files(store)
    if not files:
        return True
    wanted = [int(i) for i in forgotten]
    if wanted:
        import numpy as np

        zero_rows(files, np.unique(np.asarray(wanted, dtype=np.int64)))
    trash(files)
    if empty_now:
        empty_trash()
    return not cache_files(store)


# ---------------------------------------------------------------- build


def _build(
    store: SearchIndex,
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
                writer = MatrixWriter(cache_dir(), stem, dim)
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
    store: SearchIndex,
    dim: int,
    writer: MatrixWriter | None,
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
    matrix: Any = np.empty((capacity, dim), dtype="<f4") if writer is None else None
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


_WRITERS: list[threading.Thread] = []


def _publish_later(store: SearchIndex, built: VectorMatrix, writer: MatrixWriter) -> None:
    target = weakref.ref(store)
    PENDING[writer.tmp] = built.ids

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
            PENDING.pop(writer.tmp, None)

    # Not a daemon: the process exits only once the file is published or deleted.
    thread = threading.Thread(target=publish, name="memtui-vector-cache")
    _WRITERS[:] = [t for t in _WRITERS if t.is_alive()] + [thread]
    thread.start()


def wait_for_writes(timeout: float | None = None) -> None:
    """Wait until cache files being published in the background are (a store's close)."""
    for thread in list(_WRITERS):
        thread.join(timeout)


def _publish(store: SearchIndex, built: VectorMatrix, writer: MatrixWriter) -> None:
    """Sync the temporary file and publish it, if the vectors are still the same."""
    writer.sync()  # on disk before it gets a name other processes trust
    for _attempt in range(100):
        with FILE_LOCK:
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


# ---------------------------------------------------------------- load


def _load_file(store: SearchIndex, current: tuple[Any, ...]) -> VectorMatrix | None:
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
