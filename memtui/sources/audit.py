"""The audit log of a foreign store: a memtui database beside it, used for its audit log.

A foreign store has no place for memtui's audit events, so they go to
``<store>.memtui-audit.db`` (or ``--audit-db``): a ``MemoryStore`` file whose
``audit_events`` table is hash-chained, append-only and verified exactly like
the native one. Its record tables stay empty.

One transaction cannot span the store and this file, so a foreign forget is
written as two events: an intent (``forget-intent``) before the change and an
outcome (``forget``, with the erasure checks and ``intent_event``) after. An
intent without an outcome is an interrupted forget, and ``events`` says so.
A 0-byte file a kill left before the log's first write reads as an empty log,
and the next event writes the log into it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memtui.core.store import MemoryStore
from memtui.sources.base import SourceError

AUDIT_SUFFIX = ".memtui-audit.db"
INTENT = "forget-intent"
OUTCOME_ACTIONS = frozenset({"forget", "forget-failed"})


def default_audit_path(store_path: Path) -> Path:
    return Path(str(store_path) + AUDIT_SUFFIX)


def never_written(path: Path) -> bool:
    """Whether ``path`` is a file SQLite created and was stopped (killed) before writing
    anything to: 0 bytes, and no WAL beside it with anything in it. It holds no event."""
    wal = Path(str(path) + "-wal")
    try:
        return path.stat().st_size == 0 and (not wal.exists() or wal.stat().st_size == 0)
    except OSError:
        return False


class AuditStore(MemoryStore):
    """A memtui database used only for its audit log; record ids may be any string."""

    def append_event(
        self,
        *,
        action: str,
        record_ids: Sequence[str],
        operator: str | None,
        tier: str | None = None,
        record_type: str | None = None,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> int:
        """Append one chained event in its own transaction; returns its id.

        The store's own append writes it, so ``verify_audit`` and ``memtui audit
        verify`` check the chain unchanged.
        """
        with self._write():
            return self._append_audit(
                action=action,
                record_ids=[str(i) for i in record_ids],
                operator=operator,
                tier=tier,
                record_type=record_type,
                reason=reason,
                details=details,
            )


class ForeignAudit:
    """Opens the audit file lazily: a read-only source never creates it."""

    def __init__(self, path: Path, *, clock: Any, operator: str | None) -> None:
        self.path = Path(path)
        self._clock = clock
        self._operator = operator
        self._store: AuditStore | None = None
        self._lock = threading.RLock()

    def _open(self, *, create: bool) -> AuditStore | None:
        with self._lock:
            return self._open_locked(create=create)

    def _open_locked(self, *, create: bool) -> AuditStore | None:
        if self._store is not None:
            return self._store
        if not self.path.exists() or never_written(self.path):
            if not create:  # no log yet (or one a kill left empty): no events to read
                return None
            if not self.path.parent.exists():
                raise SourceError(f"folder {self.path.parent} for the audit log does not exist")
        try:
            self._store = AuditStore(
                self.path, clock=self._clock, operator=self._operator, read_only=not create
            )
        except SourceError:
            raise
        except Exception as exc:
            raise SourceError(f"cannot open the audit log {self.path}: {exc}") from None
        return self._store

    def append(self, **event: Any) -> int:
        with self._lock:
            store = self._open_locked(create=True)
            assert store is not None
            if store.read_only:  # opened read-only earlier for reading: reopen writable
                store.close()
                self._store = None
                store = self._open_locked(create=True)
                assert store is not None
            return store.append_event(**event)

    def events(
        self, *, limit: int | None = None, before_id: int | None = None
    ) -> list[dict[str, Any]]:
        store = self._open(create=False)
        if store is None:
            return []
        events = store.audit_events(limit=limit, before_id=before_id)
        intents = [e["id"] for e in events if e["action"] == INTENT]
        if intents:
            done = set()
            for row in store.query(
                "SELECT json_extract(details, '$.intent_event') FROM audit_events "
                "WHERE action IN ('forget', 'forget-failed')"
            ):
                if row[0] is not None:
                    done.add(int(row[0]))
            for event in events:
                if event["action"] == INTENT:
                    event["status"] = "completed" if event["id"] in done else "interrupted"
        return events

    def verify(self) -> str | None:
        store = self._open(create=False)
        return None if store is None else store.verify_audit()

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None
