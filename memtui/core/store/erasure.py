"""Forgetting: one record or one engagement's records erased from the table, the
full-text index, the vectors and their cached copies, then the WAL truncated."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtui.core.records import read_row_text
from memtui.core.store.connection import Progress
from memtui.core.store.erasure_checks import ErasureChecks
from memtui.core.store.errors import MemoryStoreError, _require_reason, _require_text, _shown
from memtui.core.store.rows import _canonical
from memtui.core.store.schema import purge_text_index, vector_triggers_off
from memtui.core.store.vectors import VectorWriter


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


def _count_by_tier(rows: Sequence[sqlite3.Row]) -> dict[str, dict[str, int]]:
    """How many of ``rows`` (id, tier, record type, ...) there are by tier, then type."""
    by_tier: dict[str, dict[str, int]] = {}
    for row in rows:
        tier = by_tier.setdefault(row[1], {})
        tier[row[2]] = tier.get(row[2], 0) + 1
    return by_tier


class Erasure(ErasureChecks, VectorWriter):
    """``forget`` and ``forget_scope``."""

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
                purge_text_index(self._conn)
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
                rows = self._scope_rows(engagement)
                ids = [row[0] for row in rows]
                erasure, checks = self._erase_scope_rows(rows, progress)
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
                        "by_tier": _count_by_tier(rows),
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

    def _scope_rows(self, engagement: str) -> list[sqlite3.Row]:
        """The engagement's records (id, tier, record type, content), refused when none."""
        rows = self.query(
            "SELECT id, tier, record_type, content FROM records WHERE engagement = ? ORDER BY id",
            (engagement,),
        )
        if not rows:
            raise MemoryStoreError(f"engagement {engagement!r} has no records to forget")
        return rows

    def _erase_scope_rows(
        self, rows: Sequence[sqlite3.Row], progress: Progress | None
    ) -> tuple[Any, dict[str, bool]]:
        """Inside the write: delete ``rows``, purge the index and the cached vectors, and
        check they are gone. Returns the cache's ``Erasure`` and the checks."""
        ids = [row[0] for row in rows]
        steps = 2 * len(ids)
        before = self._vector_cache_identity()
        with vector_triggers_off(self._conn), _delete_refusal(self.path):
            for start in range(0, len(ids), 2000):
                chunk = ids[start : start + 2000]
                self._conn.execute(
                    "DELETE FROM records WHERE id IN (SELECT value FROM json_each(?))",
                    (_canonical(chunk),),
                )
                if progress:
                    progress(start + len(chunk), steps)
        purge_text_index(self._conn)
        erasure = self._erase_vector_cache(ids, before)
        checks = self._erasure_checks(
            [(row[0], read_row_text(row[3])[0]) for row in rows],
            progress=(lambda done: progress(len(ids) + done, steps)) if progress else None,
        )
        if erasure.erased is not None:
            checks["vector_cache_erased"] = erasure.erased
        return erasure, checks

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
