"""Opening one collection of a Qdrant store: a local folder, or a server.

Which class reads a collection of each kind (Cyber-AutoAgent, mem0...) is the
caller's choice (``memtui.sources.kinds`` maps them): this package imports
none of the adapters built on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from memtui.sources.base import SourceError
from memtui.sources.qdrant.collections import choose_collection
from memtui.sources.qdrant.folder import FolderBackend, find_qdrant_folder, folder_collections
from memtui.sources.qdrant.lock import LOCK_FILE, lock_holders
from memtui.sources.qdrant.server import (
    ServerBackend,
    make_client,
    server_anchor,
    server_audit_path,
)
from memtui.sources.qdrant.source import QdrantSource

SourceClass = Callable[[str], type[QdrantSource]]
"""The class that reads a collection of a kind (``CollectionInfo.kind``)."""


class Mem0EntitiesSource(QdrantSource):
    kind = "mem0-entities"
    kind_label = "mem0 entity index (Qdrant)"


def plain_source_class(kind: str) -> type[QdrantSource]:
    """The classes of this package: a mem0 entity index, else a plain collection."""
    return Mem0EntitiesSource if kind == "mem0-entities" else QdrantSource


def open_qdrant_folder(
    path: Path,
    *,
    collection: str | None = None,
    read_only: bool = True,
    options: Mapping[str, Any] | None = None,
    source_class: SourceClass = plain_source_class,
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
    source_class: SourceClass = plain_source_class,
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
        anchor = server_anchor(url, info.name, cache_root)
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
