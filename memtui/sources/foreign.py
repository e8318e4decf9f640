"""What every foreign SQLite store shares: the connection, the cached index, search,
the audit log beside the store, and the forget protocol (intent, change, outcome).

An adapter (LangGraph, preferences, tenant evidence...) supplies its reads
(``facets``, ``page``, ``get``; a store read as two tables through one view gets
them from ``memtui.sources.union_view``), what its cache rows are, its
fingerprint, and ``_apply_forget``: the store's own forget rule in one store
transaction.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from memtui.core.embed import Embedder
from memtui.core.search import SearchResponse, explain_keyword, hybrid_search
from memtui.sources.audit import INTENT, ForeignAudit, default_audit_path
from memtui.sources.base import (
    HIDDEN_STATES,
    DetailSection,
    ForgetOutcome,
    MemorySource,
    Progress,
    Scope,
    SourceError,
    SourceRecord,
    SourceSearchResult,
    SourceSummary,
    display_time,
    require_reason,
    scope_of,
    wrap_results,
)
from memtui.sources.cache import (
    CacheRow,
    FilterSql,
    SourceIndex,
    file_fingerprint,
    fingerprint_text,
)
from memtui.sources.capabilities import ScopeForgettable

Clock = Callable[[], datetime]
BYTE_CHECK_LIMIT = 512 * 1024 * 1024
CHECKPOINT_RETRIES = 10


@dataclass
class Erasure:
    """What one erasure did in a foreign store: its checks (all must hold), counts for
    the audit event (never a value), the ids whose cached copy goes or changes, and a
    ``note`` saying in words why a check failed (never a value)."""

    checks: dict[str, bool]
    details: dict[str, Any] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    touched: list[str] = field(default_factory=list)
    note: str | None = None

    @property
    def verified(self) -> bool:
        return all(self.checks.values())

    @property
    def problem(self) -> str | None:
        failed = sorted(k for k, v in self.checks.items() if not v)
        if not failed:
            return None
        text = f"erasure not verified: {', '.join(failed)}"
        return f"{text}; {self.note}" if self.note else text


@dataclass(frozen=True)
class GapsOutcome:
    """What ``forget_gaps`` cleared: ``done`` says it in a sentence (the store's words)."""

    record_ids: tuple[str, ...]
    done: str
    event_id: int
    intent_event_id: int
    verified: bool
    checks: dict[str, bool]
    problem: str | None = None

    @classmethod
    def of(
        cls, ids: list[str], done: str, intent: int, event: int, erasure: Erasure
    ) -> GapsOutcome:
        """The outcome of one ``_audited_erasure`` of gaps, in the store's words."""
        return cls(
            record_ids=tuple(ids),
            done=done,
            event_id=event,
            intent_event_id=intent,
            verified=erasure.verified,
            checks=erasure.checks,
            problem=erasure.problem,
        )


def radius_of(records: Iterable[SourceRecord]) -> dict[str, dict[str, int]]:
    """Record counts by tier, then type, in that order (a blast radius)."""
    out: dict[str, dict[str, int]] = {}
    for record in records:
        types = out.setdefault(record.tier, {})
        types[record.record_type] = types.get(record.record_type, 0) + 1
    return {tier: dict(sorted(types.items())) for tier, types in sorted(out.items())}


def _merged_detail(have: Any, value: Any) -> Any:
    """Two records' value of one audit detail as one: counts add up, flags all hold,
    lists join; any other value is the first record's."""
    if have is None:
        return value
    if isinstance(have, bool) or isinstance(value, bool):
        return bool(have) and bool(value)
    if isinstance(have, int | float) and isinstance(value, int | float):
        return have + value
    if isinstance(have, list) and isinstance(value, list):
        return have + value
    return have


def _system_clock() -> datetime:
    return datetime.now(UTC)


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def occurrences_in_columns(
    conn: sqlite3.Connection, probe: bytes, columns: Sequence[tuple[str, str]]
) -> int:
    """How often ``probe`` occurs in the values still in ``columns`` ((table, column)
    pairs; a table or column the file lacks holds none)."""
    total = 0
    for table, column in columns:
        name, col = quote_identifier(table), quote_identifier(column)
        if column not in {r[1] for r in conn.execute(f"PRAGMA table_info({name})")}:
            continue
        for (value,) in conn.execute(
            f"SELECT CAST({col} AS BLOB) FROM {name} WHERE typeof({col}) IN ('text', 'blob') "
            f"AND instr(CAST({col} AS BLOB), ?) > 0",
            (probe,),
        ):
            total += bytes(value).count(probe)
    return total


def forgotten_bytes_gone(
    conn: sqlite3.Connection,
    data: bytes,
    probes: Sequence[bytes],
    columns: Sequence[tuple[str, str]],
) -> bool:
    """Whether ``data`` (the file's bytes) holds no copy of the forgotten values.

    Live records may hold the same bytes (any deterministic embedder gives equal
    text equal vectors), so each probe's occurrences in the file are compared
    with the occurrences the live records' values in ``columns`` account for:
    only an excess is a copy of the forgotten record.
    """
    return all(
        found <= occurrences_in_columns(conn, probe, columns)
        for probe in probes
        if (found := data.count(probe))
    )


def uri_for(path: Path, mode: str) -> str:
    return f"file:{quote(str(path.resolve()), safe='/')}?mode={mode}"


class _NamedEmbedder:
    """The operator's embedder under the name the cache records for the store's vectors."""

    def __init__(self, inner: Embedder, name: str) -> None:
        self.inner = inner
        self.name = name
        self.dim = inner.dim

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        return self.inner(texts)


class ForeignSqliteSource(MemorySource, ScopeForgettable):
    """A memory store in a SQLite file that memtui did not write."""

    #: short prefix of this source's ids (``lg``, ``pref``...)
    id_prefix: str = ""

    def __init__(
        self,
        path: str | Path,
        *,
        read_only: bool = True,
        clock: Clock | None = None,
        operator: str | None = None,
        audit_db: str | Path | None = None,
        cache_root: Path | None = None,
    ) -> None:
        super().__init__(path, read_only=read_only)
        # The store's connection is guarded by self._lock (held per query); the
        # cached index by its own lock, so that building it in a worker never
        # blocks page/get calls from another thread.
        self._index_lock = threading.RLock()
        self.clock: Clock = clock or _system_clock
        self.operator = operator
        self.audit_path = Path(audit_db) if audit_db else default_audit_path(self.path)
        self.audit = ForeignAudit(self.audit_path, clock=self.clock, operator=operator)
        self._conn = self._connect()
        self.columns = self._columns()
        self.index = SourceIndex(
            kind=self.kind,
            store_path=self.path,
            allowed=self.filter_keys,
            filter_sql=self.cache_filter_sql(),
            clock=self.cache_now,
            fingerprint=self.fingerprint,
            rows=self._all_cache_rows,
            count=self.record_count,
            root=cache_root,
        )

    # -- connection

    def _connect(self) -> sqlite3.Connection:
        mode = "ro" if self.read_only else "rw"
        try:
            conn = sqlite3.connect(
                uri_for(self.path, mode), uri=True, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA busy_timeout = 5000")
            if self.read_only:
                conn.execute("PRAGMA query_only = ON")
            else:
                conn.execute("PRAGMA secure_delete = ON")
        except sqlite3.Error as exc:
            raise SourceError(f"cannot open {self.path}: {exc}") from None
        return conn

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """One read, fetched to the end (no read transaction stays open)."""
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise SourceError(f"reading {self.path.name} failed: {exc}") from None

    def _columns(self) -> dict[str, list[str]]:
        tables = [r[0] for r in self.query("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {
            t: [r[1] for r in self.query(f'PRAGMA table_info("{t.replace(chr(34), "")}")')]
            for t in tables
        }

    def close(self) -> None:
        with self._lock:
            self._conn.close()
        self.index.close()
        self.audit.close()

    # -- what it is

    @property
    def capabilities(self) -> frozenset[str]:
        caps = {"search", "audit"}
        if self.has_vectors():
            caps.add("vectors")
        if self.has_history():
            caps.add("history")
        if not self.read_only:
            caps.add("forget")
            if "forget_scope" in self.write_capabilities:
                caps.add("forget_scope")
        return frozenset(caps)

    def has_vectors(self) -> bool:
        return False

    def has_history(self) -> bool:
        return False

    def read_only_message(self) -> str:
        return (
            f"{self.label} is open read-only: memtui opens foreign stores read-only; "
            "pass --allow-writes to change it"
        )

    def now(self) -> datetime:
        moment = self.clock()
        if moment.tzinfo is None:
            raise SourceError("the clock returned a naive datetime; return UTC")
        return moment

    def cache_now(self) -> datetime:
        """The instant the cache's native rule compares mapped expiries with."""
        return self.now()

    def now_label(self) -> str:
        return self.now().isoformat()

    def summary(self) -> SourceSummary:
        base = super().summary()
        notes = list(base.notes)
        interrupted = self.interrupted_forgets()
        counts = dict(base.counts)
        if interrupted:
            counts["interrupted_forgets"] = len(interrupted)
            notes.append(
                f"{len(interrupted)} interrupted forget(s): an intent in the audit log has no "
                "outcome; check those records"
            )
        notes.append(f"audit log: {self.audit_path}")
        return SourceSummary(
            kind=base.kind,
            label=base.label,
            path=base.path,
            read_only=base.read_only,
            counts=counts,
            notes=notes,
        )

    def header_notes(self) -> list[str]:
        """The summary's notes, the audit log named by its file (``memtui info`` has the path)."""
        full = f"audit log: {self.audit_path}"
        return [
            f"audit log: {self.audit_path.name}" if note == full else note
            for note in self.summary().notes
        ]

    def data_version(self) -> Any:
        return self.fingerprint()

    # -- cache hooks

    @abstractmethod
    def record_count(self) -> int:
        """Every record, hidden included (for progress)."""

    def fingerprint(self) -> str:
        return fingerprint_text([file_fingerprint(self.path), self._data_fingerprint()])

    def _data_fingerprint(self) -> Any:
        return None

    def cache_filter_sql(self) -> FilterSql | None:
        return None

    def cache_expiry(self, record: SourceRecord) -> str | None:
        """The record's expiry mapped so that the native rule gives the source's rule."""
        return None

    def cache_vectors(self) -> dict[str, bytes]:
        """Stored vectors by source id (one per record), little-endian float32."""
        return {}

    def _all_cache_rows(self) -> Iterable[CacheRow]:
        vectors = self.cache_vectors()
        for record in self.iter_records(include_hidden=True, page_size=2000):
            yield self.cache_row(record, vectors.get(record.id))

    def cache_row(self, record: SourceRecord, vector: bytes | None = None) -> CacheRow:
        return CacheRow(
            source_id=record.id,
            tier=record.tier,
            record_type=record.record_type,
            content=self.searchable_text(record),
            scope=record.scope,
            hidden=record.state in HIDDEN_STATES - {"expired"},
            expires_at=self.cache_expiry(record),
            vector=vector,
        )

    def searchable_text(self, record: SourceRecord) -> str:
        return record.content

    def index_status(self) -> dict[str, Any]:
        with self._index_lock:
            return self.index.status()

    def build_index(self, progress: Progress | None = None) -> dict[str, Any]:
        with self._index_lock:
            self.index.store(progress)
            return self.index.status()

    # -- search

    def vector_dim(self) -> int | None:
        """The dimension of the store's vectors, None when it has none."""
        return None

    def search(
        self,
        query: str,
        *,
        embedder: Embedder | None = None,
        limit: int = 10,
        filters: Mapping[str, Any] | None = None,
        weights: Mapping[str, float] | Sequence[float] | None = None,
        pool_size: int = 100,
        any_terms: bool = False,
        keyword_only: bool = False,
        progress: Progress | None = None,
        cancelled: Callable[[], bool] | None = None,
        vector_progress: Progress | None = None,
    ) -> SearchResponse:
        filters = self.check_filters(filters)
        with self._index_lock:
            cache = self.index.store(progress)
        recorded = cache.recorded_embedder()
        reason: str | None = None
        use: Embedder | None = None
        if keyword_only:
            reason = "keyword-only search was requested: the vector lane is off"
        elif recorded is None:
            reason = f"this {self.kind_label} has no stored vectors: the keyword lane ranks alone"
        else:
            dim = recorded["dim"]
            if embedder is None:
                reason = (
                    f"no embedder for these {dim}-dim vectors: give one that makes {dim}-dim "
                    "vectors with --embedder module:callable"
                )
            elif getattr(embedder, "dim", None) != dim:
                reason = (
                    f"no embedder for these {dim}-dim vectors: {embedder.name} makes "
                    f"{embedder.dim}-dim vectors"
                )
            else:
                use = _NamedEmbedder(embedder, recorded["name"])
        response = hybrid_search(
            cache,
            query,
            embedder=use,
            limit=limit,
            filters=filters,
            weights=weights,
            pool_size=pool_size,
            any_terms=any_terms,
            keyword_only=use is None,
            cancelled=cancelled,
            vector_progress=vector_progress,
        )
        trace = response.trace
        if use is None:
            if trace.get("fallback") is not None:
                trace["fallback"] = reason
            trace["embedder"] = None
        else:
            trace["embedder"] = embedder.name  # type: ignore[union-attr]
            if trace.get("fallback"):
                trace["fallback"] = trace["fallback"].replace(recorded["name"], embedder.name)  # type: ignore[index,union-attr]
        trace["excluded"] = self.store_exclusions(trace.get("excluded") or {})
        by_lane = trace.get("excluded_by_lane")
        if isinstance(by_lane, dict):
            trace["excluded_by_lane"] = {
                lane: self.store_exclusions(counts) if isinstance(counts, dict) else counts
                for lane, counts in by_lane.items()
            }
        trace["now"] = self.now_label()
        trace["source"] = {
            "kind": self.kind,
            "expiry_rule": self.expiry_rule,
            "index": str(self.index.path),
        }
        id_map = cache.source_ids_of(r.record_id for r in response.candidates)
        records = self.get_many(id_map.values())

        def adjust(result: Any, out: SourceSearchResult) -> SourceSearchResult:
            out.trace["fallback"] = trace["fallback"]
            record = records.get(out.id)
            if record is not None:
                out.created_at = record.created_at
                out.expires_at = record.expires_at  # type: ignore[assignment]
                out.trace["created_at"] = record.created_at
                out.trace["expires_at"] = record.expires_at
            return out

        return wrap_results(response, lambda key: id_map.get(key, f"?{key}"), adjust)

    def store_exclusions(self, counts: Mapping[str, Any]) -> dict[str, Any]:
        """Exclusion counts in the store's words: the cache's ``refuted`` is the store's
        hidden state (``inactive``, ``deleted``); a store whose only hidden state is
        ``expired`` has no refute concept, so it reports no ``refuted`` at all."""
        out: dict[str, Any] = {}
        for key, value in counts.items():
            if key != "refuted":
                out[key] = value
            elif self.hidden_state not in ("expired", "refuted"):
                out[self.hidden_state] = value
            elif value:  # hidden rows in a store without a refute concept: never dropped
                out[key] = value
        return out

    def explain(self, query: str, record_id: str) -> dict[str, Any]:
        with self._index_lock:
            cache = self.index.store()
        found = cache.cache_ids([record_id])
        if record_id not in found:
            raise SourceError(f"no record with id {record_id}")
        out = explain_keyword(cache, query, found[record_id])
        out["id"] = record_id
        return out

    # -- forget

    def _require_writable(self) -> None:
        if self.read_only:
            raise SourceError(self.read_only_message())

    def record_value_columns(self) -> list[tuple[str, str]]:
        """The (table, column) pairs where records keep the values a forget probes
        for: the byte check counts the live records' equal values there."""
        return []

    @abstractmethod
    def _apply_forget(self, record: SourceRecord) -> dict[str, Any]:
        """Apply the store's own forget rule in one store transaction.

        Returns ``removed`` (source ids gone), ``touched`` (ids whose state
        changed), ``checks`` (SQL checks that the data is gone), ``probes``
        (byte strings of the forgotten values, to look for in the file) and
        ``details`` (counts for the audit event: never a value); optionally
        ``note``, why a check fails, in words (never a value).
        """

    def forget(self, record_id: str, *, reason: str, operator: str | None = None) -> ForgetOutcome:
        self._require_writable()
        require_reason(reason)
        record = self.get(record_id)
        if record is None:
            raise SourceError(self.missing_record_message(record_id))
        preview = self.forget_preview(record_id)

        def erase() -> Erasure:
            return self._erasure_of(self._apply_forget(record), [record.id])

        intent, event, done = self._audited_erasure(
            ids=[record.id],
            tier=record.tier,
            record_type=record.record_type,
            reason=reason,
            operator=operator,
            plan={"rule": preview.get("rule"), "plan": preview.get("counts")},
            erase=erase,
            failure="forget failed, nothing was changed",
        )
        return ForgetOutcome(
            record_id=record.id,
            event_id=event,
            verified=done.verified,
            checks=done.checks,
            intent_event_id=intent,
            removed=tuple(done.removed),
            problem=done.problem,
        )

    def _erasure_of(self, applied: dict[str, Any], ids: list[str]) -> Erasure:
        """What ``_apply_forget`` did (to ``ids``), with the file purged and its bytes checked."""
        checks = dict(applied.get("checks", {}))
        file_checks, purge_details = self._purge_file(applied.get("probes", []))
        checks.update(file_checks)
        removed = list(applied.get("removed", ids))
        return Erasure(
            checks=checks,
            details={"removed": removed, **applied.get("details", {}), **purge_details},
            removed=removed,
            touched=list(applied.get("touched", [])),
            note=applied.get("note"),
        )

    # -- forget a whole scope

    def _writer(self) -> contextlib.AbstractContextManager[None]:
        """What a change holds while it runs (a Qdrant folder's lock); nothing here."""
        return contextlib.nullcontext()

    def scope_records(self, key: str, value: str) -> list[SourceRecord]:
        """Every record of one scope, hidden ones included: what ``forget_scope`` erases."""
        return list(self.iter_records({key: value}, include_hidden=True, page_size=2000))

    def forget_scope_rule(self, key: str) -> str:
        """What a forget of a whole scope does, in words (the app's dialog shows it)."""
        return (
            "Every record of this scope, hidden ones too, is erased by the store's own forget "
            "rule, as forget erases one; the freed pages are purged (VACUUM), the bytes "
            "checked, and memtui's cached copy goes too."
        )

    def blast_radius(
        self, *, engagement: str | None = None, scope: Scope | None = None
    ) -> dict[str, dict[str, int]]:
        key, value = scope_of(engagement, scope)
        self.check_scope_key(key)
        return radius_of(self.scope_records(key, value))

    def forget_scope(
        self,
        *,
        engagement: str | None = None,
        scope: Scope | None = None,
        reason: str,
        operator: str | None = None,
    ) -> ForgetOutcome:
        """Forget every record of one scope: one intent, each record by the store's own
        rule, one purge and byte check, one outcome event naming the scope."""
        key, value = scope_of(engagement, scope)
        self.check_scope_key(key)
        self._require_writable()
        require_reason(reason)
        with self._writer():
            records = self.scope_records(key, value)  # what is on disk now, under the lock
            if not records:
                raise SourceError(f"{key} {value!r} has no records to forget")
            ids = [r.id for r in records]
            intent, event, done = self._audited_erasure(
                ids=ids,
                tier=", ".join(sorted({r.tier for r in records})),
                record_type=", ".join(sorted({r.record_type for r in records})),
                reason=reason,
                operator=operator,
                plan={"scope": {key: value}, "plan": radius_of(records)},
                erase=lambda: self._scope_erasure(records, scope=(key, value)),
                failure="forget-scope failed, nothing was changed",
                operation="forget-scope",
            )
        return ForgetOutcome(
            record_id=None,
            event_id=event,
            verified=done.verified,
            checks=done.checks,
            intent_event_id=intent,
            removed=tuple(done.removed),
            problem=done.problem,
            scope=(key, value),
        )

    def _scope_erasure(self, records: Sequence[SourceRecord], *, scope: Scope) -> Erasure:
        ids = [r.id for r in records]
        done = self._erasure_of(self._apply_forget_many(records), ids)
        done.details["scope"] = {scope[0]: scope[1]}  # the scope's name, never a value of it
        return done

    def _apply_forget_many(self, records: Sequence[SourceRecord]) -> dict[str, Any]:
        """``_apply_forget`` for several records, as one result."""
        return self._forget_each(records, self._apply_forget)

    @staticmethod
    def _forget_each(
        records: Sequence[SourceRecord], apply: Callable[[SourceRecord], dict[str, Any]]
    ) -> dict[str, Any]:
        """``apply`` (one record's forget) on each record in turn, merged into one result.

        A record that fails stops the rest: when one was forgotten before it, the result
        says so (the check ``every_record_erased`` fails, the note says where it stopped)
        instead of raising, so that the outcome event records what did go.
        """
        merged: dict[str, Any] = {
            "removed": [],
            "touched": [],
            "checks": {},
            "probes": [],
            "details": {},
        }
        notes: list[str] = []
        for done, record in enumerate(records):
            try:
                applied = apply(record)
            except Exception as exc:
                if not done:
                    raise
                why = str(exc) if isinstance(exc, SourceError) else type(exc).__name__
                merged["checks"]["every_record_erased"] = False
                notes.append(f"stopped after {done} of {len(records)} records: {why}")
                break
            merged["removed"].extend(applied.get("removed", [record.id]))
            merged["touched"].extend(applied.get("touched", []))
            merged["probes"].extend(applied.get("probes", []))
            for name, held in applied.get("checks", {}).items():
                merged["checks"][name] = merged["checks"].get(name, True) and bool(held)
            for name, value in applied.get("details", {}).items():
                merged["details"][name] = _merged_detail(merged["details"].get(name), value)
            if applied.get("note"):
                notes.append(str(applied["note"]))
        if notes:
            merged["note"] = "; ".join(dict.fromkeys(notes))
        return merged

    def audit_source(self) -> dict[str, Any]:
        """What the audit events say the store is (never a value of it)."""
        return {"kind": self.kind, "store": str(self.path)}

    def _audited_erasure(
        self,
        *,
        ids: list[str],
        tier: str,
        record_type: str,
        reason: str,
        operator: str | None,
        plan: dict[str, Any],
        erase: Callable[[], Erasure],
        failure: str,
        operation: str | None = None,
    ) -> tuple[int, int, Erasure]:
        """One foreign erasure, audited across files no transaction can span.

        An intent event first; then ``erase`` (under the source lock: the store's
        own rule, its purge and byte checks); a ``forget-failed`` event if it
        raises; memtui's cached copy purged; and the outcome event with every
        check. Returns the intent and outcome event ids and the erasure.
        """
        operator = operator or self.operator
        source = self.audit_source()
        tag = {"operation": operation} if operation else {}
        intent = self.audit.append(
            action=INTENT,
            record_ids=ids,
            operator=operator,
            tier=tier,
            record_type=record_type,
            reason=reason,
            details={**tag, "source": source, **plan},
        )
        was_fresh = self.index_status()["ready"] if self.index.path.exists() else False
        try:
            with self._lock:
                done = erase()
        except Exception as exc:
            self.audit.append(
                action="forget-failed",
                record_ids=ids,
                operator=operator,
                tier=tier,
                record_type=record_type,
                reason=reason,
                details={
                    **tag,
                    "intent_event": intent,
                    "source": source,
                    "error": type(exc).__name__,
                },
            )
            if isinstance(exc, SourceError):
                raise
            raise SourceError(f"{failure}: {exc}") from None
        with self._index_lock:
            done.checks.update(
                self._purge_cache(done.removed, done.touched, reason, operator, was_fresh)
            )
        event = self.audit.append(
            action="forget",
            record_ids=ids,
            operator=operator,
            tier=tier,
            record_type=record_type,
            reason=reason,
            details={
                **tag,
                "intent_event": intent,
                "source": source,
                "count": len(done.removed),
                **done.details,
                "erasure": done.checks,
                "verified": done.verified,
            },
        )
        return intent, event, done

    def _purge_file(self, probes: Sequence[bytes]) -> tuple[dict[str, bool], dict[str, Any]]:
        """Purge what the delete freed and check that the forgotten bytes are gone.

        secure_delete was on for the delete, so the freed cells and pages are
        zeroed; VACUUM then rewrites the file without free pages (which also
        drops older free pages the store's own deletes left unzeroed), the WAL
        is truncated, and the file is searched for the forgotten bytes (beyond
        the live records' equal values).
        """
        checks: dict[str, bool] = {}
        details: dict[str, Any] = {}
        try:
            self._conn.execute("VACUUM")
            details["vacuumed"] = True
        except sqlite3.OperationalError as exc:
            details["vacuumed"] = False
            details["vacuum_problem"] = str(exc)
        mode = self._conn.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() == "wal":
            truncated = False
            for attempt in range(CHECKPOINT_RETRIES):
                busy = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                if busy == 0:
                    truncated = True
                    break
                time.sleep(0.05 * (attempt + 1))
            checks["wal_truncated"] = truncated
        details["free_pages_after"] = self._conn.execute("PRAGMA freelist_count").fetchone()[0]
        useful = [p for p in probes if p and len(p) >= 8]
        if useful:
            parts = [Path(str(self.path) + s) for s in ("", "-wal")]
            size = sum(p.stat().st_size for p in parts if p.exists())
            if size <= BYTE_CHECK_LIMIT:
                data = b"".join(p.read_bytes() for p in parts if p.exists())
                checks["bytes_gone"] = forgotten_bytes_gone(
                    self._conn, data, useful, self.record_value_columns()
                )
            else:
                details["bytes_check"] = f"skipped: the file is over {BYTE_CHECK_LIMIT} bytes"
        return checks, details

    def _removed_by_interrupted(self) -> dict[str, dict[str, Any]]:
        """Each record an interrupted forget removed from the store (it named the record,
        which is gone now), with that forget's intent event."""
        out: dict[str, dict[str, Any]] = {}
        for intent in reversed(self.interrupted_forgets()):  # oldest first: the newest wins
            for record_id in (str(i) for i in intent["record_ids"]):
                try:
                    gone = self.get(record_id) is None
                except SourceError:  # not an id of this store: nothing of it to purge
                    continue
                if gone:
                    out[record_id] = intent
        return out

    def recover_interrupted_forgets(self) -> None:
        """Purge memtui's cached copy of every record an interrupted forget removed.

        A kill after the store's change and before the outcome event leaves the
        record's text in the cached index, which only a search would rebuild; every
        open (``records``, ``info``, the app) purges it, by the native erasure.
        """
        if not self.index.path.exists() or not self.audit.path.exists():
            return
        removed = self._removed_by_interrupted()
        if not removed:
            return
        with self._index_lock:
            cache = self.index.current()
            if cache is None:
                return
            try:
                for record_id, intent in removed.items():
                    cache.purge(record_id, reason=intent["reason"], operator=intent["operator"])
            except Exception:  # a cache that cannot be purged must not serve the text
                self.index.discard()

    def missing_record_message(self, record_id: str) -> str:
        intent = next(
            (
                e
                for e in self.interrupted_forgets()  # newest first
                if record_id in [str(i) for i in e["record_ids"]]
            ),
            None,
        )
        if intent is None:
            return super().missing_record_message(record_id)
        return (
            f"{record_id} is already forgotten: the forget of audit event #{intent['id']} "
            "(forget-intent) removed it from the store and was interrupted before its outcome "
            "event; memtui's cached copy is purged (`memtui audit` shows the event)"
        )

    def _purge_cache(
        self,
        removed: Sequence[str],
        touched: Sequence[str],
        reason: str,
        operator: str | None,
        was_fresh: bool,
    ) -> dict[str, bool]:
        cache = self.index.current()
        if cache is None:
            return {"cache_gone": True}
        gone = True
        for source_id in removed:
            gone = cache.purge(source_id, reason=reason, operator=operator)["cache_gone"] and gone
        if touched:
            vectors = self.cache_vectors() if self.has_vectors() else {}
            for source_id, record in self.get_many(touched).items():
                cache.update_row(self.cache_row(record, vectors.get(source_id)))
        if was_fresh:
            self.index.refresh(self.fingerprint())
        return {"cache_gone": gone}

    # -- audit

    def audit_events(
        self, *, limit: int | None = None, before_id: int | None = None
    ) -> list[dict[str, Any]]:
        return self.audit.events(limit=limit, before_id=before_id)

    def verify_audit(self) -> str | None:
        return self.audit.verify()

    # -- helpers for adapters

    def history_section(self, record_id: str) -> DetailSection:
        rows = [
            (
                e["id"],
                display_time(e["at"]),
                e["operator"],
                e["action"],
                e.get("status", ""),
                e["reason"],
            )
            for e in reversed(self.audit_events())
            if record_id in [str(i) for i in e["record_ids"]]
        ]
        return DetailSection(
            title="memtui audit events naming this record",
            columns=("#", "at", "operator", "action", "status", "reason"),
            rows=rows,
            note=None if rows else "none",
        )
