"""Applying a confirmed change to a source: the one pipeline the app and the CLI share.

Confirmation is the caller's (a dialog, a prompt); what follows it is here: refuse a
store whose file was replaced since it was opened, apply the change through the
source's capability, name the audit event it wrote, and, while another process holds
the database, wait and try again, first checking whether the last try got through
after all (a forget whose follow-up audit write met the busy database).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memtui.core.store import MemoryStoreError
from memtui.sources.base import MemorySource, SourceRecord
from memtui.sources.capabilities import able
from memtui.sources.outcome import ForgetOutcome

MAX_RETRY_DELAY = 4.0
"""The longest pause between two tries of a change that found the database busy."""


@dataclass(frozen=True)
class Change:
    """One confirmed change: what, on what, why and by whom.

    ``kind`` and its ``target``: ``forget`` a record id, ``refute`` a record id,
    ``forget-scope`` a ``(key, value)`` scope, ``reveal`` a ``(record id, field)``.
    """

    kind: str
    target: Any
    reason: str
    operator: str | None = None


@dataclass(frozen=True)
class Saved:
    """A change that reached the database.

    ``event_id`` is its audit event; ``outcome`` a forget's (of a record or a scope);
    ``record`` the record a forget erased, as it was read before; ``value`` what a
    reveal showed. ``already`` is True when a retry found the change done by a try that
    met the busy database after it had gone through (``outcome`` is None then).
    """

    change: Change
    event_id: int | None
    outcome: ForgetOutcome | None = None
    record: SourceRecord | None = None
    value: Any = None
    already: bool = False


@dataclass(frozen=True)
class NotSaved:
    """A change that was not made: the file was replaced (``moved`` says how), or the
    database stayed busy through ``tries`` tries. Nothing was changed either way."""

    change: Change
    moved: str | None = None
    tries: int = 0


Busy = Callable[[int, int, float], None]
"""Told ``(attempt, retries, delay)`` before each pause of a change waiting its turn."""


def is_busy(error: object) -> bool:
    """Whether an error (or its message) says the database was busy or locked by another
    connection."""
    text = str(error).lower()
    return "busy" in text or "locked" in text


def apply_change(source: MemorySource, change: Change) -> Saved:
    """Make the change once (the CLI's way: any refusal or busy database raises)."""
    source.require_same_path()  # the file may have been replaced while the caller asked
    return _apply(source, change)


def save_change(
    source: MemorySource,
    change: Change,
    *,
    retries: int,
    delay: float,
    on_busy: Busy | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Saved | NotSaved:
    """Make the change, waiting its turn while another process holds the database.

    Each try waits the store's own busy timeout inside SQLite; a try that still finds
    the database busy is tried again ``retries`` times, the pause doubling from
    ``delay`` (at most ``MAX_RETRY_DELAY``), ``on_busy`` told before each pause. A
    retry first checks whether the last try got through after all. Any other error
    raises; a file replaced since the source was opened is refused before each try.
    """
    for attempt in range(retries + 1):
        moved = source.path_changed()
        if moved is not None:  # the change would go to a file no longer at the path
            return NotSaved(change, moved=moved)
        try:
            if attempt and already_done(source, change):
                return done_before(source, change)
            return _apply(source, change)
        except (MemoryStoreError, sqlite3.OperationalError) as exc:
            if not is_busy(exc):
                raise
            if attempt == retries:
                return NotSaved(change, tries=retries + 1)
            pause = min(delay * 2**attempt, MAX_RETRY_DELAY)
            if on_busy is not None:
                on_busy(attempt + 1, retries, pause)
            sleep(pause)
    raise AssertionError("unreachable")  # pragma: no cover - the loop always returns


def _apply(source: MemorySource, change: Change) -> Saved:
    reason, operator, target = change.reason, change.operator, change.target
    if change.kind == "refute":
        event = able(source, "refute").refute(str(target), reason=reason, operator=operator)
        return Saved(change, event)
    if change.kind == "forget":
        forgets = able(source, "forget")
        record = source.get(str(target))
        outcome = forgets.forget(str(target), reason=reason, operator=operator)
        return Saved(change, outcome.event_id, outcome=outcome, record=record)
    if change.kind == "forget-scope":
        scoped = able(source, "forget-scope")
        outcome = scoped.forget_scope(scope=target, reason=reason, operator=operator)
        return Saved(change, outcome.event_id, outcome=outcome)
    if change.kind == "reveal":
        record_id, field = target
        value = able(source, "reveal").reveal(record_id, field, reason=reason, operator=operator)
        return Saved(change, event_of(source, "reveal", [str(record_id)]), value=value)
    raise ValueError(f"unknown change {change.kind}")  # pragma: no cover - a programming error


def already_done(source: MemorySource, change: Change) -> bool:
    """Whether the change is on file already (a try that met the busy database after it
    went through)."""
    if change.kind == "forget":
        return source.get(str(change.target)) is None
    if change.kind == "refute":
        record = source.get(str(change.target))
        return record is None or record.state == "refuted"
    if change.kind == "forget-scope":
        return not able(source, "forget-scope").blast_radius(scope=change.target)
    return False  # a reveal is one transaction: a busy try changed nothing


def done_before(source: MemorySource, change: Change) -> Saved:
    """A change an earlier try made: the newest audit event of its action."""
    ids = None if change.kind == "forget-scope" else [str(change.target)]
    return Saved(change, event_of(source, change.kind, ids), already=True)


def event_of(source: MemorySource, action: str, record_ids: list[str] | None) -> int | None:
    """The id of the audit event a change just wrote (the newest of its action)."""
    events = source.audit_events(limit=5)
    for event in events:
        ids = [str(i) for i in event.get("record_ids") or []]
        if event["action"] == action and (record_ids is None or ids == record_ids):
            return event["id"]
    return events[0]["id"] if events else None


def scope_plan(
    source: MemorySource, scope: tuple[str, str]
) -> tuple[dict[str, dict[str, int]], str]:
    """What forgetting ``scope`` would remove (counts per tier and type) and its rule in
    words: what a confirmation shows first."""
    scoped = able(source, "forget-scope")
    return scoped.blast_radius(scope=scope), scoped.forget_scope_rule(scope[0])
