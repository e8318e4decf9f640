"""The one interface every memory source implements: ``MemorySource``.

A source is a memory store memtui can open: its own database (``NativeSource``)
or another agent's store read through an adapter. The CLI (and the app) use
only this interface, so every source is browsed, searched, explained and
corrected the same way, each under its own rules (expiry, scope, forget).

Contract, for every implementation:

- Calls are thread-safe (each source guards its connections with a lock and
  never leaves a read transaction open), so a UI may call from workers.
- Pages are bounded (``MAX_PAGE_SIZE``) and keyset-paged: the cursor is the
  id of the last record of the previous page.
- Ids are strings that round-trip: what ``page``/``records`` print, ``get``
  and ``forget`` accept.
- Filters go through the source's own allowlist (``filter_keys``); an unknown
  key is refused loudly with the native message form.
- ``search`` returns the core ``SearchResponse`` (same trace, same breakdown);
  each result is a ``SourceSearchResult`` whose ``id`` is the source's id.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memtui.core.search import SearchRequest, SearchResponse, rerank
from memtui.sources.outcome import ForgetOutcome
from memtui.sources.shapes import (
    CAPABILITIES,
    DEFAULT_PAGE_SIZE,
    FIELD_SEPARATOR,
    HIDDEN_STATES,
    MAX_PAGE_SIZE,
    RECORD_STATES,
    DetailSection,
    FileIdentity,
    Page,
    Progress,
    Scope,
    SourceError,
    SourceMovedError,
    SourceRecord,
    SourceSearchResult,
    SourceSummary,
    TierFacet,
    check_limit,
    decode_id,
    display_time,
    encode_id,
    require_reason,
    scope_of,
    unknown_filter_error,
    wrap_results,
)

# The shapes live in ``memtui.sources.shapes``; every source imports them from here too.
__all__ = [
    "MemorySource",
    "CAPABILITIES",
    "check_limit",
    "decode_id",
    "DEFAULT_PAGE_SIZE",
    "DetailSection",
    "display_time",
    "encode_id",
    "FIELD_SEPARATOR",
    "FileIdentity",
    "ForgetOutcome",
    "HIDDEN_STATES",
    "MAX_PAGE_SIZE",
    "Page",
    "Progress",
    "RECORD_STATES",
    "require_reason",
    "Scope",
    "scope_of",
    "SourceError",
    "SourceMovedError",
    "SourceRecord",
    "SourceSearchResult",
    "SourceSummary",
    "TierFacet",
    "unknown_filter_error",
    "wrap_results",
]


class MemorySource(ABC):
    """A memory store opened by memtui. See the module docstring for the contract."""

    #: short machine name: ``memtui``, ``langgraph``, ``preferences``, ``tenant-evidence``
    kind: str = ""
    #: what an operator calls it: ``memtui database``, ``LangGraph SqliteStore``
    kind_label: str = ""
    #: tiers in display order (a source may find more in the data)
    tiers: tuple[str, ...] = ()
    #: the source's scope keys (keys of ``SourceRecord.scope``)
    scope_keys: tuple[str, ...] = ()
    #: the state of records the source hides by a flag rather than by expiry
    #: (``refuted``, ``inactive``, ``deleted``); ``expired`` when only expiry hides
    hidden_state: str = "refuted"
    #: what the source can do when opened writable (``capabilities`` has them then)
    write_capabilities: frozenset[str] = frozenset({"forget"})
    #: the scope keys ``forget_scope`` erases a whole scope by (none: it cannot)
    forget_scope_keys: tuple[str, ...] = ()

    def __init__(self, path: str | Path, *, read_only: bool) -> None:
        self.path = Path(path)
        self.read_only = bool(read_only)
        self._lock = threading.RLock()
        #: what each path the source reads and writes named when it was opened
        self.opened_files: list[FileIdentity] = []
        self.watch(self.path)

    # -- what it is

    @property
    def label(self) -> str:
        return f"{self.path.name} ({self.kind_label})"

    @property
    def location(self) -> str:
        """The store as a person names it: its path (a database server's URL without its
        password)."""
        return str(self.path)

    @property
    @abstractmethod
    def capabilities(self) -> frozenset[str]:
        """What this source can do here (``forget`` only when opened writable)."""

    @property
    @abstractmethod
    def expiry_rule(self) -> str:
        """Which expiry rule applies, in words (shown in the app and the CLI)."""

    @property
    def filter_keys(self) -> frozenset[str]:
        """The filter allowlist: ``tier``, ``record_type`` and the scope keys."""
        return frozenset({"tier", "record_type", *self.scope_keys})

    def check_filters(self, filters: Mapping[str, Any] | None) -> dict[str, Any]:
        """The filters as a dict; an unknown key raises before anything runs."""
        out = dict(filters or {})
        allowed = self.filter_keys
        for key in out:
            if key not in allowed:
                raise unknown_filter_error(key, allowed)
        return out

    def can(self, capability: str) -> bool:
        return capability in self.capabilities

    @property
    def facet_keys(self) -> tuple[str, ...]:
        """The scope keys the scope tree and the search filters offer, coarsest first."""
        return self.scope_keys

    def now(self) -> datetime:
        """The source's clock (UTC): expiry is judged against it."""
        return datetime.now(UTC)

    def clock_label(self) -> str | None:
        """The store's own "now" for a header clock when it is not a wall-clock time (a
        logical time); None when the app should show ``now()`` itself."""
        return None

    def scope_parent(self, key: str, value: Any) -> str | None:
        """The value of the same scope key that ``value`` nests under in a scope tree
        (a LangGraph namespace under its parent namespace), or None when it hangs from
        its tier. Values are listed parents first (``facets`` orders them by value)."""
        return None

    def scope_values(self, key: str) -> list[str]:
        """Every value ``key`` takes in the store (hidden records included), sorted."""
        self.check_filters({key: None})
        values: set[str] = set()
        for facet in self.facets(include_hidden=True):
            values.update(str(v) for v in facet.scopes.get(key, {}))
        return sorted(values)

    def reread(self) -> None:  # noqa: B027 - optional hook
        """Drop whatever reads are kept between the store's changes, so that the next
        ones ask the store afresh (the app's F5, a change made here). Most sources keep
        none, or key what they keep on an exact change counter; no I/O here."""

    def summary(self) -> SourceSummary:
        """Counts (records, hidden, erasure gaps...) and notes for a header line."""
        total = sum(f.count for f in self.facets(include_hidden=True))
        live = sum(f.count for f in self.facets())
        return SourceSummary(
            kind=self.kind,
            label=self.label,
            path=str(self.path),
            read_only=self.read_only,
            counts={"records": total, "live": live},
            notes=[self.expiry_rule],
        )

    def header_notes(self) -> list[str]:
        """Short lines for the app's banner: the expiry rule, erasure gaps, a live agent..."""
        return list(self.summary().notes)

    # -- reading

    @abstractmethod
    def facets(
        self, filters: Mapping[str, Any] | None = None, *, include_hidden: bool = False
    ) -> list[TierFacet]:
        """Tiers with counts and per-scope-key value counts, computed in SQL.

        Each tier's count equals the number of records ``page`` lists for the
        same filters plus ``tier``; each scope value's count equals the records
        listed with that value as a filter too.
        """

    #: whether ``tier_counts`` is much cheaper than ``facets`` (a view may then show
    #: the tiers first and their scopes when they are counted)
    quick_tier_counts: bool = False

    def tier_counts(self, *, include_hidden: bool = False) -> dict[str, int]:
        """Record counts per tier: the counts of ``facets`` without their scopes."""
        return {f.tier: f.count for f in self.facets(include_hidden=include_hidden)}

    @abstractmethod
    def page(
        self,
        filters: Mapping[str, Any] | None = None,
        *,
        after: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        include_hidden: bool = False,
    ) -> Page:
        """One keyset page of records in the source's stable order."""

    @abstractmethod
    def get(self, record_id: str) -> SourceRecord | None:
        """One record by id, whatever its state; None when there is none."""

    def id_hint(self, record_id: str) -> str | None:
        """When ``record_id`` is not an id of this store's records: which id to use, if it
        names a record as the store's own tools do (a LangGraph ``namespace/key``, a bare
        point id), else what its ids look like; None for an id of the right form."""
        return None

    def get_many(self, record_ids: Iterable[str]) -> dict[str, SourceRecord]:
        out: dict[str, SourceRecord] = {}
        for record_id in record_ids:
            record = self.get(record_id)
            if record is not None:
                out[record.id] = record
        return out

    def iter_records(
        self,
        filters: Mapping[str, Any] | None = None,
        *,
        include_hidden: bool = False,
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> Iterable[SourceRecord]:
        """Every record, page by page (each page a separate bounded query)."""
        cursor: str | None = None
        while True:
            page = self.page(filters, after=cursor, limit=page_size, include_hidden=include_hidden)
            yield from page.records
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def detail(self, record_id: str) -> list[DetailSection]:
        """Extra sections for the detail pane (history, versions, orphaned vectors...)."""
        return []

    def notes(self, record: SourceRecord) -> str:
        """A short line of what matters most about a record here (a table's notes column)."""
        return ""

    # -- search

    @abstractmethod
    def search(self, request: SearchRequest | str, **options: Any) -> SearchResponse:
        """Hybrid search with the native breakdown; results are ``SourceSearchResult``.

        ``request`` is a ``SearchRequest`` (or the query text, with its other
        fields as keywords). Its ``progress`` follows a build of the keyword
        index (a foreign store's), ``vector_progress`` a build of the vector
        matrix (the first vector search after vectors changed). ``cancelled`` is
        polled while the search runs; once it returns true the search stops and
        raises ``memtui.core.cancel.Cancelled``.
        """

    def rerank(
        self, response: SearchResponse, weights: Mapping[str, float] | Sequence[float] | None
    ) -> SearchResponse:
        """What-if weights over the same lane scores (see ``memtui.core.search.rerank``)."""
        return rerank(response, weights)

    @abstractmethod
    def explain(self, query: str, record_id: str) -> dict[str, Any]:
        """The keyword lane's BM25 split into per-term contributions for one record."""

    # -- index (a foreign store's keyword lane lives in memtui's cache)

    def index_status(self) -> dict[str, Any]:
        """Whether the keyword index is ready: ``{"ready": bool, ...}``."""
        return {"ready": True, "where": "in the database"}

    def build_index(self, progress: Progress | None = None) -> dict[str, Any]:
        """Build (or refresh) the keyword index now; call from a worker. Idempotent."""
        return self.index_status()

    # -- the files it opened

    def watch(self, path: Path) -> None:
        """Remember what ``path`` names now, before the source opens it (``path_changed``
        compares); a path that names nothing is not watched."""
        identity = FileIdentity.of(path)
        if identity is not None:
            self.opened_files.append(identity)

    def path_changed(self) -> str | None:
        """None while every path the source opened still names the same file or folder
        (device and inode); else what happened to the first that does not, as one line.

        A file replaced under an open connection is still the one the connection reads
        and writes: a change would be made, and verified, in a file that is no longer
        there. Callers check before every change (the app also on each live poll).
        """
        for identity in self.opened_files:
            change = identity.change()
            if change is not None:
                return f"{change} since memtui opened it"
        return None

    def require_same_path(self) -> None:
        """Raise ``SourceMovedError`` (nothing is changed) when ``path_changed`` says so."""
        change = self.path_changed()
        if change is not None:
            raise SourceMovedError(
                f"{change}; nothing was changed: open the store again to change the file "
                "now at that path"
            )

    # -- writing

    def _require_capability(self, capability: str, action: str) -> None:
        if self.can(capability):
            return
        if self.read_only and capability in self.write_capabilities:
            raise SourceError(self.read_only_message())
        raise SourceError(f"{action} is not supported by {self.kind_label} sources")

    def require(self, capability: str, action: str | None = None) -> None:
        """Raise the operator-facing ``SourceError`` unless the source can do this now."""
        self._require_capability(capability, action or capability)

    def read_only_message(self) -> str:
        return f"{self.label} is open read-only; reopen it without --read-only"

    def forget_preview(self, record_id: str) -> dict[str, Any]:
        """What ``forget`` would remove (for a confirmation dialog); changes nothing."""
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        return {"records": [record.id], "rule": "this record only"}

    @abstractmethod
    def forget(self, record_id: str, *, reason: str, operator: str | None = None) -> ForgetOutcome:
        """Erase one record by the source's own rule, audited, erasure verified."""

    def check_scope_key(self, key: str) -> None:
        """Refuse a scope key ``forget_scope`` does not erase by (one line naming those it does)."""
        if key in self.forget_scope_keys:
            return
        if not self.forget_scope_keys:
            raise SourceError(f"forget-scope is not supported by {self.kind_label} sources")
        raise SourceError(
            f"forget-scope on {self.kind_label} forgets by "
            f"{', '.join(self.forget_scope_keys)}, not by {key!r}: give --scope KEY=VALUE "
            "with one of those"
        )

    # -- audit

    @abstractmethod
    def audit_events(
        self, *, limit: int | None = None, before_id: int | None = None
    ) -> list[dict[str, Any]]:
        """Audit events, newest first (intent events carry ``status``)."""

    @abstractmethod
    def verify_audit(self) -> str | None:
        """None when the audit hash chain holds, else the first broken link."""

    def audit_head(self) -> dict[str, Any] | None:
        events = self.audit_events(limit=1)
        return {"id": events[0]["id"], "hash": events[0]["hash"]} if events else None

    def interrupted_forgets(self) -> list[dict[str, Any]]:
        """Intent events with no outcome: forgets that stopped half way."""
        return [e for e in self.audit_events() if e.get("status") == "interrupted"]

    def recover_interrupted_forgets(self) -> None:  # noqa: B027 - optional hook
        """Clear what a forget stopped half way left in memtui's own files (run on open)."""

    def missing_record_message(self, record_id: str) -> str:
        """Why there is no record ``record_id`` (a forget of it may already have run)."""
        return f"no record with id {record_id}"

    # -- lifetime

    def data_version(self) -> Any:
        """A cheap value that changes when the store changes (poll it to refresh views)."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

    def __enter__(self) -> MemorySource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "read-only" if self.read_only else "writable"
        return f"<{type(self).__name__} {self.path} {mode}>"
