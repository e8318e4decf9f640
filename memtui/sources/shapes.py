"""The shapes every memory source speaks in: records, pages, facets, outcomes, ids.

What a source returns (``SourceRecord``, ``Page``, ``TierFacet``, ``DetailSection``,
``SourceSummary``, ``SourceSearchResult``), the error it raises
(``SourceError``), its reversible ids (``encode_id``/``decode_id``) and the small
checks every source shares. ``memtui.sources.base`` holds the interface itself.
"""

from __future__ import annotations

import bisect
import itertools
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from memtui.core.records import parse_timestamp
from memtui.core.search import SearchResponse, SearchResult
from memtui.core.secrets import mask_metadata
from memtui.core.store import MemoryStoreError

RECORD_STATES: tuple[str, ...] = ("live", "refuted", "expired", "inactive", "deleted")
HIDDEN_STATES: frozenset[str] = frozenset({"refuted", "expired", "inactive", "deleted"})

# What a source may be able to do. ``search`` is the keyword lane at least;
# ``vectors`` the vector lane from stored embeddings; ``audit`` an audit log.
CAPABILITIES: frozenset[str] = frozenset(
    {
        "search",
        "vectors",
        "forget",
        "forget_scope",
        "refute",
        "reveal",
        "lanes",
        "audit",
        "history",
    }
)

FIELD_SEPARATOR = " · "
"""Between the text fields memtui joins into one record's content (a JSON value's
strings, a prompt and its result): memtui's own joint, not a control character, so a
table row or a search result stays on one line. Stored text is left as it is."""

DEFAULT_PAGE_SIZE = 200
MAX_PAGE_SIZE = 5000

Progress = Callable[[int, int], None]
Scope = tuple[str, str]
"""One scope of a store: a scope key and one of its values (``("namespace", "users.alice")``)."""


class SourceError(MemoryStoreError):
    """A refused or impossible source operation, with a message meant for the operator.

    A ``MemoryStoreError`` so that every place that reports store errors as one
    line (the CLI, the app's workers) reports these the same way.
    """


# ---------------------------------------------------------------- shapes


@dataclass(frozen=True)
class SourceRecord:
    """One record of any source, in the one shape every view and ``--json`` uses.

    ``scope`` holds the source's own scope keys and values; ``metadata`` the
    rest of the stored payload (never vectors). Render ``metadata`` through
    ``to_json`` (or ``mask_metadata``): secret-named fields are masked there.
    """

    id: str
    tier: str
    record_type: str
    content: str
    scope: dict[str, Any]
    created_at: str | None
    expires_at: str | int | None
    state: str
    metadata: dict[str, Any] = field(default_factory=dict)
    damage: tuple[str, ...] = ()
    """What another writer left unreadable in the stored row (``MemoryRecord.damage``)."""

    @property
    def live(self) -> bool:
        return self.state == "live"

    def to_json(self, *, mask: bool = True) -> dict[str, Any]:
        """The ``--json`` shape: id, tier, record_type, content, scope, created_at,
        expires_at, state, metadata (masked), and ``damage`` for a damaged row."""
        shape = {
            "id": self.id,
            "tier": self.tier,
            "record_type": self.record_type,
            "content": self.content,
            "scope": dict(self.scope),
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "state": self.state,
            "metadata": mask_metadata(self.metadata) if mask else self.metadata,
        }
        if self.damage:
            shape["damage"] = list(self.damage)
        return shape


@dataclass(frozen=True)
class TierFacet:
    """One tier with its record count and, per scope key, the count of each value."""

    tier: str
    count: int
    scopes: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Page:
    """A bounded page of records; ``next_cursor`` is None on the last page."""

    records: list[SourceRecord]
    next_cursor: str | None

    @classmethod
    def of(cls, found: Iterable[SourceRecord], limit: int) -> Page:
        """The first ``limit`` of ``found``, read one further (``limit + 1``): the cursor is
        the last record's id when there was more."""
        taken = list(itertools.islice(found, limit + 1))
        records = taken[:limit]
        more = len(taken) > limit
        return cls(records=records, next_cursor=records[-1].id if more and records else None)


@dataclass(frozen=True)
class DetailSection:
    """An extra section of a record's detail pane: a small table and an optional note.

    Cell values are untrusted text: render them inert (``memtui.render.safe_text``).
    """

    title: str
    columns: tuple[str, ...] = ()
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    note: str | None = None


@dataclass(frozen=True)
class FileIdentity:
    """The file (or folder) a path named when memtui opened it: its device and inode.

    Taken before the file is opened, so a file replaced in between reads as replaced.
    """

    path: Path
    device: int
    inode: int

    @classmethod
    def of(cls, path: Path) -> FileIdentity | None:
        """What ``path`` names now; None when it names nothing."""
        try:
            stat = os.stat(path)
        except OSError:
            return None
        return cls(path, stat.st_dev, stat.st_ino)

    def change(self) -> str | None:
        """None while the path still names this file; else what happened to it, in words."""
        try:
            stat = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return f"{self.path} was deleted"
        except OSError as exc:
            return f"{self.path} can no longer be read ({exc.strerror or exc})"
        if (stat.st_dev, stat.st_ino) != (self.device, self.inode):
            return f"{self.path} was replaced by another file"
        return None


class SourceMovedError(SourceError):
    """A change refused because a path no longer names the file memtui opened."""


@dataclass
class SourceSearchResult(SearchResult):
    """A ``SearchResult`` that also carries the source's record id.

    ``record_id`` stays the integer the ranking broke ties on (the native id,
    or the row of memtui's index cache, built in source-id order), so that
    ``rerank`` orders ties exactly as the search did; ``id`` is what ``get``
    and ``forget`` take.
    """

    id: str = ""


@dataclass(frozen=True)
class SourceSummary:
    """Counts and notes for a source's header: erasure gaps, interrupted forgets."""

    kind: str
    label: str
    path: str
    read_only: bool
    counts: dict[str, int]
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- ids


def encode_id(kind_prefix: str, *parts: str) -> str:
    """A reversible, shell-safe id: ``prefix:part/part`` with each part percent-encoded.

    Parts may contain any character (``/``, ``:``, ``%``, spaces, newlines,
    non-ASCII): each is UTF-8 percent-encoded with only ``A-Za-z0-9_.-~`` left
    as is, so the ``/`` separator is unambiguous.
    """
    encoded = [
        text
        if _UNQUOTED.fullmatch(text := str(part))
        else quote(text, safe="", encoding="utf-8", errors="surrogatepass")
        for part in parts
    ]
    return f"{kind_prefix}:" + "/".join(encoded)


_UNQUOTED = re.compile(r"[A-Za-z0-9_.~-]*")
"""A part that ``quote`` leaves as it is (most keys): it skips the encoding."""


def decode_id(kind_prefix: str, record_id: str, parts: int) -> tuple[str, ...] | None:
    """The parts of an id made by ``encode_id``, or None when it is not one of ours."""
    if not isinstance(record_id, str) or not record_id.startswith(kind_prefix + ":"):
        return None
    body = record_id[len(kind_prefix) + 1 :]
    pieces = body.split("/")
    if len(pieces) != parts:
        return None
    try:
        return tuple(unquote(piece, encoding="utf-8", errors="surrogatepass") for piece in pieces)
    except UnicodeDecodeError:
        return None


# ---------------------------------------------------------------- helpers


def display_time(value: Any) -> str:
    """A time as the app shows a record's: ``YYYY-MM-DD HH:MM:SS UTC`` (from ISO text or
    an aware datetime); anything else as written, and None as an empty cell."""
    if value is None:
        return ""
    try:
        moment = parse_timestamp(value)
    except (TypeError, ValueError):
        return str(value)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def unknown_filter_error(key: str, allowed: Iterable[str]) -> SourceError:
    """The native allowlist message, for any source's own allowlist."""
    return SourceError(
        f"filter '{key}' is not in the scope-key allowlist ({', '.join(sorted(allowed))})"
    )


def require_reason(reason: str) -> None:
    if not isinstance(reason, str) or not reason.strip():
        raise SourceError("a reason is required: say why, it goes into the audit log")


def scope_of(engagement: str | None, scope: Scope | None) -> Scope:
    """The scope ``forget_scope`` was given: ``engagement=E`` or ``scope=(KEY, VALUE)``."""
    if engagement is not None and scope is not None:
        raise SourceError("give the engagement or a scope, not both")
    if scope is not None:
        key, value = scope
        return str(key), str(value)
    if engagement is None:
        raise SourceError("name the scope to forget: --scope KEY=VALUE (or --engagement E)")
    return "engagement", str(engagement)


def check_limit(limit: int) -> int:
    try:
        value = int(limit)
    except (TypeError, ValueError):
        raise SourceError(f"page limit must be a whole number, got {limit!r}") from None
    if value < 1 or value > MAX_PAGE_SIZE:
        raise SourceError(f"page limit must be between 1 and {MAX_PAGE_SIZE}, got {value}")
    return value


def keyset_start(
    ids: Sequence[str], after: str | None, is_id: Callable[[str], object], kind_label: str
) -> int:
    """Where a page after the cursor ``after`` starts in ``ids`` (sorted record ids of
    an in-memory snapshot): 0 without a cursor. A cursor that is not one of the kind's
    ids (``is_id`` gives None) is refused in one line."""
    if not after:
        return 0
    if is_id(after) is None:
        raise SourceError(f"cursor {after!r} is not a {kind_label} record id")
    return bisect.bisect_right(ids, after)


def wrap_results(
    response: SearchResponse,
    id_of: Callable[[int], str],
    adjust: Callable[[SearchResult, SourceSearchResult], SourceSearchResult] | None = None,
) -> SearchResponse:
    """The same response with every result a ``SourceSearchResult`` carrying its source id.

    The new results hold the same trace objects: ``response`` is the caller's to give up.
    """

    def convert(result: SearchResult) -> SourceSearchResult:
        out = SourceSearchResult(
            record_id=result.record_id,
            keyword_score=result.keyword_score,
            vector_score=result.vector_score,
            score=result.score,
            created_at=result.created_at,
            expires_at=result.expires_at,
            rank=result.rank,
            trace=result.trace,
            id=id_of(result.record_id),
        )
        return adjust(result, out) if adjust else out

    by_key = {id(r): convert(r) for r in response.candidates}
    results: list[SearchResult] = [by_key.get(id(r)) or convert(r) for r in response.results]
    candidates: list[SearchResult] = [by_key[id(r)] for r in response.candidates]
    return SearchResponse(results=results, trace=response.trace, candidates=candidates)
