"""The connection plumbing of a database the search engine reads (``SearchIndex``).

``IndexDatabase`` holds one SQLite file's main connection under a lock, a second
read-only connection for reads that run beside it (``side_query``), the reads
the engine makes (``query``, ``query_tuples`` with its ``when_busy`` and
``cancelled`` hooks), values derived from the whole file and kept until the
data changes (``derived``, ``change_token``), one write transaction at a time
(``write``) and the WAL checkpoint a forget ends with. It knows no schema: the
index that subclasses it does.

Also here: how an erasure looks for a forgotten text's bytes in the file
(``byte_probe``, ``files_holding``), read by a child process so that no
descriptor of the database file is closed in this one.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from memtui.core.records import format_timestamp, lenient_text

Clock = Callable[[], datetime]
Params = Sequence[Any] | dict[str, Any]

PROGRESS_STEPS = 1000  # virtual-machine steps between two calls of a progress handler
CHECKPOINT_RETRIES = 10
CHECKPOINT_RETRY_DELAY = 0.05
PROBE_CHARS = 64  # a forgotten text is looked for by its first characters
PROBE_MIN_BYTES = 8  # shorter texts are not looked for (they match unrelated bytes)

_T = TypeVar("_T")


class StatementWatch:
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
            self.steps += PROGRESS_STEPS
            if self.steps >= self.busy_steps:
                action, self.when_busy = self.when_busy, None
                action()
        return 0


def uri_path(path: Path) -> str:
    """``path`` resolved and percent-encoded for a ``file:`` URI."""
    return quote(str(path.resolve()), safe="/")


def undecodable(exc: sqlite3.OperationalError) -> bool:
    """Whether a read failed on stored text that is not UTF-8 (``sqlite3``'s decoding)."""
    return str(exc).startswith("Could not decode to UTF-8")


def open_connection(path: Path, *, create: bool, busy_timeout_ms: int) -> sqlite3.Connection:
    """A writable connection to ``path`` as an index keeps it: WAL, secure_delete (freed
    cells are zeroed), synchronous NORMAL; rows as ``sqlite3.Row``."""
    mode = "rwc" if create else "rw"
    conn = sqlite3.connect(
        f"file:{uri_path(path)}?mode={mode}",
        uri=True,
        isolation_level=None,
        check_same_thread=False,
    )
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


class IndexDatabase:
    """One SQLite file's connections, as the search engine reads them.

    The main connection is used under ``lock`` (held around every statement);
    ``query_tuples`` keeps a cursor of its own for the hot reads. Writes go
    through ``write()``, one transaction at a time.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path | None,
        *,
        clock: Clock,
        busy_timeout_ms: int = 5000,
    ) -> None:
        self.path = path
        self.clock = clock
        self._conn = conn
        self._lock = threading.RLock()
        self._side: sqlite3.Connection | None = None
        self._side_lock = threading.Lock()
        self._write_serial = 0
        self._derived: dict[str, tuple[tuple[int, int, int], Any]] = {}
        self._busy_timeout_ms = int(busy_timeout_ms)
        # Used only under the lock, one read at a time.
        self._tuples = conn.cursor()
        self._tuples.row_factory = None

    @property
    def lock(self) -> threading.RLock:
        """Held around every statement on the main connection."""
        return self._lock

    @property
    def connection(self) -> sqlite3.Connection:
        return self._conn

    def close(self) -> None:
        with self._lock:
            self._conn.close()
        with self._side_lock:
            if self._side is not None:
                self._side.close()
                self._side = None

    # -- time

    def now(self) -> datetime:
        moment = self.clock()
        if moment.tzinfo is None:
            raise ValueError("the clock returned a naive datetime; return UTC")
        return moment

    def now_text(self) -> str:
        return format_timestamp(self.now())

    # -- reads

    def query(self, sql: str, params: Params = ()) -> list[Any]:
        """Run one read and fetch every row, so that no read transaction stays open."""
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.OperationalError as exc:
                if not undecodable(exc):
                    raise
            return self._read_leniently(lambda: self._conn.execute(sql, params).fetchall())

    def _read_leniently(self, read: Callable[[], _T]) -> _T:
        """``read`` again, with text that is not UTF-8 read as ``UndecodedText`` (only
        after a read met such text: the strict default decodes faster). Under the lock."""
        self._conn.text_factory = lenient_text
        try:
            return read()
        finally:
            self._conn.text_factory = str

    def query_tuples(
        self,
        sql: str,
        params: Params = (),
        *,
        when_busy: Callable[[], None] | None = None,
        busy_steps: int = 0,
        cancelled: Callable[[], bool] | None = None,
    ) -> list[tuple]:
        """``query`` with plain tuples for rows (cheaper than ``sqlite3.Row`` in hot paths).

        ``when_busy`` is called once, from SQLite's progress handler, when the
        statement has run ``busy_steps`` virtual-machine steps (counted in
        thousands). When ``cancelled()`` turns true while the statement runs,
        SQLite stops it and ``sqlite3.OperationalError`` ("interrupted") is
        raised. Both run inside the statement, so neither may read through here.
        """
        with self._lock:
            if when_busy is None and cancelled is None:
                return self._tuples_leniently_on_error(sql, params)
            self._conn.set_progress_handler(
                StatementWatch(busy_steps, when_busy, cancelled), PROGRESS_STEPS
            )
            try:
                return self._tuples_leniently_on_error(sql, params)
            finally:
                self._conn.set_progress_handler(None, 0)

    def _tuples_leniently_on_error(self, sql: str, params: Params) -> list[tuple]:
        try:
            return self._tuples.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if not undecodable(exc):
                raise
        return self._read_leniently(lambda: self._tuples.execute(sql, params).fetchall())

    def side_query(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]] | None:
        """Run one read on a second, read-only connection to the same file, so that two
        statements can run at once (on two cores). None without a file, and when the
        second connection cannot be opened."""
        if self.path is None:
            return None
        with self._side_lock:
            if self._side is None:
                try:
                    side = sqlite3.connect(
                        f"file:{uri_path(self.path)}?mode=ro",
                        uri=True,
                        isolation_level=None,
                        check_same_thread=False,
                    )
                    side.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
                except sqlite3.Error:
                    return None
                self._side = side
            return self._side.execute(sql, params).fetchall()

    # -- what changed

    def data_version(self) -> int:
        """SQLite's ``data_version``: changes when another connection commits."""
        with self._lock:
            return self._conn.execute("PRAGMA data_version").fetchall()[0][0]

    def change_token(self) -> tuple[int, int, int]:
        """A value that changes whenever the data may have changed: another connection's
        commits (``data_version``), this one's write transactions, and the rows this
        one changed by any other way (``total_changes``: a statement run on
        ``connection`` outside ``write()``)."""
        with self._lock:
            version = self._conn.execute("PRAGMA data_version").fetchall()[0][0]
            return (version, self._write_serial, self._conn.total_changes)

    def derived(self, name: str, build: Callable[[Any], _T]) -> _T:
        """``build(self)``, kept under ``name`` until the data changes (``change_token``).

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

    # -- writes

    def busy_error(self) -> Exception:
        """What ``write`` raises when another connection holds the write lock."""
        return sqlite3.OperationalError(
            "the database is busy (another process is writing); try again"
        )

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``), rolled back if the block raises."""
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if "locked" in str(exc) or "busy" in str(exc):
                    raise self.busy_error() from None
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

    @contextlib.contextmanager
    def autocheckpoint_off(self) -> Iterator[None]:
        """Write transactions with no automatic checkpoint after them (each copies the WAL
        into the file and syncs it: about 0.1 s after a few thousand rows); the caller
        checkpoints once, when it suits it (``checkpoint``)."""
        with self._lock:
            pages = self._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
            self._conn.execute("PRAGMA wal_autocheckpoint = 0")
        try:
            yield
        finally:
            with self._lock:
                self._conn.execute(f"PRAGMA wal_autocheckpoint = {int(pages)}")

    def checkpoint(self) -> bool:
        """Checkpoint and truncate the WAL now; True when it finished.

        The checkpoint waits for readers through the busy handler; each wait is
        kept short so that a pinned WAL costs a bounded delay.
        """
        if self.path is None:
            return True
        for attempt in range(CHECKPOINT_RETRIES):
            with self._lock:
                self._conn.execute("PRAGMA busy_timeout = 50")
                try:
                    busy = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                finally:
                    self._conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            if busy == 0:
                return True
            time.sleep(CHECKPOINT_RETRY_DELAY * (attempt + 1))
        return False


def byte_probe(content: str) -> bytes | None:
    """The bytes an erasure looks for in the file: the text's first characters (None:
    too short to tell apart from unrelated bytes)."""
    probe = content[:PROBE_CHARS].encode("utf-8")
    return probe if len(probe) >= PROBE_MIN_BYTES else None


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


def files_holding(paths: Sequence[Path], probes: Sequence[bytes]) -> list[int] | None:
    """The indexes of ``probes`` found in any of the files at ``paths``; None if unreadable."""
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
