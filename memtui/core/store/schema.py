"""The schema: its migrations, the triggers bulk paths set aside, and the full-text
index's maintenance statement."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from memtui.core.index import FTS_TABLE
from memtui.core.records import TIERS
from memtui.core.store.errors import MemoryStoreError
from memtui.core.store.files import SQLITE_READ_ERRORS, sqlite_error_text

SCHEMA_VERSION = 2

_PURGE_CACHE_KIB = -65536  # page cache while 'optimize' rewrites the index (64 MiB)

_MIGRATIONS: tuple[str, ...] = (
    # 1: records, FTS5 external-content index, vectors, meta, audit log.
    f"""
    CREATE TABLE records (
        id INTEGER PRIMARY KEY,
        tier TEXT NOT NULL CHECK (tier IN ({", ".join(repr(t) for t in TIERS)})),
        record_type TEXT NOT NULL,
        content TEXT NOT NULL,
        profile_hash TEXT,
        engagement TEXT,
        run_id TEXT,
        tool_name TEXT,
        url_pattern TEXT,
        signature TEXT,
        metadata TEXT NOT NULL DEFAULT '{{}}',
        refuted INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        expires_at TEXT
    );
    CREATE UNIQUE INDEX records_signature ON records(signature) WHERE signature IS NOT NULL;
    CREATE INDEX records_tier_profile ON records(tier, profile_hash);
    CREATE INDEX records_tier_engagement ON records(tier, engagement);
    CREATE INDEX records_engagement ON records(engagement, record_type);
    CREATE INDEX records_profile ON records(profile_hash, record_type);
    CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(
        content, content='records', content_rowid='id'
    );
    CREATE TRIGGER records_ad AFTER DELETE ON records BEGIN
        INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, content) VALUES ('delete', old.id, old.content);
        DELETE FROM vectors WHERE record_id = old.id;
    END;
    CREATE TRIGGER records_au AFTER UPDATE OF content ON records BEGIN
        INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, content) VALUES ('delete', old.id, old.content);
        INSERT INTO {FTS_TABLE}(rowid, content) VALUES (new.id, new.content);
    END;
    CREATE TABLE vectors (
        record_id INTEGER PRIMARY KEY,
        vector BLOB NOT NULL
    );
    CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    CREATE TABLE audit_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at TEXT NOT NULL,
        operator TEXT NOT NULL,
        action TEXT NOT NULL,
        record_ids TEXT NOT NULL,
        tier TEXT,
        record_type TEXT,
        signature TEXT,
        reason TEXT,
        details TEXT NOT NULL,
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL
    );
    CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events BEGIN
        SELECT RAISE(ABORT, 'audit_events is append-only');
    END;
    CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events BEGIN
        SELECT RAISE(ABORT, 'audit_events is append-only');
    END;
    """,
    # 2: indexes for a million records, and a vectors generation counter.
    # - records_tier: keyset pages of one tier in id order, and tier counts
    #   from the index alone.
    # - records_refuted / records_expiry: the small sets that the live rule
    #   leaves out (refuted; expiring), so that live counts are index totals
    #   minus these, and search can exclude them without a join per match.
    # - records_type_profile: the distinct live profiles of one record type
    #   (the lanes' similar profiles), from the index alone; a partial index
    #   would not serve it, as the record type is a bound parameter.
    # - vectors_generation: bumped by triggers on every vector write or delete
    #   (kept apart, like the insert trigger, so bulk paths bump it once); a
    #   cached copy of the vectors (memtui.core.vector_cache) is current only
    #   for the generation it was built at. database_id tells copies apart.
    """
    CREATE INDEX records_tier ON records(tier);
    CREATE INDEX records_refuted ON records(tier, profile_hash, engagement, refuted)
        WHERE refuted != 0;
    CREATE INDEX records_expiry ON records(expires_at, refuted, tier, profile_hash, engagement)
        WHERE expires_at IS NOT NULL;
    CREATE INDEX records_type_profile ON records(record_type, profile_hash, refuted, expires_at);
    INSERT OR IGNORE INTO meta (key, value) VALUES ('vectors_generation', '0');
    INSERT OR IGNORE INTO meta (key, value) VALUES ('database_id', lower(hex(randomblob(16))));
    """,
)

# The insert trigger is kept apart so that bulk ingest can load rows without
# going through it one by one and index them in one statement afterwards.
_INSERT_TRIGGER = f"""
CREATE TRIGGER records_ai AFTER INSERT ON records BEGIN
    INSERT INTO {FTS_TABLE}(rowid, content) VALUES (new.id, new.content);
END;
"""

# Every write to the vectors table bumps the generation, so that a cached
# matrix of the vectors knows when it is stale (see memtui.core.vector_cache).
_BUMP_GENERATION = (
    "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'vectors_generation';"
)
_VECTOR_TRIGGERS = tuple(
    f"CREATE TRIGGER IF NOT EXISTS vectors_generation_{suffix} AFTER {event} ON vectors "
    f"BEGIN {_BUMP_GENERATION} END;"
    for suffix, event in (("ai", "INSERT"), ("ad", "DELETE"), ("au", "UPDATE"))
)
_VECTOR_TRIGGER_NAMES = ("vectors_generation_ai", "vectors_generation_ad", "vectors_generation_au")


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies whole."""
    statements: list[str] = []
    buffer: list[str] = []
    for line in script.strip().splitlines():
        buffer.append(line)
        candidate = "\n".join(buffer).strip()
        if candidate.endswith(";") and sqlite3.complete_statement(candidate):
            statements.append(candidate)
            buffer = []
    if "\n".join(buffer).strip():
        statements.append("\n".join(buffer).strip())
    return statements


def read_schema_state(conn: sqlite3.Connection, path: Path | None) -> tuple[int, list[str]]:
    """The file's schema version and the names of its tables; refused when unreadable."""
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            ).fetchall()
        ]
    except SQLITE_READ_ERRORS as exc:
        raise MemoryStoreError(
            f"{path} is not a usable SQLite database: {sqlite_error_text(exc)}"
        ) from None
    return version, tables


def refuse_unusable_schema(
    path: Path | None, version: int, tables: list[str], *, read_only: bool
) -> None:
    """Refuse a file this memtui cannot open as it is: one from a newer memtui, another
    program's database, and (read-only) one that is empty or needs migrations."""
    if version > SCHEMA_VERSION:
        raise MemoryStoreError(
            f"{path} was written by a newer memtui (schema {version}; this one "
            f"reads up to {SCHEMA_VERSION}); upgrade memtui to open it"
        )
    if version == 0 and tables:
        shown = ", ".join(tables[:12]) + (" ..." if len(tables) > 12 else "")
        raise MemoryStoreError(
            f"{path} is a SQLite database but not a memtui one (tables: {shown})"
        )
    if version == SCHEMA_VERSION or not read_only:
        return
    if version == 0:  # nothing to read: not a memtui database (yet)
        assert path is not None
        empty = "empty (0 bytes)" if path.stat().st_size == 0 else "without tables"
        raise MemoryStoreError(
            f"{path} is {empty}, not a memtui database; "
            f"`memtui ingest CORPUS.json --db {path}` makes one there"
        )
    raise MemoryStoreError(
        f"{path} needs a schema upgrade (schema {version} to {SCHEMA_VERSION}): "
        "it was written by an older memtui and a read-only open cannot change it; "
        f"run `memtui migrate {path}` once to upgrade it in place"
    )


def apply_migrations(conn: sqlite3.Connection, version: int) -> None:
    """Run the migrations after ``version`` up to ``SCHEMA_VERSION``; inside a write."""
    for number in range(version + 1, SCHEMA_VERSION + 1):
        for statement in _split_sql(_MIGRATIONS[number - 1]):
            conn.execute(statement)
        if number == 1:
            conn.execute(_INSERT_TRIGGER)
        if number == 2:
            for trigger in _VECTOR_TRIGGERS:
                conn.execute(trigger)
        conn.execute(f"PRAGMA user_version = {number}")


@contextlib.contextmanager
def vector_triggers_off(conn: sqlite3.Connection) -> Iterator[None]:
    """Inside a write: set the per-row generation triggers aside, bump once after.

    A bulk load or delete of vectors then costs one generation bump, not one
    per row; the triggers are back before the transaction commits.
    """
    for name in _VECTOR_TRIGGER_NAMES:
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    try:
        yield
    finally:
        for trigger in _VECTOR_TRIGGERS:
            conn.execute(trigger)
        conn.execute(_BUMP_GENERATION)


def purge_text_index(conn: sqlite3.Connection) -> None:
    """Merge the full-text index into one segment; inside a write.

    'optimize' drops the deleted postings and delete markers; with
    secure_delete on, the freed pages are zeroed. It rewrites the whole index:
    a bigger page cache for the while saves re-reading pages (10-15% at a
    million records).
    """
    cache_size = conn.execute("PRAGMA cache_size").fetchone()[0]
    conn.execute(f"PRAGMA cache_size = {_PURGE_CACHE_KIB}")
    try:
        conn.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('optimize')")
    finally:
        conn.execute(f"PRAGMA cache_size = {int(cache_size)}")
