"""``open_source``: recognize a memory store by its tables and columns, and open it.

A file is recognized by its schema alone (never by its name). A memtui
database opens writable by default (read-only with ``read_only=True``); every
foreign store opens read-only unless ``allow_writes=True``. A file memtui does
not recognize gets one clear line naming what memtui recognizes and what the
file holds. Which kinds there are, and how each opens, is the registry's
(``memtui.sources.registry``).
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, ParamSpec

from memtui.core.embed import Embedder
from memtui.core.store import SQLITE_READ_ERRORS, sqlite_error_text, sqlite_file_problem
from memtui.sources.base import MemorySource, SourceError
from memtui.sources.foreign import uri_for
from memtui.sources.kinds import TENANT_COLUMNS, tenant_table
from memtui.sources.registry import REGISTRY, Registry
from memtui.sources.store_kind import OpenRequest, Probe, Schema, StoreKind

KINDS: Registry = REGISTRY
"""Every kind memtui recognizes, in the order they are tried (the registry itself)."""

__all__ = [
    "FORMATS_HINT",
    "KINDS",
    "TENANT_COLUMNS",
    "Schema",
    "found_tables",
    "names_remote_store",
    "names_url_store",
    "open_source",
    "read_schema",
    "recognize",
    "tenant_table",
]


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


def probe(path: Path) -> Probe:
    """What recognizing ``path`` reads, or a one-line ``SourceError``."""
    if not path.exists():
        raise SourceError(f"no database at {path}; check the path")
    if path.is_dir():
        return Probe(path, {}, 0)
    problem = sqlite_file_problem(path)
    if problem is not None:
        raise SourceError(f"{path} {problem}")
    if path.stat().st_size == 0:
        return Probe(path, {}, 0)
    schema, version = read_schema(path)
    return Probe(path, schema, version)


def recognize_kind(path: Path) -> tuple[StoreKind, Probe]:
    """The registry's kind of the store at ``path``, or a one-line ``SourceError``."""
    found = probe(path)
    kind = REGISTRY.recognize(found)
    if kind is not None:
        return kind, found
    if found.is_folder:
        raise SourceError(
            f"{path} is a folder; memtui opens SQLite files and "
            f"{' and '.join(REGISTRY.folder_kinds())} ({FORMATS_HINT})"
        )
    raise SourceError(
        f"{path} is a SQLite database but not a memory store memtui recognizes "
        f"(found tables: {found_tables(found.schema)}; {FORMATS_HINT})"
    )


def recognize(path: Path) -> tuple[str, Schema, int]:
    """The kind of store at ``path`` (its name in ``KINDS``), or a one-line ``SourceError``."""
    kind, found = recognize_kind(path)
    return kind.name, found.schema, found.version


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


def _refuse_others_options(kind: StoreKind, options: Mapping[str, Any], path: object) -> None:
    """Options given for another kind of store than the one at ``path`` (a path, or a URL
    named by its scheme alone: a URL may hold a password) are refused."""
    own = options.get(kind.name)
    taken = set(own.given_flags()) if own is not None else set()
    for other in REGISTRY:
        given = options.get(other.name)
        if other is kind or given is None:
            continue
        used = [flag for flag in given.given_flags() if flag not in taken]
        if used:
            also = [
                k.options_apply_to
                for k in REGISTRY
                if k is not other
                and options.get(k.name) is not None
                and set(used) <= set(options[k.name].given_flags())
            ]
            kinds = [other.options_apply_to, *also]
            where = (
                " and ".join(kinds)
                if len(kinds) < 3
                else (f"{', '.join(kinds[:-1])} and {kinds[-1]}")
            )
            raise SourceError(f"{', '.join(used)} applies to {where}; {path} is not one")


def names_remote_store(options: Mapping[str, Any] | None) -> bool:
    """Whether ``options`` name a store to open without a path (a Qdrant server)."""
    split = REGISTRY.split_options(options or {})
    return any(k.remote is not None and k.remote.named_by(split[k.name]) for k in REGISTRY)


def names_url_store(location: object) -> bool:
    """Whether ``location`` is a URL a kind opens in place of a path (``postgresql://...``)."""
    return REGISTRY.url_kind(location) is not None


def _open_url(
    location: object, options: Mapping[str, Any], request: OpenRequest
) -> MemorySource | None:
    """The store a URL names in place of a path (a Postgres database), or None."""
    kind = REGISTRY.url_kind(location)
    if kind is None or kind.open_url is None:
        return None
    scheme = str(location).strip().partition("://")[0].lower()
    _refuse_others_options(kind, options, f"a {scheme}:// URL")
    return kind.open_url(str(location).strip(), request, options.get(kind.name))


def _open_remote(
    path: str | Path | None, options: Mapping[str, Any], request: OpenRequest
) -> MemorySource | None:
    """The store the options name without a path (a server), or None."""
    for kind in REGISTRY:
        remote = kind.remote
        if remote is None or not remote.named_by(options[kind.name]):
            continue
        if path:
            raise SourceError(f"give a store PATH or {remote.flag}, not both")
        return remote.open(request, options[kind.name])
    return None


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
    options: Mapping[str, Any] | None = None,
    **kind_options: Any,
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
    - ``options`` (and ``kind_options``): options of one kind of store, handed
      to that kind only (``Registry.split_options``): a kind's name with its
      options object, or one option by name. Qdrant's
      (``memtui.sources.kinds.QdrantOptions``): ``collection`` picks one (else
      the Cyber-AutoAgent or mem0 collection, else ``CollectionChoiceError``);
      ``qdrant_url`` (and ``api_key``, or a ready ``qdrant_client``) opens a
      server instead of ``path``; ``memory_mode`` (``operation``/``shared``)
      applies Cyber-AutoAgent's scope rule; ``mem0_history`` names mem0's
      ``history.db``. Postgres's (``PostgresOptions``): ``pg_schema``, and
      ``collection`` and ``mem0_history`` for a mem0 pgvector collection.

    ``path`` may be a URL a kind opens instead of a file (``postgresql://...``: a
    LangGraph ``PostgresStore``; ``memtui.sources.postgres``).

    Every open purges memtui's cached copy of a record an interrupted forget
    removed from the store (``recover_interrupted_forgets``).
    """
    split = REGISTRY.split_options({**(options or {}), **kind_options})
    request = OpenRequest(
        read_only=read_only,
        allow_writes=allow_writes,
        audit_db=audit_db,
        now=now,
        clock=clock,
        embedder=embedder,
        operator=operator,
        cache_root=cache_root,
    )
    remote = _open_remote(path, split, request)
    if remote is not None:
        return remote
    by_url = _open_url(path, split, request)
    if by_url is not None:
        return by_url
    if path is None or str(path) == "":
        hints = " or ".join(
            f"{k.remote.flag} URL for {k.remote.what}" for k in REGISTRY if k.remote
        )
        raise SourceError(f"give a store PATH (or {hints})" if hints else "give a store PATH")
    path = Path(path)
    kind, found = recognize_kind(path)
    _refuse_others_options(kind, split, path)
    return kind.open(found, request, split.get(kind.name))
