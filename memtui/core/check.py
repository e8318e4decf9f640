"""``memtui check``: is this memory database whole, in step, and untampered?

Each check yields findings with a severity: ``problem`` (the file is damaged,
out of step or tampered with) or ``note`` (worth knowing, not a fault).
Nothing here changes the database: the FTS5 integrity check is a write
statement, so it runs inside a transaction that is always rolled back.

A damaged file can make any read fail, in any way (SQLite's "database disk
image is malformed", an error text that is not even UTF-8, a column of the
wrong type). Every check runs guarded: a failure becomes one named problem
("vectors: could not be read: ...") and the findings of the other checks stay.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from memtui.core.index import FTS_TABLE
from memtui.core.records import MemoryRecord, lenient_text
from memtui.core.store import MemoryStore
from memtui.core.store.audit import GENESIS_HASH, audit_hash, audit_value_problem
from memtui.core.store.files import SQLITE_MAGIC, uri_path
from memtui.core.store.rows import _RECORD_COLUMNS, _TEXT_COLUMNS, _row_to_record
from memtui.core.store.schema import SCHEMA_VERSION

#: integrity_check lines reported at most (the rest are counted)
INTEGRITY_LINES = 20
#: free pages read at most, to tell zeroed ones from ones holding old bytes
FREE_PAGES_INSPECTED = 65_536
#: damaged records reported one line each (the ids of the rest on one more line)
DAMAGED_ROWS_SHOWN = 20
#: ids of the damaged records past DAMAGED_ROWS_SHOWN listed at most (the rest are counted)
DAMAGED_IDS_LISTED = 200
#: metadata longer than this is parsed in full to see whether memtui reads it (a number
#: of thousands of digits, nesting Python cannot parse); shorter JSON objects always read
LONG_METADATA = 1000


@dataclass(frozen=True)
class Finding:
    check: str
    severity: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass
class CheckReport:
    path: str
    findings: list[Finding]
    passed: list[str]

    @property
    def ok(self) -> bool:
        return not any(f.severity == "problem" for f in self.findings)

    def to_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "ok": self.ok,
            "passed": self.passed,
            "findings": [f.to_dict() for f in self.findings],
        }


@dataclass(frozen=True)
class AuditHead:
    """A chain head recorded elsewhere (what ``memtui audit head`` printed)."""

    hash: str
    id: int | None = None

    def __str__(self) -> str:
        return f"#{self.id} {self.hash}" if self.id is not None else self.hash


_HEAD = re.compile(r"\s*(?:#?(\d+)\s*[:\s]\s*)?([0-9a-fA-F]{64})\s*")


def parse_audit_head(text: str) -> AuditHead:
    """``ID HASH`` (as ``memtui audit head`` prints it), ``ID:HASH`` or ``HASH``.

    Raises ValueError for anything else.
    """
    match = _HEAD.fullmatch(text)
    if match is None:
        raise ValueError(
            "expected what `memtui audit head` prints: ID HASH (or ID:HASH, or the "
            "64-hex-digit HASH alone)"
        )
    number, digest = match.groups()
    return AuditHead(digest.lower(), int(number) if number is not None else None)


def describe_error(exc: BaseException) -> str:
    """One line for an exception raised while reading a damaged file."""
    if isinstance(exc, UnicodeDecodeError):
        # SQLite's error text quoted bytes of the damaged file that are not UTF-8
        # (e.g. a garbled schema statement): show it with those bytes escaped.
        raw = exc.object if isinstance(exc.object, bytes | bytearray) else b""
        text = bytes(raw).decode("utf-8", "backslashreplace")
        return text or "SQLite reported an error whose text is not UTF-8"
    if isinstance(exc, sqlite3.Error):
        return str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {exc}"


class _Checker:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.report = CheckReport(str(path), [], [])
        self.errors: dict[str, str] = {}  # each read error, and the check that met it first

    def problem(self, check: str, message: str) -> None:
        self.report.findings.append(Finding(check, "problem", message))

    def note(self, check: str, message: str) -> None:
        self.report.findings.append(Finding(check, "note", message))

    def passed(self, check: str) -> None:
        self.report.passed.append(check)

    def guarded(self, check: str, run: Callable[[], None]) -> None:
        """Run one check; any failure to read becomes one named problem."""
        try:
            run()
        except Exception as exc:  # a damaged file can fail a read in any way
            error = describe_error(exc)
            first = self.errors.setdefault(error, check)
            if first == check:
                self.problem(check, f"could not be read: {error}")
            else:
                self.problem(check, f"could not be read: the same error as {first}")


def check_database(path: str | Path, *, audit_head: AuditHead | str | None = None) -> CheckReport:
    """Run every check on the database at ``path`` and report what each found.

    ``audit_head`` is a chain head recorded earlier (``memtui audit head``): the
    check then also reports a log that no longer reaches it, which is how a
    rewritten log (events deleted and the sequence fixed, or a whole new file)
    shows. Never raises for what is in the file.

    Run it in a process that does not hold the same database open (the CLI's
    ``memtui check``, or a child process as the app does): it reads the file's
    header and free pages with Python file I/O, and closing that descriptor would
    drop the POSIX locks of any SQLite connection this process holds on the file.
    """
    path = Path(path)
    if isinstance(audit_head, str):
        audit_head = parse_audit_head(audit_head)
    checker = _Checker(path)
    problem = checker.problem

    if not path.is_file():
        problem("open", f"no database file at {path}")
        return checker.report
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            head = handle.read(100)
    except OSError as exc:
        problem("open", f"cannot read the file: {exc.strerror or exc}")
        return checker.report
    if size == 0:
        problem("open", "the file is empty")
        return checker.report
    if not head.startswith(SQLITE_MAGIC):
        problem("open", "not a SQLite database (the file header is wrong)")
        return checker.report
    page_size = 0
    if len(head) == 100:
        page_size = int.from_bytes(head[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(head[28:32], "big")
        if pages and size < pages * page_size and not _wal_has_frames(path):
            problem(
                "size",
                f"the file is truncated: {size} bytes, but its header promises "
                f"{pages} pages of {page_size} bytes",
            )
    try:
        conn = _open_read_only(path)
    except Exception as exc:
        problem("open", f"cannot open it: {describe_error(exc)}")
        return checker.report
    free_pages: list[int] = []
    try:
        _run_checks(conn, checker, audit_head, free_pages)
    finally:
        conn.close()
    if free_pages:
        checker.guarded("free-pages", lambda: _note_free_pages(checker, free_pages[0], page_size))
    return checker.report


#: a WAL file's header; frames (pages not yet checkpointed into the file) follow it
WAL_HEADER_BYTES = 32


def _wal_has_frames(path: Path) -> bool:
    """Whether the WAL beside ``path`` holds frames (pages that may lengthen the file).

    An empty WAL, or one with only its header, adds nothing: a read-only open (this
    check's own) can leave an empty one behind.
    """
    try:
        return Path(f"{path}-wal").stat().st_size > WAL_HEADER_BYTES
    except OSError:
        return False


#: what the file is, for a store memtui recognizes that is not a memtui database
FOREIGN_KINDS = {
    "langgraph": "a LangGraph SqliteStore",
    "preferences": "an explicit-preference store",
    "letta": "a Letta 0.11 SQLite database",
    "tenant-evidence": "a tenant evidence store",
}


def _foreign_store(path: Path) -> str | None:
    """What a store memtui recognizes (``memtui.sources``) but did not write is, in words;
    None for a memtui database or a file no source recognizes."""
    try:
        # Imported on use: memtui.sources builds on the core (never on this module).
        from memtui.sources.detect import recognize

        kind = recognize(path)[0]
    except Exception:  # not recognized (or unreadable): the schema check says the rest
        return None
    if kind == "memtui":
        return None
    if kind == "qdrant":
        return (
            "a Qdrant collection's storage.sqlite, not a memtui database: memtui check "
            "covers memtui databases; `memtui info FOLDER` on the Qdrant local folder "
            "holding it describes this store"
        )
    what = FOREIGN_KINDS.get(kind, f"a {kind} store")
    return (
        f"{what}, not a memtui database: memtui check covers memtui databases; "
        f"`memtui info {path}` describes this store"
    )


def _open_read_only(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{uri_path(path)}?mode=ro", uri=True, isolation_level=None)
    # Text that is not UTF-8 is damage to report, not a reason to stop reading.
    conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("PRAGMA query_only = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def _run_checks(
    conn: sqlite3.Connection,
    checker: _Checker,
    audit_head: AuditHead | None,
    free_pages: list[int],
) -> None:
    def query(sql: str, params: tuple[object, ...] = ()) -> list[Any]:
        return conn.execute(sql, params).fetchall()

    def one(sql: str, params: tuple[object, ...] = ()) -> Any:
        return query(sql, params)[0][0]

    def integrity() -> None:
        rows = [str(r[0]) for r in query("PRAGMA integrity_check")]
        if rows == ["ok"]:
            checker.passed("integrity")
            return
        # A row can hold several lines; one finding per line, headers left out.
        lines = [
            line.strip()
            for row in rows
            for line in row.splitlines()
            if line.strip() and not line.startswith("*** in database")
        ]
        for line in lines[:INTEGRITY_LINES]:
            checker.problem("integrity", f"SQLite integrity_check: {line}")
        if len(lines) > INTEGRITY_LINES:
            checker.problem(
                "integrity", f"SQLite integrity_check: {len(lines) - INTEGRITY_LINES} more"
            )

    checker.guarded("integrity", integrity)

    state: dict[str, object] = {}

    def schema() -> None:
        version = int(one("PRAGMA user_version"))
        state["version"] = version
        if version == SCHEMA_VERSION:
            checker.passed("schema")
            return
        foreign = _foreign_store(checker.path)
        if foreign is not None:
            state["foreign"] = True
            checker.problem("schema", foreign)
            return
        if version == 0:
            tables = [str(r[0]) for r in query("SELECT name FROM sqlite_master WHERE type='table'")]
            shown = ", ".join(tables[:12]) + (" ..." if len(tables) > 12 else "")
            checker.problem(
                "schema",
                f"a SQLite database but not a memtui one (tables: {shown})"
                if tables
                else "an empty SQLite database: memtui has not written to it",
            )
        elif version > SCHEMA_VERSION:
            checker.problem(
                "schema",
                f"schema {version} was written by a newer memtui (this one knows schemas "
                f"up to {SCHEMA_VERSION}); check it with that memtui",
            )
        else:
            checker.problem(
                "schema",
                f"schema {version} is older than this memtui's {SCHEMA_VERSION}; any "
                f"writable open upgrades it (memtui compact {checker.path}, or the app "
                "without --read-only); read-only opens refuse it until then",
            )

    checker.guarded("schema", schema)
    version = state.get("version")
    if not isinstance(version, int) or not 1 <= version <= SCHEMA_VERSION:
        # Not a schema this memtui knows: its tables may mean something else.
        if version is not None and not state.get("foreign"):
            checker.note("schema", "the memtui checks were skipped for this schema")
        return

    def index_count() -> None:
        records = int(one("SELECT count(*) FROM records"))
        indexed = int(one(f"SELECT count(*) FROM {FTS_TABLE}_docsize"))
        state["records"] = records
        if records == indexed:
            checker.passed("index-count")
        else:
            checker.problem(
                "index-count",
                f"{records} records but {indexed} rows in the full-text index; "
                f"rebuild it with memtui reindex-text {checker.path}",
            )

    checker.guarded("index-count", index_count)

    def fts5() -> None:
        outcome = _fts_integrity(checker.path)
        if outcome is None:
            checker.passed("fts5")
        elif outcome[0] == "skipped":
            checker.note("fts5", outcome[1])
        elif "integrity" not in checker.report.passed:
            # The file itself is damaged: which part FTS5 tripped on is not known.
            error = outcome[1]
            first = checker.errors.get(error)
            checker.problem(
                "fts5",
                f"FTS5's integrity-check failed: the same error as {first}"
                if first
                else f"FTS5's integrity-check failed: {error}",
            )
        elif outcome[0] == "out-of-sync":
            checker.problem(
                "fts5",
                "the full-text index is out of sync with the records; run "
                f"memtui reindex-text {checker.path}",
            )
        else:
            checker.problem(
                "fts5",
                f"the full-text index is damaged (FTS5's integrity-check: {outcome[1]}); "
                f"memtui reindex-text {checker.path} rebuilds it",
            )

    checker.guarded("fts5", fts5)
    checker.guarded("schema-objects", lambda: _check_schema_objects(query, checker))
    checker.guarded("vectors", lambda: _check_vectors(query, checker, state.get("records")))
    checker.guarded("rows", lambda: _check_rows(conn, checker))
    checker.guarded("audit-triggers", lambda: _check_audit_triggers(query, checker))
    checker.guarded("audit", lambda: _check_audit(query, checker, audit_head))

    def free() -> None:
        count = int(one("PRAGMA freelist_count"))
        if count:
            free_pages.append(count)

    checker.guarded("free-pages", free)


@cache
def _memtui_schema() -> dict[tuple[str, str], str]:
    """Every schema object memtui creates, by (type, name): its SQL, spaces normalized."""
    with MemoryStore() as fresh:
        rows = fresh.query("SELECT type, name, sql FROM sqlite_master")
    return {(str(r[0]), str(r[1])): _normalized_sql(r[2]) for r in rows}


def _normalized_sql(sql: object) -> str:
    return " ".join(str(sql or "").split())


def _check_schema_objects(query: Callable[..., list[Any]], checker: _Checker) -> None:
    """Every trigger, table, view or index memtui did not create is a problem, named.

    A trigger or view of another's (or one of memtui's rewritten) runs code on
    memtui's data: a trigger can copy a record's text on delete, where a forget
    would not look. SQLite's own objects (``sqlite_*``) are not counted, nor the audit
    log's append-only triggers: ``audit-triggers`` says what a change to one of them means.
    """
    known = _memtui_schema()
    found = False
    for kind, name, table, sql in query("SELECT type, name, tbl_name, sql FROM sqlite_master"):
        kind, name, table = str(kind), str(name), str(table)
        if name.startswith("sqlite_") or (kind == "trigger" and name in _APPEND_ONLY):
            continue
        shown = f"{kind} '{name}'" + (f" on '{table}'" if kind in ("trigger", "index") else "")
        if (kind, name) not in known:
            found = True
            checker.problem("schema-objects", f"{shown}: memtui did not create it")
        elif kind in ("trigger", "view") and _normalized_sql(sql) != known[(kind, name)]:
            found = True
            checker.problem(
                "schema-objects", f"{shown}: not the one memtui creates (its SQL was changed)"
            )
    if not found:
        checker.passed("schema-objects")


def _check_vectors(query: Callable[..., list[Any]], checker: _Checker, records: object) -> None:
    meta = dict(query("SELECT key, value FROM meta WHERE key IN ('embedder_name', 'embedder_dim')"))
    vectors = int(query("SELECT count(*) FROM vectors")[0][0])
    if "embedder_name" not in meta:
        if vectors:
            checker.problem("vectors", f"{vectors} vectors but no embedder is recorded in the file")
        else:
            checker.passed("vectors")
        return
    name = meta["embedder_name"]
    try:
        dim = int(str(meta.get("embedder_dim")))
    except ValueError:
        checker.problem("vectors", f"the recorded dimension of {name} is not a number")
        return
    wrong = query("SELECT count(*) FROM vectors WHERE length(vector) != ?", (dim * 4,))[0][0]
    orphans = int(
        query(
            "SELECT count(*) FROM vectors v WHERE NOT EXISTS "
            "(SELECT 1 FROM records r WHERE r.id = v.record_id)"
        )[0][0]
    )
    clean = True
    if wrong:
        clean = False
        checker.problem(
            "vectors", f"{wrong} vectors do not have the recorded {dim} dimensions of {name}"
        )
    if orphans:
        clean = False
        checker.problem("vectors", f"{orphans} vectors belong to no record (an erasure gap)")
    if isinstance(records, int):
        missing = records - (vectors - orphans)
        if missing > 0:
            clean = False
            checker.note(
                "vectors", f"{missing} records have no vector; memtui reindex computes them"
            )
    if clean:
        checker.passed("vectors")


def _check_audit(
    query: Callable[..., list[Any]],
    checker: _Checker,
    recorded: AuditHead | None,
) -> None:
    """The hash chain, its newest event against sqlite_sequence, and a recorded head."""
    columns = (
        "id, at, operator, action, record_ids, tier, record_type, signature, reason, "
        "details, prev_hash, hash"
    )
    keys = [c.strip() for c in columns.split(",")]
    prev_hash = GENESIS_HASH
    prev_id = 0
    broken: str | None = None
    hashes: dict[int, str] = {}
    for values in query(f"SELECT {columns} FROM audit_events ORDER BY id"):
        row = dict(zip(keys, values, strict=True))
        event = int(row["id"])
        hashes[event] = str(row["hash"])
        if broken is not None:
            continue
        unhashable = audit_value_problem(row)
        if unhashable is not None:
            broken = f"event #{event}: {unhashable}"
        elif row["prev_hash"] != prev_hash:
            after = f"event #{prev_id}" if prev_id else "the start of the log"
            broken = (
                f"event #{event}: its prev_hash does not match {after} "
                "(an event was removed, inserted or rewritten)"
            )
        elif audit_hash(prev_hash, row) != row["hash"]:
            broken = f"event #{event}: its contents do not match its hash (edited)"
        prev_hash = str(row["hash"])
        prev_id = event
    clean = broken is None
    if broken is not None:
        checker.problem("audit", f"audit chain broken at {broken}")

    # audit_events is AUTOINCREMENT: sqlite_sequence keeps the largest id ever
    # written, and nothing in memtui deletes an event (a trigger forbids it).
    last = max(hashes) if hashes else 0
    sequence = query("SELECT seq FROM sqlite_sequence WHERE name = 'audit_events'")
    written = int(sequence[0][0]) if sequence else None
    if written is None:
        if hashes:
            clean = False
            checker.problem(
                "audit",
                f"sqlite_sequence has no entry for audit_events though the log holds events "
                f"up to #{last}: it was edited, so a deletion of the newest events cannot be "
                "ruled out",
            )
    elif written > last:
        clean = False
        gone = written - last
        if hashes:
            checker.problem(
                "audit",
                (
                    "the newest audit event was"
                    if gone == 1
                    else f"the newest {gone} audit events were"
                )
                + f" deleted (the log ends at #{last}, events up to #{written} were written)",
            )
        else:
            checker.problem(
                "audit",
                f"every audit event was deleted (events up to #{written} were written)",
            )
    elif written < last:
        clean = False
        checker.problem(
            "audit",
            f"sqlite_sequence says events up to #{written} were written, but the log holds "
            f"#{last}: it was edited",
        )
    if clean:
        checker.passed("audit")

    if recorded is not None:
        problem = head_problem(hashes, recorded)
        if problem is None:
            checker.passed("audit-head")
        else:
            checker.problem("audit-head", problem)


_APPEND_ONLY = {"audit_events_no_update": "UPDATE", "audit_events_no_delete": "DELETE"}


def _refuses(name: str, sql: str) -> bool:
    """Whether trigger ``name``'s statement still refuses every change it is named for:
    ``BEFORE <change> ON audit_events``, ``RAISE(ABORT, ...)``, no ``WHEN`` to narrow it."""
    words = " ".join(sql.lower().replace("(", " ( ").split())
    head = f"create trigger {name} before {_APPEND_ONLY[name].lower()} on audit_events "
    return words.startswith(head) and "raise ( abort" in words and " when " not in words


def _check_audit_triggers(query: Callable[..., list[Any]], checker: _Checker) -> None:
    """The triggers that make SQLite refuse an edit or a delete of an audit event.

    Without them the log is no longer append-only: an event can be rewritten or
    removed with plain SQL (the hash chain still tells an edit, but a log whose
    newest events went with their sequence entry shows only against a recorded head).
    """
    found = {
        str(name): str(sql or "")
        for name, sql in query(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = "
            "'audit_events'"
        )
    }
    clean = True
    for name in _APPEND_ONLY:
        what = (
            f"the audit log's append-only trigger {name} (which refuses every {_APPEND_ONLY[name]})"
        )
        if name not in found:
            clean = False
            checker.problem(
                "audit-triggers",
                f"{what} is missing: another program dropped it, so events can be changed "
                "without SQLite refusing; memtui check --audit-head with a head recorded "
                "earlier tells whether the log was rewritten",
            )
        elif not _refuses(name, found[name]):
            clean = False
            checker.problem(
                "audit-triggers",
                f"{what} is not the one memtui created (its statement was changed): it may "
                "no longer refuse it",
            )
    if clean:
        checker.passed("audit-triggers")


def _check_rows(conn: sqlite3.Connection, checker: _Checker) -> None:
    """Records another writer left unreadable, each by id with what is damaged.

    What every view marks damaged (``MemoryRecord.damage``): a text column holding
    a BLOB, a number or bytes that are not UTF-8, metadata that is not a JSON object
    memtui can parse. SQL finds the type and JSON damage; one pass over the raw bytes
    finds text that is not UTF-8; each suspect is then read as the views read it.
    """
    metadata_suspect = (
        "CASE WHEN typeof(metadata) != 'text' THEN 1 WHEN NOT json_valid(metadata) THEN 1 "
        "WHEN json_type(metadata) != 'object' THEN 1 ELSE length(metadata) > ? END"
    )
    typed = " OR ".join(f"typeof({name}) NOT IN ('text', 'null')" for name in _TEXT_COLUMNS)
    suspects = {
        int(row[0])
        for row in conn.execute(
            f"SELECT id FROM records WHERE {typed} OR {metadata_suspect}", (LONG_METADATA,)
        )
    }
    raw = " || x'00' || ".join(
        f"ifnull(CAST({name} AS BLOB), x'')" for name in (*_TEXT_COLUMNS, "metadata")
    )
    for record_id, stored in conn.execute(f"SELECT id, CAST({raw} AS BLOB) FROM records"):
        try:
            stored.decode("utf-8")
        except UnicodeDecodeError:
            suspects.add(int(record_id))
    damaged = [
        (record.id, record.damage)
        for record in _read_records(conn, sorted(suspects))
        if record.damage
    ]
    for record_id, damage in damaged[:DAMAGED_ROWS_SHOWN]:
        checker.problem(
            "rows",
            f"record #{record_id} is damaged (written by another program): {'; '.join(damage)}",
        )
    rest = [record_id for record_id, _ in damaged[DAMAGED_ROWS_SHOWN:]]
    if rest:
        listed = ", ".join(f"#{i}" for i in rest[:DAMAGED_IDS_LISTED])
        more = (
            f" and {len(rest) - DAMAGED_IDS_LISTED} more" if len(rest) > DAMAGED_IDS_LISTED else ""
        )
        checker.problem("rows", f"{len(rest)} more damaged records: {listed}{more}")
    if damaged:
        checker.note(
            "rows",
            f"memtui records {checker.path} --all --json marks each damaged record and its "
            "stored text; memtui forget erases one",
        )
    else:
        checker.passed("rows")


def _read_records(conn: sqlite3.Connection, ids: list[int]) -> list[MemoryRecord]:
    """The records ``ids`` as the store reads them (text that is not UTF-8 included)."""
    factory, conn.text_factory = conn.text_factory, lenient_text
    row_factory, conn.row_factory = conn.row_factory, sqlite3.Row
    try:
        records: list[MemoryRecord] = []
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            records.extend(
                _row_to_record(row)
                for row in conn.execute(
                    f"SELECT {_RECORD_COLUMNS} FROM records WHERE id IN ({marks}) ORDER BY id",
                    chunk,
                )
            )
        return records
    finally:
        conn.text_factory = factory
        conn.row_factory = row_factory


def head_problem(hashes: dict[int, str], recorded: AuditHead) -> str | None:
    """Why a log (its events' hashes by id) does not reach a head recorded earlier,
    or None when it does."""
    ends = f"the log ends at #{max(hashes)}" if hashes else "the log is empty"
    if recorded.id is None:
        if recorded.hash in hashes.values():
            return None
        return (
            f"the recorded head {recorded.hash} is not in the log ({ends}): events were "
            "deleted or the log was rewritten since it was recorded"
        )
    found = hashes.get(recorded.id)
    if found == recorded.hash:
        return None
    if found is None:
        return (
            f"the recorded head #{recorded.id} is not in the log ({ends}): events were "
            "deleted (and the sequence rewritten) or the log was replaced since it was recorded"
        )
    return (
        f"event #{recorded.id} does not have the recorded hash {recorded.hash}: the log was "
        "rewritten (or replaced) since the head was recorded"
    )


def _fts_integrity(path: Path) -> tuple[str, str] | None:
    """FTS5's own integrity-check, in a transaction that is rolled back.

    None when the index is sound and matches the records; else a kind and a
    message: ``damaged`` (the index itself is inconsistent), ``out-of-sync``
    (a sound index that does not match the records: rank 0 checks the index
    alone, rank 1 also compares it with the records) or ``skipped``.
    """
    try:
        conn = sqlite3.connect(f"file:{uri_path(path)}?mode=rw", uri=True, isolation_level=None)
    except Exception as exc:
        return "skipped", f"skipped: cannot open the file for the check ({describe_error(exc)})"
    try:
        conn.execute("PRAGMA busy_timeout = 2000")
        for rank, kind in ((0, "damaged"), (1, "out-of-sync")):
            conn.execute("BEGIN")
            try:
                conn.execute(
                    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rank) VALUES ('integrity-check', ?)",
                    (rank,),
                )
            except sqlite3.OperationalError as exc:
                if "readonly" in str(exc):
                    return "skipped", (
                        "skipped: the file is not writable, and FTS5's check needs a "
                        "write transaction"
                    )
                return kind, describe_error(exc)
            except Exception as exc:
                return kind, describe_error(exc)
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
    finally:
        conn.close()
    return None


def _note_free_pages(checker: _Checker, count: int, page_size: int) -> None:
    """Whether the free pages still hold bytes of deleted content.

    memtui writes with secure_delete on, so SQLite zeroes every page it frees;
    bytes left in a free page were freed by a writer without it (another tool,
    or the file before memtui). Read from the file itself, so only when the
    write-ahead log holds no newer pages.
    """
    path = checker.path
    advice = f"memtui compact {path} rewrites the file without them"
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 32:
        checker.note(
            "free-pages",
            f"{count} free pages, not inspected while the write-ahead log holds newer "
            f"pages; {advice}",
        )
        return
    dirty, inspected = _dirty_free_pages(path, page_size, FREE_PAGES_INSPECTED)
    if inspected is None:
        checker.note("free-pages", f"{count} free pages; their list is unreadable; {advice}")
    elif dirty:
        checker.note(
            "free-pages",
            f"{dirty} of {count} free pages still hold bytes of deleted content (freed "
            f"without secure_delete, so not by memtui); {advice}",
        )
    elif inspected < count:
        checker.note(
            "free-pages",
            f"{count} free pages; the {inspected} inspected are zeroed; {advice}",
        )
    else:
        checker.note(
            "free-pages", f"{count} free pages, all zeroed: no deleted content survives in them"
        )


def _dirty_free_pages(path: Path, page_size: int, limit: int) -> tuple[int, int | None]:
    """(free pages holding non-zero bytes, free pages inspected) read from the file.

    Walks the freelist: trunk pages (next trunk, leaf count, leaf page numbers,
    then unused slots) and their leaves. ``None`` pages inspected when the list
    is not readable (out of range, a loop).
    """
    if page_size < 512:
        return 0, None
    zero = bytes(page_size)
    dirty = 0
    inspected = 0
    seen: set[int] = set()
    with path.open("rb") as handle:
        header = handle.read(100)
        total = max(int.from_bytes(header[28:32], "big"), handle.seek(0, 2) // page_size)

        def page(number: int) -> bytes | None:
            if not 1 <= number <= total or number in seen:
                return None
            seen.add(number)
            handle.seek((number - 1) * page_size)
            data = handle.read(page_size)
            return data if len(data) == page_size else None

        trunk = int.from_bytes(header[32:36], "big")
        while trunk and inspected < limit:
            data = page(trunk)
            if data is None:
                return dirty, None
            inspected += 1
            leaves = int.from_bytes(data[4:8], "big")
            if leaves > (page_size - 8) // 4:
                return dirty, None
            # A trunk's unused slots may keep stale leaf numbers (SQLite does not
            # clear a slot it takes a leaf from): only other bytes are old content.
            tail = data[8 + 4 * leaves :]
            if tail != zero[: len(tail)] and any(
                int.from_bytes(tail[i : i + 4], "big") > total for i in range(0, len(tail), 4)
            ):
                dirty += 1
            for i in range(leaves):
                if inspected >= limit:
                    break
                leaf = page(int.from_bytes(data[8 + 4 * i : 12 + 4 * i], "big"))
                if leaf is None:
                    return dirty, None
                inspected += 1
                if leaf != zero:
                    dirty += 1
            trunk = int.from_bytes(data[0:4], "big")
    return dirty, inspected
