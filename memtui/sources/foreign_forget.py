"""The forget protocol of a foreign store: intent, change, outcome.

A foreign store's forget spans files no transaction can span (the store, memtui's
index of it, the audit log beside it), so ``ForeignForgetting`` orders it: an
intent event first, then the store's own rule in one store transaction
(``_apply_forget``, the adapter's), the freed pages purged and the file's bytes
checked, memtui's copy in its index purged, and the outcome event with every
check. A forget killed half way is finished by the next open
(``recover_interrupted_forgets``).
"""

from __future__ import annotations

import contextlib
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from memtui.sources.audit import INTENT
from memtui.sources.base import (
    ForgetOutcome,
    Scope,
    SourceError,
    SourceRecord,
    require_reason,
    scope_of,
)
from memtui.sources.capabilities import ScopeForgettable
from memtui.sources.foreign_erasure import (
    Erasure,
    forget_each,
    radius_of,
)
from memtui.sources.foreign_store import ForeignStore


class ForeignForgetting(ForeignStore, ScopeForgettable):
    """A foreign store that forgets by its own rule, audited, erasure verified."""

    # -- forget

    def _require_writable(self) -> None:
        if self.read_only:
            raise SourceError(self.read_only_message())

    def record_value_columns(self) -> list[tuple[str, str]]:
        """The (table, column) pairs where records keep the values a forget probes
        for: the byte check counts the live records' equal values there."""
        return []

    @abstractmethod
    def _apply_forget(self, record: SourceRecord) -> dict[str, Any]:
        """Apply the store's own forget rule in one store transaction.

        Returns ``removed`` (source ids gone), ``touched`` (ids whose state
        changed), ``checks`` (SQL checks that the data is gone), ``probes``
        (byte strings of the forgotten values, to look for in the file) and
        ``details`` (counts for the audit event: never a value); optionally
        ``note``, why a check fails, in words (never a value).
        """

    def forget(self, record_id: str, *, reason: str, operator: str | None = None) -> ForgetOutcome:
        self._require_writable()
        require_reason(reason)
        record = self.get(record_id)
        if record is None:
            raise SourceError(self.missing_record_message(record_id))
        preview = self.forget_preview(record_id)

        def erase() -> Erasure:
            return self._erasure_of(self._apply_forget(record), [record.id])

        intent, event, done = self._audited_erasure(
            ids=[record.id],
            tier=record.tier,
            record_type=record.record_type,
            reason=reason,
            operator=operator,
            plan={"rule": preview.get("rule"), "plan": preview.get("counts")},
            erase=erase,
            failure="forget failed, nothing was changed",
        )
        return ForgetOutcome(
            record_id=record.id,
            event_id=event,
            verified=done.verified,
            checks=done.checks,
            intent_event_id=intent,
            removed=tuple(done.removed),
            problem=done.problem,
            remark=done.remark,
        )

    def _erasure_of(self, applied: dict[str, Any], ids: list[str]) -> Erasure:
        """What ``_apply_forget`` did (to ``ids``), with the file purged and its bytes checked."""
        checks = dict(applied.get("checks", {}))
        file_checks, purge_details = self._purge_applied(applied)
        checks.update(file_checks)
        removed = list(applied.get("removed", ids))
        remark = purge_details.pop("remark", None)
        return Erasure(
            checks=checks,
            details={"removed": removed, **applied.get("details", {}), **purge_details},
            removed=removed,
            touched=list(applied.get("touched", [])),
            note=applied.get("note"),
            remark=remark,
        )

    @abstractmethod
    def _purge_applied(self, applied: dict[str, Any]) -> tuple[dict[str, bool], dict[str, Any]]:
        """The purge after ``_apply_forget``: erase what the delete freed and check that
        the forgotten bytes (``applied["probes"]``, and whatever else the store's forget
        reports) are gone; ``(checks, details)``."""

    # -- forget a whole scope

    def _writer(self) -> contextlib.AbstractContextManager[None]:
        """What a change holds while it runs (a Qdrant folder's lock); nothing here."""
        return contextlib.nullcontext()

    def scope_records(self, key: str, value: str) -> list[SourceRecord]:
        """Every record of one scope, hidden ones included: what ``forget_scope`` erases."""
        return list(self.iter_records({key: value}, include_hidden=True, page_size=2000))

    def forget_scope_rule(self, key: str) -> str:
        """What a forget of a whole scope does, in words (the app's dialog shows it)."""
        return (
            "Every record of this scope, hidden ones too, is erased by the store's own forget "
            "rule, as forget erases one; the freed pages are purged (VACUUM), the bytes "
            "checked, and memtui's cached copy goes too."
        )

    def blast_radius(
        self, *, engagement: str | None = None, scope: Scope | None = None
    ) -> dict[str, dict[str, int]]:
        key, value = scope_of(engagement, scope)
        self.check_scope_key(key)
        return radius_of(self.scope_records(key, value))

    def forget_scope(
        self,
        *,
        engagement: str | None = None,
        scope: Scope | None = None,
        reason: str,
        operator: str | None = None,
    ) -> ForgetOutcome:
        """Forget every record of one scope: one intent, each record by the store's own
        rule, one purge and byte check, one outcome event naming the scope."""
        key, value = scope_of(engagement, scope)
        self.check_scope_key(key)
        self._require_writable()
        require_reason(reason)
        with self._writer():
            records = self.scope_records(key, value)  # what is on disk now, under the lock
            if not records:
                raise SourceError(f"{key} {value!r} has no records to forget")
            ids = [r.id for r in records]
            intent, event, done = self._audited_erasure(
                ids=ids,
                tier=", ".join(sorted({r.tier for r in records})),
                record_type=", ".join(sorted({r.record_type for r in records})),
                reason=reason,
                operator=operator,
                plan={"scope": {key: value}, "plan": radius_of(records)},
                erase=lambda: self._scope_erasure(records, scope=(key, value)),
                failure="forget-scope failed, nothing was changed",
                operation="forget-scope",
            )
        return ForgetOutcome(
            record_id=None,
            event_id=event,
            verified=done.verified,
            checks=done.checks,
            intent_event_id=intent,
            removed=tuple(done.removed),
            problem=done.problem,
            remark=done.remark,
            scope=(key, value),
        )

    def _scope_erasure(self, records: Sequence[SourceRecord], *, scope: Scope) -> Erasure:
        ids = [r.id for r in records]
        done = self._erasure_of(self._apply_forget_many(records), ids)
        done.details["scope"] = {scope[0]: scope[1]}  # the scope's name, never a value of it
        return done

    def _apply_forget_many(self, records: Sequence[SourceRecord]) -> dict[str, Any]:
        """``_apply_forget`` for several records, as one result."""
        return self._forget_each(records, self._apply_forget)

    _forget_each = staticmethod(forget_each)

    def audit_source(self) -> dict[str, Any]:
        """What the audit events say the store is (never a value of it)."""
        return {"kind": self.kind, "store": str(self.path)}

    def _audited_erasure(
        self,
        *,
        ids: list[str],
        tier: str,
        record_type: str,
        reason: str,
        operator: str | None,
        plan: dict[str, Any],
        erase: Callable[[], Erasure],
        failure: str,
        operation: str | None = None,
    ) -> tuple[int, int, Erasure]:
        """One foreign erasure, audited across files no transaction can span.

        An intent event first; then ``erase`` (under the source lock: the store's
        own rule, its purge and byte checks); a ``forget-failed`` event if it
        raises; memtui's cached copy purged; and the outcome event with every
        check. Returns the intent and outcome event ids and the erasure.
        """
        operator = operator or self.operator
        source = self.audit_source()
        tag = {"operation": operation} if operation else {}
        intent = self.audit.append(
            action=INTENT,
            record_ids=ids,
            operator=operator,
            tier=tier,
            record_type=record_type,
            reason=reason,
            details={**tag, "source": source, **plan},
        )
        was_fresh = self.index_status()["ready"] if self.index.path.exists() else False
        try:
            with self._lock:
                done = erase()
        except Exception as exc:
            self.audit.append(
                action="forget-failed",
                record_ids=ids,
                operator=operator,
                tier=tier,
                record_type=record_type,
                reason=reason,
                details={
                    **tag,
                    "intent_event": intent,
                    "source": source,
                    "error": type(exc).__name__,
                },
            )
            if isinstance(exc, SourceError):
                raise
            raise SourceError(f"{failure}: {exc}") from None
        with self._index_lock:
            done.checks.update(self._purge_cache(done.removed, done.touched, was_fresh))
        event = self.audit.append(
            action="forget",
            record_ids=ids,
            operator=operator,
            tier=tier,
            record_type=record_type,
            reason=reason,
            details={
                **tag,
                "intent_event": intent,
                "source": source,
                "count": len(done.removed),
                **done.details,
                "erasure": done.checks,
                "verified": done.verified,
            },
        )
        return intent, event, done

    def _removed_by_interrupted(self) -> dict[str, dict[str, Any]]:
        """Each record an interrupted forget removed from the store (it named the record,
        which is gone now), with that forget's intent event."""
        out: dict[str, dict[str, Any]] = {}
        for intent in reversed(self.interrupted_forgets()):  # oldest first: the newest wins
            for record_id in (str(i) for i in intent["record_ids"]):
                try:
                    gone = self.get(record_id) is None
                except SourceError:  # not an id of this store: nothing of it to purge
                    continue
                if gone:
                    out[record_id] = intent
        return out

    def recover_interrupted_forgets(self) -> None:
        """Purge memtui's cached copy of every record an interrupted forget removed.

        A kill after the store's change and before the outcome event leaves the
        record's text in the cached index, which only a search would rebuild; every
        open (``records``, ``info``, the app) purges it (``ForeignIndex.purge``).
        """
        if not self.index.path.exists() or not self.audit.path.exists():
            return
        removed = self._removed_by_interrupted()
        if not removed:
            return
        with self._index_lock:
            cache = self.index.current()
            if cache is None:
                return
            try:
                cache.purge(list(removed))
            except Exception:  # a cache that cannot be purged must not serve the text
                self.index.discard()

    def missing_record_message(self, record_id: str) -> str:
        intent = next(
            (
                e
                for e in self.interrupted_forgets()  # newest first
                if record_id in [str(i) for i in e["record_ids"]]
            ),
            None,
        )
        if intent is None:
            return super().missing_record_message(record_id)
        return (
            f"{record_id} is already forgotten: the forget of audit event #{intent['id']} "
            "(forget-intent) removed it from the store and was interrupted before its outcome "
            "event; memtui's cached copy is purged (`memtui audit` shows the event)"
        )

    def _purge_cache(
        self, removed: Sequence[str], touched: Sequence[str], was_fresh: bool
    ) -> dict[str, bool]:
        """Erase the removed records' copies from memtui's index, bring the touched ones
        in line with the store, and keep a fresh index fresh."""
        cache = self.index.current()
        if cache is None:
            return {"cache_gone": True}
        gone = cache.purge(removed)
        if touched:
            vectors = self.cache_vectors() if self.has_vectors() else {}
            for source_id, record in self.get_many(touched).items():
                cache.update_row(self.cache_row(record, vectors.get(source_id)))
        if was_fresh:
            self.index.refresh(self.fingerprint())
        return {"cache_gone": gone}
