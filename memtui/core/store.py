"""MemoryStore: the SQLite schema, FTS5 index, writers, scoped reads and audit log.

Every mutation goes through a method here that writes its audit event in the
same transaction (docs/design.md sections 1 and 3). Readers never hold a read
transaction open: every query is fetched to the end at once, so that a forget
can always truncate the WAL.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import sqlite3
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from memtui.core.embed import Embedder, EmbedderError, builtin_embedder, embedder_spec
from memtui.core.operator import resolve_operator
from memtui.core.records import (
    SEVERITIES,
    TIERS,
    MemoryRecord,
    anonymize_target,
    format_timestamp,
    lenient_text,
    normalize_endpoint,
    normalize_timestamp,
    read_metadata,
    read_row_text,
    tactic_signature,
)
from memtui.core.secrets import secret_paths, value_at
from memtui.core.stats import wilson_lower_bound

SCHEMA_VERSION = 2

FILTER_ALLOWLIST: frozenset[str] = frozenset(
    {"tier", "record_type", "profile_hash", "engagement", "run_id", "tool_name", "url_pattern"}
)

FTS_TABLE = "records_fts"
GENESIS_HASH = "0" * 64
CHECKPOINT_RETRIES = 10
_PROBE_EACH_MAX = 2000  # forgets of more records verify the index word by word
_PURGE_CACHE_KIB = -65536  # page cache while 'optimize' rewrites the index (64 MiB)
_BYTE_SCAN_BUDGET = 4 << 30  # bytes a forget's byte check reads in all (the file once a probe)
_PROBE_CHARS = 64  # a forgotten record's text is looked for by its first characters
_PROBE_MIN_BYTES = 8  # shorter texts are not looked for (they match unrelated bytes)
CHECKPOINT_RETRY_DELAY = 0.05

Clock = Callable[[], datetime]
Progress = Callable[[int, int], None]


class MemoryStoreError(Exception):
    """A refused or impossible store operation, with a message meant for the operator."""


class ScopeForgetResult(int):
    """What ``forget_scope`` returns: the number of records forgotten, as an ``int``.

    It compares, adds and prints as that count, and also says how the erasure
    went, as ``forget``'s return value does for one record:

    - ``verified``: the records are gone from the table, the full-text index
      and the vectors, and the WAL was truncated (docs/design.md section 3);
    - ``event_id``: the ``forget-scope`` audit event;
    - ``problem``: why erasure is not verified (None when it is);
    - ``incomplete_event_id``: the ``erasure-incomplete`` audit event written
      when the WAL could not be truncated (None otherwise);
    - ``checks``: the erasure checks recorded in the audit event, and
      ``bytes_gone`` when the file was read for the forgotten text after the
      checkpoint (a failure there writes the ``erasure-incomplete`` event).
    """

    verified: bool
    event_id: int
    problem: str | None
    incomplete_event_id: int | None
    checks: dict[str, bool]

    def __new__(
        cls,
        count: int,
        *,
        verified: bool,
        event_id: int,
        problem: str | None = None,
        incomplete_event_id: int | None = None,
        checks: dict[str, bool] | None = None,
    ) -> ScopeForgetResult:
        result = super().__new__(cls, count)
        result.verified = verified
        result.event_id = event_id
        result.problem = problem
        result.incomplete_event_id = incomplete_event_id
        result.checks = dict(checks or {})
        return result

    def __repr__(self) -> str:
        return (
            f"ScopeForgetResult({int(self)}, verified={self.verified}, "
            f"event_id={self.event_id}, problem={self.problem!r})"
        )


@dataclass(frozen=True)
class _Finish:
    """How ``_finish_erasure`` ended: verified, and if not why, with its audit event."""

    verified: bool
    problem: str | None = None
    incomplete_event_id: int | None = None


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

_RECORD_COLUMNS = (
    "id, tier, record_type, content, profile_hash, engagement, run_id, tool_name, "
    "url_pattern, metadata, created_at, expires_at, refuted, signature"
)

_AUDIT_TEXT_COLUMNS = (
    "at, operator, action, record_ids, tier, record_type, signature, reason, details"
)

SQLITE_MAGIC = b"SQLite format 3\x00"

#: What reading a damaged file can raise: SQLite's errors, and UnicodeDecodeError
#: when SQLite's error text quotes bytes of the file that are not UTF-8 (a
#: garbled schema statement), which Python cannot even decode into a message.
SQLITE_READ_ERRORS = (sqlite3.DatabaseError, UnicodeDecodeError)


def sqlite_error_text(exc: BaseException) -> str:
    """The message of an exception from ``SQLITE_READ_ERRORS``, as one line of text."""
    if isinstance(exc, UnicodeDecodeError):
        raw = exc.object if isinstance(exc.object, bytes | bytearray) else b""
        return bytes(raw).decode("utf-8", "backslashreplace") or "an error text that is not UTF-8"
    return str(exc)


def empty_database_problem(path: Path) -> str | None:
    """Why an existing ``path`` holds no memtui database to work on (0 bytes, or an
    SQLite file without tables), or None. Commands that change a database refuse
    such a file instead of quietly making a new database there; ``memtui ingest``
    is the one that makes one."""
    try:
        with path.open("rb") as handle:
            header = handle.read(100)
        if not header:
            what = "empty (0 bytes)"
        elif header[:16] == SQLITE_MAGIC and len(header) == 100 and any(header[60:64]):
            return None  # a user_version is set (memtui's schema): no need to open it
        else:
            probe = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
            try:
                version = probe.execute("PRAGMA user_version").fetchone()[0]
                tables = probe.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            finally:
                probe.close()
            if version or tables:
                return None
            what = "an SQLite file without tables"
    except (OSError, *SQLITE_READ_ERRORS):
        return None  # not readable: the open that follows says why
    return (
        f"{path} is {what}, not a memtui database; "
        f"`memtui ingest CORPUS.json --db {path}` makes one there"
    )


def sqlite_file_problem(path: Path) -> str | None:
    """Why ``path`` is not a readable SQLite file, or None when it is one.

    The header is read through SQLite, never with Python file I/O: closing any
    descriptor of a database file drops every POSIX lock this process holds on
    it, including the locks of SQLite connections already open on that file.
    SQLite's own VFS shares descriptors per file and avoids that.
    """
    try:
        probe = sqlite3.connect(f"file:{_uri_path(path)}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        return f"cannot be opened: {exc}"
    try:
        probe.execute("PRAGMA schema_version").fetchone()
    except SQLITE_READ_ERRORS as exc:
        if "not a database" in str(exc):
            return "is not a SQLite database"
        return f"cannot be read: {sqlite_error_text(exc)}"
    finally:
        probe.close()
    return None


def fts5_available() -> bool:
    """Whether this interpreter's SQLite was built with FTS5."""
    probe = sqlite3.connect(":memory:")
    try:
        probe.execute("CREATE VIRTUAL TABLE temp.fts5_probe USING fts5(x)")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        probe.close()


def pack_vector(values: Sequence[float]) -> bytes:
    """Little-endian float32 bytes of a vector."""
    return struct.pack(f"<{len(values)}f", *values)


def unpack_vector(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


_CANONICAL_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _canonical(value: Any) -> str:
    # The same text as json.dumps(value, sort_keys=True, separators=(",", ":"),
    # ensure_ascii=False), without building an encoder per call (bulk ingest).
    if not value and isinstance(value, dict):
        return "{}"
    return _CANONICAL_ENCODER.encode(value)


# The stored timestamp form (format_timestamp): 4-digit year, microseconds, Z.
_STORED_TIMESTAMP = re.compile(r"[1-9]\d{3}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def _stored_timestamp(value: Any) -> str | None:
    """``normalize_timestamp`` with a fast path for text already in the stored form."""
    if value is None:
        return None
    if isinstance(value, str) and _STORED_TIMESTAMP.fullmatch(value):
        try:
            datetime.fromisoformat(value[:-1])  # a real date and time, or ValueError
        except ValueError:
            pass  # let normalize_timestamp word the error
        else:
            return value
    return normalize_timestamp(value)


AUDIT_TEXT_COLUMNS = (
    "at",
    "operator",
    "action",
    "record_ids",
    "tier",
    "record_type",
    "signature",
    "reason",
    "details",
    "prev_hash",
    "hash",
)


def audit_value_problem(row: dict[str, Any]) -> str | None:
    """Why an audit event's stored values cannot be hashed as memtui wrote them: a
    column that is not text (a BLOB reason, say), which only another writer stores."""
    for name in AUDIT_TEXT_COLUMNS:
        problem = read_row_text(row.get(name))[1]
        if problem is not None:
            return f"its {name} {problem}: memtui writes text there, so another program wrote it"
    return None


def audit_hash(prev_hash: str, row: dict[str, Any]) -> str:
    """The chained hash of one audit event over its stored column values."""
    body = [
        prev_hash,
        row["at"],
        row["operator"],
        row["action"],
        row["record_ids"],
        row["tier"],
        row["record_type"],
        row["signature"],
        row["reason"],
        row["details"],
    ]
    return hashlib.sha256(_canonical(body).encode("utf-8")).hexdigest()


_PROGRESS_STEPS = 1000  # virtual-machine steps between two calls of a progress handler
_T = TypeVar("_T")


class _StatementWatch:
    """SQLite's progress handler for one statement: stop it, or act once it has run long.

    Returning non-zero makes SQLite abandon the statement ("interrupted"),
    which ``sqlite3`` raises as ``OperationalError``; unlike
    ``Connection.interrupt()``, only this statement stops.
    """

    __slots__ = ("busy_steps", "cancelled", "steps", "when_busy")

    def __init__(
        self,
        busy_steps: int,
        when_busy: Callable[[], None] | None,
        cancelled: Callable[[], bool] | None,
    ) -> None:
        self.steps = 0
        self.busy_steps = busy_steps
        self.when_busy = when_busy
        self.cancelled = cancelled

    def __call__(self) -> int:
        if self.cancelled is not None and self.cancelled():
            return 1
        if self.when_busy is not None:
            self.steps += _PROGRESS_STEPS
            if self.steps >= self.busy_steps:
                action, self.when_busy = self.when_busy, None
                action()
        return 0


def _system_clock() -> datetime:
    return datetime.now(UTC)


def _file_identity(path: Path | None) -> tuple[int, int] | None:
    """The device and inode ``path`` names now; None for no path or no file."""
    if path is None:
        return None
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


class MemoryStore:
    """A memtui memory database (SQLite with FTS5), or an in-memory one for ``path=None``."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        read_only: bool = False,
        clock: Clock | None = None,
        embedder: Embedder | None = None,
        operator: str | None = None,
        busy_timeout_ms: int = 5000,
    ) -> None:
        self.path = None if path is None else Path(path)
        self.read_only = read_only
        self.clock: Clock = clock or _system_clock
        self.default_operator = operator
        self.last_event_id: int | None = None
        self._lock = threading.RLock()
        self._side: sqlite3.Connection | None = None
        self._side_lock = threading.Lock()
        self._write_serial = 0
        self._derived: dict[str, tuple[tuple[int, int], Any]] = {}
        self._busy_timeout_ms = int(busy_timeout_ms)
        if not fts5_available():
            raise MemoryStoreError(
                f"this Python's SQLite {sqlite3.sqlite_version} was built without FTS5, "
                "which memtui needs for its full-text index; use a Python whose SQLite "
                "has FTS5 (python.org and most distribution builds do)"
            )
        # What the path named as it was opened (device, inode), taken first: a caller can
        # tell later whether the path still names the file this store reads and writes.
        self.file_identity = _file_identity(self.path)
        self._conn = self._connect(busy_timeout_ms)
        if self.file_identity is None:  # a new file, created by this open
            self.file_identity = _file_identity(self.path)
        # Kept for query_tuples, the hot reads: used only under the lock, one read at a time.
        self._tuples = self._conn.cursor()
        self._tuples.row_factory = None
        try:
            self._prepare_schema()
            self.embedder: Embedder | None = None
            if embedder is not None:
                self._adopt_embedder(embedder)
            else:
                self.embedder = self._recorded_builtin()
        except BaseException:
            self._conn.close()
            raise

    # ------------------------------------------------------------------ opening

    def _connect(self, busy_timeout_ms: int) -> sqlite3.Connection:
        if self.path is None:
            if self.read_only:
                raise MemoryStoreError("an in-memory store cannot be opened read-only")
            conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        else:
            if self.path.is_dir():
                raise MemoryStoreError(f"{self.path} is a directory, not a memtui database file")
            exists = self.path.exists()
            if not exists and self.read_only:
                raise MemoryStoreError(f"no database at {self.path}; check the path")
            if exists:
                self._check_magic()
            elif not self.path.parent.exists():
                raise MemoryStoreError(f"folder {self.path.parent} does not exist")
            mode = "ro" if self.read_only else "rwc"
            uri = f"file:{_uri_path(self.path)}?mode={mode}"
            try:
                conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            except sqlite3.Error as exc:
                raise MemoryStoreError(f"cannot open {self.path}: {exc}") from None
        conn.row_factory = sqlite3.Row
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            conn.execute("PRAGMA secure_delete = ON")
            if self.path is not None and not self.read_only:
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        except SQLITE_READ_ERRORS as exc:
            conn.close()
            raise MemoryStoreError(
                f"{self.path} is not a usable SQLite database: {sqlite_error_text(exc)}"
            ) from None
        return conn

    def _check_magic(self) -> None:
        assert self.path is not None
        problem = sqlite_file_problem(self.path)
        if problem is not None:
            raise MemoryStoreError(f"{self.path} {problem}")

    def _prepare_schema(self) -> None:
        try:
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            tables = [
                r[0]
                for r in self._conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
                ).fetchall()
            ]
        except SQLITE_READ_ERRORS as exc:
            raise MemoryStoreError(
                f"{self.path} is not a usable SQLite database: {sqlite_error_text(exc)}"
            ) from None
        if version > SCHEMA_VERSION:
            raise MemoryStoreError(
                f"{self.path} was written by a newer memtui (schema {version}; this one "
                f"reads up to {SCHEMA_VERSION}); upgrade memtui to open it"
            )
        if version == 0 and tables:
            shown = ", ".join(tables[:12]) + (" ..." if len(tables) > 12 else "")
            raise MemoryStoreError(
                f"{self.path} is a SQLite database but not a memtui one (tables: {shown})"
            )
        if version == SCHEMA_VERSION:
            return
        if self.read_only:
            if version == 0:  # nothing to read: not a memtui database (yet)
                assert self.path is not None
                empty = "empty (0 bytes)" if self.path.stat().st_size == 0 else "without tables"
                raise MemoryStoreError(
                    f"{self.path} is {empty}, not a memtui database; "
                    f"`memtui ingest CORPUS.json --db {self.path}` makes one there"
                )
            raise MemoryStoreError(
                f"{self.path} needs a schema upgrade (schema {version} to {SCHEMA_VERSION}): "
                "it was written by an older memtui and a read-only open cannot change it; "
                f"run `memtui migrate {self.path}` once to upgrade it in place"
            )
        with self._write():
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _split_sql(_MIGRATIONS[number - 1]):
                    self._conn.execute(statement)
                if number == 1:
                    self._conn.execute(_INSERT_TRIGGER)
                if number == 2:
                    for trigger in _VECTOR_TRIGGERS:
                        self._conn.execute(trigger)
                self._conn.execute(f"PRAGMA user_version = {number}")
            if version >= 1:  # an existing database changed shape: say so in its log
                self._append_audit(
                    action="migrate",
                    record_ids=[],
                    operator=None,
                    details={"from_schema": version, "to_schema": SCHEMA_VERSION},
                )

    def _adopt_embedder(self, embedder: Embedder) -> None:
        """Write new records' vectors with ``embedder``.

        Refused when the file holds vectors of another embedder. Nothing is
        written here: the file records the embedder in the same transaction as
        the first vectors it writes (``_store_vectors``), so a write that fails
        leaves no embedder recorded for vectors that do not exist.
        """
        recorded = self.recorded_embedder()
        if recorded and (recorded["name"], recorded["dim"]) != (embedder.name, embedder.dim):
            if self.query("SELECT 1 FROM vectors LIMIT 1"):
                raise MemoryStoreError(
                    f"this database's vectors were written by {_shown(recorded['name'])} "
                    f"({recorded['dim']} dims), not {embedder.name} ({embedder.dim} dims); "
                    "re-index with that embedder (memtui reindex) before writing with it"
                )
        self.embedder = embedder

    def _recorded_builtin(self) -> Embedder | None:
        """The built-in embedder that wrote the file's vectors, to embed new records as
        the others are (None when the file has no vectors).

        Only a built-in ``hash-N`` with the recorded dimension: a plug-in named
        in the file is never imported (the file is untrusted input); a store
        on such a file writes new records without vectors until it is opened
        with that embedder (search reports them as ``vectors_missing``).
        """
        recorded = self.recorded_embedder()
        if recorded is None or not self.query("SELECT 1 FROM vectors LIMIT 1"):
            return None  # no vectors to keep company with
        try:
            builtin = builtin_embedder(recorded["name"])
        except EmbedderError:
            return None
        if builtin is None or (builtin.name, builtin.dim) != (recorded["name"], recorded["dim"]):
            return None
        return builtin

    def close(self) -> None:
        """Close the file, once a vector cache built from it is published (or deleted)."""
        from memtui.core import vector_cache

        vector_cache.wait_for_writes()
        with self._lock:
            self._conn.close()
        with self._side_lock:
            if self._side is not None:
                self._side.close()
                self._side = None

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ primitives

    @property
    def connection(self) -> sqlite3.Connection:
        """The store's connection, for the core's read-only query modules (search, lanes)."""
        return self._conn

    def now(self) -> datetime:
        moment = self.clock()
        if moment.tzinfo is None:
            raise MemoryStoreError("the store's clock returned a naive datetime; return UTC")
        return moment

    def now_text(self) -> str:
        return format_timestamp(self.now())

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        """Run one read and fetch every row, so that no read transaction stays open."""
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.OperationalError as exc:
                if not _undecodable(exc):
                    raise
            return self._read_leniently(lambda: self._conn.execute(sql, params).fetchall())

    def _read_leniently(self, read: Callable[[], _T]) -> _T:
        """``read`` again, with text that is not UTF-8 read as ``UndecodedText``.

        Only after a read met such text (another writer's): the strict default
        decodes faster, and a row read this way names its damage instead of
        failing the whole read. Call under the lock.
        """
        self._conn.text_factory = lenient_text
        try:
            return read()
        finally:
            self._conn.text_factory = str

    def query_tuples(
        self,
        sql: str,
        params: Sequence[Any] | dict[str, Any] = (),
        *,
        when_busy: Callable[[], None] | None = None,
        busy_steps: int = 0,
        cancelled: Callable[[], bool] | None = None,
    ) -> list[tuple]:
        """``query`` with plain tuples for rows (cheaper than ``sqlite3.Row`` in hot paths).

        ``when_busy`` is called once, from SQLite's progress handler, when the
        statement has run ``busy_steps`` virtual-machine steps (counted in
        thousands): so that a reader can start work that only a long statement
        needs. When ``cancelled()`` turns true while the statement runs, SQLite
        stops it and ``sqlite3.OperationalError`` ("interrupted") is raised. Both
        run inside the statement, so neither may read through this store.
        """
        with self._lock:
            if when_busy is None and cancelled is None:
                return self._tuples_leniently_on_error(sql, params)
            self._conn.set_progress_handler(
                _StatementWatch(busy_steps, when_busy, cancelled), _PROGRESS_STEPS
            )
            try:
                return self._tuples_leniently_on_error(sql, params)
            finally:
                self._conn.set_progress_handler(None, 0)

    def _tuples_leniently_on_error(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple]:
        try:
            return self._tuples.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if not _undecodable(exc):
                raise
        return self._read_leniently(lambda: self._tuples.execute(sql, params).fetchall())

    def side_query(
        self, sql: str, params: Sequence[Any] | dict[str, Any] = ()
    ) -> list[tuple[Any, ...]] | None:
        """Run one read on a second, read-only connection to the same file.

        So that a reader (search) can run two statements at once, one on each
        connection: SQLite runs them on two cores. Every row is fetched, so no
        read transaction stays open. None for an in-memory store (one
        connection only), and when the second connection cannot be opened.
        """
        if self.path is None:
            return None
        with self._side_lock:
            if self._side is None:
                try:
                    side = sqlite3.connect(
                        f"file:{_uri_path(self.path)}?mode=ro",
                        uri=True,
                        isolation_level=None,
                        check_same_thread=False,
                    )
                    side.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
                except sqlite3.Error:
                    return None
                self._side = side
            return self._side.execute(sql, params).fetchall()

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        if self.read_only:
            raise MemoryStoreError("this database is open read-only; reopen it without --read-only")
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if "locked" in str(exc) or "busy" in str(exc):
                    raise MemoryStoreError(
                        "the database is busy (another process is writing); try again"
                    ) from None
                raise
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._conn.execute("COMMIT")
            finally:
                self._write_serial += 1

    def _require_writable(self) -> None:
        if self.read_only:
            raise MemoryStoreError("this database is open read-only; reopen it without --read-only")

    # ------------------------------------------------------------------ reads

    def _live_clause(
        self, include_refuted: bool, include_expired: bool, prefix: str = ""
    ) -> tuple[str, list[Any]]:
        """The live rule as SQL: not refuted, and ``expires_at > now`` (strict); ``""``
        when both are included. ``prefix`` qualifies the columns (``"r."``)."""
        clauses: list[str] = []
        params: list[Any] = []
        if not include_refuted:
            clauses.append(f"{prefix}refuted = 0")
        if not include_expired:
            clauses.append(f"({prefix}expires_at IS NULL OR {prefix}expires_at > ?)")
            params.append(self.now_text())
        return " AND ".join(clauses), params

    def scope_clause(
        self,
        filters: dict[str, Any] | None,
        *,
        include_refuted: bool = False,
        include_expired: bool = False,
        alias: str = "",
    ) -> tuple[str, list[Any]]:
        """SQL condition and parameters for allowlisted filters plus the live rule.

        Filter names reach SQL only after the allowlist check; values are always
        bound parameters. A ``tier`` that is not one of ``TIERS`` is refused (it
        could only match nothing, which would read as "no records"). Returns
        ``("1", [])`` when nothing restricts.
        """
        prefix = f"{alias}." if alias else ""
        clauses: list[str] = []
        params: list[Any] = []
        for key, value in (filters or {}).items():
            check_filter_key(key)
            if key == "tier" and value not in TIERS:
                raise MemoryStoreError(f"unknown tier {value!r}; tiers are {', '.join(TIERS)}")
            if value is None:
                clauses.append(f"{prefix}{key} IS NULL")
            else:
                clauses.append(f"{prefix}{key} = ?")
                params.append(value)
        live, live_params = self._live_clause(include_refuted, include_expired, prefix)
        if live:
            clauses.append(live)
            params.extend(live_params)
        return (" AND ".join(clauses) or "1"), params

    def fetch(
        self,
        *,
        include_refuted: bool = False,
        include_expired: bool = False,
        limit: int | None = None,
        after_id: int | None = None,
        **filters: Any,
    ) -> list[MemoryRecord]:
        """Records matching allowlisted scope filters, in id order.

        Refuted and expired records are left out unless asked for. ``limit`` and
        ``after_id`` page through a large scope by keyset, never by offset.
        """
        where, params = self.scope_clause(
            filters, include_refuted=include_refuted, include_expired=include_expired
        )
        if after_id is not None:
            where += " AND id > ?"
            params.append(int(after_id))
        sql = f"SELECT {_RECORD_COLUMNS} FROM records WHERE {where} ORDER BY id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [_row_to_record(row) for row in self.query(sql, params)]

    def get(self, record_id: int) -> MemoryRecord | None:
        """One record by id, whatever its state (refuted and expired included)."""
        rows = self.query(f"SELECT {_RECORD_COLUMNS} FROM records WHERE id = ?", (int(record_id),))
        return _row_to_record(rows[0]) if rows else None

    def get_many(self, record_ids: Iterable[int]) -> dict[int, MemoryRecord]:
        ids = [int(i) for i in record_ids]
        out: dict[int, MemoryRecord] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.query(
                f"SELECT {_RECORD_COLUMNS} FROM records WHERE id IN ({marks})", chunk
            ):
                record = _row_to_record(row)
                out[record.id] = record
        return out

    def data_version(self) -> int:
        """SQLite's ``data_version``: changes when another connection commits.

        Cheap enough to poll, so a view can refresh when a live agent writes.
        """
        with self._lock:
            return self._conn.execute("PRAGMA data_version").fetchall()[0][0]

    def change_token(self) -> tuple[int, int]:
        """A value that changes whenever the data may have changed.

        ``PRAGMA data_version`` moves when another connection commits; the
        store counts its own write transactions. Readers key their caches
        (the hidden rows of the live rule, document frequencies) on it.
        """
        return (self.data_version(), self._write_serial)

    def record_count(self) -> int:
        return self.query("SELECT count(*) FROM records")[0][0]

    def tier_counts(
        self, *, include_refuted: bool = False, include_expired: bool = False
    ) -> dict[str, int]:
        """Record counts per tier (every tier present, zero included), computed in SQL.

        Counted from indexes: every row per tier, less the few the live rule
        leaves out (refuted; expired), which have small partial indexes of their own.
        """
        counts = dict.fromkeys(TIERS, 0)
        counts.update(self._tier_totals())
        for (tier,), count in self._hidden_counts(("tier",), include_refuted, include_expired):
            counts[tier] -= count
        return counts

    def _hidden_counts(
        self,
        keys: Sequence[str],
        include_refuted: bool,
        include_expired: bool,
        where: str = "",
        params: Sequence[Any] = (),
    ) -> list[tuple[tuple[Any, ...], int]]:
        """Counts, grouped by ``keys``, of the rows the live rule hides.

        Refuted rows come from ``records_refuted``; expired rows that are not
        also refuted (or all expired rows, when refuted ones are shown) from
        ``records_expiry``. Each hidden row is counted once.
        """
        columns = ", ".join(keys)
        extra = f" AND {where}" if where else ""
        out: list[tuple[tuple[Any, ...], int]] = []
        if not include_refuted:
            for row in self.query(
                f"SELECT {columns}, count(*) FROM records INDEXED BY records_refuted "
                f"WHERE refuted != 0{extra} "
                f"GROUP BY {columns}",
                list(params),
            ):
                out.append((tuple(row[:-1]), row[-1]))
        if not include_expired:
            also = "" if include_refuted else " AND refuted = 0"
            for row in self.query(
                f"SELECT {columns}, count(*) FROM records INDEXED BY records_expiry "
                f"WHERE expires_at IS NOT NULL AND expires_at <= ?{also}{extra} "
                f"GROUP BY {columns}",
                [self.now_text(), *params],
            ):
                out.append((tuple(row[:-1]), row[-1]))
        return out

    def scope_counts(
        self, tier: str, *, include_refuted: bool = False, include_expired: bool = False
    ) -> dict[str, dict[str, int]]:
        """Counts of one tier's records by profile and by engagement (None: unscoped)."""
        if tier not in TIERS:
            raise MemoryStoreError(f"unknown tier {tier!r}; tiers are {', '.join(TIERS)}")
        result: dict[str, dict[str, int]] = {}
        for key in ("profile_hash", "engagement"):
            totals: dict[Any, int] = {}
            for value, count in self.query(
                f"SELECT {key}, count(*) FROM records WHERE tier = ? GROUP BY {key}", [tier]
            ):
                totals[value] = count
            for (value,), count in self._hidden_counts(
                (key,), include_refuted, include_expired, "tier = ?", [tier]
            ):
                totals[value] -= count
            result[key] = {
                value: totals[value]
                for value in sorted(v for v in totals if v is not None)
                if totals[value] > 0
            }
        return result

    FACET_KEYS: tuple[str, ...] = ("profile_hash", "engagement")

    def scope_facets(
        self, *, include_refuted: bool = False, include_expired: bool = False
    ) -> dict[str, tuple[int, dict[str, dict[str, int]]]]:
        """Every tier's record count and its counts by profile and by engagement.

        The same numbers as ``tier_counts`` and ``scope_counts`` for each tier, in
        one pass: the totals come from two covering-index scans (kept until the
        database changes, so the live and the all-inclusive view share them) less
        the rows the live rule hides, from their small partial indexes.
        """
        totals = self._scope_totals()
        out: dict[str, tuple[int, dict[str, dict[str, int]]]] = {}
        tier_totals = dict.fromkeys(TIERS, 0)
        per_key: dict[str, dict[tuple[str, Any], int]] = {}
        for key in self.FACET_KEYS:
            counts = dict(totals[key])
            for (tier, value), count in self._hidden_counts(
                ("tier", key), include_refuted, include_expired
            ):
                counts[(tier, value)] -= count
            per_key[key] = counts
        for (tier, _value), count in per_key[self.FACET_KEYS[0]].items():
            tier_totals[tier] = tier_totals.get(tier, 0) + count
        for tier, total in tier_totals.items():
            scopes: dict[str, dict[str, int]] = {}
            for key in self.FACET_KEYS:
                values = {
                    value: count
                    for (t, value), count in per_key[key].items()
                    if t == tier and value is not None and count > 0
                }
                scopes[key] = dict(sorted(values.items()))
            out[tier] = (total, scopes)
        return out

    def derived(self, name: str, build: Callable[[MemoryStore], _T]) -> _T:
        """``build(self)``, kept under ``name`` until the data changes (``change_token``).

        For what readers compute from the whole database and look up again and
        again: count totals, the rows the live rule hides, document frequencies.
        The token is read before the build, so a write during it leaves a value
        that the next look finds out of date.
        """
        token = self.change_token()
        held = self._derived.get(name)
        if held is not None and held[0] == token:
            return held[1]
        value = build(self)
        self._derived[name] = (token, value)
        return value

    def clear_count_cache(self) -> None:
        """Forget the cached count totals (the next count scans its indexes again).

        Never needed for correctness (the cache is keyed by ``change_token``); the
        benchmarks use it to measure a count as a first look pays for it.
        """
        for name in ("tier totals", "scope totals"):
            self._derived.pop(name, None)

    def _tier_totals(self) -> dict[str, int]:
        """Row counts per tier, hidden rows included; the live and the all-inclusive
        counts share one index scan."""
        return self.derived(
            "tier totals",
            lambda store: dict(store.query("SELECT tier, count(*) FROM records GROUP BY tier")),
        )

    def _scope_totals(self) -> dict[str, dict[tuple[str, Any], int]]:
        """Row counts by (tier, profile) and by (tier, engagement), hidden rows included.

        A second look (the live view after the all-inclusive one, a filter list,
        the lanes' choices) costs nothing until the database changes. Each query
        takes the lock alone, so a page read (the first screen) can run between
        the two scans.
        """

        def build(store: MemoryStore) -> dict[str, dict[tuple[str, Any], int]]:
            return {
                key: {
                    (tier, value): count
                    for tier, value, count in store.query(
                        f"SELECT tier, {key}, count(*) FROM records GROUP BY tier, {key}"
                    )
                }
                for key in self.FACET_KEYS
            }

        return self.derived("scope totals", build)

    def engagements(self) -> list[str]:
        rows = self.query(
            "SELECT DISTINCT engagement FROM records WHERE engagement IS NOT NULL ORDER BY 1"
        )
        return [r[0] for r in rows]

    def profiles(self) -> list[str]:
        rows = self.query(
            "SELECT DISTINCT profile_hash FROM records WHERE profile_hash IS NOT NULL ORDER BY 1"
        )
        return [r[0] for r in rows]

    def blast_radius(self, *, engagement: str) -> dict[str, dict[str, int]]:
        """What ``forget_scope(engagement=...)`` would erase: counts by tier, then type."""
        out: dict[str, dict[str, int]] = {}
        for tier, record_type, count in self.query(
            "SELECT tier, record_type, count(*) FROM records WHERE engagement = ? "
            "GROUP BY tier, record_type ORDER BY tier, record_type",
            (engagement,),
        ):
            out.setdefault(tier, {})[record_type] = count
        return out

    def recorded_embedder(self) -> dict[str, Any] | None:
        """The embedder that wrote this file's vectors: ``{"name", "dim"}``, plus
        ``"spec"`` (the ``module:callable`` it was loaded with) for a plug-in;
        None when none is recorded. Text from the file: never import it."""
        rows = self.query(
            "SELECT key, value FROM meta "
            "WHERE key IN ('embedder_name', 'embedder_dim', 'embedder_spec')"
        )
        values = {k: v for k, v in rows}
        if "embedder_name" not in values:
            return None
        try:
            dim = int(values.get("embedder_dim", ""))
        except (TypeError, ValueError):
            raise MemoryStoreError(
                f"this database records embedder {_shown(str(values['embedder_name']))} with "
                f"dimension {_shown(str(values.get('embedder_dim')))!r}, not a whole number; "
                "re-index it (memtui reindex)"
            ) from None
        out: dict[str, Any] = {"name": str(values["embedder_name"]), "dim": dim}
        if values.get("embedder_spec"):
            out["spec"] = str(values["embedder_spec"])
        return out

    def vector_count(self) -> int:
        return self.query("SELECT count(*) FROM vectors")[0][0]

    def vector_of(self, record_id: int) -> list[float] | None:
        rows = self.query("SELECT vector FROM vectors WHERE record_id = ?", (int(record_id),))
        return unpack_vector(rows[0][0]) if rows else None

    # ------------------------------------------------------------------ audit

    def _append_audit(
        self,
        *,
        action: str,
        record_ids: Sequence[int],
        operator: str | None,
        tier: str | None = None,
        record_type: str | None = None,
        signature: str | None = None,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> int:
        """Append one chained audit event; call only inside a write transaction."""
        last = self._conn.execute(
            "SELECT hash FROM audit_events ORDER BY id DESC LIMIT 1"
        ).fetchone()
        prev_hash = last[0] if last else GENESIS_HASH
        row = {
            "at": self.now_text(),
            "operator": resolve_operator(operator or self.default_operator),
            "action": action,
            # Native ids are integers; a foreign store's audit log names string ids.
            "record_ids": _canonical([i if isinstance(i, str) else int(i) for i in record_ids]),
            "tier": tier,
            "record_type": record_type,
            "signature": signature,
            "reason": reason,
            "details": _canonical(details or {}),
        }
        digest = audit_hash(prev_hash, row)
        cursor = self._conn.execute(
            "INSERT INTO audit_events (at, operator, action, record_ids, tier, record_type, "
            "signature, reason, details, prev_hash, hash) VALUES "
            "(:at, :operator, :action, :record_ids, :tier, :record_type, :signature, :reason, "
            ":details, :prev_hash, :hash)",
            {**row, "prev_hash": prev_hash, "hash": digest},
        )
        self.last_event_id = cursor.lastrowid
        return cursor.lastrowid

    def audit_events(
        self, *, limit: int | None = None, before_id: int | None = None
    ) -> list[dict[str, Any]]:
        """Audit events, newest first, with JSON columns decoded."""
        sql = "SELECT * FROM audit_events"
        params: list[Any] = []
        if before_id is not None:
            sql += " WHERE id < ?"
            params.append(int(before_id))
        sql += " ORDER BY id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [_audit_row(row) for row in self.query(sql, params)]

    def audit_head(self) -> dict[str, Any] | None:
        rows = self.query("SELECT id, hash FROM audit_events ORDER BY id DESC LIMIT 1")
        return {"id": rows[0][0], "hash": rows[0][1]} if rows else None

    def verify_audit(self) -> str | None:
        """None when the hash chain holds, else a description of the first broken link."""
        prev_hash = GENESIS_HASH
        prev_id = 0
        for row in self.query("SELECT * FROM audit_events ORDER BY id"):
            data = dict(row)
            unhashable = audit_value_problem(data)
            if unhashable is not None:
                return f"event #{data['id']}: {unhashable}"
            if data["prev_hash"] != prev_hash:
                after = f"event #{prev_id}" if prev_id else "the start of the log"
                return (
                    f"event #{data['id']}: its prev_hash does not match {after} "
                    "(an event was removed, inserted or rewritten)"
                )
            if audit_hash(prev_hash, data) != data["hash"]:
                return f"event #{data['id']}: its contents do not match its hash (edited)"
            prev_hash = data["hash"]
            prev_id = data["id"]
        # audit_events is AUTOINCREMENT: sqlite_sequence keeps the largest id written.
        sequence = self.query("SELECT seq FROM sqlite_sequence WHERE name = 'audit_events'")
        written = int(sequence[0][0]) if sequence else 0
        if written > prev_id:
            return (
                f"the newest events were deleted (the log ends at #{prev_id}, "
                f"events up to #{written} were written)"
            )
        return None

    # ---------------------------------------------------------------- writers

    def _insert_record(
        self,
        *,
        tier: str,
        record_type: str,
        content: str,
        metadata: dict[str, Any],
        created_at: str | None = None,
        expires_at: str | datetime | None = None,
        signature: str | None = None,
        refuted: bool = False,
        **scope: Any,
    ) -> int:
        if tier not in TIERS:
            raise MemoryStoreError(f"unknown tier {tier!r}; tiers are {', '.join(TIERS)}")
        values = {
            "tier": tier,
            "record_type": record_type,
            "content": content,
            "profile_hash": scope.get("profile_hash"),
            "engagement": scope.get("engagement"),
            "run_id": scope.get("run_id"),
            "tool_name": scope.get("tool_name"),
            "url_pattern": scope.get("url_pattern"),
            "signature": signature,
            "metadata": _canonical(metadata),
            "refuted": int(refuted),
            "created_at": created_at or self.now_text(),
            "expires_at": _expiry(expires_at),
        }
        cursor = self._conn.execute(
            "INSERT INTO records (tier, record_type, content, profile_hash, engagement, run_id, "
            "tool_name, url_pattern, signature, metadata, refuted, created_at, expires_at) VALUES "
            "(:tier, :record_type, :content, :profile_hash, :engagement, :run_id, :tool_name, "
            ":url_pattern, :signature, :metadata, :refuted, :created_at, :expires_at)",
            values,
        )
        record_id = cursor.lastrowid
        if self.embedder is not None:
            self._store_vectors([(record_id, content)])
        return record_id

    def _store_vectors(self, items: Sequence[tuple[int, str]]) -> None:
        """Embed and store the vectors of ``items`` (``(record id, text)``); inside a write.

        The embedder is foreign code: anything it raises, or a result that is
        not one vector of ``dim`` finite numbers per text, becomes a
        ``MemoryStoreError`` (the transaction rolls back). The file records the
        embedder here, with its first vectors.
        """
        embedder = self.embedder
        assert embedder is not None
        name, dim = embedder.name, embedder.dim
        try:
            vectors = list(embedder([text for _, text in items]))
        except Exception as exc:
            raise MemoryStoreError(
                f"embedder {name} failed: {type(exc).__name__}: {exc}; nothing was written"
            ) from None
        if len(vectors) != len(items):
            raise MemoryStoreError(
                f"embedder {name} returned {len(vectors)} vectors for {len(items)} texts"
            )
        rows = []
        for (record_id, _), vector in zip(items, vectors, strict=True):
            try:
                size = len(vector)
                packed = pack_vector(vector) if size == dim else b""
                finite = math.isfinite(sum(vector))
            except (TypeError, struct.error, OverflowError):
                raise MemoryStoreError(
                    f"embedder {name} returned something other than a list of numbers"
                ) from None
            if size != dim:
                raise MemoryStoreError(
                    f"embedder {name} returned {size} values, not its declared {dim}"
                )
            if not finite:
                raise MemoryStoreError(f"embedder {name} returned a non-finite value")
            rows.append((record_id, packed))
        recorded = self.recorded_embedder()
        spec = embedder_spec(embedder)
        if recorded is None or (recorded["name"], recorded["dim"], recorded.get("spec")) != (
            name,
            dim,
            spec,
        ):
            self._set_embedder_meta(embedder)
        self._conn.executemany(
            "INSERT OR REPLACE INTO vectors (record_id, vector) VALUES (?, ?)", rows
        )

    def _set_embedder_meta(self, embedder: Embedder | None) -> None:
        """Record the embedder that writes the vectors: its name, dim, and a plug-in's spec."""
        self._conn.execute(
            "DELETE FROM meta WHERE key IN ('embedder_name', 'embedder_dim', 'embedder_spec')"
        )
        if embedder is None:
            return
        values = [("embedder_name", embedder.name), ("embedder_dim", str(embedder.dim))]
        spec = embedder_spec(embedder)
        if spec:
            values.append(("embedder_spec", spec))
        self._conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", values)

    def _tactic_row(self, signature: str) -> sqlite3.Row | None:
        rows = self.query(
            f"SELECT {_RECORD_COLUMNS} FROM records WHERE signature = ?", (signature,)
        )
        return rows[0] if rows else None

    def record_success(
        self,
        *,
        profile_hash: str,
        tool: str,
        endpoint: str,
        param: str,
        proof: str | None = None,
        content: str | None = None,
        technique: str | None = None,
        target: str | None = None,
        expires_at: str | datetime | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> int:
        """Record a successful tactic: the only creator of tactics; repeats increment.

        A repeat success on the same signature updates that one row (never a
        duplicate): the counts, the grade (up only, with ``proof``) and the
        targets seen. Its ``expires_at``, when given, becomes the tactic's
        expiry: the newest success says how long the tactic is good for, so a
        tactic that had expired is live again when the new expiry is later than
        now (its counts carry on). Without ``expires_at`` the expiry stays as it
        was, expired included. ``content`` and ``technique`` are kept from the
        first success.
        """
        _require_text(profile_hash=profile_hash, tool=tool, endpoint=endpoint, param=param)
        signature = tactic_signature(profile_hash, tool, endpoint, param)
        with self._write():
            row = self._tactic_row(signature)
            if row is not None:
                record = _row_to_record(row)
                if record.refuted:
                    raise MemoryStoreError(
                        f"tactic #{record.id} is refuted; a new success is refused. Forget it "
                        "and record it afresh if it really works again"
                    )
                expiry = record.expires_at if expires_at is None else _expiry(expires_at)
                meta = _rewritable_metadata(record)
                attempts = int(meta.get("total_attempts", 0)) + 1
                successes = int(meta.get("total_successes", 0)) + 1
                _apply_counts(meta, successes, attempts)
                if proof:
                    meta["evidence_grade"] = "proven"
                    meta["proof"] = proof
                if target:
                    seen = list(meta.get("targets_seen", []))
                    hashed = anonymize_target(target)
                    if hashed not in seen:
                        seen.append(hashed)
                    meta["targets_seen"] = seen
                self._conn.execute(
                    "UPDATE records SET metadata = ?, expires_at = ? WHERE id = ?",
                    (_canonical(meta), expiry, record.id),
                )
                return record.id
            url_pattern = normalize_endpoint(endpoint)
            meta = dict(metadata or {})
            meta.update(
                {
                    "signature": signature,
                    "param_name": param,
                    "bypass_technique": technique,
                    "evidence_grade": "proven" if proof else "hypothesis",
                    "targets_seen": [anonymize_target(target)] if target else [],
                    "refuted": False,
                }
            )
            if proof:
                meta["proof"] = proof
            _apply_counts(meta, 1, 1)
            text = content or compose_tactic_text(tool, url_pattern, param, technique)
            return self._insert_record(
                tier="longterm",
                record_type="tactic",
                content=text,
                metadata=meta,
                expires_at=expires_at,
                signature=signature,
                profile_hash=profile_hash,
                tool_name=tool,
                url_pattern=url_pattern,
            )

    def record_failure(
        self,
        *,
        profile_hash: str,
        tool: str,
        endpoint: str,
        param: str,
        proof: str | None = None,
        content: str | None = None,
        technique: str | None = None,
        target: str | None = None,
        expires_at: str | datetime | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> int | None:
        """Count a failed attempt on a known tactic; an unknown signature creates nothing.

        Takes the same keys as ``record_success``, so an agent can pass one set
        of arguments to either, and refuses any other (``TypeError``): a
        misspelled key is a mistake, not something to drop. Only the signature
        (profile, tool, endpoint, param) matters: a failure proves nothing and
        changes no text, expiry, target list or metadata.
        """
        signature = tactic_signature(profile_hash, tool, endpoint, param)
        with self._write():
            row = self._tactic_row(signature)
            if row is None:
                return None
            record = _row_to_record(row)
            meta = _rewritable_metadata(record)
            attempts = int(meta.get("total_attempts", 0)) + 1
            _apply_counts(meta, int(meta.get("total_successes", 0)), attempts)
            if record.refuted:
                meta["confidence"] = 0.0
            self._conn.execute(
                "UPDATE records SET metadata = ? WHERE id = ?", (_canonical(meta), record.id)
            )
            return record.id

    def record_refuted(
        self,
        *,
        profile_hash: str,
        tool: str,
        endpoint: str,
        param: str,
        reason: str,
        operator: str | None = None,
        proof: str | None = None,
        content: str | None = None,
        technique: str | None = None,
        target: str | None = None,
        expires_at: str | datetime | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> int | None:
        """The agent's own correction: flag a known tactic refuted (audited); else nothing.

        Takes ``record_success``'s keys plus ``reason`` and ``operator``, and
        refuses any other (``TypeError``). Only the signature and the reason
        matter; the other keys are accepted so one set of arguments fits every
        tactic writer.
        """
        signature = tactic_signature(profile_hash, tool, endpoint, param)
        with self._write():
            row = self._tactic_row(signature)
            if row is None:
                return None
            record = _row_to_record(row)
            if not record.refuted:
                self._refute_locked(record, reason, operator, action="agent-refute")
            return record.id

    def refute(self, record_id: int, *, reason: str, operator: str | None = None) -> int:
        """Operator refutation of a tactic; returns the audit event id."""
        _require_reason(reason)
        with self._write():
            record = self._existing(record_id)
            if record.record_type != "tactic":
                raise MemoryStoreError(
                    f"record #{record.id} is a {record.record_type}, not a tactic; "
                    "only tactics can be refuted (forget it instead)"
                )
            if record.refuted:
                raise MemoryStoreError(f"tactic #{record.id} is already refuted")
            return self._refute_locked(record, reason, operator, action="refute")

    def _refute_locked(
        self, record: MemoryRecord, reason: str, operator: str | None, *, action: str
    ) -> int:
        meta = _rewritable_metadata(record)
        previous_grade = meta.get("evidence_grade")
        meta.update(
            {
                "refuted": True,
                "refuted_reason": reason,
                "refuted_at": self.now_text(),
                "evidence_grade": "hypothesis",
                "confidence": 0.0,
            }
        )
        self._conn.execute(
            "UPDATE records SET refuted = 1, metadata = ? WHERE id = ?",
            (_canonical(meta), record.id),
        )
        return self._append_audit(
            action=action,
            record_ids=[record.id],
            operator=operator,
            tier=record.tier,
            record_type=record.record_type,
            signature=record.signature,
            reason=reason,
            details={"previous_grade": previous_grade, "count": 1},
        )

    def record_finding(
        self,
        *,
        finding_id: str,
        run_id: str,
        engagement: str,
        severity: str,
        title: str,
        url: str,
        type: str,
        false_positive: bool = False,
        profile_hash: str | None = None,
        expires_at: str | datetime | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> int:
        """An episodic finding of one engagement and run; its title is its content.

        The same ``finding_id`` in the same engagement updates that finding
        instead of adding a second one.
        """
        _require_text(finding_id=finding_id, run_id=run_id, engagement=engagement, title=title)
        if severity not in SEVERITIES:
            raise MemoryStoreError(f"severity {severity!r} is not one of {', '.join(SEVERITIES)}")
        meta = dict(metadata or {})
        meta.update(
            {
                "finding_id": finding_id,
                "severity": severity,
                "url": url,
                "type": type,
                "false_positive": bool(false_positive),
            }
        )
        path = re.sub(r"^[a-zA-Z][a-zA-Z0-9+.-]*://[^/]*", "", url or "")
        with self._write():
            existing = self._conn.execute(
                "SELECT id FROM records WHERE engagement = ? AND record_type = 'finding' "
                "AND json_extract(metadata, '$.finding_id') = ?",
                (engagement, finding_id),
            ).fetchone()
            if existing is not None:
                self._conn.execute(
                    "UPDATE records SET content = ?, run_id = ?, metadata = ?, url_pattern = ?, "
                    "profile_hash = ?, expires_at = ? WHERE id = ?",
                    (
                        title,
                        run_id,
                        _canonical(meta),
                        normalize_endpoint(path),
                        profile_hash,
                        _expiry(expires_at),
                        existing[0],
                    ),
                )
                if self.embedder is not None:
                    self._store_vectors([(existing[0], title)])
                return existing[0]
            return self._insert_record(
                tier="episodic",
                record_type="finding",
                content=title,
                metadata=meta,
                expires_at=expires_at,
                engagement=engagement,
                run_id=run_id,
                profile_hash=profile_hash,
                url_pattern=normalize_endpoint(path),
            )

    def add_record(
        self,
        *,
        tier: str,
        record_type: str,
        content: str,
        metadata: dict[str, Any] | None = None,
        expires_at: str | datetime | None = None,
        profile_hash: str | None = None,
        engagement: str | None = None,
        run_id: str | None = None,
        tool_name: str | None = None,
        url_pattern: str | None = None,
    ) -> int:
        """A note, observation or reference; tactics and findings have their own writers."""
        if record_type in ("tactic", "finding"):
            raise MemoryStoreError(f"use record_success / record_finding to write a {record_type}")
        _require_text(content=content)
        with self._write():
            return self._insert_record(
                tier=tier,
                record_type=record_type,
                content=content,
                metadata=dict(metadata or {}),
                expires_at=expires_at,
                profile_hash=profile_hash,
                engagement=engagement,
                run_id=run_id,
                tool_name=tool_name,
                url_pattern=url_pattern,
            )

    # ------------------------------------------------------------------ ingest

    def ingest(
        self,
        rows: Sequence[dict[str, Any]],
        *,
        source: str | None = None,
        operator: str | None = None,
        progress: Progress | None = None,
        vectors: Any = None,
        embedder_name: str | None = None,
    ) -> list[int]:
        """Bulk-load prepared records (see ``memtui.core.corpus``) in one transaction.

        Rows are inserted with the per-row index trigger set aside and indexed in
        one statement afterwards; one summary audit event records the load.
        Anything wrong loads nothing.

        ``vectors`` optionally gives each row's embedding, precomputed (a
        sequence of equal-length float sequences, or a 2-D numpy array, one row
        per record): they are stored as they are, instead of being computed by
        the store's embedder, and the file records ``embedder_name`` (default:
        the store's embedder's name) with their dimension as the embedder that
        wrote them.
        """
        total = len(rows)
        bulk = None
        if vectors is not None:
            bulk = self._bulk_vectors_checked(vectors, total, embedder_name)
        with self._write():
            signatures = [row.get("signature") for row in rows if row.get("signature")]
            for start in range(0, len(signatures), 500):
                chunk = signatures[start : start + 500]
                marks = ",".join("?" * len(chunk))
                clash = self._conn.execute(
                    f"SELECT id, signature FROM records WHERE signature IN ({marks}) LIMIT 1",
                    chunk,
                ).fetchone()
                if clash is not None:
                    index = next(i for i, r in enumerate(rows) if r.get("signature") == clash[1])
                    raise MemoryStoreError(
                        f"record {index}: this tactic is already in the database as "
                        f"#{clash[0]}; a corpus is ingested once"
                    )
            before = self._conn.execute("SELECT coalesce(max(id), 0) FROM records").fetchone()[0]
            was_empty = self._conn.execute("SELECT 1 FROM records LIMIT 1").fetchone() is None
            self._conn.execute("DROP TRIGGER records_ai")
            now = self.now_text()
            insert = (
                "INSERT INTO records (tier, record_type, content, profile_hash, engagement, "
                "run_id, tool_name, url_pattern, signature, metadata, refuted, created_at, "
                "expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            )
            by_tier: dict[str, int] = {}
            batch_size = 5000
            # Rows become SQL parameters in a helper thread while SQLite inserts the
            # previous batch (the sqlite3 module releases the GIL while it steps).
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="memtui-ingest") as pool:
                pending = pool.submit(_ingest_batch, rows, 0, batch_size, now, by_tier)
                for start in range(0, total, batch_size):
                    batch = pending.result()
                    if start + batch_size < total:
                        pending = pool.submit(
                            _ingest_batch, rows, start + batch_size, batch_size, now, by_tier
                        )
                    self._conn.executemany(insert, batch)
                    done = start + len(batch)
                    if progress and done < total:
                        progress(done, total)
            last = self._conn.execute("SELECT coalesce(max(id), 0) FROM records").fetchone()[0]
            if last - before == total:
                # Fresh rowids are max + 1 each: the new ids are one contiguous run.
                ids = list(range(before + 1, last + 1))
            else:
                ids = [
                    r[0]
                    for r in self._conn.execute(
                        "SELECT id FROM records WHERE id > ? ORDER BY id", (before,)
                    ).fetchall()
                ]
            if was_empty:
                self._conn.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')")
            else:
                self._conn.execute(
                    f"INSERT INTO {FTS_TABLE}(rowid, content) "
                    "SELECT id, content FROM records WHERE id > ?",
                    (before,),
                )
            if was_empty or total * 10 >= before:
                # A big load leaves the index in many segments; merge them now, so
                # that the first forget does not pay for it.
                self._purge_index()
            self._conn.execute(_INSERT_TRIGGER)
            if bulk is not None:
                matrix, name = bulk
                self._adopt_bulk_vectors(name, matrix.shape[1])
                with self._vector_triggers_off():
                    step = 20000
                    for start in range(0, len(ids), step):
                        part = matrix[start : start + step]
                        self._conn.executemany(
                            "INSERT OR REPLACE INTO vectors (record_id, vector) VALUES (?, ?)",
                            zip(ids[start : start + step], map(bytes, part), strict=True),
                        )
            elif self.embedder is not None:
                with self._vector_triggers_off():
                    for start in range(0, len(ids), 512):
                        chunk_ids = ids[start : start + 512]
                        texts = [rows[i]["content"] for i in range(start, start + len(chunk_ids))]
                        self._store_vectors(list(zip(chunk_ids, texts, strict=True)))
            details: dict[str, Any] = {"count": total, "by_tier": by_tier}
            if ids:
                details["id_range"] = [ids[0], ids[-1]]
            if source:
                details["source"] = source
            if bulk is not None:
                details["embedder"] = bulk[1]
            elif self.embedder is not None:
                details["embedder"] = self.embedder.name
            self._append_audit(
                action="ingest",
                record_ids=[],
                operator=operator,
                reason=None,
                details=details,
            )
            if progress:
                progress(total, total)
            return ids

    def _bulk_vectors_checked(
        self, vectors: Any, total: int, embedder_name: str | None
    ) -> tuple[Any, str]:
        """Precomputed vectors as a C-contiguous little-endian float32 matrix, checked."""
        import numpy as np

        name = embedder_name or (self.embedder.name if self.embedder is not None else None)
        if not name:
            raise MemoryStoreError(
                "precomputed vectors need the name of the embedder that made them "
                "(embedder_name=...)"
            )
        try:
            matrix = np.ascontiguousarray(vectors, dtype="<f4")
        except (TypeError, ValueError) as exc:
            raise MemoryStoreError(f"precomputed vectors are not a numeric matrix: {exc}") from None
        if matrix.ndim != 2 or matrix.shape[0] != total or matrix.shape[1] < 1:
            raise MemoryStoreError(
                f"precomputed vectors must be one vector per record ({total} rows of equal "
                f"length); got shape {matrix.shape}"
            )
        if not np.isfinite(matrix).all():
            raise MemoryStoreError("precomputed vectors contain a non-finite value")
        dim = int(matrix.shape[1])
        if self.embedder is not None and (self.embedder.name, self.embedder.dim) != (name, dim):
            raise MemoryStoreError(
                f"precomputed vectors are {name} ({dim} dims) but this store writes with "
                f"{self.embedder.name} ({self.embedder.dim} dims)"
            )
        recorded = self.recorded_embedder()
        if recorded and (recorded["name"], recorded["dim"]) != (name, dim):
            if self.query("SELECT 1 FROM vectors LIMIT 1"):
                raise MemoryStoreError(
                    f"this database's vectors were written by {recorded['name']} "
                    f"({recorded['dim']} dims), not {name} ({dim} dims); re-index first"
                )
        return matrix, name

    def _adopt_bulk_vectors(self, name: str, dim: int) -> None:
        recorded = self.recorded_embedder()
        if recorded != {"name": name, "dim": dim}:
            self._conn.execute(
                "DELETE FROM meta WHERE key IN ('embedder_name', 'embedder_dim', 'embedder_spec')"
            )
            self._conn.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?)",
                [("embedder_name", name), ("embedder_dim", str(dim))],
            )

    @contextlib.contextmanager
    def _vector_triggers_off(self) -> Iterator[None]:
        """Inside a write: set the per-row generation triggers aside, bump once after.

        A bulk load or delete of vectors then costs one generation bump, not one
        per row; the triggers are back before the transaction commits.
        """
        for name in _VECTOR_TRIGGER_NAMES:
            self._conn.execute(f"DROP TRIGGER IF EXISTS {name}")
        try:
            yield
        finally:
            for trigger in _VECTOR_TRIGGERS:
                self._conn.execute(trigger)
            self._conn.execute(_BUMP_GENERATION)

    def vectors_generation(self) -> int | None:
        """The vectors generation counter: it changes whenever any vector is written or deleted."""
        rows = self.query("SELECT value FROM meta WHERE key = 'vectors_generation'")
        return int(rows[0][0]) if rows else None

    def reindex_vectors(
        self,
        embedder: Embedder | None,
        *,
        operator: str | None = None,
        progress: Progress | None = None,
    ) -> int:
        """Recompute every record's vector with ``embedder`` (None drops them all); audited."""
        total = self.record_count()
        previous = self.embedder
        try:
            return self._reindex_locked(embedder, total, operator, progress)
        except BaseException:
            self.embedder = previous  # rolled back: the store writes as before
            raise

    def _reindex_locked(
        self,
        embedder: Embedder | None,
        total: int,
        operator: str | None,
        progress: Progress | None,
    ) -> int:
        with self._write(), self._vector_triggers_off():
            self._conn.execute("DELETE FROM vectors")
            self.embedder = embedder
            self._set_embedder_meta(embedder)
            done = 0
            if embedder is not None:
                last = 0
                while True:
                    chunk = self.query(
                        "SELECT id, content FROM records WHERE id > ? ORDER BY id LIMIT 512",
                        (last,),
                    )
                    if not chunk:
                        break
                    self._store_vectors([(r[0], read_row_text(r[1])[0]) for r in chunk])
                    last = chunk[-1][0]
                    done += len(chunk)
                    if progress:
                        progress(done, total)
            self._drop_vector_cache(())
            self._append_audit(
                action="reindex",
                record_ids=[],
                operator=operator,
                details={
                    "count": done,
                    "embedder": embedder.name if embedder else None,
                    "dim": embedder.dim if embedder else None,
                },
            )
        return done

    def reveal(
        self, record_id: int, field: str, *, reason: str, operator: str | None = None
    ) -> Any:
        """Return one masked metadata field's value, writing a ``reveal`` audit event.

        The event names the record and the field, never the value.
        """
        _require_reason(reason)
        with self._write():
            record = self._existing(record_id)
            if field not in secret_paths(record.metadata):
                raise MemoryStoreError(
                    f"record #{record.id} has no masked field {field!r}; "
                    f"masked fields: {', '.join(secret_paths(record.metadata)) or 'none'}"
                )
            value = value_at(record.metadata, field)
            self._append_audit(
                action="reveal",
                record_ids=[record.id],
                operator=operator,
                tier=record.tier,
                record_type=record.record_type,
                signature=record.signature,
                reason=reason,
                details={"field": field},
            )
        return value

    def rebuild_text_index(self, *, operator: str | None = None) -> int:
        """Rebuild the full-text index from the records table; audited. Returns rows indexed."""
        with self._write():
            self._conn.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')")
            count = self._conn.execute("SELECT count(*) FROM records").fetchone()[0]
            self._append_audit(
                action="reindex-text", record_ids=[], operator=operator, details={"count": count}
            )
        return count

    def compact(self, *, operator: str | None = None) -> dict[str, int]:
        """Rewrite the file without free pages (VACUUM), then audit it.

        Content deleted before secure_delete was on can survive in free pages;
        a compacted file holds only live pages.
        """
        self._require_writable()
        with self._lock:
            before = self._conn.execute("PRAGMA freelist_count").fetchone()[0]
            try:
                self._conn.execute("VACUUM")
            except sqlite3.OperationalError as exc:
                raise MemoryStoreError(f"cannot compact now: {exc}") from None
        purged, _ = self._checkpoint()
        with self._write():
            self._append_audit(
                action="compact",
                record_ids=[],
                operator=operator,
                details={"free_pages_before": before, "wal_truncated": purged},
            )
        self._checkpoint()
        return {"free_pages_before": before}

    # ------------------------------------------------------------------ forget

    def _existing(self, record_id: int) -> MemoryRecord:
        try:
            key = int(record_id)
        except (TypeError, ValueError):
            raise MemoryStoreError(f"record id must be a whole number, got {record_id!r}") from None
        rows = self.query(f"SELECT {_RECORD_COLUMNS} FROM records WHERE id = ?", (key,))
        if not rows:
            raise MemoryStoreError(f"no record with id {key}")
        return _row_to_record(rows[0])

    def forget(self, record_id: int, *, reason: str, operator: str | None = None) -> bool:
        """Erase one record: row, index entries and vector; audited.

        Returns whether erasure was verified: the record is gone from the table,
        the full-text index and the vectors (its row of a cached copy of the
        vectors overwritten with zeros), and the WAL was checkpointed so no old
        page with its content survives in the file.
        """
        _require_reason(reason)
        with self._lock:  # no search between the commit and the cache's carry-over
            with self._write():
                record = self._existing(record_id)
                before = self._vector_cache_identity()
                with _delete_refusal(self.path):
                    self._conn.execute("DELETE FROM records WHERE id = ?", (record.id,))
                self._purge_index()
                erasure = self._erase_vector_cache([record.id], before)
                checks = self._erasure_checks([(record.id, record.content)])
                if erasure.erased is not None:
                    checks["vector_cache_erased"] = erasure.erased
                event_id = self._append_audit(
                    action="forget",
                    record_ids=[record.id],
                    operator=operator,
                    tier=record.tier,
                    record_type=record.record_type,
                    signature=record.signature,
                    reason=reason,
                    details={"count": 1, "erasure": checks},
                )
            self._carry_vector_cache(erasure)
        finish = self._finish_erasure(event_id, [record.content], checks, operator, [record.id])
        self._empty_vector_trash()
        return finish.verified

    def forget_scope(
        self,
        *,
        engagement: str,
        reason: str,
        operator: str | None = None,
        progress: Progress | None = None,
    ) -> ScopeForgetResult:
        """Forget every record of one engagement in one transaction with one audit event.

        Tactics are not engagement-scoped and stay. Returns the number forgotten,
        as a ``ScopeForgetResult``: an ``int`` that also says whether erasure was
        verified (``.verified``, ``.problem``) and names the ``forget-scope``
        audit event (``.event_id``); when the WAL could not be truncated, an
        ``erasure-incomplete`` event follows it (``.incomplete_event_id``), as
        for ``forget``. The full-text purge runs once for the whole scope.
        ``progress(done, total)`` is called as records are deleted and then
        verified gone: two steps per record, so ``total`` is twice the number
        of records.
        """
        _require_reason(reason)
        _require_text(engagement=engagement)
        with self._lock:  # no search between the commit and the cache's carry-over
            with self._write():
                rows = self.query(
                    "SELECT id, tier, record_type, content FROM records WHERE engagement = ? "
                    "ORDER BY id",
                    (engagement,),
                )
                if not rows:
                    raise MemoryStoreError(f"engagement {engagement!r} has no records to forget")
                by_tier: dict[str, dict[str, int]] = {}
                for row in rows:
                    tier = by_tier.setdefault(row[1], {})
                    tier[row[2]] = tier.get(row[2], 0) + 1
                ids = [row[0] for row in rows]
                steps = 2 * len(ids)
                before = self._vector_cache_identity()
                with self._vector_triggers_off(), _delete_refusal(self.path):
                    for start in range(0, len(ids), 2000):
                        chunk = ids[start : start + 2000]
                        self._conn.execute(
                            "DELETE FROM records WHERE id IN (SELECT value FROM json_each(?))",
                            (_canonical(chunk),),
                        )
                        if progress:
                            progress(start + len(chunk), steps)
                self._purge_index()
                erasure = self._erase_vector_cache(ids, before)
                checks = self._erasure_checks(
                    [(row[0], read_row_text(row[3])[0]) for row in rows],
                    progress=(lambda done: progress(len(ids) + done, steps)) if progress else None,
                )
                if erasure.erased is not None:
                    checks["vector_cache_erased"] = erasure.erased
                event_id = self._append_audit(
                    action="forget-scope",
                    record_ids=ids,
                    operator=operator,
                    reason=reason,
                    details={
                        # The scope's name is what changed (its records' values
                        # are not kept): the log can say which engagement went.
                        "scope": {"engagement": engagement, "engagement_records": len(ids)},
                        "count": len(ids),
                        "by_tier": by_tier,
                        "erasure": checks,
                    },
                )
            self._carry_vector_cache(erasure)
        finish = self._finish_erasure(event_id, [row[3] for row in rows], checks, operator, ids)
        self._empty_vector_trash()
        return ScopeForgetResult(
            len(ids),
            verified=finish.verified,
            event_id=event_id,
            problem=finish.problem,
            incomplete_event_id=finish.incomplete_event_id,
            checks=checks,
        )

    def _drop_vector_cache(self, forgotten: Sequence[int]) -> bool | None:
        """Invalidate every cached copy of the vectors (memtui.core.vector_cache).

        Returns whether no cache file is left, or None when there was none to
        begin with (an in-memory or small store, or one never searched by vector).
        """
        from memtui.core import vector_cache

        had_files = bool(vector_cache.cache_files(self))
        gone = vector_cache.invalidate(self, forgotten, empty_now=False)
        return gone if had_files else None

    def _vector_cache_identity(self) -> Any:
        """Inside a forget's transaction, before the delete: what a current cache matches."""
        from memtui.core import vector_cache

        return vector_cache.identity(self)

    def _erase_vector_cache(self, forgotten: Sequence[int], before: Any) -> Any:
        """Inside a forget's transaction, after the delete: zero the rows in every cached copy.

        Returns a ``vector_cache.Erasure``; its ``erased`` (None when the
        database has no cache file) goes in the audit as ``vector_cache_erased``.
        """
        from memtui.core import vector_cache

        return vector_cache.erase(self, forgotten, before)

    def _carry_vector_cache(self, erasure: Any) -> None:
        """After the forget committed: zero copies published meanwhile, keep the cache current."""
        from memtui.core import vector_cache

        vector_cache.carry_over(self, erasure)

    def _empty_vector_trash(self) -> None:
        from memtui.core import vector_cache

        vector_cache.empty_trash()

    def _purge_index(self) -> None:
        # 'optimize' merges the index into one segment, dropping the deleted
        # postings and delete markers; with secure_delete on, the freed pages
        # are zeroed. It rewrites the whole index: a bigger page cache for the
        # while saves re-reading pages (10-15% at a million records).
        cache_size = self._conn.execute("PRAGMA cache_size").fetchone()[0]
        self._conn.execute(f"PRAGMA cache_size = {_PURGE_CACHE_KIB}")
        try:
            self._conn.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('optimize')")
        finally:
            self._conn.execute(f"PRAGMA cache_size = {int(cache_size)}")

    def _erasure_checks(
        self,
        records: Sequence[tuple[int, str]],
        progress: Callable[[int], None] | None = None,
    ) -> dict[str, bool]:
        """Verify each ``(id, content)`` is gone from the table, the index and the vectors."""
        ids = [record_id for record_id, _ in records]
        row_gone = index_gone = vector_gone = True
        for start in range(0, len(ids), 5000):
            chunk = _canonical(ids[start : start + 5000])
            if self._conn.execute(
                "SELECT 1 FROM records WHERE id IN (SELECT value FROM json_each(?)) LIMIT 1",
                (chunk,),
            ).fetchone():
                row_gone = False
            if self._conn.execute(
                "SELECT 1 FROM vectors WHERE record_id IN (SELECT value FROM json_each(?)) LIMIT 1",
                (chunk,),
            ).fetchone():
                vector_gone = False
        if len(records) <= _PROBE_EACH_MAX:
            index_gone = self._probe_each(records, progress)
        else:
            index_gone = self._probe_by_word(records, progress)
        if progress:
            progress(len(records))
        return {"row_gone": row_gone, "index_gone": index_gone, "vector_gone": vector_gone}

    def _probe_each(
        self, records: Sequence[tuple[int, str]], progress: Callable[[int], None] | None
    ) -> bool:
        """One FTS5 query per record: any of its first words, at its rowid."""
        probe_sql = f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ? AND rowid = ?"
        for done, (record_id, content) in enumerate(records, start=1):
            probe = _index_probe(content)
            if probe is not None:
                if self._conn.execute(probe_sql, (probe, record_id)).fetchone() is not None:
                    return False
            if progress and done % 2000 == 0:
                progress(done)
        return True

    def _probe_by_word(
        self, records: Sequence[tuple[int, str]], progress: Callable[[int], None] | None
    ) -> bool:
        """The same probe words, each looked up once for every forgotten record at once.

        For each distinct probe word, the index's rows holding it (between the
        lowest and highest forgotten id that has it) must include none of the
        forgotten records: a forgotten record has no posting left at all. This
        reads each word's postings once instead of seeking them once per record.
        """
        import numpy as np

        holders: dict[str, list[int]] = {}
        for record_id, content in records:
            for word in _probe_words(content):
                holders.setdefault(word, []).append(record_id)
        forgotten = np.sort(np.asarray([record_id for record_id, _ in records], dtype=np.int64))
        sql = (
            f"SELECT group_concat(rowid) FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ? "
            "AND rowid >= ? AND rowid <= ?"
        )
        total = len(holders)
        for done, (word, ids) in enumerate(holders.items(), start=1):
            low, high = min(ids), max(ids)
            text = self._conn.execute(sql, (_quoted(word), low, high)).fetchone()[0]
            if text:
                found = np.fromstring(text, dtype=np.int64, sep=",")
                where = np.searchsorted(forgotten, found)
                where[where >= len(forgotten)] = len(forgotten) - 1
                if bool((forgotten[where] == found).any()):
                    return False
            if progress and done % 500 == 0:
                progress(len(records) * done // total)
        return True

    def _finish_erasure(
        self,
        event_id: int,
        contents: Sequence[str],
        checks: dict[str, bool],
        operator: str | None,
        ids: Sequence[int],
    ) -> _Finish:
        """Truncate the WAL so no old page image survives, then look for the forgotten
        text in the whole file; audit a failure of either (``erasure-incomplete``)."""
        purged, detail = self._checkpoint()
        failed_check = "wal_truncated"
        if purged:
            gone, problem = self._forgotten_text_gone(contents)
            if gone is not None:
                checks["bytes_gone"] = gone
            if problem is not None:
                purged, detail, failed_check = False, problem, "bytes_gone"
        if not purged:
            with self._write():
                incomplete = self._append_audit(
                    action="erasure-incomplete",
                    record_ids=ids,
                    operator=operator,
                    details={"forget_event": event_id, "problem": detail, "check": failed_check},
                )
            # The action's own event is what callers name; the follow-up points to it.
            self.last_event_id = event_id
            return _Finish(False, detail, incomplete)
        if not all(checks.values()):
            failed = ", ".join(sorted(name for name, held in checks.items() if not held))
            return _Finish(False, f"erasure checks failed: {failed}")
        return _Finish(True)

    def _forgotten_text_gone(self, contents: Sequence[str]) -> tuple[bool | None, str | None]:
        """Whether the forgotten records' text is gone from the file and its WAL, and if
        not, why in words (never the text).

        Read after the checkpoint, byte by byte, every table and free page alike:
        a copy made by something memtui did not write (a trigger of its own, say)
        shows here. Text that memtui's own data still holds (another live record,
        an audit event, the schema) is not a copy. The file is read once for each
        record looked for, as many as ``_BYTE_SCAN_BUDGET`` allows (at least
        one), spread over the forgotten ones. ``(None, None)`` when nothing was
        looked for (an in-memory store, texts too short to look for).
        """
        if self.path is None:
            return None, None
        probes = [p for p in dict.fromkeys(_byte_probe(text) for text in contents) if p]
        if not probes:
            return None, None
        parts = [p for p in (self.path, Path(f"{self.path}-wal")) if p.exists()]
        size = max(1, sum(p.stat().st_size for p in parts))
        count = max(1, min(len(probes), _BYTE_SCAN_BUDGET // size))
        step = len(probes) / count
        chosen = [probes[int(i * step)] for i in range(count)]
        found = _files_holding(parts, chosen)
        if found is None:
            return False, "the database file could not be read to look for the forgotten text"
        with self._lock:
            if any(not self._text_kept(chosen[i]) for i in found):
                return False, (
                    "a forgotten record's text is still in the database file, outside its "
                    "records and audit reasons: something memtui did not create copied it "
                    "(memtui check names it)"
                )
        return True, None

    def _text_kept(self, probe: bytes) -> bool:
        """Whether memtui's own data still holds ``probe``: a live record (any field), an
        audit event (a reason, a record type...) or the schema."""
        holders = (
            ("records", _RECORD_COLUMNS),
            ("audit_events", _AUDIT_TEXT_COLUMNS),
            ("sqlite_master", "sql"),
        )
        sql = " UNION ALL ".join(
            f"SELECT 1 FROM {table} WHERE "
            + " OR ".join(f"instr({column.strip()}, ?1) > 0" for column in columns.split(","))
            for table, columns in holders
        )
        return bool(self._conn.execute(f"{sql} LIMIT 1", (probe.decode("utf-8"),)).fetchone())

    def _checkpoint(self) -> tuple[bool, str | None]:
        if self.path is None:
            return True, None
        # The checkpoint waits for readers through the busy handler; keep each
        # wait short so that a pinned WAL costs a bounded, reported delay.
        for attempt in range(CHECKPOINT_RETRIES):
            with self._lock:
                self._conn.execute("PRAGMA busy_timeout = 50")
                try:
                    busy, _, _ = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                finally:
                    self._conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            if busy == 0:
                return True, None
            time.sleep(CHECKPOINT_RETRY_DELAY * (attempt + 1))
        return False, (
            "another connection holds a read transaction, so the write-ahead log "
            "could not be truncated; old page images may remain until it is"
        )

    def checkpoint(self) -> bool:
        """Checkpoint and truncate the WAL now; True when it finished."""
        return self._checkpoint()[0]


# ---------------------------------------------------------------- helpers


def migrate_database(
    path: str | Path, *, operator: str | None = None, clock: Clock | None = None
) -> dict[str, Any]:
    """Upgrade the memtui database at ``path`` to this memtui's schema, in place.

    What a writable open does on its own, for a file that read-only opens
    refuse until it is done. The migrations are forward-only and run in one
    transaction with a ``migrate`` audit event. Refuses, changing nothing: a
    missing path, a file that is not SQLite, an empty file (there is nothing
    to upgrade: ingest makes a database), another program's database and a
    file from a newer memtui. Returns ``{"from_schema", "to_schema",
    "event_id"}`` (``event_id`` None when the file was already current).
    """
    path = Path(path)
    if path.is_dir():
        raise MemoryStoreError(f"{path} is a directory, not a memtui database file")
    if not path.exists():
        raise MemoryStoreError(f"no database at {path}; check the path")
    problem = sqlite_file_problem(path)
    if problem is not None:
        raise MemoryStoreError(f"{path} {problem}")
    probe = sqlite3.connect(f"file:{_uri_path(path)}?mode=ro", uri=True)
    try:
        version = probe.execute("PRAGMA user_version").fetchone()[0]
        tables = probe.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'")
        has_tables = tables.fetchone()[0] > 0
    except SQLITE_READ_ERRORS as exc:
        raise MemoryStoreError(
            f"{path} is not a usable SQLite database: {sqlite_error_text(exc)}"
        ) from None
    finally:
        probe.close()
    if version == 0 and not has_tables:
        empty = "empty (0 bytes)" if path.stat().st_size == 0 else "without tables"
        raise MemoryStoreError(
            f"{path} is {empty}: there is nothing to upgrade; "
            f"`memtui ingest CORPUS.json --db {path}` makes a memtui database there"
        )
    with MemoryStore(path, clock=clock, operator=operator) as store:  # refuses newer, foreign
        event_id = store.last_event_id if version != SCHEMA_VERSION else None
    return {"from_schema": version, "to_schema": SCHEMA_VERSION, "event_id": event_id}


def check_filter_key(key: str) -> None:
    if key not in FILTER_ALLOWLIST:
        raise MemoryStoreError(
            f"filter '{key}' is not in the scope-key allowlist "
            f"({', '.join(sorted(FILTER_ALLOWLIST))})"
        )


def compose_tactic_text(tool: str, url_pattern: str, param: str, technique: str | None) -> str:
    """Searchable text of a tactic recorded without content of its own."""
    parts = [tool, url_pattern, f"param {param}"]
    if technique:
        parts.append(technique)
    return " ".join(parts)


def tactic_metadata(
    *,
    profile_hash: str,
    tool: str,
    endpoint: str,
    param: str,
    successes: int,
    attempts: int,
    proof: str | None = None,
    technique: str | None = None,
    targets: Iterable[str] = (),
    refuted: bool = False,
    refuted_reason: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A tactic's metadata from recorded counts, as ingest builds it."""
    meta = dict(extra or {})
    hashed: list[str] = []
    for target in targets:
        value = anonymize_target(target)
        if value not in hashed:
            hashed.append(value)
    meta.update(
        {
            "signature": tactic_signature(profile_hash, tool, endpoint, param),
            "param_name": param,
            "bypass_technique": technique,
            "evidence_grade": "proven" if proof and not refuted else "hypothesis",
            "targets_seen": hashed,
            "refuted": refuted,
        }
    )
    if proof:
        meta["proof"] = proof
    _apply_counts(meta, successes, attempts)
    if refuted:
        meta["confidence"] = 0.0
        if refuted_reason:
            meta["refuted_reason"] = refuted_reason
    return meta


def _apply_counts(meta: dict[str, Any], successes: int, attempts: int) -> None:
    meta["total_attempts"] = attempts
    meta["total_successes"] = successes
    meta["success_rate"] = successes / attempts if attempts else None
    bound = wilson_lower_bound(successes, attempts)
    meta["confidence"] = bound if bound is not None else 0.0


def _ingest_batch(
    rows: Sequence[dict[str, Any]], start: int, size: int, now: str, by_tier: dict[str, int]
) -> list[tuple[Any, ...]]:
    """SQL parameters of ``rows[start:start + size]`` for ``ingest``; counts tiers as it goes."""
    batch: list[tuple[Any, ...]] = []
    for index in range(start, min(start + size, len(rows))):
        row = rows[index]
        get = row.get
        tier = get("tier")
        if tier not in TIERS:
            raise MemoryStoreError(f"record {index}: unknown tier {tier!r}")
        by_tier[tier] = by_tier.get(tier, 0) + 1
        batch.append(
            (
                tier,
                row["record_type"],
                row["content"],
                get("profile_hash"),
                get("engagement"),
                get("run_id"),
                get("tool_name"),
                get("url_pattern"),
                get("signature"),
                _canonical(get("metadata") or {}),
                1 if get("refuted") else 0,
                _stored_timestamp(get("created_at")) or now,
                _stored_timestamp(get("expires_at")),
            )
        )
    return batch


_TEXT_COLUMNS = (
    "tier",
    "record_type",
    "content",
    "profile_hash",
    "engagement",
    "run_id",
    "tool_name",
    "url_pattern",
    "created_at",
    "expires_at",
    "signature",
)


def _row_to_record(row: sqlite3.Row) -> MemoryRecord:
    """A stored row as a record; what another writer left unreadable is named in
    ``damage`` (see ``read_row_text``, ``read_metadata``), never raised."""
    fields: dict[str, Any] = {}
    damage: list[str] = []
    for name in _TEXT_COLUMNS:
        value = row[name]
        if value.__class__ is not str and value is not None:
            value, problem = read_row_text(value)
            if problem is not None:
                damage.append(f"{name} {problem}")
        fields[name] = value
    metadata, problem = read_metadata(row["metadata"])
    if problem is not None:
        damage.append(problem)
    return MemoryRecord(
        id=row["id"],
        metadata=metadata,
        refuted=bool(row["refuted"]),
        damage=tuple(damage),
        **fields,
    )


@contextlib.contextmanager
def _delete_refusal(path: Path | None) -> Iterator[None]:
    """A delete that the database itself aborted, as the operator's one-line refusal.

    memtui's schema aborts no delete of a record: a trigger (or constraint)
    another program added did, and the whole forget rolls back with it.
    """
    try:
        yield
    except sqlite3.IntegrityError as exc:
        raise MemoryStoreError(
            f"the database refused the delete: {_shown(str(exc) or 'aborted')} (a trigger "
            "or constraint that memtui did not create); nothing was erased. Remove it to "
            f"forget here (sqlite3 {path or 'DB'} .schema shows the triggers)"
        ) from None


def _undecodable(exc: sqlite3.OperationalError) -> bool:
    """Whether a read failed on stored text that is not UTF-8 (``sqlite3``'s decoding)."""
    return str(exc).startswith("Could not decode to UTF-8")


def _audit_row(row: sqlite3.Row) -> dict[str, Any]:
    """An audit event with its JSON columns decoded; a value another writer stored that
    is not text, or not JSON, is kept as its text (``verify_audit`` reports the event)."""
    data = dict(row)
    for name in AUDIT_TEXT_COLUMNS:
        if name in data:
            data[name] = read_row_text(data[name])[0]
    for name in ("record_ids", "details"):
        try:
            data[name] = json.loads(data[name])
        except (TypeError, ValueError, RecursionError):
            pass
    return data


def _rewritable_metadata(record: MemoryRecord) -> dict[str, Any]:
    """A copy of the record's metadata to change and write back; refused when another
    writer left the metadata unreadable (writing it back would replace what is stored)."""
    damaged = [damage for damage in record.damage if damage.startswith("metadata ")]
    if damaged:
        raise MemoryStoreError(
            f"record #{record.id}'s {damaged[0]}, so memtui will not rewrite it; "
            "forget the record (it was written by another program)"
        )
    return dict(record.metadata)


def _expiry(value: str | datetime | None) -> str | None:
    try:
        return normalize_timestamp(value)
    except ValueError as exc:
        raise MemoryStoreError(f"expires_at: {exc}") from None


def _require_text(**values: Any) -> None:
    for name, value in values.items():
        if not isinstance(value, str) or not value.strip():
            raise MemoryStoreError(f"{name} is required and must be non-empty text")


def _shown(text: str, limit: int = 120) -> str:
    """Text read from the file (an embedder's name), cut short for a message."""
    return text if len(text) <= limit else text[:limit] + "..."


def _require_reason(reason: str) -> None:
    if not isinstance(reason, str) or not reason.strip():
        raise MemoryStoreError("a reason is required: say why, it goes into the audit log")


_PROBE_WORD = re.compile(r"\w+", re.UNICODE)


def _probe_words(content: str) -> list[str]:
    """The first eight distinct words of ``content``, lowercased."""
    words: list[str] = []
    for word in _PROBE_WORD.findall(content.lower()):
        if word not in words:
            words.append(word)
        if len(words) == 8:
            break
    return words


def _quoted(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def _byte_probe(content: str) -> bytes | None:
    """The bytes a forget looks for in the file: the text's first characters (None: too short)."""
    probe = content[:_PROBE_CHARS].encode("utf-8")
    return probe if len(probe) >= _PROBE_MIN_BYTES else None


# Run in a child process: closing a descriptor of the database file in this
# process would drop the POSIX locks of every SQLite connection it holds on it.
_FIND_BYTES = """
import mmap, sys
probes = [bytes.fromhex(h) for h in sys.stdin.read().split()]
found = set()
for name in sys.argv[1:]:
    try:
        handle = open(name, "rb")
    except FileNotFoundError:
        continue
    with handle:
        if handle.seek(0, 2):
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                found.update(i for i, p in enumerate(probes) if data.find(p) >= 0)
print(" ".join(map(str, sorted(found))))
"""


def _files_holding(paths: Sequence[Path], probes: Sequence[bytes]) -> list[int] | None:
    """The indexes of ``probes`` found in any of the files at ``paths``; None if unreadable."""
    import subprocess
    import sys

    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _FIND_BYTES, *map(str, paths)],
            input=" ".join(p.hex() for p in probes),
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return [int(i) for i in done.stdout.split()]


def _index_probe(content: str) -> str | None:
    """An FTS5 query matching any of the first distinct words of ``content``."""
    words = _probe_words(content)
    if not words:
        return None
    return " OR ".join(_quoted(w) for w in words)


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


def _uri_path(path: Path) -> str:
    from urllib.parse import quote

    return quote(str(path.resolve()), safe="/")
