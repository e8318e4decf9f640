"""mem0's pgvector collection (mem0ai 2.x, ``vector_store: pgvector``) as a memory source.

mem0's ``PGVector`` keeps a collection as one table named after it
(``memories`` by default): ``id uuid PRIMARY KEY, vector vector(DIMS),
payload jsonb``, with ``COLLECTION_hnsw_idx`` (``vector_cosine_ops``) when
HNSW is on and a GIN index on ``payload->>'text_lemmatized'``. The payload is
mem0's, as in its Qdrant store (``memtui.sources.mem0_payload``: tiers, the
scope keys ``user_id``/``agent_id``/``run_id``, metadata, the expiry rule).

- recognized by that shape and mem0's payload (a row with ``data``; mem0's
  telemetry table ``mem0migrations`` has the shape but not the payload);
  several collections in one schema: ``--collection NAME`` picks one;
- read in the database: facets by ``GROUP BY`` on the payload's tier and
  scope keys, a page by keyset on ``id`` (the primary key), ``get`` by id;
- the keyword lane runs on memtui's index, refreshed by the payload's
  ``updated_at`` (mem0 writes it as UTC ISO text on every add and update;
  deletions are found by counts per ``user_id``); the vector lane runs in the
  database (``Mem0Vectors``: the collection's HNSW index or an exact scan);
- mem0's history stays in its SQLite ``history.db`` unless mem0 is told
  otherwise: ``--mem0-history PATH`` attaches it, and a record's detail shows
  its ADD/UPDATE/DELETE events.

Forgetting (a memory, a user / agent / run: ``forget_scope_keys``, matched as
``payload->>KEY``) is ``Mem0PgvectorForget``'s (``memtui.sources.postgres.mem0_forget``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtui.core.search import SearchRequest, SearchResponse
from memtui.core.secrets import mask_metadata
from memtui.sources.base import (
    DetailSection,
    SourceError,
    SourceRecord,
    SourceSummary,
    TierFacet,
    decode_id,
    encode_id,
)
from memtui.sources.mem0_payload import (
    EXPIRY_RULE,
    SCOPE_KEYS,
    TIERS,
    expiry_moment,
    payload_fields,
)
from memtui.sources.postgres.catalog import Catalog, PgDatabase
from memtui.sources.postgres.index_file import PostgresIndex
from memtui.sources.postgres.index_sync import ChangeFeed
from memtui.sources.postgres.mem0_forget import Mem0PgvectorForget
from memtui.sources.postgres.mem0_sync import Mem0Feed, Mem0Vectors
from memtui.sources.postgres.source import PostgresSource
from memtui.sources.postgres.url import quote_identifier

if TYPE_CHECKING:
    from memtui.sources.mem0_history import Mem0History

ID_PREFIX = "mem0"
TELEMETRY_TABLE = "mem0migrations"
"""mem0's own telemetry collection (one ``user_identity`` row): never a memory store."""
TIER_SQL = (
    "(CASE WHEN t.payload->>'memory_type' = 'procedural_memory' "
    "THEN 'procedural' ELSE 'memory' END)"
)
TYPE_SQL = (
    "(CASE WHEN t.payload->>'memory_type' = 'procedural_memory' "
    "THEN 'procedural_memory' ELSE 'memory' END)"
)
EXPIRED_SQL = (
    "coalesce(jsonb_typeof(t.payload->'expiration_date') = 'string' "
    "AND t.payload->>'expiration_date' ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}' "
    "AND left(t.payload->>'expiration_date', 10) < %s, false)"
)
"""mem0's rule in SQL: the date (``YYYY-MM-DD``, compared as text) is before today."""


def scope_sql(key: str) -> str:
    """A session id of the payload, empty as none (as the record's scope has it)."""
    return f"NULLIF(t.payload->>{_literal(key)}, '')"


def _literal(key: str) -> str:
    return "'" + key.replace("'", "''") + "'"


# ---------------------------------------------------------------- recognizing


def shaped_tables(catalog: Catalog) -> list[str]:
    """The tables shaped as mem0's collections: ``id uuid``, ``vector vector(n)``,
    ``payload jsonb`` (the payload not yet looked at)."""
    return sorted(
        name
        for name in catalog.tables
        if catalog.has(name, {"id": "uuid", "payload": "jsonb"})
        and catalog.vector_column(name, "vector") is not None
        and name != TELEMETRY_TABLE
    )


def collections(database: PgDatabase) -> list[str]:
    """mem0's collections in the schema: the shaped tables whose first row is a memory
    (its payload has ``data``), or that are empty (mem0 made it, nothing added yet)."""
    found = []
    for name in shaped_tables(database.catalog):
        table = f"{quote_identifier(database.target.schema)}.{quote_identifier(name)}"
        rows = database.conn.query(f"SELECT payload ? 'data' FROM {table} LIMIT 1")
        if not rows or rows[0][0]:
            found.append(name)
    return found


def choose_collection(database: PgDatabase, named: str | None) -> str | None:
    """The collection to open: the one named, else the only one; several and none named
    is one line listing them. None when the schema holds no mem0 collection."""
    found = collections(database)
    where = f"{database.target.display} (schema {database.target.schema})"
    if named is not None:
        if named not in found:
            listed = ", ".join(found) or "none"
            raise SourceError(
                f"{where} has no mem0 collection {named!r} (mem0 collections: {listed}); "
                "give one of them with --collection"
            )
        return named
    if len(found) > 1:
        raise SourceError(
            f"{where} holds {len(found)} mem0 collections; pick one with --collection NAME: "
            + ", ".join(found)
        )
    return found[0] if found else None


# ---------------------------------------------------------------- the source


class Mem0PgvectorSource(Mem0PgvectorForget, PostgresSource):
    """One mem0 pgvector collection: read in the database, searched with memtui's keyword
    index and pgvector's distance in SQL; forgotten by ``Mem0PgvectorForget``."""

    kind = "mem0-pgvector"
    kind_label = "mem0 pgvector collection"
    tiers = TIERS
    scope_keys = SCOPE_KEYS
    forget_scope_keys = SCOPE_KEYS
    hidden_state = "expired"
    id_prefix = ID_PREFIX
    quick_tier_counts = True
    id_column = "id"
    payload_column = "payload"
    vector_column = "vector"

    def __init__(
        self,
        database: PgDatabase,
        *,
        collection: str,
        mem0_history: str | Path | None = None,
        **common: Any,
    ) -> None:
        self.collection = collection
        self.main_table = collection
        self.table_name = collection
        self.store_tables: tuple[str, ...] = (collection,)
        """The store's tables (the collection is one table: rows, vectors and payloads)."""
        self.forget_tables: tuple[str, ...] = (collection,)
        self._table = f"{quote_identifier(database.target.schema)}.{quote_identifier(collection)}"
        self.vectors = Mem0Vectors(database.catalog, collection, self._table)
        self.feed = Mem0Feed(self)
        self.history: Mem0History | None = None
        super().__init__(database, **common)
        if mem0_history is not None:
            try:
                self.history = self._attach_history(Path(mem0_history))
            except BaseException:
                self.close()
                raise

    def _attach_history(self, path: Path) -> Mem0History:
        """mem0's ``history.db`` given with ``--mem0-history``: it must name memories of this
        collection (unless one of them is empty)."""
        from memtui.sources.mem0_history import Mem0History

        if not path.is_file():
            raise SourceError(f"no mem0 history at {path}")
        history = Mem0History(path, writable=not self.read_only, found="given with --mem0-history")
        ids = history.memory_ids()
        if ids and not self._present(ids) and self.record_count():
            history.close()
            raise SourceError(
                f"{path} shares no memory id with collection {self.collection}: it is not "
                "this store's mem0 history"
            )
        if history.identity is not None:
            self.opened_files.append(history.identity)
        return history

    # -- what it is

    @property
    def label(self) -> str:
        return f"{self.target.display_with_schema} ({self.kind_label} {self.collection})"

    def audit_source(self) -> dict[str, Any]:
        return {**super().audit_source(), "collection": self.collection}

    @property
    def expiry_rule(self) -> str:
        return EXPIRY_RULE

    def has_vectors(self) -> bool:
        return True

    def vector_dim(self) -> int | None:
        return self.vectors.dims

    def has_history(self) -> bool:
        return self.history is not None

    def summary(self) -> SourceSummary:
        base = super().summary()
        counts = dict(base.counts)
        notes = [*base.notes, f"collection: {self.collection}", self.vectors.describe()]
        counts["vectors"] = self.query(f"SELECT count(vector) FROM {self._table}")[0][0]
        if self.history is not None:
            gaps = self._history_gaps()
            counts["deleted_with_text"] = gaps
            notes.append(f"history: {self.history.path} (given with --mem0-history)")
            if gaps:
                memories = (
                    "1 memory mem0 deleted still has"
                    if gaps == 1
                    else f"{gaps} memories mem0 deleted still have"
                )
                notes.append(
                    f"erasure gap: {memories} text readable in its history.db; clear it with "
                    "`memtui forget-gaps URL --mem0-history PATH --allow-writes`"
                )
        else:
            notes.append(
                "mem0 keeps its history in a SQLite history.db unless configured otherwise; "
                "give it with --mem0-history"
            )
        return SourceSummary(
            kind=base.kind,
            label=base.label,
            path=base.path,
            read_only=base.read_only,
            counts=counts,
            notes=notes,
        )

    def _history_gaps(self) -> int:
        return len(self.history_gap_ids())

    def history_gap_ids(self) -> list[str]:
        """Memories in the history, gone from the collection, whose text it still holds."""
        assert self.history is not None
        with_text = [
            m for m, rows in self.history.by_memory().items() if any(r.texts() for r in rows)
        ]
        present = self._present(with_text)
        return sorted(m for m in with_text if m not in present)

    def _present(self, memory_ids: Iterable[str]) -> set[str]:
        """Which of these memory ids the collection holds (as the history writes them)."""
        by_uuid = {str(u): i for i in memory_ids if (u := _uuid(i)) is not None}
        rows = self.query(
            f"SELECT id::text FROM {self._table} WHERE id = ANY(%s::uuid[])", [list(by_uuid)]
        )
        return {by_uuid[str(r[0])] for r in rows}

    # -- filters, in SQL

    def where(
        self, filters: Mapping[str, Any] | None, include_hidden: bool
    ) -> tuple[str, list[Any]]:
        """The filters and mem0's live rule as a WHERE clause on the table ``AS t``."""
        filters = self.check_filters(filters)
        clauses: list[str] = []
        params: list[Any] = []
        for key, value in filters.items():
            column = {"tier": TIER_SQL, "record_type": TYPE_SQL}.get(key) or scope_sql(key)
            clauses.append(f"{column} = %s")
            params.append(str(value))
        if not include_hidden:
            clauses.append(f"NOT {EXPIRED_SQL}")
            params.append(self.today())
        return (" AND ".join(clauses) or "TRUE"), params

    def today(self) -> str:
        """Today (UTC) as mem0 writes dates: ``YYYY-MM-DD``."""
        return self.now().astimezone(UTC).date().isoformat()

    # -- records

    def select(self) -> str:
        return f"SELECT t.id, t.payload, vector_dims(t.vector) FROM {self._table} AS t"

    def record(self, row: Sequence[Any]) -> SourceRecord:
        memory_id, payload, dims = row
        fields = payload_fields(
            payload if isinstance(payload, dict) else {}, date.fromisoformat(self.today())
        )
        metadata: dict[str, Any] = {"memory_id": str(memory_id), **fields.metadata}
        metadata["embedding"] = {"dims": dims}
        return SourceRecord(
            id=encode_id(ID_PREFIX, str(memory_id)),
            tier=fields.tier,
            record_type=fields.record_type,
            content=fields.content,
            scope=fields.scope,
            created_at=fields.created_at,
            expires_at=fields.expires_at,
            state=fields.state,
            metadata=metadata,
        )

    def record_count(self) -> int:
        return int(self.query(f"SELECT count(*) FROM {self._table}")[0][0])

    def facets(
        self, filters: Mapping[str, Any] | None = None, *, include_hidden: bool = False
    ) -> list[TierFacet]:
        """Tiers and, per tier, each session id's count: one ``GROUP BY GROUPING SETS``."""
        where, params = self.where(filters, include_hidden)
        columns = [scope_sql(k) for k in SCOPE_KEYS]
        keys = ", ".join(columns)
        sets = ", ".join(f"({TIER_SQL}, {c})" for c in columns)
        rows = self.query(
            f"SELECT {TIER_SQL}, {keys}, count(*), GROUPING({keys}) FROM {self._table} AS t "
            f"WHERE {where} GROUP BY GROUPING SETS (({TIER_SQL}), {sets})",
            params,
        )
        counts: dict[str, int] = {}
        scopes: dict[str, dict[str, dict[str, int]]] = {}
        everyone = (1 << len(SCOPE_KEYS)) - 1
        for tier, *values, count, grouping in rows:
            if grouping == everyone:
                counts[str(tier)] = int(count)
                continue
            for n, key in enumerate(SCOPE_KEYS):
                if not grouping & (1 << (len(SCOPE_KEYS) - 1 - n)) and values[n] is not None:
                    scopes.setdefault(str(tier), {}).setdefault(key, {})[str(values[n])] = int(
                        count
                    )
        order = {t: i for i, t in enumerate(TIERS)}
        return [
            TierFacet(
                tier=tier,
                count=counts[tier],
                scopes={
                    k: dict(sorted(v.items())) for k, v in sorted(scopes.get(tier, {}).items())
                },
            )
            for tier in sorted(counts, key=lambda t: (order.get(t, len(order)), t))
        ]

    def tier_counts(self, *, include_hidden: bool = False) -> dict[str, int]:
        where, params = self.where(None, include_hidden)
        rows = self.query(
            f"SELECT {TIER_SQL}, count(*) FROM {self._table} AS t WHERE {where} GROUP BY 1",
            params,
        )
        return {str(t): int(n) for t, n in rows}

    def page_sql(
        self,
        filters: Mapping[str, Any] | None,
        *,
        after: str | None,
        limit: int,
        include_hidden: bool,
    ) -> tuple[str, list[Any]]:
        """The statement of one keyset page on the primary key (``EXPLAIN`` it)."""
        where, params = self.where(filters, include_hidden)
        if after:
            memory_id = self._memory_id(after)
            if memory_id is None:
                raise SourceError(f"cursor {after!r} is not a {self.kind_label} record id")
            where += " AND t.id > %s::uuid"
            params.append(memory_id)
        return f"{self.select()} WHERE {where} ORDER BY t.id LIMIT %s", [*params, limit + 1]

    @staticmethod
    def _memory_id(record_id: str) -> str | None:
        parts = decode_id(ID_PREFIX, str(record_id), 1)
        return None if parts is None else _uuid(parts[0])

    def get(self, record_id: str) -> SourceRecord | None:
        memory_id = self._memory_id(record_id)
        if memory_id is None:
            return None
        rows = self.query(f"{self.select()} WHERE t.id = %s::uuid", [memory_id])
        return self.record(rows[0]) if rows else None

    def get_many(self, record_ids: Iterable[str]) -> dict[str, SourceRecord]:
        ids = [m for m in (self._memory_id(i) for i in dict.fromkeys(record_ids)) if m]
        out: dict[str, SourceRecord] = {}
        for start in range(0, len(ids), 1000):
            rows = self.query(
                f"{self.select()} WHERE t.id = ANY(%s::uuid[])", [ids[start : start + 1000]]
            )
            for row in rows:
                record = self.record(row)
                out[record.id] = record
        return out

    def id_hint(self, record_id: str) -> str | None:
        """A bare memory id (as mem0 names it): say memtui's id for it."""
        if self._memory_id(record_id) is not None:
            return None
        memory_id = _uuid(str(record_id).strip())
        if memory_id is not None:
            candidate = encode_id(ID_PREFIX, memory_id)
            if self.get(candidate) is not None:
                return f"memtui's id of mem0 memory {memory_id} is {candidate}"
        return (
            f"a {self.kind_label} record's id is {ID_PREFIX}:MEMORY_ID, "
            "as `memtui records` lists it"
        )

    def notes(self, record: SourceRecord) -> str:
        return str(record.metadata.get("role") or "")

    def detail(self, record_id: str) -> list[DetailSection]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        from memtui.sources.mem0_history import history_detail

        memory_id = str(record.metadata["memory_id"])
        (payload,) = self.query(
            f"SELECT payload FROM {self._table} WHERE id = %s::uuid", [memory_id]
        )[0]
        return [
            history_detail(self.history, memory_id),
            DetailSection(
                title="payload (full JSON, secrets masked)",
                columns=("json",),
                rows=[(json.dumps(mask_metadata(payload), indent=2, ensure_ascii=False),)],
            ),
            self.history_section(record.id),
        ]

    # -- memtui's index of it

    def cache_expiry(self, record: SourceRecord) -> str | None:
        return expiry_moment(record.expires_at)

    def change_feed(self) -> ChangeFeed:
        return self.feed

    def prepare_index(self, index: PostgresIndex) -> None:
        index.vector_dim = self.vectors.dims
        index.vector_search = lambda query, filters, pool, cancelled: self.vectors.lane(
            self, index, query, filters, pool, cancelled
        )

    def search(self, request: SearchRequest | str, **options: Any) -> SearchResponse:
        response = super().search(request, **options)
        if response.trace.source is not None:
            response.trace.source.index_refreshed = self.index_refreshed()
        return response

    def close(self) -> None:
        super().close()
        if self.history is not None:
            self.history.close()


def _uuid(text: str) -> str | None:
    try:
        return str(uuid.UUID(str(text)))
    except ValueError:
        return None


def open_collection(
    database: PgDatabase, collection: str, options: Any, common: dict[str, Any]
) -> Mem0PgvectorSource:
    """The collection opened (``options``: the registry's ``PostgresOptions``)."""
    history = getattr(options, "mem0_history", None)
    return Mem0PgvectorSource(database, collection=collection, mem0_history=history, **common)
