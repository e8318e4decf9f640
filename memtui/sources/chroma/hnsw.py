"""The unused capacity of a Chroma HNSW segment's files, read and zeroed.

Chroma's HNSW index (its fork of hnswlib) preallocates room for
``max_elements`` in ``data_level0.bin`` and ``length.bin`` and may write that
memory to disk uninitialized (seen with chromadb 1.5 while the index holds
fewer elements than its first allocation): past the elements in use, the files hold
whatever the writing process had on its heap (document texts among it,
deleted ones too). hnswlib reads only the first ``cur_element_count`` elements,
so memtui zeroes the rest after a forget. ``header.bin`` is 100 bytes: an int32
version (1), then size_t ``offsetLevel0``, ``max_elements``,
``cur_element_count``, ``size_data_per_element``, ... (little-endian); a header
of any other shape is left alone (and the byte check says what it found).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

HEADER = "header.bin"
DATA = "data_level0.bin"
LENGTHS = "length.bin"
HEADER_SIZE = 100


@dataclass(frozen=True)
class Slack:
    """Where the unused capacity of one segment's files starts."""

    folder: Path
    data_from: int
    lengths_from: int

    def regions(self) -> list[tuple[Path, int]]:
        return [(self.folder / DATA, self.data_from), (self.folder / LENGTHS, self.lengths_from)]

    def nonzero(self) -> bool:
        """Whether any unused byte is not zero (it may hold heap memory: text)."""
        for path, start in self.regions():
            if path.is_file():
                with path.open("rb") as handle:
                    handle.seek(start)
                    if handle.read().strip(b"\0"):
                        return True
        return False

    def zero(self) -> int:
        """Zero the unused bytes (in place, synced); returns how many were not zero."""
        cleared = 0
        for path, start in self.regions():
            if not path.is_file():
                continue
            size = path.stat().st_size
            if size <= start:
                continue
            with path.open("r+b") as handle:
                handle.seek(start)
                cleared += len(handle.read().replace(b"\0", b""))
                handle.seek(start)
                handle.write(b"\0" * (size - start))
                handle.flush()
                os.fsync(handle.fileno())
        return cleared


def read_header(folder: Path) -> bytes:
    """``header.bin``'s bytes, one more than a header holds at most (a file of any size
    costs no more)."""
    with (folder / HEADER).open("rb") as handle:
        return handle.read(HEADER_SIZE + 1)


def segment_slack(folder: Path) -> Slack | None:
    """The unused capacity of the segment in ``folder``; None when its header is not the
    layout described above (nothing is then touched)."""
    try:
        raw = read_header(folder)
    except OSError:
        return None
    if len(raw) != HEADER_SIZE or struct.unpack_from("<i", raw, 0)[0] != 1:
        return None
    offset, max_elements, count, per_element = struct.unpack_from("<4Q", raw, 4)
    data = folder / DATA
    if offset != 0 or not 0 < per_element < 1 << 20 or count > max_elements:
        return None
    if data.is_file() and not (
        count * per_element <= data.stat().st_size <= max_elements * per_element
    ):
        return None
    return Slack(folder, data_from=count * per_element, lengths_from=count * 4)


def folder_slacks(chroma_folder: Path) -> list[Slack]:
    """Every segment folder's unused capacity under a Chroma folder."""
    out = []
    for child in sorted(chroma_folder.iterdir()):
        if child.is_dir() and (child / HEADER).is_file():
            slack = segment_slack(child)
            if slack is not None:
                out.append(slack)
    return out
