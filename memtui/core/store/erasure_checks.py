"""A forget's checks: the records gone from the table, the full-text index and the
vectors, and their text gone from the file's bytes after the checkpoint."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from memtui.core.index import FTS_TABLE
from memtui.core.index_db import byte_probe, files_holding
from memtui.core.store.connection import StoreConnection
from memtui.core.store.rows import _RECORD_COLUMNS, _canonical

_PROBE_EACH_MAX = 2000  # forgets of more records verify the index word by word
_BYTE_SCAN_BUDGET = 4 << 30  # bytes a forget's byte check reads in all (the file once a probe)

# The audit columns that can hold a record's text (a reason, a record type...).
_AUDIT_TEXT_COLUMNS = (
    "at, operator, action, record_ids, tier, record_type, signature, reason, details"
)

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


def _index_probe(content: str) -> str | None:
    """An FTS5 query matching any of the first distinct words of ``content``."""
    words = _probe_words(content)
    if not words:
        return None
    return " OR ".join(_quoted(w) for w in words)


class ErasureChecks(StoreConnection):
    """Verifies that what a forget deleted is gone."""

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
        probes = [p for p in dict.fromkeys(byte_probe(text) for text in contents) if p]
        if not probes:
            return None, None
        parts = [p for p in (self.path, Path(f"{self.path}-wal")) if p.exists()]
        size = max(1, sum(p.stat().st_size for p in parts))
        count = max(1, min(len(probes), _BYTE_SCAN_BUDGET // size))
        step = len(probes) / count
        chosen = [probes[int(i * step)] for i in range(count)]
        found = files_holding(parts, chosen)
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
