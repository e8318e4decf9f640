"""Chroma (``chromadb`` 1.5, ``PersistentClient(path)``) folders as memory sources.

A Chroma folder holds ``chroma.sqlite3`` and one folder per vector segment
(HNSW files). One collection is opened at a time (``--collection NAME``; the
app offers a picker when there are several): its documents are the records,
in the order Chroma added them; the collection is the tier; ``user_id``,
``agent_id``, ``run_id`` and ``session_id`` metadata are scope keys; the rest of
the metadata is shown as is. Everything is read with SQL on the file opened
read-only (``memtui.sources.chroma.read``) and the HNSW segment's files as bytes:
nothing is unpickled and chromadb is not imported to read. Vectors come from the
segment's files (``memtui.sources.chroma.segment``) overlaid by the newer
``embeddings_queue`` rows (``memtui.sources.chroma.vectors``); when some live
document has none, search is keyword-only and says why. Forget and the erasure
gap: ``memtui.sources.chroma.source``.
"""

from pathlib import Path
from typing import Any

from memtui.sources.base import SourceError
from memtui.sources.chroma.folder import (
    INSTALL_HINT,
    ChromaCollectionChoice,
    choose_collection,
    find_chroma_folder,
    folder_collections,
)
from memtui.sources.chroma.source import ChromaSource

__all__ = [
    "INSTALL_HINT",
    "ChromaCollectionChoice",
    "ChromaSource",
    "choose_collection",
    "find_chroma_folder",
    "folder_collections",
    "open_chroma_folder",
]


def open_chroma_folder(path: Path, *, collection: str | None = None, **common: Any) -> ChromaSource:
    """Open one collection of the Chroma folder at ``path`` (or its ``chroma.sqlite3``)."""
    folder = find_chroma_folder(Path(path))
    if folder is None:
        raise SourceError(f"{path} is not a Chroma folder (no chroma.sqlite3 with its tables)")
    info = choose_collection(folder, collection)
    return ChromaSource(folder, info=info, **common)
