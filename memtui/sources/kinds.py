"""The store kinds memtui ships: how each is recognized (by tables and columns, never by
name) and opened.

Each opener imports its adapter when it runs, so recognizing a memtui database
does not import every store's adapter. Which class reads a Qdrant collection of
each kind is chosen here (``QDRANT_COLLECTION_CLASSES``): the qdrant package
imports none of the adapters built on it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtui.sources.base import MemorySource, SourceError
from memtui.sources.store_kind import OpenRequest, Probe, Remote, Schema, StoreKind

if TYPE_CHECKING:
    from memtui.sources.qdrant import QdrantSource

# ---------------------------------------------------------------- memtui's own database


def is_native(probe: Probe) -> bool:
    schema = probe.schema
    records = schema.get("records", set())
    return not probe.is_folder and (
        (
            {"id", "tier", "record_type", "content", "metadata", "refuted"} <= records
            and "audit_events" in schema
        )
        or (not schema and probe.version == 0)
    )


def open_native(probe: Probe, request: OpenRequest, options: Any) -> MemorySource:
    from memtui.core.store import MemoryStore, empty_database_problem
    from memtui.sources.native import NativeSource

    path = probe.path
    writable = request.read_only is not True
    if writable and not path.exists():
        raise SourceError(f"no database at {path}; check the path")
    empty = empty_database_problem(path) if path.exists() else None
    if empty is not None:
        raise SourceError(empty)
    store = MemoryStore(
        path,
        read_only=not writable,
        clock=request.fixed_clock(),
        embedder=request.embedder,
        operator=request.operator,
    )
    return NativeSource(store)


# ---------------------------------------------------------------- foreign SQLite stores


def is_langgraph(probe: Probe) -> bool:
    columns = probe.schema.get("store", set())
    return {"prefix", "key", "value", "created_at", "updated_at"} <= columns


def open_langgraph(probe: Probe, request: OpenRequest, options: Any) -> MemorySource:
    from memtui.sources.langgraph import LangGraphSource

    return LangGraphSource(probe.path, **request.foreign())


def is_preferences(probe: Probe) -> bool:
    schema = probe.schema
    return {"id", "session", "name", "value", "source", "created", "active"} <= schema.get(
        "assistant_preferences", set()
    ) and {"session", "revision"} <= schema.get("assistant_memory_revisions", set())


def open_preferences(probe: Probe, request: OpenRequest, options: Any) -> MemorySource:
    from memtui.sources.preferences import PreferenceSource

    return PreferenceSource(probe.path, **request.foreign())


LETTA_COLUMNS = frozenset(
    {"id", "text", "embedding_config", "metadata_", "tags", "embedding", "is_deleted", "archive_id"}
)


def is_letta(probe: Probe) -> bool:
    return LETTA_COLUMNS <= probe.schema.get("archival_passages", set())


def open_letta(probe: Probe, request: OpenRequest, options: Any) -> MemorySource:
    from memtui.sources.letta import LettaSource

    return LettaSource(probe.path, **request.foreign())


TENANT_COLUMNS = frozenset({"tenant", "revision", "kind", "body", "source", "expiry"})


def tenant_table(schema: Schema) -> str | None:
    for table, columns in sorted(schema.items()):
        if TENANT_COLUMNS <= columns:
            return table
    return None


def logical_now(now: Any) -> int | None:
    """``--now`` of a logical-time store: a whole number (None: the store's own latest)."""
    if now is None or now == "":
        return None
    if isinstance(now, bool):
        raise SourceError("--now for a tenant evidence store is a whole number (logical time)")
    if isinstance(now, int):
        return now
    text = str(now).strip()
    try:
        return int(text)
    except ValueError:
        raise SourceError(
            f"--now for a tenant evidence store is a whole number (logical time), got {now!r}"
        ) from None


def open_tenant(probe: Probe, request: OpenRequest, options: Any) -> MemorySource:
    from memtui.sources.tenant import TenantEvidenceSource

    table = tenant_table(probe.schema)
    assert table is not None
    return TenantEvidenceSource(
        probe.path,
        table=table,
        logical_now=logical_now(request.now),
        **request.foreign(clock=False),
    )


# ---------------------------------------------------------------- Qdrant


@dataclass(frozen=True)
class QdrantOptions:
    """What opening a Qdrant store takes besides a path (the CLI's Qdrant options).

    ``collection`` picks one (an alias works too); ``qdrant_url`` (with
    ``api_key``), or a ready ``qdrant_client``, opens a server instead of a
    path; ``memory_mode`` and ``mem0_history`` go to the collection kind that
    takes them (Cyber-AutoAgent, mem0).
    """

    collection: str | None = None
    api_key: str | None = None
    memory_mode: str | None = None
    mem0_history: str | Path | None = None
    qdrant_url: str | None = None
    qdrant_client: Any = None

    #: the options a path store takes, as the CLI spells them (in the order errors name them)
    PATH_FLAGS = (
        ("collection", "--collection"),
        ("api_key", "--api-key"),
        ("memory_mode", "--memory-mode"),
        ("mem0_history", "--mem0-history"),
    )

    @property
    def names_a_server(self) -> bool:
        return self.qdrant_url is not None or self.qdrant_client is not None

    def given_flags(self) -> list[str]:
        """The options given, as flags (a store of another kind refuses them)."""
        return [flag for name, flag in self.PATH_FLAGS if getattr(self, name)]

    def collection_options(self) -> dict[str, Any]:
        """What the collection's own class takes (``QdrantSource.options_from``)."""
        return {"memory_mode": self.memory_mode, "mem0_history": self.mem0_history}


#: the class that reads a Qdrant collection of each kind (``CollectionInfo.kind``)
QDRANT_COLLECTION_CLASSES = {
    "cyber-autoagent": "memtui.sources.cyber_autoagent:CyberAutoAgentSource",
    "cyber-web-cache": "memtui.sources.cyber_autoagent:WebSearchCacheSource",
    "mem0": "memtui.sources.mem0:Mem0Source",
    "mem0-entities": "memtui.sources.qdrant:Mem0EntitiesSource",
}


def qdrant_source_class(kind: str) -> type[QdrantSource]:
    """The class for a collection of ``kind`` (a plain ``QdrantSource`` for any other)."""
    where = QDRANT_COLLECTION_CLASSES.get(kind, "memtui.sources.qdrant:QdrantSource")
    module, name = where.split(":")
    found: type[QdrantSource] = getattr(importlib.import_module(module), name)
    return found


def is_qdrant(probe: Probe) -> bool:
    if probe.is_folder:
        from memtui.sources.qdrant import find_qdrant_folder

        return find_qdrant_folder(probe.path) is not None
    return probe.schema.get("points") == {"id", "point"}


def open_qdrant(probe: Probe, request: OpenRequest, options: Any) -> MemorySource:
    from memtui.sources.qdrant import open_qdrant_folder

    path: Path = probe.path
    collection = options.collection
    if path.is_file():  # a collection's storage.sqlite: its folder is two levels up
        collection = collection or path.parent.name
        path = path.parent.parent.parent
    return open_qdrant_folder(
        path,
        collection=collection,
        options=options.collection_options(),
        source_class=qdrant_source_class,
        **request.foreign(),
    )


def open_qdrant_server(request: OpenRequest, options: Any) -> MemorySource:
    from memtui.sources.qdrant import open_qdrant_server as open_server

    return open_server(
        options.qdrant_url or ":memory:",
        api_key=options.api_key,
        collection=options.collection,
        client=options.qdrant_client,
        read_only=request.foreign_read_only,
        options=options.collection_options(),
        cache_root=request.cache_root,
        audit_db=request.audit_db,
        clock=request.fixed_clock(),
        operator=request.operator,
        source_class=qdrant_source_class,
    )


# ---------------------------------------------------------------- Chroma


@dataclass(frozen=True)
class ChromaOptions:
    """What opening a Chroma folder takes besides its path: ``collection`` picks one."""

    collection: str | None = None

    def given_flags(self) -> list[str]:
        """The options given, as flags (a store of another kind refuses them)."""
        return ["--collection"] if self.collection else []


def is_chroma(probe: Probe) -> bool:
    if probe.is_folder:
        from memtui.sources.chroma.folder import find_chroma_folder

        return find_chroma_folder(probe.path) is not None
    from memtui.sources.chroma.folder import SQLITE_NAME, is_chroma_schema

    return probe.path.name == SQLITE_NAME and is_chroma_schema(set(probe.schema))


def open_chroma(probe: Probe, request: OpenRequest, options: Any) -> MemorySource:
    from memtui.sources.chroma import open_chroma_folder

    return open_chroma_folder(
        probe.path, collection=options.collection if options else None, **request.foreign()
    )


# ---------------------------------------------------------------- Postgres


@dataclass(frozen=True)
class PostgresOptions:
    """What opening a Postgres URL takes besides the URL: the schema (``--pg-schema``);
    for mem0's pgvector collections, ``collection`` picks one and ``mem0_history`` names
    mem0's ``history.db`` (the options of the same names as Qdrant's)."""

    pg_schema: str | None = None
    collection: str | None = None
    mem0_history: str | Path | None = None

    FLAGS = (
        ("pg_schema", "--pg-schema"),
        ("collection", "--collection"),
        ("mem0_history", "--mem0-history"),
    )

    def given_flags(self) -> list[str]:
        """The options given, as flags (a store of another kind refuses them)."""
        return [flag for name, flag in self.FLAGS if getattr(self, name)]


def open_postgres(url: str, request: OpenRequest, options: Any) -> MemorySource:
    """The store the URL names: the first kind of ``memtui.sources.postgres.kinds`` that
    recognizes the schema's tables."""
    from memtui.sources.postgres.kinds import open_database
    from memtui.sources.postgres.url import DEFAULT_SCHEMA, PgTarget

    schema = (options.pg_schema if options is not None else None) or DEFAULT_SCHEMA
    return open_database(PgTarget(url, schema=schema), request, options)


def _postgres_entry() -> StoreKind:
    from memtui.sources.postgres.kinds import POSTGRES_KINDS
    from memtui.sources.postgres.url import SCHEMES

    return StoreKind(
        "postgres",
        "Postgres database (" + ", ".join(k.label for k in POSTGRES_KINDS) + ")",
        "a postgresql:// URL in place of PATH; in the schema (--pg-schema, default public): "
        + "; or ".join(k.needs for k in POSTGRES_KINDS),
        lambda probe: False,  # never a file: a URL names it
        lambda probe, request, options: open_postgres(str(probe.path), request, options),
        options=PostgresOptions,
        options_apply_to="Postgres stores",
        extra="psycopg: pip install 'memtui[postgres]'",
        schemes=SCHEMES,
        open_url=open_postgres,
    )


# ---------------------------------------------------------------- the entries

NATIVE = StoreKind(
    "memtui", "memtui database", "records + records_fts + audit_events", is_native, open_native
)
LANGGRAPH = StoreKind(
    "langgraph",
    "LangGraph SqliteStore",
    "store(prefix, key, value, ...)",
    is_langgraph,
    open_langgraph,
)
PREFERENCES = StoreKind(
    "preferences",
    "explicit-preference store",
    "assistant_preferences + assistant_memory_revisions",
    is_preferences,
    open_preferences,
)
LETTA = StoreKind(
    "letta",
    "Letta 0.11 SQLite",
    "archival_passages(id, text, embedding, is_deleted, archive_id, ...); "
    "core memory from block when present",
    is_letta,
    open_letta,
)
TENANT = StoreKind(
    "tenant-evidence",
    "tenant evidence store",
    "a table with tenant, revision, kind, body, source, expiry",
    lambda probe: tenant_table(probe.schema) is not None,
    open_tenant,
)
QDRANT = StoreKind(
    "qdrant",
    "Qdrant local folder (Cyber-AutoAgent, mem0)",
    "a folder with meta.json + collection/<name>/storage.sqlite",
    is_qdrant,
    open_qdrant,
    options=QdrantOptions,
    options_apply_to="Qdrant stores",
    extra="qdrant-client for a server: pip install 'memtui[qdrant]'",
    folders="Qdrant local folders",
    remote=Remote(
        flag="--qdrant-url",
        what="a Qdrant server",
        named_by=lambda options: options.names_a_server,
        open=open_qdrant_server,
    ),
)
CHROMA = StoreKind(
    "chroma",
    "Chroma folder (chromadb PersistentClient: LangChain, LlamaIndex)",
    "a folder with chroma.sqlite3 (collections, segments, embeddings, embeddings_queue)",
    is_chroma,
    open_chroma,
    options=ChromaOptions,
    options_apply_to="Chroma folders",
    extra="chromadb to forget: pip install 'memtui[chroma]'",
    folders="Chroma folders",
)
POSTGRES = _postgres_entry()
