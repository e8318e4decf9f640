"""Cyber-AutoAgent's Qdrant collections (``double16/Cyber-AutoAgent-ng``).

**Memories** (``cyber_autoagent_memories``, or any collection with its payload
shape): one point per memory, payload ``memory`` (the text), ``metadata``
(``category``, ``operation_id`` and more per category), ``created_at`` (naive
ISO time), ``operation_id``, ``target_values`` (exact target strings),
``user_id`` (stored with literal double quotes), ``agent_id``, ``active``.

- Scopes follow the agent's own identity: target value -> operation ->
  category (scope keys ``target``, ``operation``, ``category``). Tiers group
  the categories: ``finding`` (finding, finding_candidate, finding_validation,
  validation_failure), ``objective`` (objective_*), ``observation``,
  ``knowledge``, ``other``.
- ``active: false`` points are ``inactive``: dimmed and left out by default,
  as the agent's readers skip them.
- ``--memory-mode operation|shared`` applies the agent's scope rule to the
  ``target`` and ``operation`` filters: ``target`` always matches by overlap
  with ``target_values``; ``operation`` mode (the agent's default) then also
  requires the ``operation`` filter (the agent's ``operation_id``); ``shared``
  mode drops the operation condition, as the agent does, and says so.
- Finding metadata (title, severity, validation status) is in the record's
  ``metadata["finding"]`` and its notes line.

**Web-search cache** (``cyber_autoagent_web_search_cache_<dims>_<hash16>``):
cached search results keyed by query (payload ``query``, ``result``,
``result_count``, ``created_at``/``expires_at`` as epoch seconds), labelled as
a cache, not as memories. The agent's lookup only uses points with
``expires_at > now``; memtui shows the others as expired.

The workflow database beside the folder (``outputs/cyber_autoagent.db``) is
not opened: its ``credential_records`` hold secrets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from memtui.core.search import MemoryModeNote, SearchRequest
from memtui.sources.base import (
    FIELD_SEPARATOR,
    DetailSection,
    SourceError,
    SourceRecord,
    SourceSummary,
)
from memtui.sources.qdrant import (
    WEB_CACHE_PATTERN,
    PointData,
    QdrantSource,
    epoch_text,
    record_id_of,
    text_fields,
    text_of,
)

MEMORY_MODES = ("operation", "shared")
CATEGORY_TIERS = {
    "finding": "finding",
    "finding_candidate": "finding",
    "finding_validation": "finding",
    "validation_failure": "finding",
    "objective_candidate": "objective",
    "objective_validation": "objective",
    "objective_result": "objective",
    "objective_validation_failure": "objective",
    "observation": "observation",
    "knowledge": "knowledge",
}
FINDING_KEYS = ("title", "severity", "validation_status", "status", "finding_uid", "technique")
_PAYLOAD_CORE = {
    "memory",
    "metadata",
    "created_at",
    "operation_id",
    "target_values",
    "user_id",
    "agent_id",
    "active",
}
WORKFLOW_DB = "cyber_autoagent.db"


def unquote_id(value: Any) -> str | None:
    """``"cyber-agent-x"`` (quotes stored literally by the agent) -> ``cyber-agent-x``."""
    if not isinstance(value, str):
        return None if value is None else str(value)
    text = value.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def _targets(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value if v is not None]
    return []


class CyberAutoAgentSource(QdrantSource):
    kind = "cyber-autoagent"
    kind_label = "Cyber-AutoAgent memories (Qdrant)"
    tiers = ("finding", "objective", "observation", "knowledge", "other")
    scope_keys = ("target", "operation", "category")
    forget_scope_keys = scope_keys
    list_scope_keys = ("target",)
    hidden_state = "inactive"
    option_names = ("memory_mode",)

    def __init__(self, *args: Any, memory_mode: str | None = None, **kwargs: Any) -> None:
        if memory_mode is not None and memory_mode not in MEMORY_MODES:
            raise SourceError(
                f"--memory-mode is 'operation' or 'shared' (the agent's modes), not {memory_mode!r}"
            )
        self.memory_mode = memory_mode
        super().__init__(*args, **kwargs)

    @property
    def expiry_rule(self) -> str:
        return (
            "no expiry: a memory is live until deleted; points with active: false are inactive "
            "(the agent's readers skip them) and left out by default"
        )

    def mode_rule(self) -> str:
        if self.memory_mode == "shared":
            return (
                "memory mode shared (the agent's rule): a memory is in scope when its "
                "target_values overlap the target; the operation is not required"
            )
        if self.memory_mode == "operation":
            return (
                "memory mode operation (the agent's rule): a memory is in scope when its "
                "target_values overlap the target and its operation_id is the operation"
            )
        return "no memory mode: target, operation and category filter independently"

    # -- mapping

    def record_from_point(self, point: PointData) -> SourceRecord:
        payload = point.payload
        stored = payload.get("metadata")
        meta: dict[str, Any] = stored if isinstance(stored, dict) else {}
        category = meta.get("category") or payload.get("category")
        category = str(category) if category is not None else None
        operation = payload.get("operation_id", meta.get("operation_id"))
        operation = str(operation) if operation is not None else None
        active = payload.get("active", meta.get("active", True))
        inactive = active is False or (isinstance(active, str) and active.lower() == "false")
        metadata: dict[str, Any] = {"point_id": point.pid}
        user = payload.get("user_id")
        metadata["user_id"] = unquote_id(user)
        if isinstance(user, str) and unquote_id(user) != user:
            metadata["user_id_stored"] = user
        metadata["agent_id"] = unquote_id(payload.get("agent_id"))
        metadata["active"] = not inactive
        finding = {k: meta[k] for k in FINDING_KEYS if meta.get(k) is not None}
        if finding or (category and CATEGORY_TIERS.get(category) == "finding"):
            if meta.get("target") is not None:
                finding["target"] = meta["target"]
            metadata["finding"] = finding
        metadata["metadata"] = meta
        for key, value in payload.items():
            if key not in _PAYLOAD_CORE:
                metadata[key] = value
        metadata.update(self.embedding_meta(point))
        created = payload.get("created_at")
        return SourceRecord(
            id=record_id_of(point.pid),
            tier=CATEGORY_TIERS.get(category or "", "other"),
            record_type=category or "memory",
            content=text_of(payload.get("memory")),
            scope={
                "target": _targets(payload.get("target_values")),
                "operation": operation,
                "category": category,
            },
            created_at=created if isinstance(created, str) else epoch_text(created),
            expires_at=None,
            state="inactive" if inactive else "live",
            metadata=metadata,
        )

    def notes(self, record: SourceRecord) -> str:
        finding = record.metadata.get("finding")
        parts: list[str] = []
        if finding:
            severity = str(finding.get("severity") or "").upper()
            if severity:
                parts.append(severity)
            if finding.get("title"):
                parts.append(str(finding["title"]))
            status = finding.get("validation_status") or finding.get("status")
            if status:
                parts.append(f"validation: {status}")
        if record.scope.get("operation"):
            parts.append(f"op {record.scope['operation']}")
        if record.state == "inactive":
            parts.append("inactive")
        return " · ".join(parts)

    # -- the agent's scope rule

    def effective_filters(self, filters: Mapping[str, Any] | None) -> dict[str, Any]:
        checked = self.check_filters(filters)
        if self.memory_mode is None or "target" not in checked:
            return checked
        if self.memory_mode == "operation" and "operation" not in checked:
            raise SourceError(
                "memory mode operation (the agent's default) scopes a target to one operation: "
                "add --filter operation=ID, or use --memory-mode shared"
            )
        if self.memory_mode == "shared":
            checked.pop("operation", None)
        return checked

    def search(self, request: SearchRequest | str, **options: Any) -> Any:
        request = SearchRequest.of(request, **options)
        asked = dict(request.filters or {})
        response = super().search(request)
        response.trace.memory_mode = MemoryModeNote(
            mode=self.memory_mode,
            rule=self.mode_rule(),
            dropped=["operation"]
            if self.memory_mode == "shared" and "target" in asked and "operation" in asked
            else [],
        )
        return response

    # -- summary

    def summary(self) -> SourceSummary:
        base = super().summary()
        counts = dict(base.counts)
        notes = list(base.notes)
        snap = self._current()
        inactive = sum(1 for r in snap.records if r.state == "inactive")
        counts["inactive"] = inactive
        operations = {r.scope.get("operation") for r in snap.records} - {None}
        targets = {t for r in snap.records for t in r.scope.get("target") or []}
        counts["operations"] = len(operations)
        counts["targets"] = len(targets)
        notes.append(self.mode_rule())
        folder = self.folder
        if folder is not None:
            others = [c.name for c in self.collections() if WEB_CACHE_PATTERN.match(c.name)]
            if others:
                notes.append(
                    "web-search cache collection(s) beside it (open with --collection): "
                    + ", ".join(others)
                )
            workflow = folder.parent / WORKFLOW_DB
            if workflow.exists():
                notes.append(
                    f"workflow state is in {workflow} (not opened: its credential_records hold "
                    "secrets)"
                )
        return SourceSummary(
            kind=base.kind,
            label=base.label,
            path=base.path,
            read_only=base.read_only,
            counts=counts,
            notes=notes,
        )

    def detail(self, record_id: str) -> list[DetailSection]:
        sections = super().detail(record_id)
        record = self.get(record_id)
        if record is not None and record.metadata.get("finding"):
            finding = record.metadata["finding"]
            sections.insert(
                0,
                DetailSection(
                    title="finding",
                    columns=("title", "severity", "validation", "status", "technique", "uid"),
                    rows=[
                        (
                            finding.get("title"),
                            finding.get("severity"),
                            finding.get("validation_status"),
                            finding.get("status"),
                            finding.get("technique"),
                            finding.get("finding_uid"),
                        )
                    ],
                ),
            )
        return sections


class WebSearchCacheSource(QdrantSource):
    kind = "cyber-web-cache"
    kind_label = "Cyber-AutoAgent web-search cache (Qdrant)"
    tiers = ("web-search-cache",)
    scope_keys = ()
    hidden_state = "expired"

    @property
    def expiry_rule(self) -> str:
        return (
            "Cyber-AutoAgent web-search cache rule: a cached search is used while expires_at > "
            "now (epoch seconds; the boundary instant is already expired); the agent purges "
            "points with expires_at < now"
        )

    def _now_epoch(self) -> float:
        moment: datetime = self.now()
        return moment.timestamp()

    def _expired(self, expires: Any) -> bool:
        return (
            isinstance(expires, int | float)
            and not isinstance(expires, bool)
            and not expires > self._now_epoch()
        )

    def restate(self, record: SourceRecord) -> SourceRecord:
        state = "expired" if self._expired(record.metadata.get("expires_epoch")) else "live"
        return record if state == record.state else replace(record, state=state)

    def record_from_point(self, point: PointData) -> SourceRecord:
        payload = point.payload
        query = payload.get("query") if isinstance(payload.get("query"), str) else ""
        result = payload.get("result")
        lines = [query, *text_fields(result)]
        expires = payload.get("expires_at")
        expired = self._expired(expires)
        match = WEB_CACHE_PATTERN.match(self.info.name)
        return SourceRecord(
            id=record_id_of(point.pid),
            tier="web-search-cache",
            record_type="cached-search",
            content=FIELD_SEPARATOR.join(line for line in lines if line),
            scope={},
            created_at=epoch_text(payload.get("created_at")),
            expires_at=epoch_text(expires),
            state="expired" if expired else "live",
            metadata={
                "point_id": point.pid,
                "cache": "Cyber-AutoAgent web-search cache (not agent memory)",
                "query": query,
                "result_count": payload.get("result_count"),
                "result": result,
                "created_epoch": payload.get("created_at"),
                "expires_epoch": expires,
                "embedding_model_hash": match.group(2) if match else None,
                **self.embedding_meta(point),
            },
        )

    def cache_expiry(self, record: SourceRecord) -> str | None:
        expires = record.metadata.get("expires_epoch")
        text = epoch_text(expires)
        return text  # native rule expires_at > now is the agent's rule (strict)

    def notes(self, record: SourceRecord) -> str:
        return f"web-search cache · {record.metadata.get('result_count')} result(s)"

    def summary(self) -> SourceSummary:
        base = super().summary()
        notes = [
            "a Cyber-AutoAgent web-search cache: cached search results shared across "
            "operations, not agent memory",
            *base.notes,
        ]
        counts = dict(base.counts)
        counts["expired"] = sum(1 for r in self._current().records if r.state == "expired")
        return SourceSummary(
            kind=base.kind,
            label=base.label,
            path=base.path,
            read_only=base.read_only,
            counts=counts,
            notes=notes,
        )
