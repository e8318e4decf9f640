"""A Qdrant server, through qdrant-client (``pip install 'memtui[qdrant]'``)."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memtui.config import current
from memtui.sources.base import FileIdentity, SourceError
from memtui.sources.cache import cache_root
from memtui.sources.qdrant.collections import (
    CollectionInfo,
    classify,
    client_missing_error,
    vector_config,
)
from memtui.sources.qdrant.points import PointData, decode_point

LOAD_BATCH = 512


def make_client(url: str, api_key: str | None, timeout: int | None = None) -> Any:
    """A ``QdrantClient`` for a server (kept as a function so tests can point it elsewhere)."""
    try:
        from qdrant_client import QdrantClient
    except ImportError:
        raise client_missing_error("opening a Qdrant server") from None
    kwargs: dict[str, Any] = {"url": url}
    if api_key:
        kwargs["api_key"] = api_key
    if timeout:
        kwargs["timeout"] = timeout
    try:
        return QdrantClient(**kwargs)
    except Exception as exc:
        raise SourceError(f"cannot connect to the Qdrant server at {url}: {exc}") from None


def safe_url(url: str) -> str:
    """The URL without credentials (it names the store in labels and audit events)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        parts = parts._replace(netloc=host)
    return urlunsplit(parts)


class ServerBackend:
    """One collection of a Qdrant server, through qdrant-client."""

    kind = "server"

    def __init__(
        self, client: Any, url: str, info: CollectionInfo | None = None, *, owns_client: bool
    ) -> None:
        self.client = client
        self.owns_client = owns_client  # a client handed in by the caller stays open
        self.url = safe_url(url)
        self.info = info  # set once chosen
        self._snapshot: Any = None

    def collections(self) -> list[CollectionInfo]:
        try:
            names = sorted(c.name for c in self.client.get_collections().collections)
        except Exception as exc:
            raise SourceError(f"cannot list the collections of {self.url}: {exc}") from None
        out: list[CollectionInfo] = []
        for name in names:
            try:
                described = self.client.get_collection(name)
            except Exception as exc:
                raise SourceError(
                    f"cannot describe collection {name} on {self.url}: {exc}"
                ) from None
            params = described.config.params
            vectors = params.vectors
            config: dict[str, Any]
            if vectors is None:
                config = {}
            elif hasattr(vectors, "size"):
                config = {"vectors": {"size": vectors.size, "distance": _distance(vectors)}}
            else:
                config = {
                    "vectors": {
                        k: {"size": v.size, "distance": _distance(v)} for k, v in vectors.items()
                    }
                }
            vector_name, dim, distance, dense = vector_config(config)
            sparse = tuple(sorted((params.sparse_vectors or {}).keys()))
            sample: tuple[str, ...] = ()
            try:
                points, _ = self.client.scroll(name, limit=1, with_payload=True, with_vectors=False)
                if points and isinstance(points[0].payload, dict):
                    sample = tuple(sorted(points[0].payload))
            except Exception:
                sample = ()
            count = described.points_count
            out.append(
                CollectionInfo(
                    name=name,
                    points=count if isinstance(count, int) else None,
                    dim=dim,
                    distance=distance,
                    vector_name=vector_name,
                    vector_names=dense,
                    sparse=sparse,
                    kind=classify(name, sample),
                    sample_keys=sample,
                )
            )
        return out

    def aliases(self) -> dict[str, str]:
        try:
            return {a.alias_name: a.collection_name for a in self.client.get_aliases().aliases}
        except Exception:
            return {}

    def load(self) -> list[PointData]:
        assert self.info is not None
        out: list[PointData] = []
        offset = None
        while True:
            try:
                points, offset = self.client.scroll(
                    self.info.name,
                    limit=LOAD_BATCH,
                    offset=offset,
                    with_payload=True,
                    with_vectors=True,
                )
            except Exception as exc:
                raise SourceError(
                    f"reading collection {self.info.name} on {self.url} failed: {exc}"
                ) from None
            out.extend(decode_point(p, self.info.vector_name) for p in points)
            if offset is None:
                break
        digest = hashlib.sha256()
        for point in sorted(out, key=lambda p: str(p.pid)):
            digest.update(json.dumps([str(point.pid), point.payload], sort_keys=True).encode())
            digest.update(point.vector or b"")
        self._snapshot = [len(out), digest.hexdigest()]
        return out

    def state_key(self) -> Any:
        return self._snapshot

    def delete(self, point: PointData) -> dict[str, Any]:
        assert self.info is not None
        from qdrant_client.http import models

        try:
            self.client.delete(
                self.info.name,
                points_selector=models.PointIdsList(points=[point.pid]),
                wait=True,
            )
            left = self.client.retrieve(self.info.name, ids=[point.pid], with_payload=False)
        except Exception as exc:
            raise SourceError(f"deleting the point on {self.url} failed: {exc}") from None
        return {"point_gone": not left}

    def close(self) -> None:
        if self.owns_client:
            with contextlib.suppress(Exception):
                self.client.close()

    # -- what the source asks of its backend (``memtui.sources.qdrant.backend``)

    rereads = False
    """A server is read once per open (``refresh`` reads it again)."""
    forget_where = "the server"
    connection = None
    refused: tuple[str, ...] = ()
    folder = None

    def watched(self, opened: list[FileIdentity]) -> list[FileIdentity]:
        """No file of the store's to watch: the server names the collection on every
        request, so a change and its check reach the collection that has the name now."""
        return []

    def label(self, location: Path, kind_label: str) -> str:
        assert self.info is not None
        return f"{self.info.name} @ {self.url} ({kind_label})"

    def writer(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def notes(self) -> list[str]:
        return []

    def storage_notes(self, counts: dict[str, Any]) -> list[str]:
        return []

    def add_probes(self, plan: dict[str, list[bytes]], probes: Sequence[bytes]) -> None:
        """The server's storage is not byte-checked (it compacts its own segments)."""

    def purge(
        self, plan: Mapping[str, Sequence[bytes]], value_columns: Sequence[tuple[str, str]]
    ) -> tuple[dict[str, bool], dict[str, Any]]:
        return {}, {
            "server_storage": (
                "not byte-checked: the server compacts its own segments (the point is deleted "
                "and no longer retrievable)"
            )
        }


def _distance(params: Any) -> str | None:
    value = getattr(params, "distance", None)
    return getattr(value, "value", None) or (str(value) if value is not None else None)


def server_anchor(url: str, collection: str | None, root: Path | None) -> Path:
    """A folder in memtui's cache naming the server (the cache and audit key on it)."""
    key = hashlib.sha256(f"{safe_url(url)}\0{collection or ''}".encode()).hexdigest()[:16]
    anchor = (root or cache_root()) / "servers" / key
    anchor.mkdir(parents=True, exist_ok=True)
    info = anchor / "server.json"
    if not info.exists():
        info.write_text(json.dumps({"url": safe_url(url), "collection": collection}) + "\n")
    return anchor


def server_audit_path(url: str, collection: str) -> Path:
    """Default audit log of a server collection: in the user's data folder."""
    key = hashlib.sha256(f"{safe_url(url)}\0{collection}".encode()).hexdigest()[:16]
    folder = current().data_dir / "audit"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"qdrant-{collection[:40]}-{key}.memtui-audit.db"
