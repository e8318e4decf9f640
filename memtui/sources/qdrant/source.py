"""``QdrantSource``: one Qdrant collection behind the ``MemorySource`` interface.

The source holds a backend (``memtui.sources.qdrant.backend``: a local folder
or a server) and the cached index its base class keeps; it reads a snapshot of
every point, pages and filters it, and runs the forget protocol through the
backend.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from memtui.core.search import SearchRequest
from memtui.sources.base import (
    DEFAULT_PAGE_SIZE,
    FIELD_SEPARATOR,
    DetailSection,
    Page,
    SourceError,
    SourceRecord,
    SourceSummary,
    TierFacet,
    check_limit,
)
from memtui.sources.cache import FilterSql, fingerprint_text
from memtui.sources.foreign import ForeignSource
from memtui.sources.qdrant.backend import Backend
from memtui.sources.qdrant.collections import CollectionInfo
from memtui.sources.qdrant.filters import list_filter_sql, matches
from memtui.sources.qdrant.lock import LOCK_FILE
from memtui.sources.qdrant.points import (
    ID_PREFIX,
    PointData,
    epoch_text,
    normalize_pid,
    payload_text,
    pid_of,
    record_id_of,
    text_fields,
)
from memtui.sources.shapes import keyset_start

TEXT_KEYS = ("memory", "data", "text", "content", "page_content", "document", "query")
#: refused points named one by one in the summary (the rest are counted)
SHOWN_REFUSALS = 3

Clock = Callable[[], datetime]


@dataclass
class _Snapshot:
    records: list[SourceRecord] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    by_id: dict[str, SourceRecord] = field(default_factory=dict)
    points: dict[str, PointData] = field(default_factory=dict)
    key: Any = None


class QdrantSource(ForeignSource):
    """A Qdrant collection (local folder or server) behind the ``MemorySource`` interface.

    Subclasses map a collection's payloads onto tiers and scopes
    (``record_from_point``); this class handles reading, paging, facets,
    freshness, the cached index, and the forget protocol.
    """

    kind = "qdrant"
    kind_label = "Qdrant collection"
    tiers: tuple[str, ...] = ("points",)
    scope_keys: tuple[str, ...] = ()
    #: scope keys whose value is a list (a filter matches any element)
    list_scope_keys: tuple[str, ...] = ()
    hidden_state = "expired"
    id_prefix = ID_PREFIX
    write_capabilities = frozenset({"forget", "forget_scope"})
    _held = False
    """While True the snapshot is not re-read (a scope forget deletes point after point)."""

    def __init__(
        self,
        location: Path,
        *,
        backend: Backend,
        info: CollectionInfo,
        live_holders: list[int] | None = None,
        read_only: bool = True,
        clock: Clock | None = None,
        operator: str | None = None,
        audit_db: str | Path | None = None,
        cache_root: Path | None = None,
        notes: Sequence[str] = (),
    ) -> None:
        self.backend = backend
        self.info = info
        self.live_holders = live_holders
        self._open_notes = list(notes)
        self._snap = _Snapshot()
        self._probe_plan: dict[str, list[bytes]] = {}
        super().__init__(
            location,
            read_only=read_only,
            clock=clock,
            operator=operator,
            audit_db=audit_db,
            cache_root=cache_root,
        )
        self.opened_files = backend.watched(self.opened_files)
        self._reload()

    # -- connection (the backend owns it)

    def _connect(self) -> Any:
        return self.backend.connection

    def _columns(self) -> dict[str, list[str]]:
        return {}

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        conn = self.backend.connection
        if conn is None:
            return []
        with self._lock:
            try:
                return conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise SourceError(f"reading {self.path.name} failed: {exc}") from None

    def _close_connection(self) -> None:
        self.backend.close()

    # -- what it is

    @property
    def is_server(self) -> bool:
        return self.backend.kind == "server"

    @property
    def folder(self) -> Path | None:
        return self.backend.folder

    @property
    def live(self) -> bool:
        return bool(self.live_holders)

    def audit_source(self) -> dict[str, Any]:
        return {**super().audit_source(), "collection": self.info.name}

    @property
    def label(self) -> str:
        return self.backend.label(self.path, self.kind_label)

    @property
    def expiry_rule(self) -> str:
        return "no expiry: a point is live until it is deleted"

    def has_vectors(self) -> bool:
        return self.info.dim is not None

    def vector_dim(self) -> int | None:
        return self.info.dim

    def read_only_message(self) -> str:
        if self.live:
            return (
                f"{self.label} is open read-only: the agent is live (process "
                f"{', '.join(str(p) for p in self.live_holders or [])} holds "
                f"{self.path / LOCK_FILE}); memtui will not write to a folder an agent is using "
                "- stop the agent first, or point memtui at its Qdrant server"
            )
        return super().read_only_message()

    def summary(self) -> SourceSummary:
        base = super().summary()
        notes = list(base.notes)
        counts = dict(base.counts)
        head: list[str] = []
        if self.live:
            head.append(
                "the agent is live: read-only (a running client holds the folder's .lock; "
                "memtui reads storage.sqlite without taking it)"
            )
        refused = self.refused
        head.extend(refused[:SHOWN_REFUSALS])
        if len(refused) > SHOWN_REFUSALS:
            head.append(
                f"and {len(refused) - SHOWN_REFUSALS} more refused points "
                "(memtui records names each, on stderr)"
            )
        head.extend(self.backend.notes())
        counts["points"] = len(self._snap.points)
        info = self.info
        notes.append(
            f"collection {info.name}: {len(self._snap.points)} points, "
            f"{info.dim if info.dim is not None else '?'} dims, {info.distance or '?'}"
            + (f", sparse: {', '.join(info.sparse)}" if info.sparse else "")
        )
        notes.extend(self.backend.storage_notes(counts))
        notes.extend(self._open_notes)
        return SourceSummary(
            kind=base.kind,
            label=base.label,
            path=base.path,
            read_only=base.read_only,
            counts=counts,
            notes=head + notes,
        )

    @property
    def refused(self) -> list[str]:
        """One line per point memtui refused to read (the rest of the collection is read)."""
        self._current()
        return list(self.backend.refused)

    def collections(self) -> list[CollectionInfo]:
        """Every collection of the store (for a picker)."""
        return self.backend.collections()

    # -- mapping (subclasses)

    def record_from_point(self, point: PointData) -> SourceRecord:
        payload = point.payload
        text = ""
        for key in TEXT_KEYS:
            if isinstance(payload.get(key), str):
                text = payload[key]
                break
        if not text:
            text = FIELD_SEPARATOR.join(text_fields(payload))
        created = payload.get("created_at")
        return SourceRecord(
            id=record_id_of(point.pid),
            tier="points",
            record_type="point",
            content=text,
            scope={},
            created_at=created if isinstance(created, str) else epoch_text(created),
            expires_at=None,
            state="live",
            metadata={"point_id": point.pid, "payload": payload, **self.embedding_meta(point)},
        )

    def embedding_meta(self, point: PointData) -> dict[str, Any]:
        info: dict[str, Any] = {"dims": point.dims}
        if point.dense_names not in ((), ("",)):
            info["dense"] = list(point.dense_names)
        if point.sparse_names:
            info["sparse"] = list(point.sparse_names)
        return {"embedding": info}

    def prepare(self, points: Mapping[str, PointData]) -> None:
        """Called after the points are read and before they are mapped (mem0: its history)."""

    def extra_records(self, points: Mapping[str, PointData]) -> list[SourceRecord]:
        """Records that are not points (mem0: deleted memories still readable in history)."""
        return []

    def state_key(self) -> Any:
        return self.backend.state_key()

    #: the open options this kind of collection takes (``memory_mode``, ``mem0_history``)
    option_names: tuple[str, ...] = ()

    @classmethod
    def options_from(cls, options: Mapping[str, Any], *, folder: Path | None) -> dict[str, Any]:
        """The source's own keyword arguments; an option for another kind is refused."""
        for name, value in options.items():
            if value is not None and name not in cls.option_names:
                raise SourceError(
                    f"--{name.replace('_', '-')} does not apply to {cls.kind_label} collections"
                )
        return {k: v for k, v in options.items() if k in cls.option_names}

    # -- loading and freshness

    def _reload(self) -> None:
        with self._lock:
            key = self.state_key()
            points = self.backend.load()
            by_point = {record_id_of(p.pid): p for p in points}
            self.prepare(by_point)
            records = [self.record_from_point(p) for p in points]
            records.extend(self.extra_records(by_point))
            records.sort(key=lambda r: r.id)
            self._snap = _Snapshot(
                records=records,
                ids=[r.id for r in records],
                by_id={r.id: r for r in records},
                points=by_point,
                key=key if self.backend.rereads else self.state_key(),
            )

    def _current(self) -> _Snapshot:
        with self._lock:
            if self.backend.rereads and not self._held and self.state_key() != self._snap.key:
                self._reload()
            return self._snap

    def refresh(self) -> None:
        """Read the collection again (a server is read once per open otherwise)."""
        self._reload()

    # -- filters

    def effective_filters(self, filters: Mapping[str, Any] | None) -> dict[str, Any]:
        """The filters after the source's own rule (Cyber-AutoAgent's memory mode)."""
        return self.check_filters(filters)

    def _select(
        self, filters: Mapping[str, Any] | None, include_hidden: bool, start: int = 0
    ) -> Iterator[SourceRecord]:
        checked = self.effective_filters(filters)
        records = self._current().records
        for stored in records[start:]:
            record = self.restate(stored)
            if not include_hidden and record.state != "live":
                continue
            if matches(record, checked):
                yield record

    def cache_filter_sql(self) -> FilterSql:
        return list_filter_sql(set(self.list_scope_keys))

    # -- reading

    def record_count(self) -> int:
        return len(self._current().records)

    def fingerprint(self) -> str:
        snap = self._current()
        return fingerprint_text([self.kind, self.info.name, snap.key, len(snap.records)])

    def facets(
        self, filters: Mapping[str, Any] | None = None, *, include_hidden: bool = False
    ) -> list[TierFacet]:
        tiers: dict[str, int] = {}
        scopes: dict[str, dict[str, dict[str, int]]] = {}
        for record in self._select(filters, include_hidden):
            tiers[record.tier] = tiers.get(record.tier, 0) + 1
            bucket = scopes.setdefault(record.tier, {})
            for key in self.scope_keys:
                value = record.scope.get(key)
                values = value if isinstance(value, list) else [value]
                for item in dict.fromkeys(str(v) for v in values if v is not None):
                    counts = bucket.setdefault(key, {})
                    counts[item] = counts.get(item, 0) + 1
        order = {t: i for i, t in enumerate(self.tiers)}
        return [
            TierFacet(
                tier=tier,
                count=tiers[tier],
                scopes={k: dict(sorted(v.items())) for k, v in sorted(scopes[tier].items())},
            )
            for tier in sorted(tiers, key=lambda t: (order.get(t, len(order)), t))
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
        start = keyset_start(self._current().ids, after, pid_of, self.kind_label)
        return Page.of(self._select(filters, include_hidden, start), limit)

    def _canonical(self, record_id: str) -> str | None:
        pid = pid_of(record_id)
        return None if pid is None else record_id_of(pid)

    def restate(self, record: SourceRecord) -> SourceRecord:
        """The record with its state as of now (a collection whose expiry moves with time)."""
        return record

    def get(self, record_id: str) -> SourceRecord | None:
        key = self._canonical(record_id)
        record = None if key is None else self._current().by_id.get(key)
        return None if record is None else self.restate(record)

    def id_hint(self, record_id: str) -> str | None:
        """A bare point id (``7``, a UUID), as Qdrant and mem0 name a point: say its id."""
        if pid_of(record_id) is not None:
            return None
        text = str(record_id).strip()
        try:
            candidate = record_id_of(normalize_pid(int(text) if text.isdigit() else text))
        except ValueError:
            candidate = None
        if candidate is not None and self.get(candidate) is not None:
            return f"memtui's id of point {text} is {candidate}"
        return (
            f"a {self.kind_label} record's id is {ID_PREFIX}:POINT_ID, as `memtui records` lists it"
        )

    def get_many(self, record_ids: Iterable[str]) -> dict[str, SourceRecord]:
        snap = self._current()
        out: dict[str, SourceRecord] = {}
        for record_id in record_ids:
            key = self._canonical(record_id)
            if key is not None and key in snap.by_id:
                out[key] = self.restate(snap.by_id[key])
        return out

    def point(self, record_id: str) -> PointData | None:
        key = self._canonical(record_id)
        return None if key is None else self._current().points.get(key)

    def notes(self, record: SourceRecord) -> str:
        return f"point {record.metadata.get('point_id')}"

    def detail(self, record_id: str) -> list[DetailSection]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        from memtui.core.secrets import mask_metadata

        point = self.point(record_id)
        sections = []
        if point is not None:
            sections.append(
                DetailSection(
                    title="payload (full JSON, secrets masked)",
                    columns=("json",),
                    rows=[(json.dumps(mask_metadata(point.payload), indent=2, sort_keys=True),)],
                )
            )
            sections.append(
                DetailSection(
                    title="stored embedding",
                    columns=("collection", "dims", "dense names", "sparse names"),
                    rows=[
                        (
                            self.info.name,
                            point.dims,
                            ", ".join(n or "(unnamed)" for n in point.dense_names),
                            ", ".join(point.sparse_names),
                        )
                    ],
                )
            )
        sections.append(self.history_section(record.id))
        return sections

    # -- search (the cached index; the vectors are the collection's own)

    def cache_vectors(self) -> dict[str, bytes]:
        dim = self.info.dim
        return {
            record_id: point.vector
            for record_id, point in self._current().points.items()
            if point.vector is not None and (dim is None or point.dims == dim)
        }

    def search(self, request: SearchRequest | str, **options: Any) -> Any:
        request = SearchRequest.of(request, **options)
        response = super().search(request.but(filters=self.effective_filters(request.filters)))
        if response.trace.source is not None:  # the foreign source names its index
            response.trace.source.collection = self.info.name
        return response

    # -- forget

    def _require_writable(self) -> None:
        if self.read_only:
            raise SourceError(self.read_only_message())

    def _writer(self) -> contextlib.AbstractContextManager[None]:
        return self.backend.writer()

    def forget(self, record_id: str, *, reason: str, operator: str | None = None) -> Any:
        self._require_writable()
        with self._writer():
            self._current()  # what is on disk now, under the lock (re-read if it changed)
            return super().forget(record_id, reason=reason, operator=operator)

    def forget_preview(self, record_id: str) -> dict[str, Any]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        return {
            "records": [record.id],
            "rule": f"The point (payload and vectors) is deleted from {self.backend.forget_where}.",
            "counts": {"points": 1},
        }

    def _delete_point(self, point: PointData, record: SourceRecord) -> dict[str, bool]:
        """Delete the point in the backend; returns checks.

        The byte check looks for what is the point's own: its id and its text
        (payload values shared with other points, such as an operation id, stay).
        """
        result = self.backend.delete(point)
        checks = {"point_gone": bool(result.get("point_gone"))}
        probes = [str(point.pid).encode("utf-8")]
        if record.content:
            probes.append(record.content.encode("utf-8")[:256])
        self.backend.add_probes(self._probe_plan, probes)
        return checks

    def record_value_columns(self) -> list[tuple[str, str]]:
        return [("points", "point")]  # a local folder's storage.sqlite: one pickle a point

    def _apply_forget(self, record: SourceRecord) -> dict[str, Any]:
        self._probe_plan = {}
        point = self.point(record.id)
        if point is None:
            raise SourceError(f"no point with id {record.id}")
        checks = self._delete_point(point, record)
        return {
            "removed": [record.id],
            "checks": checks,
            "probes": [],
            "details": {"collection": self.info.name, "backend": self.backend.kind},
        }

    # -- forget a whole scope

    @property
    def payload_scopes(self) -> bool:
        """Whether a scope is a top-level payload ``KEY=VALUE`` (a collection memtui maps
        to no scope keys of its own, such as a plain Qdrant collection)."""
        return not self.scope_keys

    def check_scope_key(self, key: str) -> None:
        if not self.payload_scopes:
            super().check_scope_key(key)
        elif not key.strip():
            raise SourceError("name a payload key of the points: --scope KEY=VALUE")

    def scope_records(self, key: str, value: str) -> list[SourceRecord]:
        snap = self._current()
        if self.payload_scopes:
            return [
                self.restate(record)
                for record in snap.records
                if record.id in snap.points
                and payload_text(snap.points[record.id].payload.get(key)) == value
            ]
        return [
            record
            for record in (self.restate(r) for r in snap.records)
            if matches(record, {key: value})
        ]

    def _apply_forget_many(self, records: Sequence[SourceRecord]) -> dict[str, Any]:
        """Each point deleted in turn from the snapshot read before the first (the file
        changes under it), and every point's bytes kept for the one check after."""
        plans: dict[str, list[bytes]] = {}

        def apply(record: SourceRecord) -> dict[str, Any]:
            applied = self._apply_forget(record)
            for path, probes in self._probe_plan.items():
                plans.setdefault(path, []).extend(probes)
            return applied

        self._held = True
        try:
            applied = self._forget_each(records, apply)
        finally:
            self._held = False
        self._probe_plan = plans
        return applied

    def _purge_applied(self, applied: dict[str, Any]) -> tuple[dict[str, bool], dict[str, Any]]:
        """The backend's purge of what the forget planned (``_probe_plan``), then the
        other files it changed."""
        checks, details = self.backend.purge(self._probe_plan, self.record_value_columns())
        extra_checks, extra_details = self._purge_extra()
        checks.update(extra_checks)
        details.update(extra_details)
        self._reload()
        return checks, details

    def _purge_extra(self) -> tuple[dict[str, bool], dict[str, Any]]:
        """Purge other files the forget changed (mem0's history)."""
        return {}, {}
