"""Which collections a Qdrant store holds, what each holds, and which one to open."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memtui.sources.base import SourceError

INSTALL_HINT = "pip install 'memtui[qdrant]'"
CAA_COLLECTION = "cyber_autoagent_memories"
MEM0_COLLECTION = "mem0"
WEB_CACHE_PATTERN = re.compile(r"^cyber_autoagent_web_search_cache_(\d+)_([0-9a-f]{16})$")


class CollectionChoiceError(SourceError):
    """The store holds several collections and none was named: pick one.

    ``collections`` lists them (``CollectionInfo``) for a picker.
    """

    def __init__(self, where: str, collections: Sequence[CollectionInfo]) -> None:
        self.where = where
        self.collections = list(collections)
        listed = "; ".join(c.describe() for c in self.collections) or "none"
        if self.collections:
            message = (
                f"{where} holds {len(self.collections)} Qdrant collections; pick one with "
                f"--collection NAME: {listed}"
            )
        else:
            message = f"{where} holds no Qdrant collection"
        super().__init__(message)


def client_missing_error(what: str) -> SourceError:
    return SourceError(f"{what} needs qdrant-client, which is not installed: {INSTALL_HINT}")


def vector_config(config: Any) -> tuple[str | None, int | None, str | None, tuple[str, ...]]:
    """(dense vector name, its size, distance, every dense name) from a collection config."""
    vectors = config.get("vectors") if isinstance(config, dict) else None
    if isinstance(vectors, dict) and "size" in vectors:
        return "", _int(vectors.get("size")), _str(vectors.get("distance")), ("",)
    if isinstance(vectors, dict) and vectors:
        names = tuple(sorted(str(k) for k in vectors))
        chosen = "" if "" in vectors else names[0]
        params = vectors.get(chosen) or {}
        size = _int(params.get("size")) if isinstance(params, dict) else None
        distance = _str(params.get("distance")) if isinstance(params, dict) else None
        return chosen, size, distance, names
    return None, None, None, ()


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class CollectionInfo:
    """One collection: name, point count, dense vector size and distance, and what it holds."""

    name: str
    points: int | None
    dim: int | None
    distance: str | None
    vector_name: str | None = ""
    vector_names: tuple[str, ...] = ()
    sparse: tuple[str, ...] = ()
    kind: str = "qdrant"
    sample_keys: tuple[str, ...] = ()

    def describe(self) -> str:
        points = "?" if self.points is None else str(self.points)
        dims = "?" if self.dim is None else str(self.dim)
        if self.kind == "chroma":
            space = self.distance or "?"
            return f"{self.name} ({points} documents, {dims} dims, {space}; Chroma collection)"
        label = KIND_LABELS.get(self.kind, "Qdrant collection")
        return f"{self.name} ({points} points, {dims} dims, {self.distance or '?'}; {label})"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "points": self.points,
            "dims": self.dim,
            "distance": self.distance,
            "kind": self.kind,
            "label": KIND_LABELS.get(self.kind, "Qdrant collection"),
        }


KIND_LABELS = {
    "chroma": "Chroma collection",
    "cyber-autoagent": "Cyber-AutoAgent memories",
    "cyber-web-cache": "Cyber-AutoAgent web-search cache",
    "mem0": "mem0 memories",
    "mem0-entities": "mem0 entity index",
    "qdrant": "Qdrant collection",
}


def classify(name: str, sample_keys: Iterable[str] = ()) -> str:
    """What a collection holds, by its name first and its payload keys second."""
    keys = set(sample_keys)
    if name == CAA_COLLECTION:
        return "cyber-autoagent"
    if WEB_CACHE_PATTERN.match(name):
        return "cyber-web-cache"
    if name == MEM0_COLLECTION:
        return "mem0"
    if name.endswith(("_entities", "-entities")):
        return "mem0-entities"
    if {"memory", "target_values", "operation_id"} <= keys:
        return "cyber-autoagent"
    if {"query", "result", "result_count", "expires_at"} <= keys:
        return "cyber-web-cache"
    if {"data", "hash"} <= keys:
        return "mem0"
    return "qdrant"


def choose_collection(
    collections: Sequence[CollectionInfo],
    wanted: str | None,
    where: str,
    aliases: Mapping[str, str],
) -> CollectionInfo:
    by_name = {c.name: c for c in collections}
    if wanted:
        name = aliases.get(wanted, wanted) if wanted not in by_name else wanted
        if name in by_name:
            return by_name[name]
        listed = "; ".join(c.describe() for c in collections) or "none"
        raise SourceError(f"{where} has no collection {wanted!r}; it holds: {listed}")
    for preferred in (CAA_COLLECTION, MEM0_COLLECTION):
        if preferred in by_name:
            return by_name[preferred]
    if len(collections) == 1:
        return collections[0]
    raise CollectionChoiceError(where, collections)
