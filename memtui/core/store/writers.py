"""The writers of single records: tactics (success, failure, refutation), findings,
other records, and the audited reveal of a masked field."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from memtui.core.records import (
    SEVERITIES,
    TIERS,
    MemoryRecord,
    anonymize_target,
    normalize_endpoint,
    normalize_timestamp,
    tactic_signature,
)
from memtui.core.secrets import secret_paths, value_at
from memtui.core.stats import wilson_lower_bound
from memtui.core.store.errors import MemoryStoreError, _require_reason, _require_text
from memtui.core.store.rows import _RECORD_COLUMNS, _canonical, _row_to_record
from memtui.core.store.vectors import VectorWriter


def compose_tactic_text(tool: str, url_pattern: str, param: str, technique: str | None) -> str:
    """Searchable text of a tactic recorded without content of its own."""
    parts = [tool, url_pattern, f"param {param}"]
    if technique:
        parts.append(technique)
    return " ".join(parts)


def tactic_metadata(
    *,
    profile_hash: str,
    tool: str,
    endpoint: str,
    param: str,
    successes: int,
    attempts: int,
    proof: str | None = None,
    technique: str | None = None,
    targets: Iterable[str] = (),
    refuted: bool = False,
    refuted_reason: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A tactic's metadata from recorded counts, as ingest builds it."""
    meta = dict(extra or {})
    hashed: list[str] = []
    for target in targets:
        value = anonymize_target(target)
        if value not in hashed:
            hashed.append(value)
    meta.update(
        {
            "signature": tactic_signature(profile_hash, tool, endpoint, param),
            "param_name": param,
            "bypass_technique": technique,
            "evidence_grade": "proven" if proof and not refuted else "hypothesis",
            "targets_seen": hashed,
            "refuted": refuted,
        }
    )
    if proof:
        meta["proof"] = proof
    _apply_counts(meta, successes, attempts)
    if refuted:
        meta["confidence"] = 0.0
        if refuted_reason:
            meta["refuted_reason"] = refuted_reason
    return meta


def _apply_counts(meta: dict[str, Any], successes: int, attempts: int) -> None:
    meta["total_attempts"] = attempts
    meta["total_successes"] = successes
    meta["success_rate"] = successes / attempts if attempts else None
    bound = wilson_lower_bound(successes, attempts)
    meta["confidence"] = bound if bound is not None else 0.0


def _rewritable_metadata(record: MemoryRecord) -> dict[str, Any]:
    """A copy of the record's metadata to change and write back; refused when another
    writer left the metadata unreadable (writing it back would replace what is stored)."""
    damaged = [damage for damage in record.damage if damage.startswith("metadata ")]
    if damaged:
        raise MemoryStoreError(
            f"record #{record.id}'s {damaged[0]}, so memtui will not rewrite it; "
            "forget the record (it was written by another program)"
        )
    return dict(record.metadata)


def _expiry(value: str | datetime | None) -> str | None:
    try:
        return normalize_timestamp(value)
    except ValueError as exc:
        raise MemoryStoreError(f"expires_at: {exc}") from None


class RecordWriters(VectorWriter):
    """Every writer of one record; each writes its audit event, if any, in its transaction."""

    def _insert_record(
        self,
        *,
        tier: str,
        record_type: str,
        content: str,
        metadata: dict[str, Any],
        created_at: str | None = None,
        expires_at: str | datetime | None = None,
        signature: str | None = None,
        refuted: bool = False,
        **scope: Any,
    ) -> int:
        if tier not in TIERS:
            raise MemoryStoreError(f"unknown tier {tier!r}; tiers are {', '.join(TIERS)}")
        values = {
            "tier": tier,
            "record_type": record_type,
            "content": content,
            "profile_hash": scope.get("profile_hash"),
            "engagement": scope.get("engagement"),
            "run_id": scope.get("run_id"),
            "tool_name": scope.get("tool_name"),
            "url_pattern": scope.get("url_pattern"),
            "signature": signature,
            "metadata": _canonical(metadata),
            "refuted": int(refuted),
            "created_at": created_at or self.now_text(),
            "expires_at": _expiry(expires_at),
        }
        cursor = self._conn.execute(
            "INSERT INTO records (tier, record_type, content, profile_hash, engagement, run_id, "
            "tool_name, url_pattern, signature, metadata, refuted, created_at, expires_at) VALUES "
            "(:tier, :record_type, :content, :profile_hash, :engagement, :run_id, :tool_name, "
            ":url_pattern, :signature, :metadata, :refuted, :created_at, :expires_at)",
            values,
        )
        record_id = cursor.lastrowid
        assert record_id is not None  # set by every INSERT
        if self.embedder is not None:
            self._store_vectors([(record_id, content)])
        return record_id

    def _tactic_row(self, signature: str) -> sqlite3.Row | None:
        rows = self.query(
            f"SELECT {_RECORD_COLUMNS} FROM records WHERE signature = ?", (signature,)
        )
        return rows[0] if rows else None

    def record_success(
        self,
        *,
        profile_hash: str,
        tool: str,
        endpoint: str,
        param: str,
        proof: str | None = None,
        content: str | None = None,
        technique: str | None = None,
        target: str | None = None,
        expires_at: str | datetime | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> int:
        """Record a successful tactic: the only creator of tactics; repeats increment.

        A repeat success on the same signature updates that one row (never a
        duplicate): the counts, the grade (up only, with ``proof``) and the
        targets seen. Its ``expires_at``, when given, becomes the tactic's
        expiry: the newest success says how long the tactic is good for, so a
        tactic that had expired is live again when the new expiry is later than
        now (its counts carry on). Without ``expires_at`` the expiry stays as it
        was, expired included. ``content`` and ``technique`` are kept from the
        first success.
        """
        _require_text(profile_hash=profile_hash, tool=tool, endpoint=endpoint, param=param)
        signature = tactic_signature(profile_hash, tool, endpoint, param)
        with self._write():
            row = self._tactic_row(signature)
            if row is not None:
                return self._repeat_success(
                    _row_to_record(row), proof=proof, target=target, expires_at=expires_at
                )
            url_pattern = normalize_endpoint(endpoint)
            meta = dict(metadata or {})
            meta.update(
                {
                    "signature": signature,
                    "param_name": param,
                    "bypass_technique": technique,
                    "evidence_grade": "proven" if proof else "hypothesis",
                    "targets_seen": [anonymize_target(target)] if target else [],
                    "refuted": False,
                }
            )
            if proof:
                meta["proof"] = proof
            _apply_counts(meta, 1, 1)
            text = content or compose_tactic_text(tool, url_pattern, param, technique)
            return self._insert_record(
                tier="longterm",
                record_type="tactic",
                content=text,
                metadata=meta,
                expires_at=expires_at,
                signature=signature,
                profile_hash=profile_hash,
                tool_name=tool,
                url_pattern=url_pattern,
            )

    def _repeat_success(
        self,
        record: MemoryRecord,
        *,
        proof: str | None,
        target: str | None,
        expires_at: str | datetime | None,
    ) -> int:
        """One more success of a known tactic: its counts, grade, targets and expiry; inside
        a write."""
        if record.refuted:
            raise MemoryStoreError(
                f"tactic #{record.id} is refuted; a new success is refused. Forget it "
                "and record it afresh if it really works again"
            )
        expiry = record.expires_at if expires_at is None else _expiry(expires_at)
        meta = _rewritable_metadata(record)
        attempts = int(meta.get("total_attempts", 0)) + 1
        successes = int(meta.get("total_successes", 0)) + 1
        _apply_counts(meta, successes, attempts)
        if proof:
            meta["evidence_grade"] = "proven"
            meta["proof"] = proof
        if target:
            seen = list(meta.get("targets_seen", []))
            hashed = anonymize_target(target)
            if hashed not in seen:
                seen.append(hashed)
            meta["targets_seen"] = seen
        self._conn.execute(
            "UPDATE records SET metadata = ?, expires_at = ? WHERE id = ?",
            (_canonical(meta), expiry, record.id),
        )
        return record.id

    def record_failure(
        self,
        *,
        profile_hash: str,
        tool: str,
        endpoint: str,
        param: str,
        proof: str | None = None,
        content: str | None = None,
        technique: str | None = None,
        target: str | None = None,
        expires_at: str | datetime | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> int | None:
        """Count a failed attempt on a known tactic; an unknown signature creates nothing.

        Takes the same keys as ``record_success``, so an agent can pass one set
        of arguments to either, and refuses any other (``TypeError``): a
        misspelled key is a mistake, not something to drop. Only the signature
        (profile, tool, endpoint, param) matters: a failure proves nothing and
        changes no text, expiry, target list or metadata.
        """
        signature = tactic_signature(profile_hash, tool, endpoint, param)
        with self._write():
            row = self._tactic_row(signature)
            if row is None:
                return None
            record = _row_to_record(row)
            meta = _rewritable_metadata(record)
            attempts = int(meta.get("total_attempts", 0)) + 1
            _apply_counts(meta, int(meta.get("total_successes", 0)), attempts)
            if record.refuted:
                meta["confidence"] = 0.0
            self._conn.execute(
                "UPDATE records SET metadata = ? WHERE id = ?", (_canonical(meta), record.id)
            )
            return record.id

    def record_refuted(
        self,
        *,
        profile_hash: str,
        tool: str,
        endpoint: str,
        param: str,
        reason: str,
        operator: str | None = None,
        proof: str | None = None,
        content: str | None = None,
        technique: str | None = None,
        target: str | None = None,
        expires_at: str | datetime | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> int | None:
        """The agent's own correction: flag a known tactic refuted (audited); else nothing.

        Takes ``record_success``'s keys plus ``reason`` and ``operator``, and
        refuses any other (``TypeError``). Only the signature and the reason
        matter; the other keys are accepted so one set of arguments fits every
        tactic writer.
        """
        signature = tactic_signature(profile_hash, tool, endpoint, param)
        with self._write():
            row = self._tactic_row(signature)
            if row is None:
                return None
            record = _row_to_record(row)
            if not record.refuted:
                self._refute_locked(record, reason, operator, action="agent-refute")
            return record.id

    def refute(self, record_id: int, *, reason: str, operator: str | None = None) -> int:
        """Operator refutation of a tactic; returns the audit event id."""
        _require_reason(reason)
        with self._write():
            record = self._existing(record_id)
            if record.record_type != "tactic":
                raise MemoryStoreError(
                    f"record #{record.id} is a {record.record_type}, not a tactic; "
                    "only tactics can be refuted (forget it instead)"
                )
            if record.refuted:
                raise MemoryStoreError(f"tactic #{record.id} is already refuted")
            return self._refute_locked(record, reason, operator, action="refute")

    def _refute_locked(
        self, record: MemoryRecord, reason: str, operator: str | None, *, action: str
    ) -> int:
        meta = _rewritable_metadata(record)
        previous_grade = meta.get("evidence_grade")
        meta.update(
            {
                "refuted": True,
                "refuted_reason": reason,
                "refuted_at": self.now_text(),
                "evidence_grade": "hypothesis",
                "confidence": 0.0,
            }
        )
        self._conn.execute(
            "UPDATE records SET refuted = 1, metadata = ? WHERE id = ?",
            (_canonical(meta), record.id),
        )
        return self._append_audit(
            action=action,
            record_ids=[record.id],
            operator=operator,
            tier=record.tier,
            record_type=record.record_type,
            signature=record.signature,
            reason=reason,
            details={"previous_grade": previous_grade, "count": 1},
        )

    def record_finding(
        self,
        *,
        finding_id: str,
        run_id: str,
        engagement: str,
        severity: str,
        title: str,
        url: str,
        type: str,
        false_positive: bool = False,
        profile_hash: str | None = None,
        expires_at: str | datetime | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> int:
        """An episodic finding of one engagement and run; its title is its content.

        The same ``finding_id`` in the same engagement updates that finding
        instead of adding a second one.
        """
        _require_text(finding_id=finding_id, run_id=run_id, engagement=engagement, title=title)
        if severity not in SEVERITIES:
            raise MemoryStoreError(f"severity {severity!r} is not one of {', '.join(SEVERITIES)}")
        meta = dict(metadata or {})
        meta.update(
            {
                "finding_id": finding_id,
                "severity": severity,
                "url": url,
                "type": type,
                "false_positive": bool(false_positive),
            }
        )
        path = re.sub(r"^[a-zA-Z][a-zA-Z0-9+.-]*://[^/]*", "", url or "")
        with self._write():
            existing = self._conn.execute(
                "SELECT id FROM records WHERE engagement = ? AND record_type = 'finding' "
                "AND json_extract(metadata, '$.finding_id') = ?",
                (engagement, finding_id),
            ).fetchone()
            if existing is not None:
                self._conn.execute(
                    "UPDATE records SET content = ?, run_id = ?, metadata = ?, url_pattern = ?, "
                    "profile_hash = ?, expires_at = ? WHERE id = ?",
                    (
                        title,
                        run_id,
                        _canonical(meta),
                        normalize_endpoint(path),
                        profile_hash,
                        _expiry(expires_at),
                        existing[0],
                    ),
                )
                if self.embedder is not None:
                    self._store_vectors([(existing[0], title)])
                return existing[0]
            return self._insert_record(
                tier="episodic",
                record_type="finding",
                content=title,
                metadata=meta,
                expires_at=expires_at,
                engagement=engagement,
                run_id=run_id,
                profile_hash=profile_hash,
                url_pattern=normalize_endpoint(path),
            )

    def add_record(
        self,
        *,
        tier: str,
        record_type: str,
        content: str,
        metadata: dict[str, Any] | None = None,
        expires_at: str | datetime | None = None,
        profile_hash: str | None = None,
        engagement: str | None = None,
        run_id: str | None = None,
        tool_name: str | None = None,
        url_pattern: str | None = None,
    ) -> int:
        """A note, observation or reference; tactics and findings have their own writers."""
        if record_type in ("tactic", "finding"):
            raise MemoryStoreError(f"use record_success / record_finding to write a {record_type}")
        _require_text(content=content)
        with self._write():
            return self._insert_record(
                tier=tier,
                record_type=record_type,
                content=content,
                metadata=dict(metadata or {}),
                expires_at=expires_at,
                profile_hash=profile_hash,
                engagement=engagement,
                run_id=run_id,
                tool_name=tool_name,
                url_pattern=url_pattern,
            )

    def reveal(
        self, record_id: int, field: str, *, reason: str, operator: str | None = None
    ) -> Any:
        """Return one masked metadata field's value, writing a ``reveal`` audit event.

        The event names the record and the field, never the value.
        """
        _require_reason(reason)
        with self._write():
            record = self._existing(record_id)
            if field not in secret_paths(record.metadata):
                raise MemoryStoreError(
                    f"record #{record.id} has no masked field {field!r}; "
                    f"masked fields: {', '.join(secret_paths(record.metadata)) or 'none'}"
                )
            value = value_at(record.metadata, field)
            self._append_audit(
                action="reveal",
                record_ids=[record.id],
                operator=operator,
                tier=record.tier,
                record_type=record.record_type,
                signature=record.signature,
                reason=reason,
                details={"field": field},
            )
        return value
