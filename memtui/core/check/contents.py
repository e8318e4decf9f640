"""The checks of what the tables hold: vectors against the recorded embedder, and
records another writer left unreadable."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from memtui.core.check.report import Checker
from memtui.core.records import MemoryRecord, lenient_text
from memtui.core.store.rows import _RECORD_COLUMNS, _TEXT_COLUMNS, _row_to_record

#: damaged records reported one line each (the ids of the rest on one more line)
DAMAGED_ROWS_SHOWN = 20

#: ids of the damaged records past DAMAGED_ROWS_SHOWN listed at most (the rest are counted)
DAMAGED_IDS_LISTED = 200

#: metadata longer than this is parsed in full to see whether memtui reads it (a number
#: of thousands of digits, nesting Python cannot parse); shorter JSON objects always read
LONG_METADATA = 1000


def check_vectors(query: Callable[..., list[Any]], checker: Checker, records: object) -> None:
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


def check_rows(conn: sqlite3.Connection, checker: Checker) -> None:
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
