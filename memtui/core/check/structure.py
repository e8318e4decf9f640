"""The checks of the file's structure: SQLite's integrity check, the schema version,
the full-text index against the records, and the schema objects memtui created."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from memtui.core.check.audit import APPEND_ONLY
from memtui.core.check.report import Checker, Recognizer, describe_error
from memtui.core.index import FTS_TABLE
from memtui.core.store import MemoryStore
from memtui.core.store.files import uri_path
from memtui.core.store.schema import SCHEMA_VERSION

#: integrity_check lines reported at most (the rest are counted)
INTEGRITY_LINES = 20


#: what the file is, for a store memtui recognizes that is not a memtui database
FOREIGN_KINDS = {
    "langgraph": "a LangGraph SqliteStore",
    "preferences": "an explicit-preference store",
    "letta": "a Letta 0.11 SQLite database",
    "tenant-evidence": "a tenant evidence store",
}


Query = Callable[..., list[Any]]


def check_integrity(query: Query, checker: Checker) -> None:
    """SQLite's integrity check: one problem a line it reports (at most ``INTEGRITY_LINES``)."""
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
        checker.problem("integrity", f"SQLite integrity_check: {len(lines) - INTEGRITY_LINES} more")


def check_schema(query: Query, checker: Checker, state: dict[str, object]) -> None:
    """The schema version: this memtui's, or what the file is instead. Keeps the version
    in ``state`` (and ``foreign`` for a store memtui recognizes but did not write)."""
    version = int(query("PRAGMA user_version")[0][0])
    state["version"] = version
    if version == SCHEMA_VERSION:
        checker.passed("schema")
        return
    foreign = _foreign_store(checker.path, checker.store_kind)
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


def _foreign_store(path: Path, store_kind: Recognizer | None) -> str | None:
    """What a store memtui recognizes (``store_kind``) but did not write is, in words;
    None for a memtui database, a file no source recognizes, or no ``store_kind``."""
    if store_kind is None:
        return None
    try:
        kind = store_kind(path)
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


def check_index_count(query: Query, checker: Checker, state: dict[str, object]) -> None:
    """As many rows in the full-text index as records; keeps the count in ``state``."""
    records = int(query("SELECT count(*) FROM records")[0][0])
    indexed = int(query(f"SELECT count(*) FROM {FTS_TABLE}_docsize")[0][0])
    state["records"] = records
    if records == indexed:
        checker.passed("index-count")
    else:
        checker.problem(
            "index-count",
            f"{records} records but {indexed} rows in the full-text index; "
            f"rebuild it with memtui reindex-text {checker.path}",
        )


def check_fts5(checker: Checker) -> None:
    """FTS5's own integrity-check: the index whole and in step with the records."""
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


@cache
def _memtui_schema() -> dict[tuple[str, str], str]:
    """Every schema object memtui creates, by (type, name): its SQL, spaces normalized."""
    with MemoryStore() as fresh:
        rows = fresh.query("SELECT type, name, sql FROM sqlite_master")
    return {(str(r[0]), str(r[1])): _normalized_sql(r[2]) for r in rows}


def _normalized_sql(sql: object) -> str:
    return " ".join(str(sql or "").split())


def check_schema_objects(query: Query, checker: Checker) -> None:
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
        if name.startswith("sqlite_") or (kind == "trigger" and name in APPEND_ONLY):
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
