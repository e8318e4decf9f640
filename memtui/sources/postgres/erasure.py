"""What the purge after a Postgres forget reads and checks (``PgErasure``).

A ``DELETE`` leaves the row's bytes in its page until the space is reused, and
plain ``VACUUM`` does not wipe them either: pruning marks the space free and
compacts the page without zeroing it (measured on Postgres 16). The purge that
overwrites and reads the deleted rows' blocks is ``page_purge.PagePurge``; this
module holds what it stands on: the forgotten texts' probes (``text_probes``) and
vectors' (``VectorProbe``, ``count_near``), the server's data directory when it is
readable here (a local server: its ``global/pg_control`` names the server's system
identifier), the relations' files, the SQL checks (``occurrences``: every text and
jsonb column; ``statistics_hold``: ``pg_stats``; ``snapshot_holders``) and the
vacuum.

What memtui cannot reach is ``UNREACHABLE``: named in the dialog, in ``info``
and in SECURITY.md, never counted as verified.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memtui.sources.postgres.connection import PgConnection
from memtui.sources.postgres.url import quote_identifier
from memtui.sources.shapes import SourceError

UNREACHABLE = (
    "WAL segments until the server recycles them (and any WAL archive), replicas, "
    "base backups and pg_dump files"
)
"""What a forget in a Postgres store cannot erase: copies outside the tables' files."""
TEXT_TYPES = ("text", "character varying", "character", "jsonb", "json", "name")
PROBE_MIN = 8
PROBE_MAX = 64
CHUNK = 8 * 1024 * 1024
SEGMENTS = 1024
"""The most 1 GB segments of one relation read (beyond that the scan stops)."""
BYTE_SCAN_LIMIT = 2 * 1024 * 1024 * 1024
_ESCAPED = frozenset('"\\')
PROBES_PER_SCAN = 32
"""The most probes one scan of a table looks for (a forget of a whole namespace has a
probe per item)."""
PageMap = dict[str, list[Any]]
"""Per table, ``[block, bytes]`` of each deleted row (its ``ctid`` block and
``pg_column_size``); ``"toast"``: the tables whose deleted values were TOASTed."""


def text_probes(texts: Sequence[str]) -> list[str]:
    """A distinctive part of each text: its longest stretch that ``jsonb``'s text form
    writes unescaped (no quote, backslash or control character), at most ``PROBE_MAX``
    characters; stretches shorter than ``PROBE_MIN`` are no probe."""
    out: list[str] = []
    for text in texts:
        best = ""
        run: list[str] = []
        for char in [*str(text), "\0"]:
            if char in _ESCAPED or ord(char) < 32:
                if len(run) > len(best):
                    best = "".join(run)
                run = []
            else:
                run.append(char)
        probe = best[:PROBE_MAX]
        if len(probe.encode("utf-8")) >= PROBE_MIN and probe not in out:
            out.append(probe)
    return out


def string_leaves(value: Any) -> list[str]:
    """Every string in a JSON value (keys' values, list items), depth first."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in string_leaves(item)]
    if isinstance(value, list):
        return [text for item in value for text in string_leaves(item)]
    return []


def count_in_file(path: Path, probes: Sequence[bytes]) -> dict[bytes, int]:
    """How often each probe occurs in the file, read in chunks (overlapping by a probe)."""
    counts = dict.fromkeys(probes, 0)
    keep = max((len(p) for p in probes), default=1) - 1
    tail = b""
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            data = tail + chunk
            for probe in probes:
                # occurrences wholly inside the kept tail were counted with the last chunk
                counts[probe] += data.count(probe) - tail.count(probe)
            tail = data[-keep:] if keep else b""
    return counts


def count_near(path: Path, head: Sequence[float], rtol: float = 4e-6, atol: float = 0.0) -> int:
    """How often the file holds a run of float4 values (4-byte aligned) within a few
    units in the last place of ``head``: a cosine HNSW index keeps a vector pgvector
    normalized itself, in an order of float arithmetic this cannot repeat bit for bit.
    A zero matches only a zero (``atol`` 0): small integers read as floats are tiny
    denormals, and would match a vector's zeros otherwise."""
    import numpy as np

    want = np.asarray(head, dtype=np.float32)
    size = len(want)
    limit = atol + rtol * abs(float(want[0]))
    count = 0
    tail = np.empty(0, dtype=np.float32)
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            values = np.concatenate([tail, np.frombuffer(chunk[: len(chunk) // 4 * 4], "<f4")])
            starts = values[: max(0, len(values) - size + 1)]
            with np.errstate(invalid="ignore", over="ignore"):
                hits = np.flatnonzero(np.abs(starts - want[0]) <= limit)
                for at in hits:
                    if np.allclose(values[at : at + size], want, rtol=rtol, atol=atol):
                        count += 1
            tail = values[len(starts) :]
    return count


def flush_statistics(conn: Any) -> None:
    """Send this session's pending table statistics (the rows its deletes left dead) to the
    server before a vacuum counts the dead rows: a session sends them when it has been
    idle a second, so they would arrive after the vacuum's count and raise the dead-row
    count the erasure gap reads (``n_dead_tup``) by rows that are gone. PostgreSQL 15+
    (``pg_stat_force_next_flush``: sent when the session next waits for a statement)."""
    if int(conn.execute("SHOW server_version_num").fetchone()[0]) >= 150000:
        conn.execute("SELECT pg_stat_force_next_flush()")


def recount_dead_rows(conn: Any, names: str) -> None:
    """A plain ``VACUUM`` of tables just rewritten by ``VACUUM FULL``, which does not reset
    the dead-row count of their TOAST tables (Letta's vectors live there): the plain
    vacuum counts the rewritten files again (none dead) and says so to the statistics."""
    conn.execute(f"VACUUM {names}")


@dataclass(frozen=True)
class VectorProbe:
    """A forgotten pgvector value: where it was (table, column) and its components."""

    table: str
    column: str
    values: tuple[float, ...]

    def window(self) -> tuple[float, ...]:
        """The components the probe is made of (``PROBE_MAX`` bytes' worth): of the runs
        that start at a nonzero component, the one with most nonzero ones (a sparse
        vector's first components may all be zero, and runs of zeros are in every file:
        they would be counted as copies, and no forget of it verified)."""
        width = PROBE_MAX // 4
        values = [float(v) for v in self.values]
        best, most = 0, -1
        for start in range(max(1, len(values) - width + 1)):
            if values[start] == 0.0:
                continue
            nonzero = sum(1 for v in values[start : start + width] if v != 0.0)
            if nonzero > most:
                best, most = start, nonzero
        return tuple(values[best : best + width])

    def raw(self) -> bytes:
        """Its window as the server keeps it on disk (float4, this machine's byte order:
        the files are only read on a local server)."""
        head = self.window()
        return struct.pack(f"={len(head)}f", *head)

    def heads(self) -> list[tuple[float, ...]]:
        """Its window, and that of its unit-length copy when that differs (what a
        ``vector_cosine_ops`` HNSW index keeps), for ``count_near``."""
        head = self.window()
        norm = math.sqrt(sum(float(v) * float(v) for v in self.values))
        if not norm or abs(norm - 1.0) < 1e-5:
            return [head]
        return [head, tuple(v / norm for v in head)]

    def literal(self) -> str:
        return "[" + ",".join(repr(float(v)) for v in self.values) + "]"


@dataclass
class PurgeReport:
    """What the purge did and found: its checks, its steps for the audit (no value), and
    a remark for the outcome line (a rewrite, a scan that could not run)."""

    checks: dict[str, bool] = field(default_factory=dict)
    steps: list[str] = field(default_factory=list)
    remarks: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


class PgErasure:
    """The purge and checks after a forget, on the store's own connection."""

    def __init__(
        self,
        pg: PgConnection,
        schema: str,
        store_tables: Sequence[str],
        columns: dict[str, dict[str, str]],
    ) -> None:
        self.pg = pg
        self.schema = schema
        self.store_tables = [t for t in store_tables if t in columns]
        self.columns = columns

    def qualified(self, table: str) -> str:
        return f"{quote_identifier(self.schema)}.{quote_identifier(table)}"

    # -- where the files are

    def data_directory(self) -> tuple[Path | None, str]:
        """The server's data directory when memtui can read it here, else why not."""
        try:
            setting = self.pg.query("SELECT current_setting('data_directory')")[0][0]
            ident = int(self.pg.query("SELECT system_identifier FROM pg_control_system()")[0][0])
        except SourceError:
            return None, "the server does not show this user its data directory"
        path = Path(str(setting))
        try:
            with (path / "global" / "pg_control").open("rb") as handle:
                control = handle.read(8)
        except OSError:
            return None, "the server's data directory is not readable here (a remote server?)"
        if int.from_bytes(control, "little") != ident % 2**64:
            return None, "the data directory at the server's path here is another server's"
        return path, ""

    def relation_files(self, tables: Sequence[str]) -> list[tuple[str, str]]:
        """``(relation, file path relative to the data directory)`` of each table, its
        TOAST table, and every index of both."""
        names = [self.qualified(t) for t in tables]
        rows = self.pg.query(
            "WITH t AS (SELECT c.oid, c.reltoastrelid FROM pg_catalog.pg_class AS c "
            "WHERE c.oid = ANY(SELECT to_regclass(n) FROM unnest(%s::text[]) AS n)), "
            "r AS (SELECT oid FROM t UNION SELECT reltoastrelid FROM t WHERE reltoastrelid <> 0) "
            "SELECT c.relname, pg_relation_filepath(c.oid) FROM pg_catalog.pg_class AS c "
            "WHERE c.oid IN (SELECT oid FROM r UNION "
            "SELECT indexrelid FROM pg_catalog.pg_index WHERE indrelid IN (SELECT oid FROM r)) "
            "ORDER BY 1",
            [names],
        )
        return [(str(name), str(path)) for name, path in rows if path]

    def relation_files_of(self, table: str) -> str:
        """The file (relative to the data directory) of ``table``'s heap."""
        rows = self.pg.query(
            "SELECT pg_relation_filepath(to_regclass(%s))", [self.qualified(table)]
        )
        return str(rows[0][0])

    def vector_index_files(self, table: str, column: str) -> list[tuple[str, str]]:
        """``(index, file)`` of every index of ``table`` on ``column``."""
        rows = self.pg.query(
            "SELECT c.relname, pg_relation_filepath(c.oid) FROM pg_catalog.pg_index AS i "
            "JOIN pg_catalog.pg_class AS c ON c.oid = i.indexrelid "
            "JOIN pg_catalog.pg_attribute AS a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass(%s) AND a.attname = %s "
            "ORDER BY 1",
            [self.qualified(table), column],
        )
        return [(str(name), str(path)) for name, path in rows if path]

    @staticmethod
    def segments(base: Path) -> list[Path]:
        """The segment files of the relation whose first segment is ``base``."""
        out: list[Path] = []
        for segment in range(SEGMENTS):
            part = base if segment == 0 else Path(f"{base}.{segment}")
            if not part.exists():
                break
            out.append(part)
        return out

    def relation_size(self, base: Path) -> int:
        return sum(part.stat().st_size for part in self.segments(base))

    def scan_files(
        self, root: Path, tables: Sequence[str], probes: Sequence[bytes]
    ) -> dict[bytes, int]:
        """Occurrences of each probe in the files of ``tables`` (read after a checkpoint)."""
        found = dict.fromkeys(probes, 0)
        read = 0
        for _name, relative in self.relation_files(tables):
            base = root / relative
            for segment in range(SEGMENTS):
                part = base if segment == 0 else Path(f"{base}.{segment}")
                if not part.exists():
                    break
                read += part.stat().st_size
                if read > BYTE_SCAN_LIMIT:
                    raise SourceError(f"the tables' files are over {BYTE_SCAN_LIMIT} bytes")
                for probe, count in count_in_file(part, probes).items():
                    found[probe] += count
        return found

    # -- in SQL

    def text_columns(self, table: str) -> list[str]:
        return [
            column
            for column, declared in self.columns.get(table, {}).items()
            if declared.split("(", 1)[0] in TEXT_TYPES
        ]

    def occurrences(self, probes: Sequence[str]) -> list[int]:
        """How often each probe occurs in every text and jsonb column of the store's tables
        (rows still there: a live item with the same text, or a copy): one scan of each
        table for all its columns and up to ``PROBES_PER_SCAN`` probes (a scan per column
        and probe cost a forget several reads of the whole store)."""
        totals: list[int] = []
        for start in range(0, len(probes), PROBES_PER_SCAN):
            chunk = probes[start : start + PROBES_PER_SCAN]
            found = [0] * len(chunk)
            for table in self.store_tables:
                texts = [f"{quote_identifier(c)}::text" for c in self.text_columns(table)]
                if texts:
                    row = self._occurrences_in(table, texts, chunk)
                    found = [a + b for a, b in zip(found, row, strict=True)]
            totals += found
        return totals

    def _occurrences_in(self, table: str, texts: Sequence[str], probes: Sequence[str]) -> list[int]:
        """Each probe's occurrences in the columns ``texts`` (SQL text expressions) of
        ``table``, in one scan (a NULL column counts none: it must not make the row's sum
        NULL, which ``sum`` would skip)."""
        one = " + ".join(
            f"coalesce((length({t}) - length(replace({t}, %s, ''))) / length(%s), 0)" for t in texts
        )
        counts = ", ".join(f"coalesce(sum({one}), 0)" for _ in probes)
        where = " OR ".join(f"strpos({t}, %s) > 0" for _ in probes for t in texts)
        params = [v for p in probes for _ in texts for v in (p, p)]
        params += [p for p in probes for _ in texts]
        rows = self.pg.query(f"SELECT {counts} FROM {self.qualified(table)} WHERE {where}", params)
        return [int(n) for n in rows[0]]

    def live_equal(self, vector: VectorProbe) -> int:
        """How many live rows hold a vector equal to ``vector``."""
        column = quote_identifier(vector.column)
        rows = self.pg.query(
            f"SELECT count(*) FROM {self.qualified(vector.table)} "
            f"WHERE {column} = %s::{self.vector_type(vector)}",
            [vector.literal()],
        )
        return int(rows[0][0])

    def vector_type(self, vector: VectorProbe) -> str:
        declared = self.columns.get(vector.table, {}).get(vector.column, "vector")
        return declared.split("(", 1)[0]

    def snapshot_holders(self) -> list[str]:
        """What may keep this database's dead rows from a vacuum, in words: other
        sessions with a snapshot older than now (an open transaction), prepared
        transactions, replication slots holding an xmin. (A role that may not read
        other roles' sessions, without ``pg_read_all_stats``, sees its own alone.)"""
        out = [
            f"a transaction open since {started:%Y-%m-%d %H:%M:%S} (pid {pid}"
            + (f", {app}" if app else "")
            + ")"
            for pid, app, started in self.pg.query(
                "SELECT pid, coalesce(application_name, ''), xact_start "
                "FROM pg_catalog.pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_xmin IS NOT NULL "
                "AND xact_start < statement_timestamp() ORDER BY xact_start LIMIT 3"
            )
        ]
        prepared = self.pg.query(
            "SELECT count(*) FROM pg_catalog.pg_prepared_xacts WHERE database = current_database()"
        )[0][0]
        if prepared:
            out.append(f"{prepared} prepared transaction(s)")
        slots = self.pg.query(
            "SELECT count(*) FROM pg_catalog.pg_replication_slots "
            "WHERE (database IS NULL OR database = current_database()) AND xmin IS NOT NULL"
        )[0][0]
        if slots:
            out.append(f"{slots} replication slot(s) holding an xmin")
        return out

    def statistics_hold(self, probes: Sequence[str]) -> bool:
        """Whether the planner's statistics of the store's tables still show a probe."""
        for probe in probes:
            rows = self.pg.query(
                "SELECT count(*) FROM pg_catalog.pg_stats WHERE schemaname = %s "
                "AND tablename = ANY(%s) AND (strpos(most_common_vals::text, %s) > 0 "
                "OR strpos(histogram_bounds::text, %s) > 0)",
                [self.schema, list(self.store_tables), probe, probe],
            )
            if rows[0][0]:
                return True
        return False

    # -- the purge

    def vacuum(self, tables: Sequence[str], *, full: bool, analyze: bool = True) -> str:
        """``VACUUM`` of ``tables``: plain with ``INDEX_CLEANUP ON`` (else a vacuum that
        finds few dead rows skips the indexes, and pgvector's HNSW index keeps the
        deleted element's vector), or ``FULL`` (a rewrite)."""
        options = ["FULL"] if full else ["INDEX_CLEANUP ON"]
        if analyze:
            options.append("ANALYZE")
        names = ", ".join(self.qualified(t) for t in tables)
        statement = f"VACUUM ({', '.join(options)}) {names}"

        def run(conn: Any) -> None:
            flush_statistics(conn)
            conn.execute(statement)
            if full:
                recount_dead_rows(conn, names)

        self.pg.run(run)
        return f"VACUUM ({', '.join(options)}) {', '.join(tables)}"

    def text_checks(self, report: PurgeReport, probes: Sequence[str], live: Sequence[int]) -> None:
        """``text_gone`` (no live row holds a probe: ``live`` are their occurrences) and
        ``statistics_gone`` (the planner's statistics do not show one)."""
        elsewhere = sum(live)
        report.checks["text_gone"] = elsewhere == 0
        if elsewhere:
            report.details["text_elsewhere"] = elsewhere
            report.remarks.append(
                f"the forgotten text is still in {elsewhere} place(s) of the store's "
                "tables (another item holding the same text?)"
            )
        report.checks["statistics_gone"] = not self.statistics_hold(probes)

    @staticmethod
    def _step(report: PurgeReport) -> Callable[[str, Callable[[], str]], bool]:
        """Run one step of the purge: its words go to ``steps``; a failure is a failed
        check named after it (the delete is committed: the outcome must still be written)."""

        def run(name: str, work: Callable[[], str]) -> bool:
            try:
                report.steps.append(work())
            except SourceError as exc:
                report.checks[name] = False
                report.details[f"{name}_problem"] = str(exc)[:300]
                return False
            return True

        return run
