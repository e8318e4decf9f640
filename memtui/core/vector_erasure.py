"""Forget means gone, without a rebuild: the forgotten rows zeroed in every copy of the
vector matrix, then the copies carried over to the database after the forget (see
``memtui.core.vector_cache``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memtui.core.index import SearchIndex
from memtui.core.vector_files import (
    leftover_files,
    read_sidecar,
    republish,
    rows_are_zero,
    shred,
    take_down_sidecar,
    trash,
    zero_rows,
)
from memtui.core.vector_matrix import (
    FILE_LOCK,
    HELD,
    PENDING,
    VectorMatrix,
    cache_dir,
    cache_files,
    identity,
    rows_of,
)


@dataclass
class Erasure:
    """What ``erase`` did inside a forget's transaction, for ``carry_over`` after it."""

    forgotten: Any  # int64 record ids, ascending
    before: tuple[Any, ...] | None  # the identity just before the delete
    after: tuple[Any, ...] | None  # the identity once the forget is committed
    held: VectorMatrix | None  # the in-memory copy, its forgotten rows zeroed, if current
    sidecar: dict[str, Any] | None  # the on-disk sidecar ``erase`` took down
    erased: bool | None  # forgotten rows zero in every cache file; None: there was none


def erase(store: SearchIndex, forgotten: Any, before: tuple[Any, ...] | None) -> Erasure:
    """Inside a forget's transaction, after the delete: zero the forgotten rows everywhere.

    ``before`` is ``identity(store)`` read in the same transaction before the
    delete. Every cache file of the database (one still being published by
    this process included) gets the forgotten rows (and their norms)
    overwritten with zeros, synced; so does the in-memory copy, which is
    dropped instead if it cannot be (a read-only map of a file not zeroed).
    The sidecar is taken down and the in-memory copy marked current for no
    identity, so that until ``carry_over`` nothing trusts the copies: if the
    transaction rolls back they are rebuilt, never used without the rows.
    Files whose rows cannot be told apart are erased whole (``leftover_files``):
    a matrix not yet published (being built, or left by a process that died
    before publishing it) and the trash. ``erased`` (for the audit) says
    whether every forgotten row of every cache file, and of the copy this
    process maps, now reads as zeros (None: the database had no cache file).
    """
    import numpy as np

    targets = np.unique(np.asarray(list(forgotten), dtype=np.int64))
    after = identity(store)
    with FILE_LOCK:
        files = cache_files(store)
        side = read_sidecar(store)
        if side is not None:
            take_down_sidecar(store)
        failed = zero_rows(files, targets) if len(targets) else []
        leftovers = leftover_files(store)
        failed += [p for p in leftovers if not shred(p)]
        held = HELD.pop(store, None)
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


def carry_over(store: SearchIndex, erasure: Erasure) -> bool:
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
    with FILE_LOCK:
        files = cache_files(store)
        failed = zero_rows(files, erasure.forgotten) if len(erasure.forgotten) else []
        carried = False
        held = erasure.held
        if held is not None and current:
            held.identity = now
            if HELD.get(store) is None:
                HELD[store] = held
            carried = True
        side = read_sidecar(store) or erasure.sidecar
        if (
            current
            and now is not None
            and side is not None
            and tuple(side.get("identity", ())) == tuple(erasure.before or ())
            and (cache_dir() / str(side.get("matrix"))) not in failed
            and republish(store, side, erasure.forgotten, now)
        ):
            return True
        # Not current, or no usable sidecar: drop every cache file but the
        # one this process is still publishing for the carried-over copy.
        keep = {held.path} if carried and held is not None and held.path in PENDING else set()
        trash([p for p in cache_files(store) if p not in keep])
        return carried


def _erase_held(held: VectorMatrix, targets: Any) -> bool:
    """Zero the forgotten rows of an in-memory copy and mark them removed.

    False when its rows cannot be zeroed: a read-only map of a file that
    still holds them (the caller drops it).
    """
    import numpy as np

    rows = rows_of(held.ids, targets)
    if len(rows):
        matrix = held.matrix
        if held.source == "memory":
            if not matrix.flags.writeable:
                return False
            matrix[rows] = 0.0
        elif not rows_are_zero(matrix, rows):  # a map of a file zero_rows zeroed reads zeros
            return False
        norms = held.norms
        if not norms.flags.writeable:
            norms = norms.copy()
        norms[rows] = 0.0
        held.norms = norms
        if held.squares is not None:
            held.squares[rows] = 0.0
        previous = held.removed if held.removed is not None else np.zeros(0, dtype=np.int64)
        held.removed = np.union1d(previous, rows).astype(np.int64)
    if held.bad:
        gone = set(targets.tolist())
        held.bad = {k: v for k, v in held.bad.items() if k not in gone}
    return True
