"""What a Qdrant source asks of where its collection lives: a local folder or a server.

``QdrantSource`` holds one backend (``FolderBackend`` reads ``storage.sqlite``
itself; ``ServerBackend`` goes through qdrant-client and has no SQLite at all)
and the cached index its base class keeps; every difference between the two is
a method here, never a type test in the source.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from memtui.sources.base import FileIdentity
from memtui.sources.qdrant.collections import CollectionInfo
from memtui.sources.qdrant.points import PointData


class Backend(Protocol):
    """One collection of a Qdrant store, read and changed."""

    kind: str
    """``folder`` or ``server`` (named in forget audit events)."""
    rereads: bool
    """Whether the collection is read again when ``state_key`` changes (a folder)."""
    forget_where: str
    """Where a forget deletes the point, in words."""

    @property
    def connection(self) -> sqlite3.Connection | None:
        """The open ``storage.sqlite`` (a folder), else None."""

    @property
    def folder(self) -> Path | None:
        """The Qdrant local folder, else None."""

    @property
    def refused(self) -> Sequence[str]:
        """One line per point the last load refused to read."""

    def load(self) -> list[PointData]: ...

    def state_key(self) -> Any: ...

    def delete(self, point: PointData) -> dict[str, Any]: ...

    def close(self) -> None: ...

    def collections(self) -> list[CollectionInfo]: ...

    def watched(self, opened: list[FileIdentity]) -> list[FileIdentity]:
        """The files whose replacement the source watches, given what it ``opened``."""

    def label(self, location: Path, kind_label: str) -> str: ...

    def writer(self) -> contextlib.AbstractContextManager[None]:
        """Held while a forget changes the collection."""

    def notes(self) -> list[str]:
        """What the summary says first about how the collection was read."""

    def storage_notes(self, counts: dict[str, Any]) -> list[str]:
        """What the summary says about the storage (adding to ``counts``)."""

    def add_probes(self, plan: dict[str, list[bytes]], probes: Sequence[bytes]) -> None:
        """Note bytes a forget checks are gone from the backend's file afterwards."""

    def purge(
        self, plan: Mapping[str, Sequence[bytes]], value_columns: Sequence[tuple[str, str]]
    ) -> tuple[dict[str, bool], dict[str, Any]]:
        """After a forget: purge freed storage and check the bytes (checks, details)."""
