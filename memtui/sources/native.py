"""``NativeSource``: a memtui database behind the ``MemorySource`` interface (every feature)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from memtui.core.lanes import (
    host_history,
    host_history_count,
    learned_tactics,
    negative_evidence,
    profile_priors,
    similar_profiles,
)
from memtui.core.records import TIERS, MemoryRecord
from memtui.core.search import (
    SearchRequest,
    SearchResponse,
    SourceNote,
    explain_keyword,
    hybrid_search,
)
from memtui.core.store import FILTER_ALLOWLIST, MemoryStore, MemoryStoreError
from memtui.sources.base import (
    DEFAULT_PAGE_SIZE,
    DetailSection,
    FileIdentity,
    ForgetOutcome,
    MemorySource,
    Page,
    Scope,
    SourceError,
    SourceRecord,
    TierFacet,
    check_limit,
    scope_of,
    unknown_filter_error,
    wrap_results,
)
from memtui.sources.capabilities import HasLanes, Refutable, Revealable, ScopeForgettable

NATIVE_SCOPE_KEYS: tuple[str, ...] = (
    "profile_hash",
    "engagement",
    "run_id",
    "tool_name",
    "url_pattern",
)
# The scope keys the facet tree counts (the others are too fine-grained to list).
FACET_KEYS: tuple[str, ...] = ("profile_hash", "engagement")


@contextlib.contextmanager
def _as_source_errors() -> Iterator[None]:
    """The store's refusals as ``SourceError`` (the one error type of the interface)."""
    try:
        yield
    except SourceError:
        raise
    except MemoryStoreError as exc:
        raise SourceError(str(exc)) from None


def _native_id(record_id: str | int) -> int:
    text = str(record_id).strip()
    if not text.isdigit():
        raise SourceError(
            f"no record with id {record_id} (the ids of a memtui database are whole numbers)"
        )
    return int(text)


class NativeSource(MemorySource, ScopeForgettable, Refutable, Revealable, HasLanes):
    """A memtui database: every feature, one transaction per audited change."""

    kind = "memtui"
    kind_label = "memtui database"
    tiers = TIERS
    scope_keys = NATIVE_SCOPE_KEYS
    hidden_state = "refuted"
    write_capabilities = frozenset({"forget", "forget_scope", "refute", "reveal"})
    forget_scope_keys = ("engagement",)

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store.path or Path(":memory:"), read_only=store.read_only)
        self.store = store
        # The store took the file's identity before it opened it (it may be long open).
        identity = store.file_identity
        self.opened_files = [] if identity is None else [FileIdentity(self.path, *identity)]

    @property
    def capabilities(self) -> frozenset[str]:
        caps = {"search", "vectors", "lanes", "audit", "history"}
        if not self.read_only:
            caps |= {"forget", "forget_scope", "refute", "reveal"}
        return frozenset(caps)

    @property
    def expiry_rule(self) -> str:
        return (
            "memtui rule: a record is live while expires_at > now (the boundary instant is expired)"
        )

    @property
    def filter_keys(self) -> frozenset[str]:
        return FILTER_ALLOWLIST

    def check_filters(self, filters: Mapping[str, Any] | None) -> dict[str, Any]:
        out = dict(filters or {})
        for key in out:
            if key not in FILTER_ALLOWLIST:
                raise unknown_filter_error(key, FILTER_ALLOWLIST)
        return out

    @property
    def facet_keys(self) -> tuple[str, ...]:
        return FACET_KEYS

    def now(self) -> datetime:
        return self.store.now()

    def scope_values(self, key: str) -> list[str]:
        if key in FACET_KEYS:  # every value on file, from the counts the tree shares
            facets = self.store.scope_facets(include_refuted=True, include_expired=True)
            return sorted({v for _count, scopes in facets.values() for v in scopes[key]})
        return super().scope_values(key)

    def summary(self):
        base = super().summary()
        counts = dict(base.counts)
        counts["vectors"] = self.store.vector_count()
        recorded = self.store.recorded_embedder()
        notes = list(base.notes)
        if recorded:
            notes.append(f"vectors by {recorded['name']} ({recorded['dim']} dims)")
        return type(base)(
            kind=base.kind,
            label=base.label,
            path=base.path,
            read_only=base.read_only,
            counts=counts,
            notes=notes,
        )

    def header_notes(self) -> list[str]:
        """The expiry rule and the recorded embedder: no counting (the tree counts)."""
        notes = ["expiry: live while expires_at > now"]
        recorded = self.store.recorded_embedder()
        if recorded:
            notes.append(f"vectors: {recorded['name']}, {recorded['dim']} dims")
        return notes

    # -- records

    def to_source(self, record: MemoryRecord) -> SourceRecord:
        if record.refuted:
            state = "refuted"
        elif record.is_expired(self.store.now()):
            state = "expired"
        else:
            state = "live"
        metadata = dict(record.metadata)
        if record.signature is not None:
            metadata.setdefault("signature", record.signature)
        return SourceRecord(
            id=str(record.id),
            tier=record.tier,
            record_type=record.record_type,
            content=record.content,
            scope={key: getattr(record, key) for key in NATIVE_SCOPE_KEYS},
            created_at=record.created_at,
            expires_at=record.expires_at,
            state=state,
            metadata=metadata,
            damage=record.damage,
        )

    def facets(
        self, filters: Mapping[str, Any] | None = None, *, include_hidden: bool = False
    ) -> list[TierFacet]:
        filters = self.check_filters(filters)
        store = self.store
        if not filters:
            facets = store.scope_facets(
                include_refuted=include_hidden, include_expired=include_hidden
            )
            return [
                TierFacet(tier=tier, count=count, scopes=scopes)
                for tier, (count, scopes) in facets.items()
            ]
        # Filtered facets: one grouped query per key, through the store's scope clause.
        where, params = store.scope_clause(
            filters, include_refuted=include_hidden, include_expired=include_hidden
        )
        counts = dict.fromkeys(TIERS, 0)
        for tier, count in store.query(
            f"SELECT tier, count(*) FROM records WHERE {where} GROUP BY tier", params
        ):
            counts[tier] = count
        scopes: dict[str, dict[str, dict[str, int]]] = {t: {} for t in TIERS}
        for key in FACET_KEYS:
            for tier, value, count in store.query(
                f"SELECT tier, {key}, count(*) FROM records WHERE {where} AND {key} IS NOT NULL "
                f"GROUP BY tier, {key} ORDER BY {key}",
                params,
            ):
                scopes[tier].setdefault(key, {})[value] = count
        return [
            TierFacet(tier=t, count=counts[t], scopes={k: scopes[t].get(k, {}) for k in FACET_KEYS})
            for t in TIERS
        ]

    quick_tier_counts = True

    def tier_counts(self, *, include_hidden: bool = False) -> dict[str, int]:
        return self.store.tier_counts(
            include_refuted=include_hidden, include_expired=include_hidden
        )

    def page(
        self,
        filters: Mapping[str, Any] | None = None,
        *,
        after: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        include_hidden: bool = False,
    ) -> Page:
        filters = self.check_filters(filters)
        limit = check_limit(limit)
        after_id = None if after in (None, "") else _native_id(after)
        found = self.store.fetch(
            include_refuted=include_hidden,
            include_expired=include_hidden,
            limit=limit + 1,
            after_id=after_id,
            **filters,
        )
        return Page.of((self.to_source(r) for r in found), limit)

    def get(self, record_id: str) -> SourceRecord | None:
        text = str(record_id).strip()
        if not text.isdigit():
            return None
        record = self.store.get(int(text))
        return None if record is None else self.to_source(record)

    def get_many(self, record_ids: Iterable[str]) -> dict[str, SourceRecord]:
        ids = [int(str(i)) for i in record_ids if str(i).strip().isdigit()]
        return {str(k): self.to_source(v) for k, v in self.store.get_many(ids).items()}

    def notes(self, record: SourceRecord) -> str:
        meta = record.metadata
        parts = []
        if meta.get("evidence_grade"):
            parts.append(str(meta["evidence_grade"]))
        if "total_attempts" in meta:
            parts.append(f"{meta.get('total_successes', 0)}/{meta.get('total_attempts', 0)}")
        return " ".join(parts)

    def detail(self, record_id: str) -> list[DetailSection]:
        key = _native_id(record_id)
        record = self.store.get(key)
        if record is None:
            raise SourceError(f"no record with id {key}")
        sections = []
        vector = self.store.vector_of(key)
        recorded = self.store.recorded_embedder()
        sections.append(
            DetailSection(
                title="vector",
                columns=("stored", "dims", "embedder"),
                rows=[
                    (
                        "yes" if vector is not None else "no",
                        len(vector) if vector is not None else 0,
                        recorded["name"] if recorded else "",
                    )
                ],
            )
        )
        rows = self.store.query(
            "SELECT id, at, operator, action, reason FROM audit_events "
            "WHERE EXISTS (SELECT 1 FROM json_each(audit_events.record_ids) WHERE value = ?) "
            "ORDER BY id",
            (key,),
        )
        sections.append(
            DetailSection(
                title="history (audit events naming this record)",
                columns=("#", "at", "operator", "action", "reason"),
                rows=[tuple(r) for r in rows],
                note=None if rows else "no audited action has touched this record",
            )
        )
        return sections

    # -- search

    def search(self, request: SearchRequest | str, **options: Any) -> SearchResponse:
        request = SearchRequest.of(request, **options)
        request = request.but(filters=self.check_filters(request.filters))
        with _as_source_errors():
            response = hybrid_search(self.store, request)
        response.trace.source = SourceNote(kind=self.kind, expiry_rule=self.expiry_rule)
        return wrap_results(response, str)

    def explain(self, query: str, record_id: str) -> dict[str, Any]:
        with _as_source_errors():
            out = explain_keyword(self.store, query, _native_id(record_id))
        out["id"] = str(out["record_id"])
        return out

    # -- writing

    def read_only_message(self) -> str:
        return "this database is open read-only; reopen it without --read-only"

    def _event_after(self, head: int, action: str) -> int:
        for event in self.store.audit_events(limit=5):
            if event["id"] > head and event["action"] == action:
                return event["id"]
        raise SourceError(f"the {action} audit event was not found")  # pragma: no cover

    def _head(self) -> int:
        head = self.store.audit_head()
        return head["id"] if head else 0

    def forget(self, record_id: str, *, reason: str, operator: str | None = None) -> ForgetOutcome:
        self._require_capability("forget", "forget")
        key = _native_id(record_id)
        with self._lock:
            head = self._head()
            with _as_source_errors():
                verified = self.store.forget(key, reason=reason, operator=operator)
            event_id = self._event_after(head, "forget")
            event = next(e for e in self.store.audit_events(limit=5) if e["id"] == event_id)
            incomplete = [
                e
                for e in self.store.audit_events(limit=5)
                if e["action"] == "erasure-incomplete" and e["id"] > event_id
            ]
        checks = dict(event["details"].get("erasure", {}))
        failed = {e["details"].get("check", "wal_truncated") for e in incomplete}
        checks["wal_truncated"] = "wal_truncated" not in failed
        if "bytes_gone" in failed:
            checks["bytes_gone"] = False
        return ForgetOutcome(
            record_id=str(key),
            event_id=event_id,
            verified=verified,
            checks=checks,
            removed=(str(key),),
            problem=incomplete[0]["details"].get("problem") if incomplete else None,
        )

    def forget_preview(self, record_id: str) -> dict[str, Any]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        return {
            "records": [record.id],
            "rule": (
                "The record, its full-text index entries and its vector are erased, and the "
                "database file is checkpointed so no copy of it remains."
            ),
        }

    def forget_scope(
        self,
        *,
        engagement: str | None = None,
        scope: Scope | None = None,
        reason: str,
        operator: str | None = None,
    ) -> ForgetOutcome:
        """The store's ``forget_scope`` (one transaction, one ``forget-scope`` event) as an
        outcome: the count, how erasure went, and the ``erasure-incomplete`` event when the
        WAL stayed."""
        self._require_capability("forget_scope", "forget-scope")
        key, value = scope_of(engagement, scope)
        self.check_scope_key(key)
        with _as_source_errors():
            done = self.store.forget_scope(engagement=value, reason=reason, operator=operator)
        return ForgetOutcome(
            record_id=None,
            event_id=done.event_id,
            verified=done.verified,
            checks=dict(done.checks),
            problem=done.problem,
            scope=(key, value),
            count=int(done),
            incomplete_event_id=done.incomplete_event_id,
        )

    def forget_scope_rule(self, key: str) -> str:
        return (
            "Every record of this engagement, in every tier, is erased with its index entries "
            "and vectors. Tactics are not engagement-scoped and stay."
        )

    def blast_radius(
        self, *, engagement: str | None = None, scope: Scope | None = None
    ) -> dict[str, dict[str, int]]:
        key, value = scope_of(engagement, scope)
        self.check_scope_key(key)
        return self.store.blast_radius(engagement=value)

    def lane_choices(self) -> tuple[list[str], dict[str, int], list[str]]:
        tactics = self.store.scope_facets()["longterm"][1].get("profile_hash", {})
        return self.scope_values("profile_hash"), tactics, self.scope_values("engagement")

    def lanes(
        self,
        profile: str | None,
        engagement: str | None,
        *,
        min_denominator: int,
        history_limit: int | None = None,
    ) -> dict[str, Any]:
        store = self.store
        data: dict[str, Any] = {"profile": profile, "engagement": engagement}
        if profile:
            data["priors"] = profile_priors(store, profile)
            data["tactics"] = learned_tactics(store, profile)
            data["negative"] = negative_evidence(store, profile, min_denominator)
        if engagement:
            history = host_history(store, engagement, limit=history_limit)
            whole = history_limit is None or len(history) < history_limit
            data["history"] = history
            data["history_total"] = len(history) if whole else host_history_count(store, engagement)
        return data

    def lane_report(
        self,
        profile: str,
        engagement: str | None,
        *,
        current_run: str | None,
        min_denominator: int,
        min_similarity: float,
        per_tool_cap: int,
    ) -> dict[str, Any]:
        store = self.store
        return {
            "known_profiles": store.profiles(),
            "known_engagements": store.engagements(),
            "pooled": similar_profiles(store, profile, min_similarity=min_similarity),
            "priors": profile_priors(store, profile, min_similarity=min_similarity),
            "tactics": learned_tactics(store, profile, per_tool_cap=per_tool_cap),
            "negative": negative_evidence(
                store, profile, min_denominator=min_denominator, min_similarity=min_similarity
            ),
            "history": (
                host_history(store, engagement, current_run) if engagement is not None else []
            ),
        }

    def refute(self, record_id: str, *, reason: str, operator: str | None = None) -> int:
        self._require_capability("refute", "refute")
        with _as_source_errors():
            return self.store.refute(_native_id(record_id), reason=reason, operator=operator)

    def reveal(
        self, record_id: str, field_name: str, *, reason: str, operator: str | None = None
    ) -> Any:
        self._require_capability("reveal", "reveal")
        return self.store.reveal(
            _native_id(record_id), field_name, reason=reason, operator=operator
        )

    # -- audit

    def audit_events(
        self, *, limit: int | None = None, before_id: int | None = None
    ) -> list[dict[str, Any]]:
        return self.store.audit_events(limit=limit, before_id=before_id)

    def verify_audit(self) -> str | None:
        return self.store.verify_audit()

    def audit_head(self) -> dict[str, Any] | None:
        return self.store.audit_head()

    def data_version(self) -> Any:
        return self.store.data_version()

    def close(self) -> None:
        self.store.close()
