"""``open_source``: recognize a memory store by its tables and columns, and open it.

A file is recognized by its schema alone (never by its name). A memtui
database opens writable by default (read-only with ``read_only=True``); every
foreign store opens read-only unless ``allow_writes=True``. A file memtui does
not recognize gets one clear line naming what memtui recognizes and what the
file holds.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, ParamSpec

from memtui.core.embed import Embedder
from memtui.core.records import parse_timestamp
from memtui.core.store import (
    SQLITE_READ_ERRORS,
    MemoryStore,
    empty_database_problem,
    sqlite_error_text,
    sqlite_file_problem,
)
from memtui.sources.base import MemorySource, SourceError
from memtui.sources.foreign import uri_for
from memtui.sources.native import NativeSource

Schema = dict[str, set[str]]


@dataclass(frozen=True)
class Kind:
    name: str
    label: str
    needs: str  # what the recognizer looks for, in words

    def describe(self) -> str:
        return f"{self.label} ({self.needs})"


KINDS: tuple[Kind, ...] = (
    Kind("memtui", "memtui database", "records + records_fts + audit_events"),
    Kind("langgraph", "LangGraph SqliteStore", "store(prefix, key, value, ...)"),
    Kind(
        "preferences",
        "explicit-preference store",
        "assistant_preferences + assistant_memory_revisions",
    ),
    Kind(
        "letta",
        "Letta 0.11 SQLite",
        "archival_passages(id, text, embedding, is_deleted, archive_id, ...); "
        "core memory from block when present",
    ),
    Kind(
        "tenant-evidence",
        "tenant evidence store",
        "a table with tenant, revision, kind, body, source, expiry",
    ),
    Kind(
        "qdrant",
        "Qdrant local folder (Cyber-AutoAgent, mem0)",
        "a folder with meta.json + collection/<name>/storage.sqlite",
    ),
)


def read_schema(path: Path) -> tuple[Schema, int]:
    """Tables with their columns, and ``user_version``, read without changing the file."""
    try:
        conn = sqlite3.connect(uri_for(path, "ro"), uri=True)
    except sqlite3.Error as exc:
        raise SourceError(f"cannot open {path}: {exc}") from None
    try:
        conn.execute("PRAGMA query_only = ON")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            ).fetchall()
        ]
        schema: Schema = {}
        for table in tables:
            quoted = table.replace('"', '""')
            schema[table] = {r[1] for r in conn.execute(f'PRAGMA table_info("{quoted}")')}
    except SQLITE_READ_ERRORS as exc:
        raise SourceError(
            f"{path} is not a usable SQLite database: {sqlite_error_text(exc)}"
        ) from None
    finally:
        conn.close()
    return schema, version


def _is_native(schema: Schema, version: int) -> bool:
    records = schema.get("records", set())
    return (
        {"id", "tier", "record_type", "content", "metadata", "refuted"} <= records
        and "audit_events" in schema
    ) or (not schema and version == 0)


def _is_langgraph(schema: Schema) -> bool:
    return {"prefix", "key", "value", "created_at", "updated_at"} <= schema.get("store", set())


def _is_preferences(schema: Schema) -> bool:
    return {"id", "session", "name", "value", "source", "created", "active"} <= schema.get(
        "assistant_preferences", set()
    ) and {"session", "revision"} <= schema.get("assistant_memory_revisions", set())


def _is_letta(schema: Schema) -> bool:
    return {
        "id",
        "text",
        "embedding_config",
        "metadata_",
        "tags",
        "embedding",
        "is_deleted",
        "archive_id",
    } <= schema.get("archival_passages", set())


TENANT_COLUMNS = frozenset({"tenant", "revision", "kind", "body", "source", "expiry"})


def tenant_table(schema: Schema) -> str | None:
    for table, columns in sorted(schema.items()):
        if TENANT_COLUMNS <= columns:
            return table
    return None


def _is_qdrant_storage(schema: Schema) -> bool:
    return schema.get("points") == {"id", "point"}


def recognize(path: Path) -> tuple[str, Schema, int]:
    """The kind of store at ``path`` (see ``KINDS``), or a one-line ``SourceError``."""
    if not path.exists():
        raise SourceError(f"no database at {path}; check the path")
    if path.is_dir():
        from memtui.sources.qdrant import find_qdrant_folder

        if find_qdrant_folder(path) is not None:
            return "qdrant", {}, 0
        raise SourceError(
            f"{path} is a folder; memtui opens SQLite files and Qdrant local folders "
            f"({FORMATS_HINT})"
        )
    problem = sqlite_file_problem(path)
    if problem is not None:
        raise SourceError(f"{path} {problem}")
    if path.stat().st_size == 0:
        return "memtui", {}, 0
    schema, version = read_schema(path)
    if _is_native(schema, version):
        return "memtui", schema, version
    if _is_langgraph(schema):
        return "langgraph", schema, version
    if _is_preferences(schema):
        return "preferences", schema, version
    if _is_letta(schema):
        return "letta", schema, version
    if tenant_table(schema):
        return "tenant-evidence", schema, version
    if _is_qdrant_storage(schema):
        return "qdrant", schema, version
    raise SourceError(
        f"{path} is a SQLite database but not a memory store memtui recognizes "
        f"(found tables: {found_tables(schema)}; {FORMATS_HINT})"
    )


FORMATS_HINT = "memtui info --formats lists what it opens"
FOUND_TABLES_WIDTH = 60
"""The most characters of "found tables" in the one-line refusal (the rest ends in …)."""


def found_tables(schema: Schema) -> str:
    """``customers(id, name), invoices(amount, ...)``: what an unrecognized file holds, short."""
    found = ", ".join(
        f"{t}({', '.join(sorted(c)[:8])}{', ...' if len(c) > 8 else ''})"
        for t, c in sorted(schema.items())[:12]
    )
    if len(found) > FOUND_TABLES_WIDTH:
        found = found[: FOUND_TABLES_WIDTH - 1] + "…"
    return found or "none"


def _clock_from(now: Any, clock: Callable[[], datetime] | None) -> Callable[[], datetime] | None:
    if isinstance(now, datetime):
        moment = now if now.tzinfo else None
        if moment is None:
            raise SourceError("--now needs a timezone (e.g. 2026-11-30T12:00:00Z)")
        return lambda: moment
    if isinstance(now, str) and now.strip():
        try:
            moment = parse_timestamp(now)
        except ValueError as exc:
            raise SourceError(f"--now: {exc}") from None
        return lambda: moment
    return clock


def _logical_now(now: Any) -> int | None:
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


Options = ParamSpec("Options")


def _recovered(
    opener: Callable[Options, MemorySource],
) -> Callable[Options, MemorySource]:
    """``opener``, then what an interrupted forget left in memtui's own files is cleared."""

    @functools.wraps(opener)
    def open_and_recover(*args: Options.args, **kwargs: Options.kwargs) -> MemorySource:
        source = opener(*args, **kwargs)
        try:
            source.recover_interrupted_forgets()
        except BaseException:
            source.close()
            raise
        return source

    return open_and_recover


@_recovered
def open_source(
    path: str | Path | None,
    *,
    read_only: bool | None = None,
    allow_writes: bool = False,
    audit_db: str | Path | None = None,
    now: Any = None,
    clock: Callable[[], datetime] | None = None,
    embedder: Embedder | None = None,
    operator: str | None = None,
    cache_root: Path | None = None,
    collection: str | None = None,
    qdrant_url: str | None = None,
    api_key: str | None = None,
    qdrant_client: Any = None,
    memory_mode: str | None = None,
    mem0_history: str | Path | None = None,
) -> MemorySource:
    """Open the memory store at ``path`` behind the ``MemorySource`` interface.

    - ``read_only``: None means the default (a memtui database writable, a
      foreign store read-only); True forces read-only for any store.
    - ``allow_writes``: lets a foreign store be changed (forget), audited in
      ``audit_db`` (default ``<store>.memtui-audit.db``).
    - ``now``: a fixed "now": an ISO-8601 time (or aware datetime) for
      time-based stores, a whole number for a logical-time store.
    - ``cache_root``: where the keyword index of a foreign store is cached
      (default ``$XDG_CACHE_HOME/memtui/sources``).
    - Qdrant (``memtui.sources.qdrant``): ``collection`` picks one (else the
      Cyber-AutoAgent or mem0 collection, else ``CollectionChoiceError``);
      ``qdrant_url`` (and ``api_key``, or a ready ``qdrant_client``) opens a
      server instead of ``path``; ``memory_mode`` (``operation``/``shared``)
      applies Cyber-AutoAgent's scope rule; ``mem0_history`` names mem0's
      ``history.db``.

    Every open purges memtui's cached copy of a record an interrupted forget
    removed from the store (``recover_interrupted_forgets``).
    """
    qdrant_options = {"memory_mode": memory_mode, "mem0_history": mem0_history}
    if qdrant_url is not None or qdrant_client is not None:
        if path:
            raise SourceError("give a store PATH or --qdrant-url, not both")
        from memtui.sources.qdrant import open_qdrant_server

        return open_qdrant_server(
            qdrant_url or ":memory:",
            api_key=api_key,
            collection=collection,
            client=qdrant_client,
            read_only=read_only is True or not allow_writes,
            options=qdrant_options,
            cache_root=cache_root,
            audit_db=audit_db,
            clock=_clock_from(now, clock),
            operator=operator,
        )
    if path is None or str(path) == "":
        raise SourceError("give a store PATH (or --qdrant-url URL for a Qdrant server)")
    path = Path(path)
    kind, schema, _version = recognize(path)
    if kind != "qdrant" and (collection or api_key or any(qdrant_options.values())):
        used = [
            name
            for name, value in (
                ("--collection", collection),
                ("--api-key", api_key),
                ("--memory-mode", memory_mode),
                ("--mem0-history", mem0_history),
            )
            if value
        ]
        raise SourceError(f"{', '.join(used)} applies to Qdrant stores; {path} is not one")
    if kind == "memtui":
        writable = read_only is not True
        if writable and not path.exists():
            raise SourceError(f"no database at {path}; check the path")
        empty = empty_database_problem(path) if path.exists() else None
        if empty is not None:
            raise SourceError(empty)
        store = MemoryStore(
            path,
            read_only=not writable,
            clock=_clock_from(now, clock),
            embedder=embedder,
            operator=operator,
        )
        return NativeSource(store)
    foreign_read_only = read_only is True or not allow_writes
    common: dict[str, Any] = {
        "read_only": foreign_read_only,
        "operator": operator,
        "audit_db": audit_db,
        "cache_root": cache_root,
    }
    if kind == "tenant-evidence":
        from memtui.sources.tenant import TenantEvidenceSource

        table = tenant_table(schema)
        assert table is not None
        return TenantEvidenceSource(path, table=table, logical_now=_logical_now(now), **common)
    common["clock"] = _clock_from(now, clock)
    if kind == "langgraph":
        from memtui.sources.langgraph import LangGraphSource

        return LangGraphSource(path, **common)
    if kind == "preferences":
        from memtui.sources.preferences import PreferenceSource

        return PreferenceSource(path, **common)
    if kind == "letta":
        from memtui.sources.letta import LettaSource

        return LettaSource(path, **common)
    if kind == "qdrant":
        from memtui.sources.qdrant import open_qdrant_folder

        if path.is_file():  # a collection's storage.sqlite: its folder is two levels up
            collection = collection or path.parent.name
            path = path.parent.parent.parent
        return open_qdrant_folder(path, collection=collection, options=qdrant_options, **common)
    raise SourceError(f"{path}: no adapter for {kind}")  # pragma: no cover
