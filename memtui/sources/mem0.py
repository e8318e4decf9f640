"""mem0 (mem0ai 2.x, default local set-up) as a memory source: its Qdrant collection and history.

- Vector store: a Qdrant collection (``mem0`` by default), one point per
  memory: payload ``data`` (the text), ``hash``, ``created_at``/``updated_at``
  (UTC ISO), the session ids (``user_id``, ``agent_id``, ``run_id``),
  ``actor_id``, ``role``, ``text_lemmatized`` (a second copy of the text), and
  the caller's metadata flattened into the top level. Scope keys are the
  session ids; a procedural memory (``memory_type: procedural_memory``) is in
  tier ``procedural``, every other in ``memory``.
- History: mem0's ``history.db`` (``--mem0-history``, else found inside or
  next to the Qdrant folder, via ``$MEM0_DIR``, or in ``~/.mem0``; accepted
  only when it shares memory ids with the collection). Its columns are read
  first (older releases used ``prev_value``, ``new_value``, ``timestamp``). A
  record's detail shows its ADD/UPDATE/DELETE events.
- **Erasure gap**: mem0's own delete removes the point but keeps the text, in
  the DELETE row's ``old_memory``, the ADD row's ``new_memory`` and every
  UPDATE row. Such deleted memories are listed as ``deleted`` records (hidden
  by default) and counted in the summary; so are the raw chat messages of the
  ``messages`` table.
- Expiry is mem0's rule: a memory with ``expiration_date`` (``YYYY-MM-DD``) is
  expired once that date is before today (UTC).
- Forget (``--allow-writes``): deletes the point (see ``memtui.sources.qdrant``)
  and clears the text of every history row of the memory (the events stay),
  with ``secure_delete`` on and ``VACUUM`` in both files, then checks their
  bytes. ``forget_gaps`` does the same for every memory mem0 deleted itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, date
from pathlib import Path
from typing import Any

from memtui.sources.base import (
    DetailSection,
    SourceError,
    SourceRecord,
    SourceSummary,
    require_reason,
)
from memtui.sources.foreign import Erasure, GapsOutcome
from memtui.sources.mem0_history import (
    TEXT_COLUMNS,
    HistoryRow,
    Mem0History,
    history_candidates,
    history_detail,
)
from memtui.sources.mem0_payload import (
    EXPIRY_RULE,
    SCOPE_KEYS,
    TIERS,
    expiry_moment,
    is_expired,
    payload_fields,
)
from memtui.sources.mem0_payload import text as _text
from memtui.sources.qdrant import (
    PointData,
    QdrantSource,
    pid_of,
    purge_sqlite,
    record_id_of,
)


class Mem0Source(QdrantSource):
    kind = "mem0"
    kind_label = "mem0 memories (Qdrant)"
    tiers = TIERS
    scope_keys = SCOPE_KEYS
    forget_scope_keys = scope_keys
    hidden_state = "deleted"
    option_names = ("mem0_history",)

    def __init__(self, *args: Any, mem0_history: str | Path | None = None, **kwargs: Any) -> None:
        self._history_arg = Path(mem0_history) if mem0_history else None
        self.history: Mem0History | None = None
        self._history_resolved = False
        self._history_notes: list[str] = []
        self._rows: dict[str, list[HistoryRow]] = {}
        super().__init__(*args, **kwargs)

    # -- history

    def _resolve_history(self, point_ids: set[str]) -> None:
        self._history_resolved = True
        writable = not self.read_only
        for path, how in history_candidates(self.folder, self._history_arg):
            if not path.is_file():
                if self._history_arg is not None:
                    raise SourceError(f"no mem0 history at {path}")
                continue
            try:
                history = Mem0History(path, writable=writable, found=how)
            except SourceError:
                if self._history_arg is not None:
                    raise
                self._history_notes.append(f"{path} ({how}) is not a mem0 history.db: ignored")
                continue
            shared = history.memory_ids() & point_ids
            if shared or (self._history_arg is not None and not point_ids):
                self.history = history
                if history.identity is not None:
                    self.opened_files.append(history.identity)
                return
            history.close()
            if self._history_arg is not None:
                raise SourceError(
                    f"{path} shares no memory id with collection {self.info.name}: it is not "
                    "this store's mem0 history"
                )
            self._history_notes.append(
                f"{path} ({how}) shares no memory id with this collection: ignored"
            )

    def has_history(self) -> bool:
        return self.history is not None

    def state_key(self) -> Any:
        history = self.history.state_key() if self.history is not None else None
        return [super().state_key(), history]

    def _reload(self) -> None:
        with self._lock:
            first = not self._history_resolved
            super()._reload()
            if first:
                self._snap.key = self.state_key()

    def prepare(self, points: Mapping[str, PointData]) -> None:
        if not self._history_resolved:
            self._resolve_history({str(p.pid) for p in points.values()})
        self._rows = self.history.by_memory() if self.history is not None else {}

    def extra_records(self, points: Mapping[str, PointData]) -> list[SourceRecord]:
        out: list[SourceRecord] = []
        for memory_id, rows in self._rows.items():
            record_id = self._record_id(memory_id)
            if record_id is None or record_id in points:
                continue
            texts = [t for row in rows for t in row.texts()]
            if not texts:
                continue  # deleted and cleared: nothing left to show
            last = next(
                (t for row in reversed(rows) for t in (row.new_memory, row.old_memory) if t), ""
            )
            deleted_at = next((r.updated_at for r in reversed(rows) if r.event == "DELETE"), None)
            out.append(
                SourceRecord(
                    id=record_id,
                    tier="memory",
                    record_type="memory",
                    content=last,
                    scope={"user_id": None, "agent_id": None, "run_id": None},
                    created_at=_text(rows[0].created_at),
                    expires_at=None,
                    state="deleted",
                    metadata={
                        "memory_id": memory_id,
                        "deleted_at": _text(deleted_at),
                        "history_events": [r.event for r in rows],
                        "erasure_gap": (
                            "deleted by mem0 (or gone from the collection), but its text is "
                            f"still readable in {self.history.path if self.history else 'history'}"
                        ),
                    },
                )
            )
        return out

    @staticmethod
    def _record_id(memory_id: str) -> str | None:
        pid = pid_of(record_id_of(memory_id))
        return None if pid is None else record_id_of(pid)

    # -- mapping

    @property
    def expiry_rule(self) -> str:
        return (
            f"{EXPIRY_RULE}. Memories deleted by mem0 whose text is still in history.db are "
            "shown as deleted"
        )

    def _today(self) -> date:
        return self.now().astimezone(UTC).date()

    def restate(self, record: SourceRecord) -> SourceRecord:
        if record.state == "deleted":
            return record
        state = "expired" if is_expired(record.expires_at, self._today()) else "live"
        return record if state == record.state else replace(record, state=state)

    def record_from_point(self, point: PointData) -> SourceRecord:
        fields = payload_fields(point.payload, self._today())
        rows = self._rows.get(str(point.pid), [])
        metadata: dict[str, Any] = {"point_id": point.pid, **fields.metadata}
        if rows:
            metadata["history_events"] = [r.event for r in rows]
        metadata.update(self.embedding_meta(point))
        return SourceRecord(
            id=record_id_of(point.pid),
            tier=fields.tier,
            record_type=fields.record_type,
            content=fields.content,
            scope=fields.scope,
            created_at=fields.created_at,
            expires_at=fields.expires_at,
            state=fields.state,
            metadata=metadata,
        )

    def cache_expiry(self, record: SourceRecord) -> str | None:
        return expiry_moment(record.expires_at)

    def notes(self, record: SourceRecord) -> str:
        if record.state == "deleted":
            return "deleted by mem0: text still in history.db (erasure gap)"
        events = record.metadata.get("history_events") or []
        parts = [str(record.metadata.get("role") or "")]
        if events:
            parts.append("history: " + " ".join(str(e) for e in events))
        return " · ".join(p for p in parts if p)

    def detail(self, record_id: str) -> list[DetailSection]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        sections = super().detail(record_id) if record.state != "deleted" else []
        memory_id = str(record.metadata.get("point_id") or record.metadata.get("memory_id"))
        sections.insert(0, self.history_detail(memory_id))
        if record.state == "deleted":
            sections.append(self.history_section(record.id))
        return sections

    def history_detail(self, memory_id: str) -> DetailSection:
        return history_detail(self.history, memory_id, self._history_notes)

    # -- summary

    def gap_ids(self) -> list[str]:
        """Record ids of deleted memories whose text is still readable in the history."""
        return [r.id for r in self._current().records if r.state == "deleted"]

    def summary(self) -> SourceSummary:
        base = super().summary()
        counts = dict(base.counts)
        notes = list(base.notes)
        head: list[str] = []
        snap = self._current()
        if self.history is None:
            notes.append(
                "no mem0 history.db found (looked inside and next to the folder, in $MEM0_DIR "
                "and ~/.mem0); give it with --mem0-history"
            )
            notes.extend(self._history_notes)
        else:
            gaps = sum(1 for r in snap.records if r.state == "deleted")
            counts["deleted_with_text"] = gaps
            counts["history_rows"] = sum(len(v) for v in self._rows.values())
            superseded = sum(
                1
                for record_id in snap.points
                for row in self._rows.get(str(snap.points[record_id].pid), [])
                if row.event == "UPDATE" and row.old_memory
            )
            counts["earlier_versions"] = superseded
            messages = self.history.messages()
            if messages is not None:
                counts["messages"] = messages
            if gaps:
                head.append(
                    f"erasure gap: {gaps} deleted memor{'y' if gaps == 1 else 'ies'} still "
                    "have text readable in history.db (mem0's delete keeps it in the DELETE "
                    "row's old_memory and the ADD/UPDATE rows); clear it with "
                    "`memtui forget-gaps PATH --allow-writes`"
                )
            if superseded:
                notes.append(
                    f"{superseded} earlier version(s) of live memories are kept in history.db "
                    "(UPDATE rows); a memtui forget clears them with the memory"
                )
            if messages:
                notes.append(
                    f"the messages table holds {messages} raw chat message(s) (mem0 keeps the "
                    "last 10 per session scope)"
                )
            notes.append(
                f"history: {self.history.path} ({self.history.found}); it may be shared by "
                "several mem0 stores"
            )
        return SourceSummary(
            kind=base.kind,
            label=base.label,
            path=base.path,
            read_only=base.read_only,
            counts=counts,
            notes=head + notes,
        )

    # -- forget

    def forget_preview(self, record_id: str) -> dict[str, Any]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        memory_id = self._memory_id(record)
        rows = self.history.rows(memory_id) if self.history is not None else []
        texts = [t for r in rows for t in r.texts()]
        point = self.point(record.id) is not None
        where = "the server" if self.is_server else "storage.sqlite"
        rule = (
            f"The point is deleted from {where} and the text of its {len(rows)} history "
            "row(s) cleared (the events stay); freed pages are purged (VACUUM) in both files."
            if point
            else f"The text of its {len(rows)} history row(s) is cleared (mem0 already deleted "
            "the point; the events stay); freed pages are purged (VACUUM)."
        )
        return {
            "records": [record.id],
            "rule": rule,
            "counts": {
                "points": int(point),
                "history_rows": len(rows),
                "history_rows_with_text": sum(1 for r in rows if r.texts()),
                "messages_with_same_text": self.history.messages_containing(
                    [record.content, *texts]
                )
                if self.history is not None
                else 0,
            },
        }

    @staticmethod
    def _memory_id(record: SourceRecord) -> str:
        return str(record.metadata.get("point_id") or record.metadata.get("memory_id"))

    def record_value_columns(self) -> list[tuple[str, str]]:
        """The points, and the text of the history rows of other memories."""
        columns = super().record_value_columns()
        if self.history is not None:
            names = self.history.columns
            columns += [("history", name) for c in TEXT_COLUMNS if (name := names[c])]
        return columns

    def _apply_forget(self, record: SourceRecord) -> dict[str, Any]:
        self._probe_plan = {}
        checks: dict[str, bool] = {}
        details: dict[str, Any] = {"collection": self.info.name, "backend": self.backend.kind}
        point = self.point(record.id)
        memory_id = self._memory_id(record)
        texts = {record.content} if record.content else set()
        if self.history is not None:
            texts.update(t for r in self.history.rows(memory_id) for t in r.texts())
        if point is not None:
            checks.update(self._delete_point(point, record))
        details["point_deleted"] = point is not None
        probes = [t.encode("utf-8")[:256] for t in texts if len(t.encode("utf-8")) >= 8]
        self.backend.add_probes(self._probe_plan, probes)
        if self.history is not None:
            details["messages_with_same_text"] = self.history.messages_containing(sorted(texts))
            details["history_rows_cleared"] = self.history.clear([memory_id])
            left = [r for r in self.history.rows(memory_id) if r.texts()]
            checks["history_text_cleared"] = not left
            self._probe_plan[str(self.history.path)] = probes
        return {"removed": [record.id], "checks": checks, "probes": [], "details": details}

    def _purge_extra(self) -> tuple[dict[str, bool], dict[str, Any]]:
        if self.history is None or str(self.history.path) not in self._probe_plan:
            return {}, {}
        return purge_sqlite(
            self.history.conn,
            self.history.path,
            self._probe_plan[str(self.history.path)],
            self.record_value_columns(),
        )

    def forget_gaps_preview(self) -> dict[str, Any]:
        ids = self.gap_ids()
        rows = sum(
            1
            for record_id in ids
            for r in self._rows.get(self._memory_id(self._current().by_id[record_id]), [])
            if r.texts()
        )
        memories = f"{len(ids)} deleted memor{'y' if len(ids) == 1 else 'ies'}"
        return {
            "records": ids,
            "counts": {"memories": len(ids), "history_rows_with_text": rows},
            "nothing": "no erasure gap: no deleted memory has text left in the history",
            "question": (
                f"Clear the text of {memories} ({rows} history rows; the events stay) and "
                "purge the freed pages? This cannot be undone"
            ),
        }

    def forget_gaps(self, *, reason: str, operator: str | None = None) -> GapsOutcome:
        """Clear the text mem0's own deletes left in the history (audited, verified)."""
        self._require_writable()
        require_reason(reason)
        history = self.history
        if history is None:
            raise SourceError("no mem0 history.db is open for this store: nothing to clear")
        with self._writer():
            ids = self.gap_ids()  # what is on disk now, under the lock
            preview = self.forget_gaps_preview()

            def erase() -> Erasure:
                snap = self._current()
                memory_ids = [self._memory_id(snap.by_id[i]) for i in ids]
                texts = {t for m in memory_ids for r in history.rows(m) for t in r.texts()}
                probes = [t.encode("utf-8")[:256] for t in texts if len(t.encode()) >= 8]
                cleared = history.clear(memory_ids)
                checks = {
                    "history_text_cleared": not any(
                        r.texts() for m in memory_ids for r in history.rows(m)
                    )
                }
                details: dict[str, Any] = {"history_rows_cleared": cleared}
                columns = self.record_value_columns()
                c, d = purge_sqlite(history.conn, history.path, probes, columns)
                checks.update(c)
                details.update(d)
                plan: dict[str, list[bytes]] = {}
                self.backend.add_probes(plan, probes)
                c, d = self.backend.purge(plan, columns)
                checks.update(c)
                details.update({k: v for k, v in d.items() if k != "server_storage"})
                self._reload()
                return Erasure(checks=checks, details=details, removed=list(ids))

            intent, event, done = self._audited_erasure(
                ids=ids,
                tier="memory",
                record_type="memory",
                reason=reason,
                operator=operator,
                plan={"plan": preview["counts"]},
                erase=erase,
                failure="forget-gaps failed",
                operation="forget-gaps",
            )
        return GapsOutcome.of(
            ids,
            (
                f"cleared the text of {len(ids)} deleted memories "
                f"({done.details['history_rows_cleared']} history rows)"
            ),
            intent,
            event,
            done,
        )

    def close(self) -> None:
        super().close()
        if self.history is not None:
            self.history.close()
