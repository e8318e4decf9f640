"""The vectors a Chroma HNSW segment persisted, read from its files (never through hnswlib).

Chroma keeps a collection's vectors in its vector segment's folder, written by
its fork of hnswlib (``chroma-core/hnswlib``, ``saveIndex``/``persistDirty``):

- ``header.bin``, 100 bytes, little-endian: int32 version (1), then size_t
  ``offsetLevel0`` (0), ``max_elements``, ``cur_element_count``,
  ``size_data_per_element``, ``label_offset``, ``offsetData``; int32
  ``maxlevel``, uint32 ``enterpoint``; size_t ``maxM``, ``maxM0``, ``M``; double
  ``mult``; size_t ``ef_construction``.
- ``data_level0.bin``: ``size_data_per_element`` bytes per element, the first
  ``cur_element_count`` in use: a uint32 whose low 16 bits count the level-0
  links and whose third byte's low bit is the delete mark, ``maxM0`` uint32
  links, the vector (``dim`` float32 at ``offsetData``), the label (size_t at
  ``label_offset``).
- ``length.bin``: a float32 per element, the vector's norm; for the ``cosine``
  space the index stores the unit vector and hnswlib's ``getDataByLabel`` (what
  chromadb's ``get`` returns) multiplies it back by this norm. ``l2`` and ``ip``
  store the vector as given (their ``length.bin`` is not written).
- ``index_metadata.pickle``: the map from document id to label
  (``id_to_label``), a protocol-3 dict of strings and integers, read with
  ``memtui.sources.plain_pickle`` (never unpickled).

Everything read is checked against the header and the collection's dimension
before it is used, and what is read is bounded by the files' sizes: a file that
does not match refuses the segment with a one-line reason (``SegmentRefused``).
"""

from __future__ import annotations

import pickle
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtui.sources.chroma.hnsw import DATA, HEADER, HEADER_SIZE, LENGTHS, read_header
from memtui.sources.plain_pickle import read_plain_pickle
from memtui.sources.safe_pickle import MAX_TEXT, PickleLimits

ID_MAP = "index_metadata.pickle"
PERSISTENCE_VERSION = 1
#: the largest id map read, per element of the header (ids average well under this)
MAP_BYTES_PER_ELEMENT = 512
#: elements read at a time (what one chunk of ``data_level0.bin`` costs in memory)
CHUNK_ELEMENTS = 65536
#: a stored unit vector's norm may differ from 1 by float32 rounding, no more
UNIT_TOLERANCE = 1e-3


class SegmentRefused(Exception):
    """The segment's files are not what the header and the collection say: ``reason``."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True)
class HnswHeader:
    """The fields of ``header.bin`` that say where each element's parts are."""

    max_elements: int
    count: int
    per_element: int
    label_offset: int
    data_offset: int
    max_m0: int

    @classmethod
    def parse(cls, raw: bytes) -> HnswHeader:
        if len(raw) != HEADER_SIZE:
            size = f"{len(raw)} bytes" if len(raw) <= HEADER_SIZE else "longer"
            raise SegmentRefused(f"{HEADER} is {size}, not {HEADER_SIZE} bytes")
        version = struct.unpack_from("<i", raw, 0)[0]
        if version != PERSISTENCE_VERSION:
            raise SegmentRefused(f"{HEADER} has version {version}, not {PERSISTENCE_VERSION}")
        level0, max_elements, count, per_element, label_offset, data_offset = struct.unpack_from(
            "<6Q", raw, 4
        )
        max_m0 = struct.unpack_from("<Q", raw, 68)[0]
        if level0 != 0:
            raise SegmentRefused(f"{HEADER} puts level 0 at offset {level0}, not 0")
        return cls(max_elements, count, per_element, label_offset, data_offset, max_m0)

    def check(self, dim: int) -> None:
        """Refuse a header whose layout is not hnswlib's for ``dim`` float32 values."""
        if not 0 < self.max_m0 < 1 << 16:
            raise SegmentRefused(f"{HEADER} says maxM0 is {self.max_m0} (a link count is 16 bits)")
        if self.data_offset != 4 + 4 * self.max_m0:
            raise SegmentRefused(
                f"{HEADER} puts the vector at byte {self.data_offset} of an element, "
                f"not after its {self.max_m0} links ({4 + 4 * self.max_m0})"
            )
        held = (self.label_offset - self.data_offset) / 4
        if held != dim:
            raise SegmentRefused(
                f"{HEADER} describes {held:g}-dim vectors; the collection's are {dim}-dim"
            )
        if self.per_element != self.label_offset + 8:
            raise SegmentRefused(
                f"{HEADER} says an element is {self.per_element} bytes, not "
                f"{self.label_offset + 8} (links, vector, label)"
            )
        if self.count > self.max_elements:
            raise SegmentRefused(
                f"{HEADER} counts {self.count} elements in room for {self.max_elements}"
            )


@dataclass
class SegmentVectors:
    """The live elements of a segment that its id map names: ids and one matrix row each."""

    ids: list[str]
    matrix: Any  # numpy float32, one row per id
    deleted: int  # elements with the delete mark
    unmapped: int  # live elements whose label the id map does not name


def read_segment(folder: Path, dim: int, space: str) -> SegmentVectors:
    """The vectors of the segment in ``folder``, as chromadb's ``get`` returns them;
    ``SegmentRefused`` when a file does not match the header or the collection."""
    try:
        header = HnswHeader.parse(read_header(folder))
    except OSError as exc:
        raise SegmentRefused(f"{HEADER} cannot be read ({exc.strerror})") from None
    header.check(dim)
    if header.count == 0:
        return SegmentVectors(ids=[], matrix=_np().zeros((0, dim), "<f4"), deleted=0, unmapped=0)
    labels, deleted, matrix = read_elements(folder / DATA, header, dim)
    if space == "cosine":
        matrix = _scaled_by_norms(folder / LENGTHS, header.count, matrix, deleted)
    id_to_label = read_id_map(folder / ID_MAP, header.count)
    return _mapped(labels, deleted, matrix, id_to_label)


def _np() -> Any:
    import numpy

    return numpy


def read_elements(path: Path, header: HnswHeader, dim: int) -> tuple[Any, Any, Any]:
    """(labels, delete marks, vectors) of the elements in use, read a chunk at a time."""
    np = _np()
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise SegmentRefused(f"{DATA} cannot be read ({exc.strerror})") from None
    whole = size // header.per_element
    if whole < header.count:
        raise SegmentRefused(
            f"{DATA} holds {whole} whole element(s); {HEADER} counts {header.count} (truncated)"
        )
    layout = np.dtype(
        {
            "names": ["links", "vector", "label"],
            "formats": ["<u4", ("<f4", (dim,)), "<u8"],
            "offsets": [0, header.data_offset, header.label_offset],
            "itemsize": header.per_element,
        }
    )
    labels = np.empty(header.count, "<u8")
    links = np.empty(header.count, "<u4")
    matrix = np.empty((header.count, dim), "<f4")
    with path.open("rb") as handle:
        for start in range(0, header.count, CHUNK_ELEMENTS):
            n = min(CHUNK_ELEMENTS, header.count - start)
            raw = handle.read(n * header.per_element)
            if len(raw) != n * header.per_element:
                raise SegmentRefused(f"{DATA} changed while it was read")
            chunk = np.frombuffer(raw, dtype=layout)
            labels[start : start + n] = chunk["label"]
            links[start : start + n] = chunk["links"]
            matrix[start : start + n] = chunk["vector"]
    if int((links & 0xFFFF).max()) > header.max_m0:
        raise SegmentRefused(f"{DATA} has an element with more links than maxM0 ({header.max_m0})")
    deleted = (links >> 16) & 1 == 1
    return labels, deleted, matrix


def _scaled_by_norms(path: Path, count: int, matrix: Any, deleted: Any) -> Any:
    """The cosine space's unit vectors times their norms (``getDataByLabel``'s product)."""
    np = _np()
    norms = np.sqrt(np.einsum("ij,ij->i", matrix[~deleted], matrix[~deleted], dtype=np.float64))
    off = np.abs(norms - 1) > UNIT_TOLERANCE
    if np.any(off & (norms != 0)):
        raise SegmentRefused(
            f"{DATA} holds vectors that are not unit length, as a cosine index stores them"
        )
    try:
        with path.open("rb") as handle:
            raw = handle.read(count * 4)
    except OSError as exc:
        raise SegmentRefused(f"{LENGTHS} cannot be read ({exc.strerror})") from None
    if len(raw) != count * 4:
        raise SegmentRefused(f"{LENGTHS} holds {len(raw) // 4} norm(s); {HEADER} counts {count}")
    lengths = np.frombuffer(raw, "<f4")
    return matrix * lengths[:, None]


def read_id_map(path: Path, count: int) -> dict[str, int]:
    """``id_to_label`` of the segment's pickle, read by ``read_plain_pickle`` under bounds
    scaled to ``count`` elements (a document id to a label, each)."""
    try:
        size = path.stat().st_size
    except OSError:
        raise SegmentRefused(f"{ID_MAP} (the id map) is missing") from None
    most = 1024 * 1024 + MAP_BYTES_PER_ELEMENT * count
    if size > most:
        raise SegmentRefused(
            f"{ID_MAP} is {size:,} bytes for {count} element(s) (more than {most:,}): not read"
        )
    objects = 8 * count + 1024
    limits = PickleLimits(objects=objects, values=objects, text=max(MAX_TEXT, size), depth=8)
    try:
        value = read_plain_pickle(path.read_bytes(), limits)
    except pickle.UnpicklingError as exc:
        raise SegmentRefused(f"{ID_MAP} refused: {exc}") from None
    except (OSError, MemoryError, RecursionError) as exc:
        raise SegmentRefused(f"{ID_MAP} cannot be read ({type(exc).__name__})") from None
    id_to_label = value.get("id_to_label") if isinstance(value, dict) else None
    if not isinstance(id_to_label, dict):
        raise SegmentRefused(f"{ID_MAP} holds no id_to_label map")
    for eid, label in id_to_label.items():
        if type(eid) is not str or type(label) is not int or not 0 <= label < 1 << 64:
            raise SegmentRefused(
                f"{ID_MAP}'s id_to_label maps {str(eid)[:40]!r} to {str(label)[:40]!r}, "
                "not a document id to a label"
            )
    return id_to_label


def _mapped(labels: Any, deleted: Any, matrix: Any, id_to_label: dict[str, int]) -> SegmentVectors:
    """The rows of the live elements whose labels the id map names, in the map's order."""
    np = _np()
    live = np.flatnonzero(~deleted)
    live_labels = labels[live]
    order = np.argsort(live_labels, kind="stable")
    sorted_labels = live_labels[order]
    if len(sorted_labels) > 1 and bool(np.any(sorted_labels[1:] == sorted_labels[:-1])):
        raise SegmentRefused(f"{DATA} gives one label to two live elements")
    ids = list(id_to_label)
    wanted = np.fromiter(id_to_label.values(), dtype="<u8", count=len(ids))
    if len(np.unique(wanted)) != len(wanted):
        raise SegmentRefused(f"{ID_MAP} gives one label to two documents")
    at = np.searchsorted(sorted_labels, wanted)
    at = np.minimum(at, max(len(sorted_labels) - 1, 0))
    found = sorted_labels[at] == wanted if len(sorted_labels) else np.zeros(len(ids), bool)
    rows = live[order[at[found]]]
    vectors = matrix[rows]
    if not bool(np.isfinite(vectors).all()):
        raise SegmentRefused(f"{DATA} holds a vector that is not all finite numbers")
    kept = [eid for eid, hit in zip(ids, found.tolist(), strict=True) if hit]
    return SegmentVectors(
        ids=kept,
        matrix=vectors,
        deleted=int(deleted.sum()),
        unmapped=len(live) - len(kept),
    )
