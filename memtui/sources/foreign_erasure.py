"""What a foreign store's erasure reports, and how it checks that the bytes are gone.

``Erasure`` is what one erasure did (its checks, audit counts, the ids whose
cached copy goes or changes); ``GapsOutcome`` is what ``forget_gaps`` returns.
``forgotten_bytes_gone`` looks for the forgotten values in a store file's bytes
beyond what live records account for; ``forget_each`` runs one record's forget
rule over several records.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memtui.sources.shapes import SourceError, SourceRecord

BYTE_CHECK_LIMIT = 512 * 1024 * 1024
CHECKPOINT_RETRIES = 10


@dataclass
class Erasure:
    """What one erasure did in a foreign store: its checks (all must hold), counts for
    the audit event (never a value), the ids whose cached copy goes or changes, a
    ``note`` saying in words why a check failed (never a value), and a ``remark`` the
    outcome line adds (how the purge went, when the store says: a table rewritten)."""

    checks: dict[str, bool]
    details: dict[str, Any] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    touched: list[str] = field(default_factory=list)
    note: str | None = None
    remark: str | None = None

    @property
    def verified(self) -> bool:
        return all(self.checks.values())

    @property
    def problem(self) -> str | None:
        failed = sorted(k for k, v in self.checks.items() if not v)
        if not failed:
            return None
        text = f"erasure not verified: {', '.join(failed)}"
        return f"{text}; {self.note}" if self.note else text


@dataclass(frozen=True)
class GapsOutcome:
    """What ``forget_gaps`` cleared: ``done`` says it in a sentence (the store's words)."""

    record_ids: tuple[str, ...]
    done: str
    event_id: int
    intent_event_id: int
    verified: bool
    checks: dict[str, bool]
    problem: str | None = None

    @classmethod
    def of(
        cls, ids: list[str], done: str, intent: int, event: int, erasure: Erasure
    ) -> GapsOutcome:
        """The outcome of one ``_audited_erasure`` of gaps, in the store's words."""
        return cls(
            record_ids=tuple(ids),
            done=done,
            event_id=event,
            intent_event_id=intent,
            verified=erasure.verified,
            checks=erasure.checks,
            problem=erasure.problem,
        )


def radius_of(records: Iterable[SourceRecord]) -> dict[str, dict[str, int]]:
    """Record counts by tier, then type, in that order (a blast radius)."""
    out: dict[str, dict[str, int]] = {}
    for record in records:
        types = out.setdefault(record.tier, {})
        types[record.record_type] = types.get(record.record_type, 0) + 1
    return {tier: dict(sorted(types.items())) for tier, types in sorted(out.items())}


def merged_detail(have: Any, value: Any) -> Any:
    """Two records' value of one audit detail as one: counts add up, flags all hold,
    lists join; any other value is the first record's."""
    if have is None:
        return value
    if isinstance(have, bool) or isinstance(value, bool):
        return bool(have) and bool(value)
    if isinstance(have, int | float) and isinstance(value, int | float):
        return have + value
    if isinstance(have, list) and isinstance(value, list):
        return have + value
    return have


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def occurrences_in_columns(
    conn: sqlite3.Connection, probe: bytes, columns: Sequence[tuple[str, str]]
) -> int:
    """How often ``probe`` occurs in the values still in ``columns`` ((table, column)
    pairs; a table or column the file lacks holds none)."""
    total = 0
    for table, column in columns:
        name, col = quote_identifier(table), quote_identifier(column)
        if column not in {r[1] for r in conn.execute(f"PRAGMA table_info({name})")}:
            continue
        for (value,) in conn.execute(
            f"SELECT CAST({col} AS BLOB) FROM {name} WHERE typeof({col}) IN ('text', 'blob') "
            f"AND instr(CAST({col} AS BLOB), ?) > 0",
            (probe,),
        ):
            total += bytes(value).count(probe)
    return total


def forgotten_bytes_gone(
    conn: sqlite3.Connection,
    data: bytes,
    probes: Sequence[bytes],
    columns: Sequence[tuple[str, str]],
) -> bool:
    """Whether ``data`` (the file's bytes) holds no copy of the forgotten values.

    Live records may hold the same bytes (any deterministic embedder gives equal
    text equal vectors), so each probe's occurrences in the file are compared
    with the occurrences the live records' values in ``columns`` account for:
    only an excess is a copy of the forgotten record.
    """
    return all(
        found <= occurrences_in_columns(conn, probe, columns)
        for probe in probes
        if (found := data.count(probe))
    )


def forget_each(
    records: Sequence[SourceRecord], apply: Callable[[SourceRecord], dict[str, Any]]
) -> dict[str, Any]:
    """``apply`` (one record's forget) on each record in turn, merged into one result.

    A record that fails stops the rest: when one was forgotten before it, the result
    says so (the check ``every_record_erased`` fails, the note says where it stopped)
    instead of raising, so that the outcome event records what did go.
    """
    merged: dict[str, Any] = {
        "removed": [],
        "touched": [],
        "checks": {},
        "probes": [],
        "details": {},
    }
    notes: list[str] = []
    for done, record in enumerate(records):
        try:
            applied = apply(record)
        except Exception as exc:
            if not done:
                raise
            why = str(exc) if isinstance(exc, SourceError) else type(exc).__name__
            merged["checks"]["every_record_erased"] = False
            notes.append(f"stopped after {done} of {len(records)} records: {why}")
            break
        merged["removed"].extend(applied.get("removed", [record.id]))
        merged["touched"].extend(applied.get("touched", []))
        merged["probes"].extend(applied.get("probes", []))
        for name, held in applied.get("checks", {}).items():
            merged["checks"][name] = merged["checks"].get(name, True) and bool(held)
        for name, value in applied.get("details", {}).items():
            merged["details"][name] = merged_detail(merged["details"].get(name), value)
        if applied.get("note"):
            notes.append(str(applied["note"]))
    if notes:
        merged["note"] = "; ".join(dict.fromkeys(notes))
    return merged
