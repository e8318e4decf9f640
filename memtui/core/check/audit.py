"""The checks of the audit log: its hash chain, its newest event against
sqlite_sequence, a head recorded elsewhere, and its append-only triggers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memtui.core.check.report import AuditHead, Checker
from memtui.core.store.audit import GENESIS_HASH, audit_hash, audit_value_problem

_AUDIT_COLUMNS = (
    "id, at, operator, action, record_ids, tier, record_type, signature, reason, "
    "details, prev_hash, hash"
)


def check_audit(
    query: Callable[..., list[Any]],
    checker: Checker,
    recorded: AuditHead | None,
) -> None:
    """The hash chain, its newest event against sqlite_sequence, and a recorded head."""
    hashes, broken = _walk_chain(query)
    clean = broken is None
    if broken is not None:
        checker.problem("audit", f"audit chain broken at {broken}")
    if not _sequence_matches(query, checker, hashes):
        clean = False
    if clean:
        checker.passed("audit")

    if recorded is not None:
        problem = head_problem(hashes, recorded)
        if problem is None:
            checker.passed("audit-head")
        else:
            checker.problem("audit-head", problem)


def _walk_chain(query: Callable[..., list[Any]]) -> tuple[dict[int, str], str | None]:
    """Every event's hash by id, and where the chain first breaks (None: it holds)."""
    keys = [c.strip() for c in _AUDIT_COLUMNS.split(",")]
    prev_hash = GENESIS_HASH
    prev_id = 0
    broken: str | None = None
    hashes: dict[int, str] = {}
    for values in query(f"SELECT {_AUDIT_COLUMNS} FROM audit_events ORDER BY id"):
        row = dict(zip(keys, values, strict=True))
        event = int(row["id"])
        hashes[event] = str(row["hash"])
        if broken is not None:
            continue
        unhashable = audit_value_problem(row)
        if unhashable is not None:
            broken = f"event #{event}: {unhashable}"
        elif row["prev_hash"] != prev_hash:
            after = f"event #{prev_id}" if prev_id else "the start of the log"
            broken = (
                f"event #{event}: its prev_hash does not match {after} "
                "(an event was removed, inserted or rewritten)"
            )
        elif audit_hash(prev_hash, row) != row["hash"]:
            broken = f"event #{event}: its contents do not match its hash (edited)"
        prev_hash = str(row["hash"])
        prev_id = event
    return hashes, broken


def _sequence_matches(
    query: Callable[..., list[Any]], checker: Checker, hashes: dict[int, str]
) -> bool:
    """Whether sqlite_sequence agrees with the newest event; a problem when it does not.

    audit_events is AUTOINCREMENT: sqlite_sequence keeps the largest id ever
    written, and nothing in memtui deletes an event (a trigger forbids it).
    """
    last = max(hashes) if hashes else 0
    sequence = query("SELECT seq FROM sqlite_sequence WHERE name = 'audit_events'")
    written = int(sequence[0][0]) if sequence else None
    if written is None:
        if hashes:
            checker.problem(
                "audit",
                f"sqlite_sequence has no entry for audit_events though the log holds events "
                f"up to #{last}: it was edited, so a deletion of the newest events cannot be "
                "ruled out",
            )
            return False
    elif written > last:
        gone = written - last
        if hashes:
            checker.problem(
                "audit",
                (
                    "the newest audit event was"
                    if gone == 1
                    else f"the newest {gone} audit events were"
                )
                + f" deleted (the log ends at #{last}, events up to #{written} were written)",
            )
        else:
            checker.problem(
                "audit",
                f"every audit event was deleted (events up to #{written} were written)",
            )
        return False
    elif written < last:
        checker.problem(
            "audit",
            f"sqlite_sequence says events up to #{written} were written, but the log holds "
            f"#{last}: it was edited",
        )
        return False
    return True


def head_problem(hashes: dict[int, str], recorded: AuditHead) -> str | None:
    """Why a log (its events' hashes by id) does not reach a head recorded earlier,
    or None when it does."""
    ends = f"the log ends at #{max(hashes)}" if hashes else "the log is empty"
    if recorded.id is None:
        if recorded.hash in hashes.values():
            return None
        return (
            f"the recorded head {recorded.hash} is not in the log ({ends}): events were "
            "deleted or the log was rewritten since it was recorded"
        )
    found = hashes.get(recorded.id)
    if found == recorded.hash:
        return None
    if found is None:
        return (
            f"the recorded head #{recorded.id} is not in the log ({ends}): events were "
            "deleted (and the sequence rewritten) or the log was replaced since it was recorded"
        )
    return (
        f"event #{recorded.id} does not have the recorded hash {recorded.hash}: the log was "
        "rewritten (or replaced) since the head was recorded"
    )


APPEND_ONLY = {"audit_events_no_update": "UPDATE", "audit_events_no_delete": "DELETE"}


def _refuses(name: str, sql: str) -> bool:
    """Whether trigger ``name``'s statement still refuses every change it is named for:
    ``BEFORE <change> ON audit_events``, ``RAISE(ABORT, ...)``, no ``WHEN`` to narrow it."""
    words = " ".join(sql.lower().replace("(", " ( ").split())
    head = f"create trigger {name} before {APPEND_ONLY[name].lower()} on audit_events "
    return words.startswith(head) and "raise ( abort" in words and " when " not in words


def check_audit_triggers(query: Callable[..., list[Any]], checker: Checker) -> None:
    """The triggers that make SQLite refuse an edit or a delete of an audit event.

    Without them the log is no longer append-only: an event can be rewritten or
    removed with plain SQL (the hash chain still tells an edit, but a log whose
    newest events went with their sequence entry shows only against a recorded head).
    """
    found = {
        str(name): str(sql or "")
        for name, sql in query(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = "
            "'audit_events'"
        )
    }
    clean = True
    for name in APPEND_ONLY:
        what = (
            f"the audit log's append-only trigger {name} (which refuses every {APPEND_ONLY[name]})"
        )
        if name not in found:
            clean = False
            checker.problem(
                "audit-triggers",
                f"{what} is missing: another program dropped it, so events can be changed "
                "without SQLite refusing; memtui check --audit-head with a head recorded "
                "earlier tells whether the log was rewritten",
            )
        elif not _refuses(name, found[name]):
            clean = False
            checker.problem(
                "audit-triggers",
                f"{what} is not the one memtui created (its statement was changed): it may "
                "no longer refuse it",
            )
    if clean:
        checker.passed("audit-triggers")
