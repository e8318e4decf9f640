"""``memtui check``: is this memory database whole, in step, and untampered?

Each check yields findings with a severity: ``problem`` (the file is damaged,
out of step or tampered with) or ``note`` (worth knowing, not a fault).
Nothing here changes the database: the FTS5 integrity check is a write
statement, so it runs inside a transaction that is always rolled back.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path

from memtui.core.store import (
    FTS_TABLE,
    SCHEMA_VERSION,
    SQLITE_MAGIC,
    MemoryStore,
    MemoryStoreError,
)


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


def check_database(path: str | Path) -> CheckReport:
    """Run every check on the database at ``path`` and report what each found.

    Run it in a process that does not hold the same database open (the CLI's
    ``memtui check``, or a child process as the app does): it reads the file's
    header with Python file I/O, and closing that descriptor would drop the
    POSIX locks of any SQLite connection this process holds on the file.
    """
    path = Path(path)
    report = CheckReport(str(path), [], [])

    def problem(check: str, message: str) -> None:
        report.findings.append(Finding(check, "problem", message))

    def note(check: str, message: str) -> None:
        report.findings.append(Finding(check, "note", message))

    if not path.is_file():
        problem("open", f"no database file at {path}")
        return report
    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(100)
    if size == 0:
        problem("open", "the file is empty")
        return report
    if not head.startswith(SQLITE_MAGIC):
        problem("open", "not a SQLite database (the file header is wrong)")
        return report
    if len(head) == 100:
        page_size = int.from_bytes(head[16:18], "big") or 65536
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(head[28:32], "big")
        if pages and size < pages * page_size and not Path(f"{path}-wal").exists():
            problem(
                "size",
                f"the file is truncated: {size} bytes, but its header promises "
                f"{pages} pages of {page_size} bytes",
            )
    try:
        store = MemoryStore(path, read_only=True)
    except MemoryStoreError as exc:
        problem("open", str(exc))
        return report
    with store:
        _run_checks(store, path, report, problem, note)
    return report


def _run_checks(store, path, report, problem, note) -> None:  # noqa: C901
    try:
        rows = [r[0] for r in store.query("PRAGMA integrity_check")]
    except sqlite3.DatabaseError as exc:
        problem("integrity", f"SQLite integrity_check could not run: {exc}")
        return
    if rows == ["ok"]:
        report.passed.append("integrity")
    else:
        for line in rows[:20]:
            problem("integrity", f"SQLite integrity_check: {line}")

    version = store.query("PRAGMA user_version")[0][0]
    if version == SCHEMA_VERSION:
        report.passed.append("schema")
    else:
        problem("schema", f"schema version {version}, expected {SCHEMA_VERSION}")

    try:
        records = store.query("SELECT count(*) FROM records")[0][0]
        indexed = store.query(f"SELECT count(*) FROM {FTS_TABLE}_docsize")[0][0]
    except sqlite3.DatabaseError as exc:
        problem("index", f"cannot count records and index rows: {exc}")
        return
    if records == indexed:
        report.passed.append("index-count")
    else:
        problem(
            "index-count",
            f"{records} records but {indexed} rows in the full-text index; "
            "rebuild it with memtui reindex-text",
        )

    fts_error = _fts_integrity(path)
    if fts_error is None:
        report.passed.append("fts5")
    elif fts_error.startswith("skipped"):
        note("fts5", fts_error)
    else:
        problem("fts5", f"FTS5 integrity-check: {fts_error}")

    recorded = store.recorded_embedder()
    vectors = store.vector_count()
    if recorded is None:
        if vectors:
            problem("vectors", f"{vectors} vectors but no embedder is recorded in the file")
        else:
            report.passed.append("vectors")
    else:
        width = recorded["dim"] * 4
        wrong = store.query("SELECT count(*) FROM vectors WHERE length(vector) != ?", (width,))[0][
            0
        ]
        orphans = store.query(
            "SELECT count(*) FROM vectors v WHERE NOT EXISTS "
            "(SELECT 1 FROM records r WHERE r.id = v.record_id)"
        )[0][0]
        missing = records - (vectors - orphans)
        clean = True
        if wrong:
            clean = False
            problem(
                "vectors",
                f"{wrong} vectors do not have the recorded {recorded['dim']} dimensions "
                f"of {recorded['name']}",
            )
        if orphans:
            clean = False
            problem("vectors", f"{orphans} vectors belong to no record (an erasure gap)")
        if missing > 0:
            clean = False
            note("vectors", f"{missing} records have no vector; memtui reindex computes them")
        if clean:
            report.passed.append("vectors")

    broken = store.verify_audit()
    if broken is None:
        report.passed.append("audit")
    else:
        problem("audit", f"audit chain broken at {broken}")

    free = store.query("PRAGMA freelist_count")[0][0]
    if free:
        note(
            "free-pages",
            f"{free} free pages; content deleted before memtui managed this file may "
            "survive in them: memtui compact rewrites the file",
        )


def _fts_integrity(path: Path) -> str | None:
    """FTS5's own integrity-check, in a transaction that is rolled back."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        return f"skipped: cannot open the file for the check ({exc})"
    try:
        conn.execute("PRAGMA busy_timeout = 2000")
        conn.execute("BEGIN")
        try:
            conn.execute(
                f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rank) VALUES ('integrity-check', 1)"
            )
        finally:
            conn.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "readonly" in str(exc):
            return "skipped: the file is not writable, and FTS5's check needs a write transaction"
        return str(exc)
    except sqlite3.DatabaseError as exc:
        return str(exc)
    finally:
        conn.close()
    return None
