"""What a source can change, one small protocol per write: forget, forget a scope, refute,
reveal, clear erasure gaps; and the lanes (structured retrieval over memtui's tactics).

A source class implements the protocols of what it supports. Whether it can do it *now*
(a source opened read-only changes nothing) is its ``capabilities`` set; ``able`` asks
that set and hands the source back typed as the protocol, or raises the operator's one
line saying why not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol, overload, runtime_checkable

from memtui.sources.base import SourceError
from memtui.sources.outcome import ForgetOutcome

# ---------------------------------------------------------------- the protocols


@runtime_checkable
class Forgettable(Protocol):
    """Erases one record by the store's own rule, audited, erasure verified."""

    def forget_preview(self, record_id: str) -> dict[str, Any]:
        """What ``forget`` would remove (``records``, the ``rule`` in words); changes nothing."""
        ...

    def forget(
        self, record_id: str, *, reason: str, operator: str | None = None
    ) -> ForgetOutcome: ...


@runtime_checkable
class ScopeForgettable(Protocol):
    """Erases every record of one scope (``forget_scope_keys`` says by which keys)."""

    def forget_scope_rule(self, key: str) -> str:
        """What forgetting a whole scope of ``key`` does, in words (a dialog shows it)."""
        ...

    def blast_radius(
        self, *, engagement: str | None = None, scope: tuple[str, str] | None = None
    ) -> dict[str, dict[str, int]]:
        """What ``forget_scope`` would remove: record counts per tier and type."""
        ...

    def forget_scope(
        self,
        *,
        engagement: str | None = None,
        scope: tuple[str, str] | None = None,
        reason: str,
        operator: str | None = None,
    ) -> ForgetOutcome: ...


@runtime_checkable
class Refutable(Protocol):
    """A store of memtui's tactics with their evidence: a tactic can be refuted (it stays
    on file, out of reads and search). Only a memtui database is one."""

    def refute(self, record_id: str, *, reason: str, operator: str | None = None) -> int:
        """Refute one tactic; returns the audit event's id."""
        ...


@runtime_checkable
class Revealable(Protocol):
    """Shows one masked metadata field in clear, audited."""

    def reveal(
        self, record_id: str, field_name: str, *, reason: str, operator: str | None = None
    ) -> Any: ...


@runtime_checkable
class GapClearable(Protocol):
    """Clears what the store's own deletes left behind (mem0's history, LangGraph's
    orphaned vectors, Letta's soft-deleted passages)."""

    def forget_gaps_preview(self) -> dict[str, Any]:
        """``records`` to clear, the ``question`` to ask, or what to say when ``nothing``."""
        ...

    def forget_gaps(self, *, reason: str, operator: str | None = None) -> Any: ...


@runtime_checkable
class HasLanes(Protocol):
    """The structured retrieval lanes: priors, tactics, negative evidence, host history."""

    def lane_choices(self) -> tuple[list[str], dict[str, int], list[str]]:
        """Profiles, live tactics per profile, and engagements the lanes can be asked about."""
        ...

    def lanes(
        self,
        profile: str | None,
        engagement: str | None,
        *,
        min_denominator: int,
        history_limit: int | None = None,
    ) -> dict[str, Any]:
        """The four lanes: ``priors``, ``tactics``, ``negative`` (for a profile), ``history``.

        ``history`` holds at most ``history_limit`` findings, the most severe;
        ``history_total`` says how many there are.
        """
        ...

    def lane_report(
        self,
        profile: str,
        engagement: str | None,
        *,
        current_run: str | None,
        min_denominator: int,
        min_similarity: float,
        per_tool_cap: int,
    ) -> dict[str, Any]:
        """Every lane for ``memtui lanes``, with the profiles pooled and those on file."""
        ...


class _Capable(Protocol):
    @property
    def capabilities(self) -> frozenset[str]: ...

    @property
    def kind_label(self) -> str: ...

    def require(self, capability: str, action: str | None = None) -> None: ...


ACTIONS: Mapping[str, tuple[type, str]] = {
    "forget": (Forgettable, "forget"),
    "forget-scope": (ScopeForgettable, "forget_scope"),
    "refute": (Refutable, "refute"),
    "reveal": (Revealable, "reveal"),
    "forget-gaps": (GapClearable, "forget"),
    "lanes": (HasLanes, "lanes"),
}
"""Each action: the protocol that does it, and its name in a source's ``capabilities``."""


def with_article(label: str) -> str:
    """``a LangGraph SqliteStore``, ``an explicit-preference store``."""
    return ("an " if label[:1].lower() in "aeiou" else "a ") + label


def lanes_refusal(kind_label: str) -> str:
    return (
        "lanes (priors, tactics, host history) need a memtui database: "
        f"this is {with_article(kind_label)}"
    )


@overload
def able(source: _Capable, action: Literal["forget"]) -> Forgettable: ...
@overload
def able(source: _Capable, action: Literal["forget-scope"]) -> ScopeForgettable: ...
@overload
def able(source: _Capable, action: Literal["refute"]) -> Refutable: ...
@overload
def able(source: _Capable, action: Literal["reveal"]) -> Revealable: ...
@overload
def able(source: _Capable, action: Literal["forget-gaps"]) -> GapClearable: ...
@overload
def able(source: _Capable, action: Literal["lanes"]) -> HasLanes: ...


def able(source: _Capable, action: str) -> Any:
    """``source`` as the protocol of ``action`` when its ``capabilities`` say it can do that
    now; else the refusal, one line for the operator (``SourceError``: open read-only, or
    not supported by this kind of store)."""
    protocol, capability = ACTIONS[action]
    if action == "lanes" and capability not in source.capabilities:
        raise SourceError(lanes_refusal(source.kind_label))
    source.require(capability, action)
    if not isinstance(source, protocol):
        raise SourceError(f"{action} is not supported by {source.kind_label} sources")
    return source
