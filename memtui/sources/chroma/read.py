"""Reading one collection of a Chroma folder with SQL: records, facets, vectors, the gap.

Everything is read from ``chroma.sqlite3`` (opened read-only): the metadata
segment's ``embeddings`` and ``embedding_metadata`` rows are the live records
(the document is the ``chroma:document`` key), and the write-ahead
``embeddings_queue`` holds every add/update/upsert with its vector and its
metadata (JSON, the document under ``chroma:document``). Queue rows of ids the
collection no longer holds are what Chroma's own delete leaves behind: they are
shown as ``deleted`` records (hidden by default) and counted as the erasure gap.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memtui.core.records import format_timestamp
from memtui.sources.base import (
    DEFAULT_PAGE_SIZE,
    Page,
    SourceError,
    SourceRecord,
    TierFacet,
    check_limit,
    decode_id,
    encode_id,
)
from memtui.sources.chroma.folder import SQLITE_NAME
from memtui.sources.foreign import ForeignSqliteSource
from memtui.sources.qdrant.collections import CollectionInfo

ID_PREFIX = "chroma"
DOCUMENT_KEY = "chroma:document"
SCOPE_KEYS = ("user_id", "agent_id", "run_id", "session_id")
#: queue operations (chromadb's ``Operation``): ADD, UPDATE, UPSERT, DELETE
WRITES = (0, 1, 2)
DELETE = 3


def chroma_time(text: Any) -> str | None:
    """SQLite's ``CURRENT_TIMESTAMP`` (UTC ``YYYY-MM-DD HH:MM:SS``) as memtui's ISO text."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.strptime(text[:19], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return None
    return format_timestamp(moment)


def queue_document(metadata: Any) -> tuple[str | None, dict[str, Any]]:
    """The document and other metadata of a queue row's JSON (never anything but JSON)."""
    if not isinstance(metadata, str) or not metadata:
        return None, {}
    try:
        value = json.loads(metadata)
    except ValueError:
        return None, {}
    if not isinstance(value, dict):
        return None, {}
    document = value.pop(DOCUMENT_KEY, None)
    return (document if isinstance(document, str) else None), value


@dataclass
class Snapshot:
    """The collection as read at one fingerprint."""

    key: Any = None
    records: list[SourceRecord] = field(default_factory=list)
    by_id: dict[str, SourceRecord] = field(default_factory=dict)
    order: dict[str, int] = field(default_factory=dict)
    #: queue rows holding a document, per embedding id (deleted ids too)
    queue_texts: dict[str, list[str]] = field(default_factory=dict)
    #: the newest FLOAT32 vector of each live document, by record id
    vectors: dict[str, bytes] = field(default_factory=dict)
    #: ids whose DELETE row is in the queue and that the collection no longer holds
    deletes: set[str] = field(default_factory=set)
    live_count: int = 0


class ChromaReads(ForeignSqliteSource):
    """One Chroma collection, read with SQL."""

    kind = "chroma"
    kind_label = "Chroma collection"
    scope_keys = SCOPE_KEYS
    hidden_state = "deleted"

    def __init__(self, folder: Path, *, info: CollectionInfo, **kwargs: Any) -> None:
        self.folder = folder
        self.info = info
        self._snap = Snapshot()
        self._snap_lock = threading.RLock()
        if kwargs.get("audit_db") is None:
            kwargs["audit_db"] = Path(str(folder) + ".memtui-audit.db")
        super().__init__(folder / SQLITE_NAME, **kwargs)
        file_watches = self.opened_files
        self.opened_files = []
        self.watch(folder)  # the folder first: a restored copy of it is another folder
        self.opened_files.extend(file_watches)
        ids = self.query(
            "SELECT c.id, (SELECT s.id FROM segments AS s WHERE s.collection = c.id "
            "AND s.scope = 'METADATA') FROM collections AS c WHERE c.name = ?",
            (info.name,),
        )
        if not ids or ids[0][1] is None:
            raise SourceError(f"{folder}: collection {info.name!r} has no metadata segment")
        self.collection_id = str(ids[0][0])
        self.segment_id = str(ids[0][1])
        self.tiers = (info.name,)

    @property
    def label(self) -> str:
        return f"{self.folder.name}/{self.info.name} ({self.kind_label})"

    @property
    def expiry_rule(self) -> str:
        return (
            "Chroma has no expiry: every document is live until deleted; documents Chroma "
            "deleted whose text is still in chroma.sqlite3 are shown as deleted"
        )

    def audit_source(self) -> dict[str, Any]:
        return {**super().audit_source(), "collection": self.info.name}

    # -- SQL

    def _topic(self) -> str:
        return f"%/{self.collection_id}"

    def queue_rows(self) -> list[tuple[Any, ...]]:
        """(seq_id, created_at, operation, id, vector, encoding, metadata) of the collection,
        in order."""
        return self.query(
            "SELECT seq_id, created_at, operation, id, vector, encoding, metadata "
            "FROM embeddings_queue WHERE topic LIKE ? ORDER BY seq_id",
            (self._topic(),),
        )

    def _load(self) -> Snapshot:
        rows = self.query(
            "SELECT id, embedding_id, seq_id, created_at FROM embeddings WHERE segment_id = ? "
            "ORDER BY id",
            (self.segment_id,),
        )
        meta: dict[int, dict[str, Any]] = {}
        for rid, key, s, i, f, b in self.query(
            "SELECT m.id, m.key, m.string_value, m.int_value, m.float_value, m.bool_value "
            "FROM embedding_metadata AS m JOIN embeddings AS e ON e.id = m.id "
            "WHERE e.segment_id = ? ORDER BY m.id, m.key",
            (self.segment_id,),
        ):
            value = s if s is not None else i if i is not None else f if f is not None else None
            if value is None and b is not None:
                value = bool(b)
            meta.setdefault(int(rid), {})[str(key)] = value
        snap = Snapshot()
        live: set[str] = set()
        for rid, embedding_id, seq_id, created_at in rows:
            values = meta.get(int(rid), {})
            document = values.pop(DOCUMENT_KEY, None)
            eid = str(embedding_id)
            live.add(eid)
            snap.records.append(
                self._record(eid, document, values, chroma_time(created_at), "live", seq_id)
            )
        deleted: dict[str, list[tuple[Any, ...]]] = {}
        dim = self.info.dim or 0
        for row in self.queue_rows():
            seq_id, created_at, operation, eid, vector, encoding, metadata = row
            if operation == DELETE and str(eid) not in live:
                snap.deletes.add(str(eid))
            if operation not in WRITES:
                continue
            if (
                str(eid) in live
                and isinstance(vector, bytes)
                and dim
                and len(vector) == dim * 4
                and str(encoding or "FLOAT32").upper() == "FLOAT32"
            ):
                snap.vectors[encode_id(ID_PREFIX, str(eid))] = vector
            document, _ = queue_document(metadata)
            if document is not None:
                snap.queue_texts.setdefault(str(eid), []).append(document)
            if str(eid) not in live and document is not None:
                deleted.setdefault(str(eid), []).append(row)
        for eid, held in deleted.items():
            fields: dict[str, Any] = {}
            for row in held:  # an update's row holds only what it changed
                fields.update(queue_document(row[6])[1])
            document = next(
                d for row in reversed(held) if (d := queue_document(row[6])[0]) is not None
            )
            record = self._record(
                eid, document, fields, chroma_time(held[0][1]), "deleted", held[-1][0]
            )
            record.metadata["erasure_gap"] = (
                f"deleted by Chroma, but its text is still in {SQLITE_NAME} "
                f"({len(held)} embeddings_queue row(s))"
            )
            snap.records.append(record)
        snap.live_count = len(live)
        if len(snap.vectors) != len(live):
            snap.vectors = {}  # a lane that ranks only some documents would mislead
        snap.by_id = {r.id: r for r in snap.records}
        snap.order = {r.id: n for n, r in enumerate(snap.records)}
        return snap

    def _record(
        self,
        eid: str,
        document: Any,
        fields: dict[str, Any],
        created_at: str | None,
        state: str,
        seq_id: Any,
    ) -> SourceRecord:
        scope = {k: (str(fields[k]) if fields.get(k) is not None else None) for k in SCOPE_KEYS}
        seq = seq_id if isinstance(seq_id, int) else None
        if isinstance(seq_id, bytes):
            seq = int.from_bytes(seq_id, "big")
        return SourceRecord(
            id=encode_id(ID_PREFIX, eid),
            tier=self.info.name,
            record_type="document",
            content=document if isinstance(document, str) else "",
            scope=scope,
            created_at=created_at,
            expires_at=None,
            state=state,
            metadata={
                "embedding_id": eid,
                "seq_id": seq,
                **{k: v for k, v in fields.items() if k not in SCOPE_KEYS},
            },
        )

    def _current(self) -> Snapshot:
        key = self.fingerprint()
        with self._snap_lock:
            if self._snap.key != key:
                snap = self._load()
                snap.key = key
                self._snap = snap
            return self._snap

    # -- reads

    def record_count(self) -> int:
        return len(self._current().records)

    def _matching(
        self, filters: Mapping[str, Any] | None, include_hidden: bool
    ) -> list[SourceRecord]:
        wanted = self.check_filters(filters)
        out = []
        for record in self._current().records:
            if not include_hidden and record.state != "live":
                continue
            fields = {"tier": record.tier, "record_type": record.record_type, **record.scope}
            if all(
                (fields.get(k) is None) if v is None else fields.get(k) == str(v)
                for k, v in wanted.items()
            ):
                out.append(record)
        return out

    def facets(
        self, filters: Mapping[str, Any] | None = None, *, include_hidden: bool = False
    ) -> list[TierFacet]:
        records = self._matching(filters, include_hidden)
        scopes: dict[str, dict[str, int]] = {}
        for record in records:
            for key in SCOPE_KEYS:
                value = record.scope.get(key)
                if value is not None:
                    bucket = scopes.setdefault(key, {})
                    bucket[value] = bucket.get(value, 0) + 1
        if not records and filters and "tier" in filters:
            return []
        return [
            TierFacet(
                tier=self.info.name,
                count=len(records),
                scopes={k: dict(sorted(v.items())) for k, v in sorted(scopes.items())},
            )
        ]

    def page(
        self,
        filters: Mapping[str, Any] | None = None,
        *,
        after: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        include_hidden: bool = False,
    ) -> Page:
        limit = check_limit(limit)
        records = self._matching(filters, include_hidden)
        start = 0
        if after is not None:
            order = self._current().order
            if after not in order:
                raise SourceError(f"no record with id {after} to page after")
            position = order[after]
            start = next((n for n, r in enumerate(records) if order[r.id] > position), len(records))
        chosen = records[start : start + limit]
        more = start + limit < len(records)
        return Page(records=chosen, next_cursor=chosen[-1].id if more and chosen else None)

    def get(self, record_id: str) -> SourceRecord | None:
        return self._current().by_id.get(record_id)

    def id_hint(self, record_id: str) -> str | None:
        if decode_id(ID_PREFIX, record_id, 1) is not None:
            return None
        candidate = encode_id(ID_PREFIX, str(record_id))
        if candidate in self._current().by_id:
            return f"Chroma ids are given as {candidate}"
        return f"ids here look like {ID_PREFIX}:DOCUMENT-ID"

    def notes(self, record: SourceRecord) -> str:
        if record.state == "deleted":
            return "deleted by Chroma: text still in chroma.sqlite3 (erasure gap)"
        return ""

    # -- vectors

    def vector_dim(self) -> int | None:
        return self.info.dim

    def has_vectors(self) -> bool:
        return bool(self._current().vectors)

    def cache_vectors(self) -> dict[str, bytes]:
        """The newest FLOAT32 vector of each live document, from ``embeddings_queue``
        (chromadb packs it as little-endian float32, ``dim * 4`` bytes)."""
        return dict(self._current().vectors)

    def vector_note(self) -> str | None:
        """Why search is keyword-only, when the vectors cannot be read; None when they can."""
        snap = self._current()
        if snap.vectors or not snap.live_count:
            return None
        return (
            "the vectors of live documents are not all in embeddings_queue (Chroma purges it "
            "once the HNSW segment has them; that segment's id map is a pickle, never "
            "loaded): search is keyword-only"
        )
