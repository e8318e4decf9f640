"""The vector matrix of one database, the copies this process holds, and where the
copies on disk go (see ``memtui.core.vector_cache``)."""

from __future__ import annotations

import hashlib
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memtui.config import current
from memtui.core.index import SearchIndex

CACHE_DIR_ENV = "MEMTUI_CACHE_DIR"

HELD: weakref.WeakKeyDictionary[Any, VectorMatrix] = weakref.WeakKeyDictionary()


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
    # The vector lane's rows whose norm it cannot divide by, found on first use
    # (``memtui.core.search.vector``); a row removed later stays in them harmlessly.
    odd_rows: Any = None
    # Whether every row has its record, and keeps it while the matrix is current: found
    # on first use by the vector lane (``_rows_have_records``); None until then.
    rows_recorded: bool | None = None
    # Each row's float64 sum of squares, as the vector lane's exact pass adds it, for a
    # matrix of few values: found on first use (``_row_squares``); a forget zeroes its rows.
    squares: Any = None

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


def cache_stem(store: SearchIndex) -> str | None:
    """The file-name stem of this database's cache files; None for an in-memory store."""
    if store.path is None:
        return None
    where = str(Path(store.path).resolve())
    return "vectors-" + hashlib.sha256(where.encode("utf-8")).hexdigest()[:24]


def identity(store: SearchIndex) -> tuple[Any, ...] | None:
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


def cache_files(store: SearchIndex) -> list[Path]:
    """Every cache file of this database now on disk."""
    stem = cache_stem(store)
    folder = cache_dir()
    if stem is None or not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.name.startswith(stem))


def rows_of(ids: Any, targets: Any) -> Any:
    """The rows of the ascending ``ids`` that hold one of the ascending ``targets``."""
    import numpy as np

    if not len(ids) or not len(targets):
        return np.zeros(0, dtype=np.int64)
    where = np.searchsorted(ids, targets)
    inside = where < len(ids)
    where = where[inside]
    return where[ids[where] == targets[inside]].astype(np.int64)


# Publishing a cache file and invalidating the cache never overlap in this
# process: a forget (which holds the store's lock) waits for a file being
# published, then zeroes its own rows in it; the publisher never waits long
# for the store's lock while it holds this one.
FILE_LOCK = threading.Lock()
PENDING: dict[Path, Any] = {}  # temporary matrix files of this process -> their ids
