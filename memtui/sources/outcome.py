"""``ForgetOutcome``: what every erasure returns, of one record or of a whole scope.

It renders itself the way the CLI reports it (raw text: the caller escapes it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

NOT_VERIFIED = "erasure not verified: "


def erasure_status(verified: bool, problem: str | None, *, whole: bool = False) -> str:
    """``erasure verified``, or ``erasure NOT verified (why)``: the problem without its
    own "erasure not verified: " unless ``whole`` (raw text: escape it)."""
    if verified:
        return "erasure verified"
    detail = problem or "see the audit log"
    if not whole and detail.startswith(NOT_VERIFIED):  # the problem says it already
        detail = detail[len(NOT_VERIFIED) :]
    return f"erasure NOT verified ({detail})"


@dataclass(frozen=True)
class ForgetOutcome:
    """What a forget did, of one record or of a whole scope: the audit events that record
    it and the erasure checks.

    ``event_id`` is the audit event of the forget (for a foreign store the outcome event;
    ``intent_event_id`` the intent written before the change; ``incomplete_event_id`` the
    ``erasure-incomplete`` event a memtui database writes when its WAL stayed).
    ``verified`` is True only when every check in ``checks`` held. ``record_id`` is the
    record asked for (None for a scope), ``scope`` the scope forgotten (None for a record).
    """

    record_id: str | None
    event_id: int
    verified: bool
    checks: dict[str, bool]
    intent_event_id: int | None = None
    removed: tuple[str, ...] = ()
    problem: str | None = None
    scope: tuple[str, str] | None = None
    count: int | None = None
    """How many records went, when ``removed`` does not list them (a memtui database's scope)."""
    incomplete_event_id: int | None = None
    remark: str | None = None
    """How the purge went, in words, when the store says (a Postgres table rewritten)."""

    @property
    def forgotten(self) -> int:
        """How many records were forgotten."""
        return len(self.removed) if self.count is None else self.count

    def __int__(self) -> int:
        return self.forgotten

    def erasure_status(self) -> str:
        """``erasure verified``, or ``erasure NOT verified (why)`` (raw text: escape it).

        A scope's line has always shown the problem whole; a record's says "erasure not
        verified" once."""
        return erasure_status(self.verified, self.problem, whole=self.scope is not None)

    def events_text(self) -> str:
        """The audit events it wrote: ``audit event #E``, or the pair it wrote."""
        if self.incomplete_event_id is not None:
            return (
                f"audit events #{self.event_id} forget-scope, "
                f"#{self.incomplete_event_id} erasure-incomplete"
            )
        if self.intent_event_id is not None:
            return f"audit events #{self.intent_event_id} intent, #{self.event_id} outcome"
        return f"audit event #{self.event_id}"

    def report(self, what: str) -> str:
        """The CLI's line: ``forgot WHAT: erasure verified (audit event #E)`` (raw text),
        and the remark after it when there is one."""
        line = f"forgot {what}: {self.erasure_status()} ({self.events_text()})"
        return f"{line}; {self.remark}" if self.remark else line

    def to_dict(self) -> dict[str, Any]:
        """The outcome as JSON: ids, counts, checks and events (never a forgotten value)."""
        return {
            "record_id": self.record_id,
            "scope": None if self.scope is None else {self.scope[0]: self.scope[1]},
            "forgotten": self.forgotten,
            "removed": list(self.removed),
            "verified": self.verified,
            "checks": dict(self.checks),
            "problem": self.problem,
            "event_id": self.event_id,
            "intent_event_id": self.intent_event_id,
            "incomplete_event_id": self.incomplete_event_id,
            "remark": self.remark,
        }
