"""Reading a LangGraph ``SqliteStore``: records, the namespace tree, search, vectors.

``memtui.sources.langgraph`` says how a LangGraph store is read and forgotten; the
source there adds the write path to ``LangGraphReads``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from memtui.core.records import format_timestamp
from memtui.core.search import SearchRequest, SearchResponse, cosine
from memtui.core.secrets import is_secret_key
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
    decode_id,
    encode_id,
)
from memtui.sources.cache import FilterSql, unpack_f32
from memtui.sources.foreign import ForeignSqliteSource

ID_PREFIX = "lg"
_LG_TEXT = "%Y-%m-%d %H:%M:%S"  # SQLite CURRENT_TIMESTAMP


@functools.lru_cache(maxsize=4096)
def secret_field(name: str) -> bool:
    """``is_secret_key``, remembered: the same few field names come back in every item."""
    return is_secret_key(name)


def text_fields(value: Any) -> list[str]:
    """Every string in a JSON value, depth first, leaving out secret-named fields."""
    out: list[str] = []
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if secret_field(str(key)):
                continue
            out.extend(text_fields(item))
    elif isinstance(value, list):
        for item in value:
            out.extend(text_fields(item))
    return out


def parse_value(raw: Any) -> tuple[Any, str | None]:
    """The stored value as JSON (bytes or text), or ``(text, problem)`` when it is not JSON."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes | bytearray) else raw
    if text is None:
        return None, "no value"
    try:
        return json.loads(text), None
    except (TypeError, ValueError) as exc:
        return str(text), f"value is not JSON: {exc}"


def parse_lg_time(text: Any) -> datetime | None:
    """The first 19 characters of a LangGraph timestamp as UTC (what its rule compares)."""
    if not isinstance(text, str) or len(text) < 19:
        return None
    try:
        return datetime.strptime(text[:19], _LG_TEXT).replace(tzinfo=_utc())
    except ValueError:
        return None


def _utc():
    from datetime import UTC

    return UTC


def namespace_facets(
    by_prefix: Iterable[tuple[str, int]], namespace_filter: Any = None
) -> list[TierFacet]:
    """Tier facets from record counts per LangGraph namespace (``prefix``): the first label
    is the tier, every deeper namespace counts its own records and those nested under it."""
    tiers: dict[str, int] = {}
    spaces: dict[str, dict[str, int]] = {}
    for prefix, count in by_prefix:
        tier = prefix.split(".", 1)[0]
        tiers[tier] = tiers.get(tier, 0) + count
        labels = prefix.split(".")
        bucket = spaces.setdefault(tier, {})
        # From the second label: the first is the tier, whose node lists it already.
        for depth in range(2, len(labels) + 1):
            ancestor = ".".join(labels[:depth])
            if namespace_filter is not None and not (
                ancestor == namespace_filter or ancestor.startswith(f"{namespace_filter}.")
            ):
                continue  # an ancestor above the filter would count only part of itself
            bucket[ancestor] = bucket.get(ancestor, 0) + count
    return [
        TierFacet(
            tier=t,
            count=tiers[t],
            scopes={"namespace": dict(sorted(spaces[t].items()))} if spaces[t] else {},
        )
        for t in sorted(tiers)
    ]


def namespace_parent(key: str, value: Any) -> str | None:
    """A namespace nests under its parent namespace; one of two labels under its tier."""
    if key != "namespace" or not isinstance(value, str):
        return None
    labels = value.split(".")
    return ".".join(labels[:-1]) if len(labels) > 2 else None


def namespace_cache_filter(key: str, value: Any, column: str) -> tuple[str, list[Any]] | None:
    """The SQL of a ``namespace`` filter on memtui's local cache (SQLite): the namespace
    and what nests under it (LangGraph's SQLite and Postgres stores alike)."""
    if key != "namespace":
        return None
    text = str(value)
    return (f"({column} = ? OR substr({column}, 1, ?) = ?)", [text, len(text) + 1, f"{text}."])


def item_id_hint(text: str, exists: Callable[[str], bool]) -> str:
    """Which id names an item given as LangGraph names it (``memories.user-1/trip`` or
    ``memories/user-1/trip``), when ``exists(candidate)``; else what an id looks like."""
    for at in (i for i, char in enumerate(text) if char == "/"):
        space, key = text[:at], text[at + 1 :]
        for prefix in dict.fromkeys((space, space.replace("/", "."))):
            candidate = encode_id(ID_PREFIX, prefix, key)
            if exists(candidate):
                return f"memtui's id of item {key!r} in namespace {prefix!r} is {candidate}"
    return "a LangGraph item's id is lg:NAMESPACE/KEY, as `memtui records` lists it"


class LangGraphReads(ForeignSqliteSource):
    """What ``LangGraphSource`` reads: the records, their scope tree, search and vectors
    (its forget and gaps are in ``memtui.sources.langgraph``)."""

    kind = "langgraph"
    kind_label = "LangGraph SqliteStore"
    scope_keys = ("namespace",)
    hidden_state = "expired"
    id_prefix = ID_PREFIX

    # -- what it is

    @property
    def expiry_rule(self) -> str:
        return (
            "LangGraph rule: an item expires when expires_at < now (compared as text to the "
            "second, like its sweep's CURRENT_TIMESTAMP): the boundary second is still live"
        )

    def has_vectors(self) -> bool:
        return "store_vectors" in self.columns

    def _has_ttl(self) -> bool:
        return "expires_at" in self.columns.get("store", [])

    def now_text(self) -> str:
        return self.now().astimezone(_utc()).strftime(_LG_TEXT)

    def now_label(self) -> str:
        return self.now_text()

    def cache_now(self) -> datetime:
        return self.now().astimezone(_utc()).replace(microsecond=0)

    def cache_expiry(self, record: SourceRecord) -> str | None:
        moment = parse_lg_time(record.expires_at)
        if moment is None:
            return None
        # native: live while cache_exp > now; LangGraph: live while exp[:19] >= now[:19]
        return format_timestamp(moment + timedelta(microseconds=1))

    def summary(self) -> SourceSummary:
        base = super().summary()
        counts = dict(base.counts)
        notes = list(base.notes)
        if self.has_vectors():
            counts["vectors"] = self.query("SELECT count(*) FROM store_vectors")[0][0]
            orphans = self.orphaned_vectors()
            counts["orphaned_vectors"] = orphans
            if orphans:
                notes.insert(
                    0,
                    f"erasure gap: {orphans} orphaned vector(s) of deleted items remain in "
                    "store_vectors (LangGraph's delete leaves them; its cascade never fires); "
                    "clear them with `memtui forget-gaps PATH --allow-writes`",
                )
        freelist = self.query("PRAGMA freelist_count")[0][0]
        if freelist:
            counts["free_pages"] = freelist
            notes.append(
                f"{freelist} free page(s) may still hold text of earlier deletes "
                "(a memtui forget vacuums the file)"
            )
        return SourceSummary(
            kind=base.kind,
            label=base.label,
            path=base.path,
            read_only=base.read_only,
            counts=counts,
            notes=notes,
        )

    def orphaned_vectors(self, namespace: str | None = None) -> int:
        if not self.has_vectors():
            return 0
        sql = (
            "SELECT count(*) FROM store_vectors AS v WHERE NOT EXISTS "
            "(SELECT 1 FROM store AS s WHERE s.prefix = v.prefix AND s.key = v.key)"
        )
        params: list[Any] = []
        if namespace is not None:
            sql += " AND v.prefix = ?"
            params.append(namespace)
        return self.query(sql, params)[0][0]

    # -- filters

    def _where(
        self, filters: Mapping[str, Any] | None, include_hidden: bool, alias: str = ""
    ) -> tuple[str, list[Any]]:
        filters = self.check_filters(filters)
        p = f"{alias}." if alias else ""
        clauses: list[str] = []
        params: list[Any] = []
        for key, value in filters.items():
            if key == "tier":
                clauses.append(f"substr({p}prefix, 1, instr({p}prefix || '.', '.') - 1) = ?")
                params.append(value)
            elif key == "record_type":
                clauses.append("'item' = ?")
                params.append(value)
            elif key == "namespace":
                clauses.append(f"({p}prefix = ? OR substr({p}prefix, 1, ?) = ?)")
                params.extend([value, len(str(value)) + 1, f"{value}."])
        if not include_hidden and self._has_ttl():
            clauses.append(f"({p}expires_at IS NULL OR NOT ({p}expires_at < ?))")
            params.append(self.now_text())
        return (" AND ".join(clauses) or "1"), params

    def cache_filter_sql(self) -> FilterSql:
        return namespace_cache_filter  # type: ignore[return-value]

    # -- records

    def _select(self) -> str:
        ttl = "s.expires_at, s.ttl_minutes" if self._has_ttl() else "NULL, NULL"
        fields = (
            "(SELECT group_concat(field_name, char(31)) FROM (SELECT field_name FROM store_vectors "
            "AS v WHERE v.prefix = s.prefix AND v.key = s.key ORDER BY field_name))"
            if self.has_vectors()
            else "NULL"
        )
        return (
            f"SELECT s.prefix, s.key, s.value, s.created_at, s.updated_at, {ttl}, {fields} "
            "FROM store AS s"
        )

    def _record(self, row: tuple[Any, ...]) -> SourceRecord:
        prefix, key, raw, created, updated, expires, ttl, fields = row
        value, problem = parse_value(raw)
        expired = expires is not None and str(expires) < self.now_text()
        metadata: dict[str, Any] = {
            "namespace": prefix.split(".") if prefix else [],
            "key": key,
            "value": value,
            "updated_at": updated,
            "ttl_minutes": ttl,
        }
        if problem:
            metadata["problem"] = problem
        if fields is not None:
            metadata["vector_fields"] = str(fields).split("\x1f")
        elif self.has_vectors():
            metadata["vector_fields"] = []
        content = FIELD_SEPARATOR.join(text_fields(value)) if problem is None else str(value)
        return SourceRecord(
            id=encode_id(ID_PREFIX, prefix, key),
            tier=prefix.split(".", 1)[0] if prefix else "",
            record_type="item",
            content=content,
            scope={"namespace": prefix},
            created_at=created,
            expires_at=expires,
            state="expired" if expired else "live",
            metadata=metadata,
        )

    def record_count(self) -> int:
        return self.query("SELECT count(*) FROM store")[0][0]

    def _data_fingerprint(self) -> Any:
        parts = self.query("SELECT count(*), max(rowid), max(updated_at) FROM store")[0]
        vectors = (
            self.query("SELECT count(*), max(rowid) FROM store_vectors")[0]
            if self.has_vectors()
            else None
        )
        return [list(parts), list(vectors) if vectors else None]

    def facets(
        self, filters: Mapping[str, Any] | None = None, *, include_hidden: bool = False
    ) -> list[TierFacet]:
        where, params = self._where(filters, include_hidden, alias="s")
        by_prefix = self.query(
            f"SELECT s.prefix, count(*) FROM store AS s WHERE {where} GROUP BY s.prefix", params
        )
        return namespace_facets(by_prefix, dict(filters or {}).get("namespace"))

    def scope_parent(self, key: str, value: Any) -> str | None:
        return namespace_parent(key, value)

    def page(
        self,
        filters: Mapping[str, Any] | None = None,
        *,
        after: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        include_hidden: bool = False,
    ) -> Page:
        limit = check_limit(limit)
        where, params = self._where(filters, include_hidden, alias="s")
        if after:
            parts = decode_id(ID_PREFIX, after, 2)
            if parts is None:
                raise SourceError(f"cursor {after!r} is not a {self.kind_label} record id")
            where += " AND (s.prefix, s.key) > (?, ?)"
            params.extend(parts)
        rows = self.query(
            f"{self._select()} WHERE {where} ORDER BY s.prefix, s.key LIMIT ?", [*params, limit + 1]
        )
        return Page.of((self._record(r) for r in rows), limit)

    def _key(self, record_id: str) -> tuple[str, str] | None:
        parts = decode_id(ID_PREFIX, str(record_id), 2)
        return None if parts is None else (parts[0], parts[1])

    def get(self, record_id: str) -> SourceRecord | None:
        key = self._key(record_id)
        if key is None:
            return None
        rows = self.query(f"{self._select()} WHERE s.prefix = ? AND s.key = ?", key)
        return self._record(rows[0]) if rows else None

    def id_hint(self, record_id: str) -> str | None:
        """``memories.user-1/trip`` (or ``memories/user-1/trip``) names an item by its
        namespace and key, as LangGraph's ``get(namespace, key)`` does: say its id."""
        if self._key(record_id) is not None:
            return None
        return item_id_hint(str(record_id), lambda candidate: self.get(candidate) is not None)

    def get_many(self, record_ids: Iterable[str]) -> dict[str, SourceRecord]:
        out: dict[str, SourceRecord] = {}
        for record_id in record_ids:
            record = self.get(record_id)
            if record is not None:
                out[record.id] = record
        return out

    def notes(self, record: SourceRecord) -> str:
        fields = record.metadata.get("vector_fields")
        parts = [f"key {record.metadata.get('key')}"]
        if fields:
            parts.append(f"vectors: {', '.join(fields)}")
        if record.metadata.get("ttl_minutes") is not None:
            parts.append(f"ttl {record.metadata['ttl_minutes']:g} min")
        return " · ".join(parts)

    def detail(self, record_id: str) -> list[DetailSection]:
        key = self._key(record_id)
        record = self.get(record_id)
        if key is None or record is None:
            raise SourceError(f"no record with id {record_id}")
        from memtui.core.secrets import mask_metadata

        sections = [
            DetailSection(
                title="value (full JSON, secrets masked)",
                columns=("json",),
                # Text as written (the app shows control characters as visible escapes).
                rows=[
                    (
                        json.dumps(
                            mask_metadata(record.metadata.get("value")),
                            indent=2,
                            ensure_ascii=False,
                        ),
                    )
                ],
            )
        ]
        if self.has_vectors():
            rows = self.query(
                "SELECT field_name, length(embedding) / 4, created_at FROM store_vectors "
                "WHERE prefix = ? AND key = ? ORDER BY field_name",
                key,
            )
            orphans = self.orphaned_vectors(key[0])
            sections.append(
                DetailSection(
                    title="vectors",
                    columns=("field", "dims", "created"),
                    rows=[tuple(r) for r in rows],
                    note=(
                        f"erasure gap: {orphans} orphaned vector(s) of deleted items in namespace "
                        f"{key[0]!r}"
                        if orphans
                        else "no orphaned vectors in this namespace"
                    ),
                )
            )
        sections.append(self.history_section(record.id))
        return sections

    def vector_dim(self) -> int | None:
        if not self.has_vectors():
            return None
        rows = self.query("SELECT length(embedding) / 4 FROM store_vectors LIMIT 1")
        return rows[0][0] if rows else None

    def field_vectors(self) -> dict[str, dict[str, bytes]]:
        """Every stored vector of every item, by record id, then field name in name order
        (one per text field the store's index embeds; LangGraph's default index has one,
        ``$``)."""
        if not self.has_vectors():
            return {}
        out: dict[str, dict[str, bytes]] = {}
        for prefix, key, field_name, blob in self.query(
            "SELECT v.prefix, v.key, v.field_name, v.embedding FROM store_vectors AS v "
            "JOIN store AS s ON s.prefix = v.prefix AND s.key = v.key "
            "ORDER BY v.prefix, v.key, v.field_name"
        ):
            if isinstance(blob, bytes) and blob:
                fields = out.setdefault(encode_id(ID_PREFIX, prefix, key), {})
                fields[str(field_name)] = bytes(blob)
        return out

    def cache_vectors(self) -> dict[str, bytes]:
        # The first field by name; a search puts in the field that wins for its query.
        return {rid: next(iter(fields.values())) for rid, fields in self.field_vectors().items()}

    def search(self, request: SearchRequest | str, **options: Any) -> SearchResponse:
        """LangGraph's rule for an item with several vectors (several text fields
        indexed): it scores every field and keeps the best. The cached vector of such an
        item is the one of the field that wins for this query, so the vector lane's score
        is LangGraph's; such a result's breakdown names its field (``vector.field``)."""
        request = SearchRequest.of(request, **options)
        several = {
            rid: vectors for rid, vectors in self.field_vectors().items() if len(vectors) > 1
        }
        winners: dict[str, str] = {}
        with self._index_lock:  # no other search sees the vectors of this one's query
            query_vector = self._query_vector(request) if several else None
            if query_vector is not None:
                for rid, vectors in several.items():
                    winners[rid] = max(
                        vectors, key=lambda name: cosine(query_vector, unpack_f32(vectors[name]))
                    )
                cache = self.index.store(request.progress)
                cache.replace_vectors({rid: several[rid][winners[rid]] for rid in several})
            response = super().search(request)
        for result in response.candidates:
            lane = result.trace.vector
            record_id = getattr(result, "id", None)
            if lane.raw is not None and record_id in winners:
                lane.field = winners[record_id]
        return response

    def _query_vector(self, request: SearchRequest) -> list[float] | None:
        """The query's embedding when the vector lane will run on the store's vectors."""
        embedder = request.embedder
        if embedder is None or request.keyword_only:
            return None
        if getattr(embedder, "dim", None) != self.vector_dim():
            return None
        try:
            return [float(v) for v in embedder([request.query])[0]]
        except Exception:  # the search itself reports a failing embedder
            return None
