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
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
from memtui.sources.chroma.hnsw import DATA, HEADER, LENGTHS
from memtui.sources.chroma.scope_counts import scope_counts
from memtui.sources.chroma.segment import ID_MAP
from memtui.sources.chroma.vectors import (
    CollectionVectors,
    read_collection_vectors,
    vector_segment,
)
from memtui.sources.foreign import ForeignSqliteSource
from memtui.sources.qdrant.collections import CollectionInfo

ID_PREFIX = "chroma"
DOCUMENT_KEY = "chroma:document"
SCOPE_KEYS = ("user_id", "agent_id", "run_id", "session_id")
#: queue operations (chromadb's ``Operation``): ADD, UPDATE, UPSERT, DELETE
WRITES = (0, 1, 2)
DELETE = 3
#: the vector segment's files whose change is a change of the collection's vectors
SEGMENT_FILES = (HEADER, DATA, LENGTHS, ID_MAP)


_SQLITE_TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")


def chroma_time(text: Any) -> str | None:
    """SQLite's ``CURRENT_TIMESTAMP`` (UTC ``YYYY-MM-DD HH:MM:SS``) as memtui's ISO text
    (``format_timestamp``'s form), without parsing each one (a page has hundreds)."""
    if not isinstance(text, str) or not _SQLITE_TIME.match(text):
        return None
    return f"{text[:10]}T{text[11:19]}.000000Z"


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
    """What is read once per state of the file: the deleted documents the queue still
    holds, and whether it holds every live document's vector."""

    key: Any = None
    deleted: list[SourceRecord] = field(default_factory=list)
    deleted_by_id: dict[str, int] = field(default_factory=dict)
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
        self._vector_read: tuple[Any, CollectionVectors] | None = None
        self._vector_lock = threading.RLock()  # not the snapshot's: reads need not wait
        self.vector_segment_id: str | None = None
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
        self.vector_segment_id = vector_segment(self.query, self.collection_id)
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

    _LIVE = "FROM embeddings AS e WHERE e.segment_id = ?"
    _NOT_LIVE = (
        "NOT EXISTS (SELECT 1 FROM embeddings AS e WHERE e.segment_id = ? "
        "AND e.embedding_id = q.id)"
    )

    def _load(self) -> Snapshot:
        snap = Snapshot()
        snap.live_count = int(self.query(f"SELECT count(*) {self._LIVE}", (self.segment_id,))[0][0])
        deleted: dict[str, list[tuple[Any, ...]]] = {}
        for row in self.query(
            "SELECT q.seq_id, q.created_at, q.operation, q.id, q.metadata "
            f"FROM embeddings_queue AS q WHERE q.topic LIKE ? AND {self._NOT_LIVE} "
            "ORDER BY q.seq_id",
            (self._topic(), self.segment_id),
        ):
            eid = str(row[3])
            if row[2] == DELETE:
                snap.deletes.add(eid)
            elif row[2] in WRITES and queue_document(row[4])[0] is not None:
                deleted.setdefault(eid, []).append(row)
        for eid, held in deleted.items():
            fields: dict[str, Any] = {}
            for row in held:  # an update's row holds only what it changed
                fields.update(queue_document(row[4])[1])
            document = next(
                d for row in reversed(held) if (d := queue_document(row[4])[0]) is not None
            )
            record = self._record(
                eid, document, fields, chroma_time(held[0][1]), "deleted", held[-1][0]
            )
            record.metadata["erasure_gap"] = (
                f"deleted by Chroma, but its text is still in {SQLITE_NAME} "
                f"({len(held)} embeddings_queue row(s))"
            )
            snap.deleted.append(record)
        snap.deleted_by_id = {r.id: n for n, r in enumerate(snap.deleted)}
        return snap

    def queue_texts(self, eids: Sequence[str]) -> dict[str, list[str]]:
        """The documents the queue's add/update/upsert rows hold, per id."""
        out: dict[str, list[str]] = {}
        for start in range(0, len(eids), 500):
            chunk = list(eids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for eid, metadata in self.query(
                "SELECT id, metadata FROM embeddings_queue WHERE topic LIKE ? "
                f"AND operation IN (0, 1, 2) AND id IN ({marks}) ORDER BY seq_id",
                (self._topic(), *chunk),
            ):
                document = queue_document(metadata)[0]
                if document is not None:
                    out.setdefault(str(eid), []).append(document)
        return out

    def earlier_versions(self) -> int:
        """Queue rows of live documents holding a text other than the current one."""
        doc = f'$."{DOCUMENT_KEY}"'
        return int(
            self.query(
                "SELECT count(*) FROM embeddings_queue AS q "
                "JOIN embeddings AS e ON e.segment_id = ? AND e.embedding_id = q.id "
                "JOIN embedding_metadata AS m ON m.id = e.id AND m.key = ? "
                "WHERE q.topic LIKE ? AND q.operation IN (0, 1, 2) AND json_valid(q.metadata) "
                "AND json_extract(q.metadata, ?) IS NOT NULL "
                "AND json_extract(q.metadata, ?) IS NOT m.string_value",
                (self.segment_id, DOCUMENT_KEY, self._topic(), doc, doc),
            )[0][0]
        )

    def _live_records(self, rows: Sequence[tuple[Any, ...]]) -> list[SourceRecord]:
        """Records of these ``(id, embedding_id, seq_id, created_at)`` rows, in order."""
        meta: dict[int, dict[str, Any]] = {}
        ids = [int(r[0]) for r in rows]
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for rid, key, s, i, f, b in self.query(
                "SELECT id, key, string_value, int_value, float_value, bool_value "
                f"FROM embedding_metadata WHERE id IN ({marks}) ORDER BY id, key",
                chunk,
            ):
                value = s if s is not None else i if i is not None else f
                if value is None and b is not None:
                    value = bool(b)
                meta.setdefault(int(rid), {})[str(key)] = value
        out = []
        for rid, eid, seq_id, created_at in rows:
            values = meta.get(int(rid), {})
            document = values.pop(DOCUMENT_KEY, None)
            out.append(
                self._record(str(eid), document, values, chroma_time(created_at), "live", seq_id)
            )
        return out

    def _record(
        self,
        eid: str,
        document: Any,
        fields: dict[str, Any],
        created_at: str | None,
        state: str,
        seq_id: Any,
    ) -> SourceRecord:
        scope = {k: (v if isinstance(v := fields.get(k), str) else None) for k in SCOPE_KEYS}
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
                **{k: v for k, v in fields.items() if scope.get(k) is None},
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
        snap = self._current()
        return snap.live_count + len(snap.deleted)

    def _wanted(self, filters: Mapping[str, Any] | None) -> tuple[dict[str, Any], bool]:
        """The filters, and whether the tier and type filters leave any record."""
        wanted = self.check_filters(filters)
        possible = wanted.get("tier", self.info.name) == self.info.name and wanted.get(
            "record_type", "document"
        ) in ("document",)
        return wanted, possible

    def _scope_sql(self, wanted: Mapping[str, Any]) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        for key, value in wanted.items():
            if key in ("tier", "record_type"):
                continue
            has = (
                "EXISTS (SELECT 1 FROM embedding_metadata AS s WHERE s.id = e.id "
                "AND s.key = ? AND s.string_value"
            )
            if value is None:
                clauses.append(f"NOT {has} IS NOT NULL)")
                params.append(key)
            else:
                clauses.append(f"{has} = ?)")
                params.extend([key, str(value)])
        return "".join(f" AND {c}" for c in clauses), params

    def _deleted_matching(self, wanted: Mapping[str, Any]) -> list[SourceRecord]:
        return [
            r
            for r in self._current().deleted
            if all(
                (r.scope.get(k) is None) if v is None else r.scope.get(k) == str(v)
                for k, v in wanted.items()
                if k not in ("tier", "record_type")
            )
        ]

    #: the tiers (one: the collection) are counted from the snapshot, the scopes follow
    quick_tier_counts = True

    def tier_counts(self, *, include_hidden: bool = False) -> dict[str, int]:
        snap = self._current()
        return {self.info.name: snap.live_count + (len(snap.deleted) if include_hidden else 0)}

    def facets(
        self, filters: Mapping[str, Any] | None = None, *, include_hidden: bool = False
    ) -> list[TierFacet]:
        wanted, possible = self._wanted(filters)
        if not possible:
            return []
        where, params = self._scope_sql(wanted)
        if where:
            count = int(
                self.query(f"SELECT count(*) {self._LIVE}{where}", (self.segment_id, *params))[0][0]
            )
        else:
            count = self._current().live_count
        scopes: dict[str, dict[str, int]] = {}
        for key, value, n in self._scope_counts(where, params):
            scopes.setdefault(str(key), {})[str(value)] = int(n)
        if include_hidden:
            for record in self._deleted_matching(wanted):
                count += 1
                for key in SCOPE_KEYS:
                    value = record.scope.get(key)
                    if value is not None:
                        bucket = scopes.setdefault(key, {})
                        bucket[value] = bucket.get(value, 0) + 1
        return [
            TierFacet(
                tier=self.info.name,
                count=count,
                scopes={k: dict(sorted(v.items())) for k, v in sorted(scopes.items())},
            )
        ]

    def _scope_counts(self, where: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """(key, value, live documents) of the scope keys under the ``_scope_sql`` filter,
        by the cheapest exact plan (``memtui.sources.chroma.scope_counts``)."""
        return scope_counts(
            self.query,
            segment_id=self.segment_id,
            keys=SCOPE_KEYS,
            live_count=self._current().live_count,
            where=where,
            params=params,
        )

    def _live_key(self, eid: str) -> int | None:
        rows = self.query(
            "SELECT id FROM embeddings WHERE segment_id = ? AND embedding_id = ?",
            (self.segment_id, eid),
        )
        return int(rows[0][0]) if rows else None

    def page(
        self,
        filters: Mapping[str, Any] | None = None,
        *,
        after: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        include_hidden: bool = False,
    ) -> Page:
        limit = check_limit(limit)
        wanted, possible = self._wanted(filters)
        live_after, deleted_after = 0, -1
        if after is not None:
            snap = self._current()
            parts = decode_id(ID_PREFIX, after, 1)
            key = self._live_key(parts[0]) if parts else None
            if key is not None:
                live_after = key
            elif after in snap.deleted_by_id:
                live_after, deleted_after = -1, snap.deleted_by_id[after]
            else:
                raise SourceError(f"no record with id {after} to page after")
        if not possible:
            return Page(records=[], next_cursor=None)
        records: list[SourceRecord] = []
        if live_after >= 0:
            where, params = self._scope_sql(wanted)
            rows = self.query(
                # ``+e.segment_id``: walk the rowid range in order (the segment's index
                # would sort every row of the collection for each page)
                "SELECT e.id, e.embedding_id, e.seq_id, e.created_at FROM embeddings AS e "
                f"WHERE +e.segment_id = ?{where} AND e.id > ? ORDER BY e.id LIMIT ?",
                (self.segment_id, *params, live_after, limit + 1),
            )
            records = self._live_records(rows)
        if include_hidden and len(records) <= limit:
            order = self._current().deleted_by_id
            records += [r for r in self._deleted_matching(wanted) if order[r.id] > deleted_after][
                : limit + 1 - len(records)
            ]
        return Page.of(records, limit)

    def get(self, record_id: str) -> SourceRecord | None:
        return next(iter(self.get_many([record_id]).values()), None)

    def get_many(self, record_ids: Iterable[str]) -> dict[str, SourceRecord]:
        """Records by id, the live ones read with one query per 500 (a search reads its
        candidates' dates: one ``get`` each took half its time)."""
        wanted: dict[str, str] = {}
        for record_id in record_ids:
            parts = decode_id(ID_PREFIX, record_id, 1)
            if parts is not None:
                wanted[parts[0]] = record_id
        out: dict[str, SourceRecord] = {}
        eids = list(wanted)
        for start in range(0, len(eids), 500):
            chunk = eids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.query(
                "SELECT id, embedding_id, seq_id, created_at FROM embeddings "
                f"WHERE segment_id = ? AND embedding_id IN ({marks})",
                (self.segment_id, *chunk),
            )
            for record in self._live_records(rows):
                out[record.id] = record
        missing = [r for r in wanted.values() if r not in out]
        if missing:
            snap = self._current()
            for record_id in missing:
                at = snap.deleted_by_id.get(record_id)
                if at is not None:
                    out[record_id] = snap.deleted[at]
        return out

    def id_hint(self, record_id: str) -> str | None:
        if decode_id(ID_PREFIX, record_id, 1) is not None:
            return None
        candidate = encode_id(ID_PREFIX, str(record_id))
        if self.get(candidate) is not None:
            return f"Chroma ids are given as {candidate}"
        return f"ids here look like {ID_PREFIX}:DOCUMENT-ID"

    def notes(self, record: SourceRecord) -> str:
        if record.state == "deleted":
            return "deleted by Chroma: text still in chroma.sqlite3 (erasure gap)"
        return ""

    # -- vectors

    def vector_dim(self) -> int | None:
        return self.info.dim

    def _data_fingerprint(self) -> Any:
        """The vector segment's files' sizes and times (chromadb persists them apart)."""
        if self.vector_segment_id is None:
            return None
        folder = self.folder / self.vector_segment_id
        out: list[list[int] | None] = []
        for name in SEGMENT_FILES:
            try:
                stat = (folder / name).stat()
            except OSError:
                out.append(None)
                continue
            out.append([stat.st_size, stat.st_mtime_ns])
        return out

    def _vectors(self, *, with_vectors: bool = False) -> CollectionVectors:
        """What was read of the collection's vectors for this state of the folder. The
        verdict (complete or why not) is kept; the vectors only until ``cache_vectors``
        takes them, and only when read for it: asked for again, they are read again."""
        key = self.fingerprint()
        with self._vector_lock:
            cached = self._vector_read
            if (
                cached is None
                or cached[0] != key
                or (with_vectors and cached[1].complete and cached[1].vectors is None)
            ):
                read = CollectionVectors(why="the collection has no dimension (no vectors)")
                if self.info.dim:
                    read = read_collection_vectors(
                        self.folder,
                        self.query,
                        collection_id=self.collection_id,
                        metadata_segment=self.segment_id,
                        dim=self.info.dim,
                        space=self.info.distance or "l2",
                    )
                if not with_vectors:
                    read.vectors = None  # the verdict is kept, not 100,000 vectors beside it
                cached = (key, read)
                self._vector_read = cached
            return cached[1]

    def has_vectors(self) -> bool:
        read = self._vectors()
        return read.complete and read.live > 0

    def cache_vectors(self) -> dict[str, bytes]:
        """Each live document's vector, little-endian float32 (``chroma.vectors``: the HNSW
        segment's files overlaid by the newer queue rows); none unless every live document
        has one (a lane that ranks only some documents would mislead). The vectors are
        handed over and not kept: the next call reads them again."""
        with self._vector_lock:
            read = self._vectors(with_vectors=True)
            vectors, read.vectors = read.vectors, None
        if not vectors or not read.live:
            return {}
        return {encode_id(ID_PREFIX, eid): blob for eid, blob in vectors.items()}

    def vector_note(self) -> str | None:
        """Why search is keyword-only, when the vectors cannot be read; None when they can."""
        read = self._vectors()
        if read.complete or not read.live or not self.info.dim:
            return None
        return f"{read.why}: search is keyword-only"

    def _vector_lane_off(self, request: Any, recorded: dict[str, Any] | None) -> str | None:
        reason = super()._vector_lane_off(request, recorded)
        if recorded is None and not request.keyword_only:
            why = self._vectors().why
            if why and self.info.dim:
                return f"this {self.kind_label} has no stored vectors memtui can read: {why}"
        return reason
