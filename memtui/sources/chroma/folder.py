"""Finding a Chroma folder and listing its collections, by SQL on ``chroma.sqlite3``.

Read-only throughout: the file is opened ``mode=ro`` (no journal, no WAL made),
so the folder stays byte-identical. Segment folders are not opened here (their
vectors: ``memtui.sources.chroma.segment``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memtui.sources.base import SourceError
from memtui.sources.foreign_store import uri_for
from memtui.sources.qdrant.collections import CollectionChoiceError, CollectionInfo

SQLITE_NAME = "chroma.sqlite3"
CHROMA_TABLES = frozenset(
    {"collections", "segments", "embeddings", "embedding_metadata", "embeddings_queue"}
)
INSTALL_HINT = "pip install 'memtui[chroma]'"


def is_chroma_schema(tables: set[str] | frozenset[str]) -> bool:
    return CHROMA_TABLES <= set(tables)


def find_chroma_folder(path: Path) -> Path | None:
    """The Chroma folder at ``path`` (a folder holding ``chroma.sqlite3`` with Chroma's
    tables, or that file itself), or None."""
    sqlite = path / SQLITE_NAME if path.is_dir() else path
    if sqlite.name != SQLITE_NAME or not sqlite.is_file():
        return None
    try:
        tables = {str(r[0]) for r in read_rows(sqlite, "SELECT name FROM sqlite_master")}
    except SourceError:
        return None
    return sqlite.parent if is_chroma_schema(tables) else None


def read_rows(sqlite: Path, sql: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]:
    """One read of the file, opened read-only and closed again."""
    try:
        conn = sqlite3.connect(uri_for(sqlite, "ro"), uri=True)
    except sqlite3.Error as exc:
        raise SourceError(f"cannot open {sqlite}: {exc}") from None
    try:
        conn.execute("PRAGMA query_only = ON")
        return conn.execute(sql, params).fetchall()
    except sqlite3.Error as exc:
        raise SourceError(f"reading {sqlite.name} failed: {exc}") from None
    finally:
        conn.close()


class ChromaCollectionChoice(CollectionChoiceError):
    """The folder holds several Chroma collections and none was named (the app's picker
    lists them)."""

    def __init__(self, where: str, collections: Sequence[CollectionInfo]) -> None:
        super().__init__(where, collections)
        listed = "; ".join(c.describe() for c in self.collections) or "none"
        self.args = (
            f"{where} holds {len(self.collections)} Chroma collections; pick one with "
            f"--collection NAME: {listed}",
        )


def folder_collections(folder: Path) -> list[CollectionInfo]:
    """Every collection of the folder with its document count, dimension and space."""
    sqlite = folder / SQLITE_NAME
    columns = {str(r[1]) for r in read_rows(sqlite, "PRAGMA table_info(collections)")}
    optional = ", ".join(
        f"c.{name}" if name in columns else "NULL" for name in ("schema_str", "config_json_str")
    )
    rows = read_rows(
        sqlite,
        "SELECT c.name, c.dimension, "
        "(SELECT count(*) FROM embeddings AS e JOIN segments AS s ON s.id = e.segment_id "
        " WHERE s.collection = c.id AND s.scope = 'METADATA'), "
        "(SELECT m.str_value FROM collection_metadata AS m WHERE m.collection_id = c.id "
        f" AND m.key = 'hnsw:space'), {optional} "
        "FROM collections AS c ORDER BY c.name",
    )
    return [
        CollectionInfo(
            name=str(name),
            points=int(count) if isinstance(count, int) else None,
            dim=int(dim) if isinstance(dim, int) else None,
            distance=collection_space(schema, legacy, config),
            kind="chroma",
        )
        for name, dim, count, legacy, schema, config in rows
    ]


DEFAULT_SPACE = "l2"
"""Chroma's distance when a collection names none (``hnsw:space`` unset)."""


def collection_space(schema: object, legacy: object, config: object) -> str:
    """A collection's distance (``l2``, ``cosine``, ``ip``): chromadb 1.x keeps it in the
    collection's schema (``#embedding``'s vector index), older ones in its ``hnsw:space``
    metadata or its configuration's ``hnsw`` part; none named is Chroma's default."""
    space = _json_path(schema, "keys", "#embedding", "float_list", "vector_index", "config")
    for found in (
        space.get("space") if isinstance(space, dict) else None,
        legacy,
        (_json_path(config, "hnsw") or {}).get("space"),
    ):
        if isinstance(found, str) and found:
            return found
    return DEFAULT_SPACE


def _json_path(text: object, *keys: str) -> dict[str, Any] | None:
    """The object at ``keys`` in the JSON ``text``; None when it is not there."""
    if not isinstance(text, str) or not text:
        return None
    try:
        value: Any = json.loads(text)
    except ValueError:
        return None
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value if isinstance(value, dict) else None


def choose_collection(folder: Path, wanted: str | None) -> CollectionInfo:
    collections = folder_collections(folder)
    by_name = {c.name: c for c in collections}
    if wanted:
        if wanted in by_name:
            return by_name[wanted]
        listed = "; ".join(c.describe() for c in collections) or "none"
        raise SourceError(f"{folder} has no Chroma collection {wanted!r}; it holds: {listed}")
    if len(collections) == 1:
        return collections[0]
    if not collections:
        raise SourceError(f"{folder} holds no Chroma collection")
    raise ChromaCollectionChoice(str(folder), collections)
