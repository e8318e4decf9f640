"""MemoryStore: the SQLite schema, FTS5 index, writers, scoped reads and audit log.

Every mutation goes through a method here that writes its audit event in the
same transaction (docs/design.md sections 1 and 3). Readers never hold a read
transaction open: every query is fetched to the end at once, so that a forget
can always truncate the WAL.

The package is split by job, one module each: ``files`` (what a file is before
it is opened), ``schema`` (migrations and triggers), ``connection`` (opening,
the write transaction, the checkpoint; the lock and the reads are
``memtui.core.index_db``'s, shared with a foreign store's index), ``rows`` (a record as a row),
``reads`` (scoped reads and counts), ``audit`` (the hash chain), ``vectors``,
``writers`` (tactics, findings, refutation, reveal), ``ingest``, ``erasure``
and ``erasure_checks`` (forget and its checks), ``maintenance``; and
``memory_store``, where ``MemoryStore`` is composed of them. Everything that was
imported from ``memtui.core.store`` still is.
"""

from memtui.core.index import FTS_TABLE
from memtui.core.store.audit import (
    AUDIT_TEXT_COLUMNS,
    GENESIS_HASH,
    audit_hash,
    audit_value_problem,
)
from memtui.core.store.connection import Clock, Progress
from memtui.core.store.erasure import ScopeForgetResult
from memtui.core.store.errors import MemoryStoreError
from memtui.core.store.files import (
    SQLITE_MAGIC,
    SQLITE_READ_ERRORS,
    empty_database_problem,
    fts5_available,
    sqlite_error_text,
    sqlite_file_problem,
)
from memtui.core.store.memory_store import MemoryStore, migrate_database
from memtui.core.store.reads import FILTER_ALLOWLIST, check_filter_key
from memtui.core.store.rows import (
    _RECORD_COLUMNS,
    _TEXT_COLUMNS,
    _canonical,
    _row_to_record,
    pack_vector,
    unpack_vector,
)
from memtui.core.store.schema import _INSERT_TRIGGER, _MIGRATIONS, SCHEMA_VERSION, _split_sql
from memtui.core.store.writers import compose_tactic_text, tactic_metadata

__all__ = [
    "AUDIT_TEXT_COLUMNS",
    "FILTER_ALLOWLIST",
    "FTS_TABLE",
    "GENESIS_HASH",
    "SCHEMA_VERSION",
    "SQLITE_MAGIC",
    "SQLITE_READ_ERRORS",
    "_INSERT_TRIGGER",
    "_MIGRATIONS",
    "_RECORD_COLUMNS",
    "_TEXT_COLUMNS",
    "Clock",
    "MemoryStore",
    "MemoryStoreError",
    "Progress",
    "ScopeForgetResult",
    "_canonical",
    "_row_to_record",
    "_split_sql",
    "audit_hash",
    "audit_value_problem",
    "check_filter_key",
    "compose_tactic_text",
    "empty_database_problem",
    "fts5_available",
    "migrate_database",
    "pack_vector",
    "sqlite_error_text",
    "sqlite_file_problem",
    "tactic_metadata",
    "unpack_vector",
]
