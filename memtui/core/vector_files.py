"""The vector cache's files: the matrix writer, the sidecar, zeroing forgotten rows,
the trash (see ``memtui.core.vector_cache``)."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import threading
from pathlib import Path
from typing import Any

from memtui.core.index import SearchIndex
from memtui.core.vector_matrix import (
    PENDING,
    cache_dir,
    cache_files,
    cache_stem,
    rows_of,
)

ZERO_CHUNK = 4096  # rows zeroed per step
_HEADER_BYTES = 128  # a .npy v1.0 header padded to a fixed size, written before the rows
_NPY_MAGIC = b"\x93NUMPY\x01\x00"


def rows_are_zero(matrix: Any, rows: Any) -> bool:
    """Whether every byte of ``rows`` of ``matrix`` is zero (-0.0 is not)."""
    for start in range(0, len(rows), ZERO_CHUNK):
        if _nonzero_rows(matrix[rows[start : start + ZERO_CHUNK]]).any():
            return False
    return True


def _nonzero_rows(values: Any) -> Any:
    """Over the rows of a float32 array (or the values of a vector): any byte not zero."""
    import numpy as np

    bits = np.ascontiguousarray(values).view(np.uint32)
    return (bits != 0).reshape(len(bits), -1).any(axis=1)


def read_sidecar(store: SearchIndex) -> dict[str, Any] | None:
    stem = cache_stem(store)
    if stem is None:
        return None
    try:
        info = json.loads((cache_dir() / f"{stem}.json").read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def take_down_sidecar(store: SearchIndex) -> None:
    stem = cache_stem(store)
    if stem is not None:
        try:
            (cache_dir() / f"{stem}.json").unlink()
        except OSError:
            pass


def leftover_files(store: SearchIndex) -> list[Path]:
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
        if name.startswith(TRASH):
            name = name[len(TRASH) :].partition("-")[2]
        elif ".tmp-" not in name or path in PENDING:
            continue
        if name.startswith(stem):
            found.append(path)
    return sorted(found)


def shred(path: Path) -> bool:
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


def republish(
    store: SearchIndex, side: dict[str, Any], forgotten: Any, now: tuple[Any, ...]
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
        rows = np.union1d(previous.astype(np.int64), rows_of(ids, forgotten)).astype(np.int64)
        gone = set(forgotten.tolist())
        tag = hashlib.sha256(repr(now).encode()).hexdigest()[:12]
        removed_path = folder / f"{stem}-{tag}.removed.npy"
        save_atomic(removed_path, rows)
        sidecar = dict(side)
        sidecar["identity"] = list(now)
        sidecar["removed"] = removed_path.name
        sidecar["bad"] = [[k, v] for k, v in side.get("bad", []) if k not in gone]
        kept = _write_sidecar(folder, stem, sidecar)
    except (OSError, ValueError, KeyError, TypeError):
        return False
    keep = {folder / n for n in names} | {removed_path, kept}
    trash([p for p in cache_files(store) if p not in keep and ".tmp-" not in p.name])
    return True


def trash(paths: list[Path]) -> None:
    """Move ``paths`` out of the cache at once; ``empty_trash`` deletes them later."""
    for path in paths:
        trash = path.with_name(f"{TRASH}{secrets.token_hex(6)}-{path.name}")
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


TRASH = "trash-"


def _leftover_trash(folder: Path) -> list[Path]:
    """Trash files another process renamed but did not get to delete."""
    try:
        return [p for p in folder.iterdir() if p.name.startswith(TRASH)]
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


class MatrixWriter:
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
        save_atomic(ids_path, ids)
        save_atomic(norms_path, norms)
        if removed_path is not None:
            save_atomic(removed_path, removed)
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
                os.replace(path, path.with_name(f"{TRASH}{secrets.token_hex(6)}-{path.name}"))
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


def save_atomic(path: Path, array: Any) -> None:
    import numpy as np

    tmp = path.with_name(f"{path.name}.tmp-{secrets.token_hex(4)}")
    with tmp.open("wb") as handle:
        np.save(handle, array)
    os.replace(tmp, path)


def zero_rows(files: list[Path], targets: Any) -> list[Path]:
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
        if matrix_path in PENDING:  # being published by this process
            ids = PENDING[matrix_path]
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
        rows = rows_of(ids, targets)
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
        for start in range(0, len(rows), ZERO_CHUNK):
            chunk = rows[start : start + ZERO_CHUNK]
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
