"""``check_database``: the file's header, then every check on a read-only connection."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memtui.core.check.audit import check_audit, check_audit_triggers
from memtui.core.check.contents import check_rows, check_vectors
from memtui.core.check.free_pages import note_free_pages
from memtui.core.check.report import (
    AuditHead,
    Checker,
    CheckReport,
    Recognizer,
    describe_error,
    parse_audit_head,
)
from memtui.core.check.structure import (
    check_fts5,
    check_index_count,
    check_integrity,
    check_schema,
    check_schema_objects,
)
from memtui.core.store.files import SQLITE_MAGIC, uri_path
from memtui.core.store.schema import SCHEMA_VERSION


def check_database(
    path: str | Path,
    *,
    audit_head: AuditHead | str | None = None,
    store_kind: Recognizer | None = None,
) -> CheckReport:
    """Run every check on the database at ``path`` and report what each found.

    ``audit_head`` is a chain head recorded earlier (``memtui audit head``): the
    check then also reports a log that no longer reaches it, which is how a
    rewritten log (events deleted and the sequence fixed, or a whole new file)
    shows. ``store_kind`` names the kind of store a file is (the sources' recognizer,
    which the core does not import): another program's store that memtui reads is
    then named as such instead of by its tables. Never raises for what is in the file.

    Run it in a process that does not hold the same database open (the CLI's
    ``memtui check``, or a child process as the app does): it reads the file's
    header and free pages with Python file I/O, and closing that descriptor would
    drop the POSIX locks of any SQLite connection this process holds on the file.
    """
    path = Path(path)
    if isinstance(audit_head, str):
        audit_head = parse_audit_head(audit_head)
    checker = Checker(path, store_kind)
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
        checker.guarded("free-pages", lambda: note_free_pages(checker, free_pages[0], page_size))
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
    checker: Checker,
    audit_head: AuditHead | None,
    free_pages: list[int],
) -> None:
    """Every check on the open file, in order; the memtui ones only for a known schema."""

    def query(sql: str, params: tuple[object, ...] = ()) -> list[Any]:
        return conn.execute(sql, params).fetchall()

    checker.guarded("integrity", lambda: check_integrity(query, checker))
    state: dict[str, object] = {}
    checker.guarded("schema", lambda: check_schema(query, checker, state))
    version = state.get("version")
    if not isinstance(version, int) or not 1 <= version <= SCHEMA_VERSION:
        # Not a schema this memtui knows: its tables may mean something else.
        if version is not None and not state.get("foreign"):
            checker.note("schema", "the memtui checks were skipped for this schema")
        return
    checker.guarded("index-count", lambda: check_index_count(query, checker, state))
    checker.guarded("fts5", lambda: check_fts5(checker))
    checker.guarded("schema-objects", lambda: check_schema_objects(query, checker))
    checker.guarded("vectors", lambda: check_vectors(query, checker, state.get("records")))
    checker.guarded("rows", lambda: check_rows(conn, checker))
    checker.guarded("audit-triggers", lambda: check_audit_triggers(query, checker))
    checker.guarded("audit", lambda: check_audit(query, checker, audit_head))
    checker.guarded("free-pages", lambda: _count_free_pages(query, free_pages))


def _count_free_pages(query: Callable[..., list[Any]], free_pages: list[int]) -> None:
    """Keep the file's free page count in ``free_pages``, when it has any."""
    count = int(query("PRAGMA freelist_count")[0][0])
    if count:
        free_pages.append(count)
