"""mem0's memory payload as a record: what every store of mem0's memories shares.

mem0 2.x writes the same payload whichever vector store holds it (a Qdrant
point's payload, a pgvector row's ``payload`` jsonb): ``data`` (the text),
``hash``, ``created_at``/``updated_at`` (UTC ISO), the session ids
(``user_id``, ``agent_id``, ``run_id``: the scope keys), ``actor_id``,
``role``, ``text_lemmatized`` (a second copy of the text, for its keyword
search), ``expiration_date`` and ``memory_type``, and the caller's metadata
flattened into the top level. A procedural memory (``memory_type:
procedural_memory``) is in tier ``procedural``, every other in ``memory``.

Expiry is mem0's rule: a memory with ``expiration_date`` (``YYYY-MM-DD``) is
expired once that date is before today (UTC); the date itself is still live.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from memtui.core.records import format_timestamp

TIERS = ("memory", "procedural")
SCOPE_KEYS = ("user_id", "agent_id", "run_id")
CORE_KEYS = {
    "data",
    "hash",
    "created_at",
    "updated_at",
    "text_lemmatized",
    "user_id",
    "agent_id",
    "run_id",
    "actor_id",
    "role",
    "attributed_to",
    "expiration_date",
    "memory_type",
}
"""The payload keys mem0 itself writes; any other key is the caller's metadata."""
EXPIRY_RULE = (
    "mem0 rule: a memory with expiration_date (YYYY-MM-DD) is expired once that date is "
    "before today (UTC); the date itself is still live"
)


def expiration(value: Any) -> date | None:
    """The ``expiration_date`` as a date (None when absent or not a date)."""
    if not isinstance(value, str):
        return None
    try:
        return date.fromisoformat(value[:10])
    except ValueError:
        return None


def is_expired(expires_at: Any, today: date) -> bool:
    """mem0's rule: expired once the expiration date is before today."""
    expiry = expiration(expires_at)
    return expiry is not None and expiry < today


def expiry_moment(expires_at: Any) -> str | None:
    """The moment a memory stops being live, for memtui's index (live while
    ``expiry >= today``, i.e. until ``expiry + 1 day`` at 00:00 UTC)."""
    expiry = expiration(expires_at)
    if expiry is None:
        return None
    moment = datetime.combine(expiry + timedelta(days=1), datetime.min.time(), UTC)
    return format_timestamp(moment)


def text(value: Any) -> str | None:
    """A payload value as text (None stays None)."""
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def scope_value(value: Any) -> str | None:
    """A session id as a scope value (empty is none)."""
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else str(value)


def memory_text(value: Any) -> str:
    """The memory's text (``data``), or "" when it is not a string."""
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class PayloadFields:
    """What a record takes from a mem0 payload (its id and store metadata aside)."""

    tier: str
    record_type: str
    content: str
    scope: dict[str, str | None]
    created_at: str | None
    expires_at: str | None
    state: str
    metadata: dict[str, Any]


def payload_fields(payload: Mapping[str, Any], today: date) -> PayloadFields:
    """The record fields of one memory's payload, its state by mem0's expiry rule."""
    expires = payload.get("expiration_date")
    procedural = payload.get("memory_type") == "procedural_memory"
    metadata: dict[str, Any] = {
        "hash": payload.get("hash"),
        "updated_at": payload.get("updated_at"),
        "actor_id": payload.get("actor_id"),
        "role": payload.get("role"),
    }
    if payload.get("attributed_to") is not None:
        metadata["attributed_to"] = payload["attributed_to"]
    metadata["metadata"] = {k: v for k, v in payload.items() if k not in CORE_KEYS}
    return PayloadFields(
        tier="procedural" if procedural else "memory",
        record_type="procedural_memory" if procedural else "memory",
        content=memory_text(payload.get("data")),
        scope={k: scope_value(payload.get(k)) for k in SCOPE_KEYS},
        created_at=text(payload.get("created_at")),
        expires_at=expires if isinstance(expires, str) else None,
        state="expired" if is_expired(expires, today) else "live",
        metadata=metadata,
    )
