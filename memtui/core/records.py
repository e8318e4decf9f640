"""The record vocabulary shared by the store, search, lanes and the app.

Four tiers share one storage shape so that provenance, scope and retention are
uniform (design.md section 2).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

TIERS: tuple[str, ...] = ("working", "episodic", "longterm", "knowledge")

SCOPE_FIELDS: tuple[str, ...] = ("profile_hash", "engagement", "run_id", "tool_name", "url_pattern")

SEVERITIES: tuple[str, ...] = ("critical", "high", "medium", "low", "info")

EVIDENCE_GRADES: tuple[str, ...] = ("hypothesis", "proven")

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_LONG_HEX = re.compile(r"^[0-9a-fA-F]{16,}$")
_NUMBER = re.compile(r"^\d+$")


def normalize_endpoint(path: str) -> str:
    """Replace volatile path segments (numbers, UUIDs, long hex ids) with ``*``.

    ``/api/9/orders`` becomes ``/api/*/orders``. A query string or fragment is
    dropped: the dedup key of a tactic is the route, not one request.
    """
    path = (path or "").split("?", 1)[0].split("#", 1)[0]
    segments = path.split("/")
    out = []
    for seg in segments:
        if _NUMBER.match(seg) or _UUID.match(seg) or _LONG_HEX.match(seg):
            out.append("*")
        else:
            out.append(seg)
    return "/".join(out)


def tactic_signature(profile_hash: str, tool: str, endpoint: str, param: str) -> str:
    """The dedup key of a tactic: a short one-way digest of its normalized parts.

    The signature is a digest rather than the joined text so that the audit log,
    which names signatures, never carries an endpoint or parameter in the clear.
    """
    parts = (profile_hash or "", (tool or "").lower(), normalize_endpoint(endpoint), param or "")
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]


def anonymize_target(domain: str) -> str:
    """Stable, case-insensitive, one-way 8-hex-character hash of a target domain."""
    canonical = (domain or "").strip().lower().rstrip(".")
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:8]


def format_timestamp(moment: datetime) -> str:
    """Fixed-width UTC ISO-8601 text, so stored timestamps compare as strings."""
    if moment.tzinfo is None:
        raise ValueError(f"timestamp {moment!r} has no timezone; give an aware UTC datetime")
    # isoformat: four-digit years always (strftime's %Y drops the zeros of year 1..999)
    return moment.astimezone(UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def parse_timestamp(value: str | datetime) -> datetime:
    """Parse ISO-8601 text (``Z`` or an offset) into an aware UTC datetime."""
    if isinstance(value, datetime):
        moment = value
    else:
        text = str(value).strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"{value!r} is not an ISO-8601 timestamp (e.g. 2026-11-30T10:00:00Z)"
            ) from None
    if moment.tzinfo is None:
        raise ValueError(f"timestamp {value!s} has no timezone; add Z or an offset")
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+14:00 is before year 1 in UTC
        raise ValueError(f"timestamp {value!s} is out of range (years 1 to 9999 in UTC)") from None


def normalize_timestamp(value: str | datetime | None) -> str | None:
    """Stored form of a timestamp given as text or datetime; None stays None."""
    if value is None:
        return None
    return format_timestamp(parse_timestamp(value))


@dataclass(frozen=True)
class MemoryRecord:
    """One stored memory, as read back from the store."""

    id: int
    tier: str
    record_type: str
    content: str
    profile_hash: str | None = None
    engagement: str | None = None
    run_id: str | None = None
    tool_name: str | None = None
    url_pattern: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""
    expires_at: str | None = None
    refuted: bool = False
    signature: str | None = None

    def is_expired(self, now: datetime) -> bool:
        """Strict boundary: a record is live only while ``expires_at > now``."""
        return self.expires_at is not None and self.expires_at <= format_timestamp(now)

    @property
    def evidence_grade(self) -> str | None:
        return self.metadata.get("evidence_grade")

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tier": self.tier,
            "record_type": self.record_type,
            "content": self.content,
            "profile_hash": self.profile_hash,
            "engagement": self.engagement,
            "run_id": self.run_id,
            "tool_name": self.tool_name,
            "url_pattern": self.url_pattern,
            "signature": self.signature,
            "refuted": self.refuted,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "metadata": self.metadata,
        }
