"""The kinds of store memtui recognizes in a Postgres schema, tried in order.

A kind is one module of this package and one ``PostgresKind`` here: how it is
recognized (by its tables, columns and types in the chosen schema, from the
``Catalog``) and opened (with the ``PgDatabase`` the recognizing opened: its
connection, target and catalog). The registry's one ``postgres`` entry
(``memtui.sources.kinds.POSTGRES``) opens a URL through ``POSTGRES_KINDS``;
a database none of them recognizes is one line saying what it holds.

Adding a kind (Letta's passages): its module with the source class, a
recognizer and an opener below, and one entry in ``POSTGRES_KINDS``. A kind
that holds several stores in one schema (mem0's collections) sets
``takes_collection``: ``--collection`` then tries those kinds only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from memtui.sources.base import MemorySource
from memtui.sources.postgres.catalog import Catalog, PgDatabase
from memtui.sources.postgres.connection import PgConnection
from memtui.sources.postgres.url import PgTarget
from memtui.sources.store_kind import OpenRequest

PostgresOpener = Callable[[PgDatabase, OpenRequest, Any], MemorySource | None]
"""``open(database, request, options)``: the store in ``database``, opened (``options``:
the registry's ``PostgresOptions``); None when a closer look finds none after all."""


@dataclass(frozen=True)
class PostgresKind:
    """One kind of store in a Postgres schema."""

    name: str
    label: str
    needs: str
    """What the recognizer looks for, in words (``memtui info --formats``)."""
    missing: str
    """It, short, for "holds ... but no LangGraph store" (``a LangGraph store``)."""
    recognize: Callable[[Catalog, Any], bool]
    open: PostgresOpener
    takes_collection: bool = False
    """Whether ``--collection`` names one of its stores (then only such kinds are tried)."""


# ---------------------------------------------------------------- LangGraph PostgresStore


def is_langgraph_postgres(catalog: Catalog, options: Any) -> bool:
    """LangGraph's ``store`` table: prefix and key text, value jsonb, its two times."""
    return catalog.has(
        "store",
        {
            "prefix": "text",
            "key": "text",
            "value": "jsonb",
            "created_at": "timestamp",
            "updated_at": "timestamp",
        },
    )


def open_langgraph_postgres(database: PgDatabase, request: OpenRequest, options: Any) -> Any:
    from memtui.sources.postgres.langgraph import LangGraphPostgresSource

    if getattr(options, "mem0_history", None):
        from memtui.sources.base import SourceError

        raise SourceError(
            f"--mem0-history applies to mem0 collections; {database.target.display} "
            f"(schema {database.target.schema}) holds a LangGraph PostgresStore"
        )
    return LangGraphPostgresSource(database, **request.foreign())


LANGGRAPH_POSTGRES = PostgresKind(
    name="langgraph-postgres",
    label="LangGraph PostgresStore",
    needs="store(prefix, key, value jsonb, created_at, updated_at[, expires_at, ttl_minutes]); "
    "store_vectors(prefix, key, field_name, embedding vector) when indexed",
    missing="LangGraph store",
    recognize=is_langgraph_postgres,
    open=open_langgraph_postgres,
)

# ---------------------------------------------------------------- mem0 pgvector collection


def is_mem0_pgvector(catalog: Catalog, options: Any) -> bool:
    """A table shaped as mem0's ``PGVector`` collection: id uuid, vector, payload jsonb."""
    from memtui.sources.postgres.mem0_pgvector import shaped_tables

    return bool(shaped_tables(catalog))


def open_mem0_pgvector(database: PgDatabase, request: OpenRequest, options: Any) -> Any:
    from memtui.sources.postgres.mem0_pgvector import choose_collection, open_collection

    collection = choose_collection(database, getattr(options, "collection", None))
    if collection is None:
        return None
    return open_collection(database, collection, options, request.foreign())


MEM0_PGVECTOR = PostgresKind(
    name="mem0-pgvector",
    label="mem0 pgvector collection",
    needs="a mem0 collection table (id uuid, vector vector(n), payload jsonb with mem0's "
    "data, hash, user_id...); --collection NAME when there are several",
    missing="mem0 pgvector collection",
    recognize=is_mem0_pgvector,
    open=open_mem0_pgvector,
    takes_collection=True,
)

# ---------------------------------------------------------------- Letta server


def is_letta_postgres(catalog: Catalog, options: Any) -> bool:
    """Letta's ``archival_passages`` (text, json configs and tags, archive, soft-delete
    flag, a pgvector ``embedding``)."""
    from memtui.sources.postgres.letta import is_letta_server

    return is_letta_server(catalog)


def open_letta_postgres(database: PgDatabase, request: OpenRequest, options: Any) -> Any:
    from memtui.sources.postgres.letta import LettaPostgresSource

    if getattr(options, "mem0_history", None):
        from memtui.sources.base import SourceError

        raise SourceError(
            f"--mem0-history applies to mem0 collections; {database.target.display} "
            f"(schema {database.target.schema}) holds a Letta server's passages"
        )
    return LettaPostgresSource(database, **request.foreign())


LETTA_POSTGRES = PostgresKind(
    name="letta-postgres",
    label="Letta server",
    needs="Letta's archival_passages(id, text, embedding vector(4096), embedding_config json, "
    "metadata_ json, tags json, archive_id, is_deleted, created_at, updated_at), with "
    "archives, passage_tags, block and block_history when there",
    missing="Letta server passages",
    recognize=is_letta_postgres,
    open=open_letta_postgres,
)

POSTGRES_KINDS: tuple[PostgresKind, ...] = (LANGGRAPH_POSTGRES, MEM0_PGVECTOR, LETTA_POSTGRES)
"""Every kind a Postgres URL may hold, in the order they are tried."""


def open_database(target: PgTarget, request: OpenRequest, options: Any) -> MemorySource:
    """The store at ``target``: connect (read-only unless writes are allowed), read the
    schema's catalog, open it as the first kind that recognizes it; else one line."""
    conn = PgConnection(target, read_only=request.foreign_read_only)
    try:
        catalog = _catalog(conn, target)
        database = PgDatabase(target=target, conn=conn, catalog=catalog)
        named = getattr(options, "collection", None) is not None
        tried = [kind for kind in POSTGRES_KINDS if kind.takes_collection or not named]
        for kind in tried:
            if kind.recognize(catalog, options):
                source = kind.open(database, request, options)
                if source is not None:
                    return source
        from memtui.sources.base import SourceError

        wanted = either(kind.missing for kind in tried)
        raise SourceError(f"{catalog.describe(target)} but no {wanted}")
    except BaseException:
        conn.close()
        raise


def either(names: Iterable[str]) -> str:
    """``a, b or c``: what a schema was looked at for, in words."""
    listed = list(names)
    return " or ".join([", ".join(listed[:-1]), listed[-1]] if len(listed) > 2 else listed)


def _catalog(conn: PgConnection, target: PgTarget) -> Catalog:
    from memtui.sources.postgres.catalog import read_catalog

    return read_catalog(conn, target.schema)
