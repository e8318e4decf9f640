"""What a file on disk is, read before (or without) opening it as a store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memtui.core.index_db import uri_path

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
        probe = sqlite3.connect(f"file:{uri_path(path)}?mode=ro", uri=True)
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
