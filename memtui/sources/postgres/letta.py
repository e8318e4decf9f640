"""Letta's server (Postgres with pgvector) as a memory source: its archival passages and
core memory blocks.

Letta's server keeps the ORM tables its 0.11 SQLite file has
(``memtui.sources.letta``) in Postgres; records are mapped by the same functions
(``memtui.sources.letta_records``: the same ids, tiers, scopes and states):

- tier ``archival``: ``archival_passages`` (id ``archival:<passage id>``), scoped by
  ``archive`` (the archive's name, from ``archives``) and ``tag`` (any of its JSON
  ``tags``); soft-deleted passages (``is_deleted``) are ``deleted``: left out by
  default, and counted as an erasure gap (their text is still in the table);
- tier ``core``: ``block`` rows (id ``core:<block id>``), scoped by ``label``; the
  detail pane shows ``block_history``, whose rows keep every earlier value;
- every read is one statement over a ``UNION ALL`` of the two tables (``items``):
  facets by ``GROUP BY GROUPING SETS``, a page by keyset on ``(part, id)``, a
  lookup by primary key;
- the keyword lane runs on memtui's index, refreshed by ``updated_at``
  (``memtui.sources.postgres.letta_sync``); the vector lane runs in the database
  on ``embedding`` (``vector(4096)``, zero-padded), the query zero-padded the
  same way: the cosine of two zero-padded vectors is that of their real
  components, which the trace recomputes from the vector unpadded to
  ``embedding_config.embedding_dim``.

Forgetting (a passage and its ``passage_tags`` rows; never a core block) and the
soft-deleted passages' erasure gap are ``LettaPostgresForget``'s
(``memtui.sources.postgres.letta_forget``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memtui.core.search import SearchRequest, SearchResponse
from memtui.sources.base import (
    DEFAULT_PAGE_SIZE,
    DetailSection,
    Page,
    SourceError,
    SourceRecord,
    SourceSummary,
    TierFacet,
    check_limit,
)
from memtui.sources.cache import FilterSql
from memtui.sources.letta_records import (
    EXPIRY_RULE,
    ID_HINT,
    TIERS,
    block_record,
    passage_record,
    record_notes,
    record_sections,
    tag_cache_filter,
    view_key,
)
from memtui.sources.letta_records import (
    record_id as id_of,
)
from memtui.sources.postgres.catalog import Catalog, PgDatabase
from memtui.sources.postgres.index_file import PostgresIndex
from memtui.sources.postgres.index_sync import ChangeFeed
from memtui.sources.postgres.letta_forget import LettaPostgresForget
from memtui.sources.postgres.letta_sync import LettaFeed, LettaVectors
from memtui.sources.postgres.source import PostgresSource

PASSAGES = "archival_passages"
STORE_TABLES = (
    PASSAGES,
    "passage_tags",
    "archives",
    "block",
    "block_history",
    "source_passages",
    "messages",
)
"""Where a forgotten passage's text is looked for (those the schema has): ``messages`` too,
whose tool calls (``archival_memory_insert``) and returns may hold a passage's text; a
forget does not change them, so such a copy leaves the forget unverified, named."""
ViewKey = tuple[int, str]


def is_letta_server(catalog: Catalog) -> bool:
    """Letta's ``archival_passages``: id and text, ``embedding_config`` and ``tags`` json,
    the archive it is in, the soft-delete flag, and a pgvector ``embedding``."""
    return catalog.has(
        PASSAGES,
        {
            "id": None,
            "text": None,
            "embedding_config": "json",
            "metadata_": "json",
            "tags": "json",
            "archive_id": None,
            "is_deleted": "boolean",
            "created_at": "timestamp",
            "updated_at": "timestamp",
        },
    ) and (catalog.vector_column(PASSAGES, "embedding") is not None)


class LettaPostgresSource(LettaPostgresForget, PostgresSource):
    """A Letta server's Postgres: passages and blocks read in the database, searched with
    memtui's keyword index and pgvector's distance in SQL."""

    kind = "letta-postgres"
    kind_label = "Letta server Postgres"
    tiers = TIERS
    scope_keys = ("archive", "tag", "label")
    forget_scope_keys = ("archive", "tag")
    hidden_state = "deleted"
    quick_tier_counts = True
    main_table = PASSAGES

    def __init__(self, database: PgDatabase, **common: Any) -> None:
        tables = database.catalog.tables
        self.schema = database.target.schema  # ``table`` names the tables from here on
        self.store_tables = tuple(t for t in STORE_TABLES if t in tables)
        self.forget_tables = tuple(t for t in (PASSAGES, "passage_tags") if t in tables)
        self.has_blocks = "block" in tables
        self.has_archives = "archives" in tables
        self.has_tag_rows = "passage_tags" in tables
        self.vectors = LettaVectors(self, database.catalog)
        self.feed = LettaFeed(self)
        super().__init__(database, **common)

    # -- what it is

    @property
    def expiry_rule(self) -> str:
        return EXPIRY_RULE

    def has_vectors(self) -> bool:
        return True

    def vector_dim(self) -> int | None:
        return self.vectors.dim()

    def has_history(self) -> bool:
        return "block_history" in self.catalog.tables

    def summary(self) -> SourceSummary:
        base = super().summary()
        counts = dict(base.counts)
        notes = [*base.notes, self.vectors.describe()]
        deleted = len(self.soft_deleted())
        counts["soft_deleted_passages"] = deleted
        if deleted:
            notes.insert(
                0,
                f"erasure gap: {deleted} soft-deleted passage(s) still hold their text "
                "(is_deleted only hides them); erase them with "
                "`memtui forget-gaps URL --allow-writes`",
            )
        if self.has_history():
            history = self.query(f"SELECT count(*) FROM {self.table('block_history')}")[0][0]
            counts["block_history_rows"] = int(history)
            if history:
                notes.append(f"{history} block_history row(s) keep earlier values of core memory")
        return SourceSummary(
            kind=base.kind,
            label=base.label,
            path=base.path,
            read_only=base.read_only,
            counts=counts,
            notes=notes,
        )

    # -- the two tables as one list

    def archive_sql(self, alias: str = "p") -> str:
        """A passage's archive as the scope names it: the archive's name, else its id."""
        if not self.has_archives:
            return f"{alias}.archive_id"
        return (
            f"coalesce((SELECT a.name FROM {self.table('archives')} AS a "
            f"WHERE a.id = {alias}.archive_id), {alias}.archive_id)"
        )

    def items(self) -> str:
        """Passages (part 0) and blocks (part 1) as one relation: part, rid, tier,
        record_type, archive, tags (jsonb), label, live."""
        passages = (
            "SELECT 0 AS part, p.id AS rid, 'archival'::text AS tier, "
            f"'passage'::text AS record_type, {self.archive_sql()}::text AS archive, "
            "p.tags::jsonb AS tags, NULL::text AS label, NOT coalesce(p.is_deleted, false) "
            f"AS live FROM {self.table(PASSAGES)} AS p"
        )
        if not self.has_blocks:
            return passages
        blocks = (
            "SELECT 1, b.id, 'core', 'block', NULL, NULL, b.label, "
            f"NOT coalesce(b.is_deleted, false) FROM {self.table('block')} AS b"
        )
        return f"{passages} UNION ALL {blocks}"

    def where(
        self, filters: Mapping[str, Any] | None, include_hidden: bool
    ) -> tuple[str, list[Any]]:
        """The filters and Letta's live rule as a WHERE clause on ``items AS i``."""
        filters = self.check_filters(filters)
        clauses: list[str] = []
        params: list[Any] = []
        for key, value in filters.items():  # allowlisted: a column of items, or the tag
            if key == "tag":
                clauses.append("i.tags @> jsonb_build_array(%s::text)")
                params.append(str(value))
            elif value is None:
                clauses.append(f"i.{key} IS NULL")
            else:
                clauses.append(f"i.{key} = %s")
                params.append(str(value))
        if not include_hidden:
            clauses.append("i.live")
        return (" AND ".join(clauses) or "TRUE"), params

    def record_count(self) -> int:
        return int(self.query(f"SELECT count(*) FROM ({self.items()}) AS i")[0][0])

    def tier_counts(self, *, include_hidden: bool = False) -> dict[str, int]:
        where, params = self.where(None, include_hidden)
        rows = self.query(
            f"SELECT i.tier, count(*) FROM ({self.items()}) AS i WHERE {where} GROUP BY 1", params
        )
        return {str(t): int(n) for t, n in rows}

    def facets(
        self, filters: Mapping[str, Any] | None = None, *, include_hidden: bool = False
    ) -> list[TierFacet]:
        """Tiers, and per tier the count of each archive, label and tag: two statements."""
        where, params = self.where(filters, include_hidden)
        items = self.items()
        rows = self.query(
            "SELECT i.tier, i.archive, i.label, count(*), GROUPING(i.archive, i.label) "
            f"FROM ({items}) AS i WHERE {where} GROUP BY GROUPING SETS "
            "((i.tier), (i.tier, i.archive), (i.tier, i.label))",
            params,
        )
        counts: dict[str, int] = {}
        scopes: dict[str, dict[str, dict[str, int]]] = {}
        for tier, archive, label, count, grouping in rows:
            if grouping == 3:
                counts[str(tier)] = int(count)
            elif grouping == 1 and archive is not None:
                scopes.setdefault(str(tier), {}).setdefault("archive", {})[str(archive)] = count
            elif grouping == 2 and label is not None:
                scopes.setdefault(str(tier), {}).setdefault("label", {})[str(label)] = count
        for tier, tag, count in self.query(
            "SELECT i.tier, t.v #>> '{}', count(DISTINCT (i.part, i.rid)) "
            f"FROM ({items}) AS i CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN "
            "jsonb_typeof(i.tags) = 'array' THEN i.tags ELSE '[]'::jsonb END) AS t(v) "
            f"WHERE {where} AND jsonb_typeof(t.v) = 'string' GROUP BY 1, 2",
            params,
        ):
            scopes.setdefault(str(tier), {}).setdefault("tag", {})[str(tag)] = int(count)
        shown = TIERS if self.has_blocks else TIERS[:1]
        return [
            TierFacet(
                tier=tier,
                count=counts.get(tier, 0),
                scopes={
                    key: dict(sorted((v, int(n)) for v, n in values.items()))
                    for key, values in sorted(scopes.get(tier, {}).items())
                },
            )
            for tier in shown
        ]

    def page_sql(
        self,
        filters: Mapping[str, Any] | None,
        *,
        after: str | None,
        limit: int,
        include_hidden: bool,
    ) -> tuple[str, list[Any]]:
        """The keys of one keyset page on ``(part, rid)`` (``EXPLAIN`` it)."""
        where, params = self.where(filters, include_hidden)
        if after:
            key = view_key(after)
            if key is None:
                raise SourceError(f"cursor {after!r} is not a {self.kind_label} record id")
            where += " AND (i.part, i.rid) > (%s, %s)"
            params.extend(key)
        sql = (
            f"SELECT i.part, i.rid FROM ({self.items()}) AS i WHERE {where} "
            "ORDER BY i.part, i.rid LIMIT %s"
        )
        return sql, [*params, limit + 1]

    def page(
        self,
        filters: Mapping[str, Any] | None = None,
        *,
        after: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        include_hidden: bool = False,
    ) -> Page:
        limit = check_limit(limit)
        sql, params = self.page_sql(
            filters, after=after, limit=limit, include_hidden=include_hidden
        )
        keys = [(int(part), str(rid)) for part, rid in self.query(sql, params)]
        found = self.load(keys)  # one more than ``limit``: whether there is a next page
        return Page.of((found[k] for k in keys if k in found), limit)

    # -- records

    def passage_select(self) -> str:
        """A passage's columns as ``passage_record`` takes them (``FROM ... AS p``)."""
        return (
            "SELECT p.id, p.text, p.embedding_config, p.metadata_, p.tags, p.created_at, "
            f"p.updated_at, p.is_deleted, p.archive_id, {self.archive_sql()}, "
            f"vector_dims(p.embedding) FROM {self.table(PASSAGES)} AS p"
        )

    def load(self, keys: Iterable[ViewKey]) -> dict[ViewKey, SourceRecord]:
        """The records of these keys that are in the store, by key."""
        keys = list(keys)
        out: dict[ViewKey, SourceRecord] = {}
        passages = [rid for part, rid in keys if part == 0]
        blocks = [rid for part, rid in keys if part == 1] if self.has_blocks else []
        for start in range(0, len(passages), 1000):
            chunk = passages[start : start + 1000]
            for row in self.query(f"{self.passage_select()} WHERE p.id = ANY(%s)", [chunk]):
                out[(0, str(row[0]))] = passage_record(row)
        for start in range(0, len(blocks), 1000):
            chunk = blocks[start : start + 1000]
            for row in self.query(
                'SELECT id, label, value, "limit", description, metadata_, created_at, '
                f"updated_at, is_deleted, version FROM {self.table('block')} "
                "WHERE id = ANY(%s)",
                [chunk],
            ):
                out[(1, str(row[0]))] = block_record(row)
        return out

    def record(self, row: Sequence[Any]) -> SourceRecord:
        """A row of ``passage_select``."""
        return passage_record(row)

    def get(self, record_id: str) -> SourceRecord | None:
        key = view_key(record_id)
        return None if key is None else self.load([key]).get(key)

    def get_many(self, record_ids: Iterable[str]) -> dict[str, SourceRecord]:
        keys = [k for k in (view_key(i) for i in dict.fromkeys(record_ids)) if k is not None]
        return {r.id: r for r in self.load(keys).values()}

    def id_hint(self, record_id: str) -> str | None:
        """A bare passage or block id, as Letta names it: say memtui's id of it."""
        if view_key(record_id) is not None:
            return None
        for part in (0, 1):
            candidate = id_of(part, str(record_id).strip())
            if self.get(candidate) is not None:
                return f"memtui's id of {record_id} is {candidate}"
        return ID_HINT

    def notes(self, record: SourceRecord) -> str:
        return record_notes(record)

    def detail(self, record_id: str) -> list[DetailSection]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        history = None
        if record.tier != "archival" and self.has_history():
            history = self.query(
                "SELECT sequence_number, value, actor_type, actor_id, created_at "
                f"FROM {self.table('block_history')} WHERE block_id = %s "
                "ORDER BY sequence_number",
                [record.metadata["block_id"]],
            )
        sections = record_sections(record, history)
        sections.append(self.history_section(record.id))
        return sections

    # -- memtui's index of it

    def cache_filter_sql(self) -> FilterSql:
        return tag_cache_filter  # type: ignore[return-value]

    def change_feed(self) -> ChangeFeed:
        return self.feed

    def prepare_index(self, index: PostgresIndex) -> None:
        index.vector_dim = self.vectors.dim()
        index.vector_search = lambda query, filters, pool, cancelled: self.vectors.lane(
            index, query, filters, pool, cancelled
        )

    def search(self, request: SearchRequest | str, **options: Any) -> SearchResponse:
        response = super().search(request, **options)
        if response.trace.source is not None:
            response.trace.source.index_refreshed = self.index_refreshed()
        return response
