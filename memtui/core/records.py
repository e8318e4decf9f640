"""The record vocabulary shared by the store, search, lanes and the app.

Four tiers share one storage shape so that provenance, scope and retention are
uniform (docs/design.md section 2).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from memtui.core.secrets import mask_json_text

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
    damage: tuple[str, ...] = ()
    """What another writer left unreadable in this row, one phrase per column
    (``read_row_text``, ``read_metadata``); empty for a sound row."""

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


# ---------------------------------------------------------------- damaged rows
#
# Another program can write rows into a memtui database that memtui's writers
# never would: text that is not UTF-8, a BLOB where text belongs, metadata that
# is not a JSON object. Such a row is read with its damage named, never refused.


class UndecodedText(str):
    """A text column's value that was not valid UTF-8, its bad bytes written ``\\xNN``."""


def lenient_text(raw: bytes) -> str:
    """A SQLite ``text_factory``: UTF-8 text, or ``UndecodedText`` when it is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return UndecodedText(raw.decode("utf-8", "backslashreplace"))


def read_row_text(value: Any) -> tuple[Any, str | None]:
    """A text column's stored value as text, and what is wrong with it (None when sound).

    NULL stays None. A BLOB, or text that is not UTF-8 (read with ``lenient_text``),
    becomes text with its bad bytes written ``\\xNN``; a number becomes its digits.
    """
    if value is None or (isinstance(value, str) and not isinstance(value, UndecodedText)):
        return value, None
    if isinstance(value, UndecodedText):
        return str(value), "is not valid UTF-8 (its bad bytes are shown as \\xNN)"
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace"), "is a BLOB, not text"
    return str(value), f"is a number ({type(value).__name__}), not text"


RAW_METADATA_KEY = "raw_text"
"""The one metadata field of a row whose metadata cannot be read: its stored text."""
RAW_METADATA_CHARS = 2000
"""At most this much of unreadable metadata is kept to show (the file keeps it all)."""


def read_metadata(value: Any) -> tuple[dict[str, Any], str | None]:
    """The stored metadata as a dict, and what is wrong with it (None when sound).

    Metadata that is not a JSON object (not JSON, a list, nested too deep to
    parse, a number too long to read) comes back as ``{RAW_METADATA_KEY: text}``:
    its stored text, cut to ``RAW_METADATA_CHARS``, secret-named fields' values
    masked (``mask_json_text``), so it shows as raw text but never unmasked.
    """
    text, problem = read_row_text(value)
    if problem is None:
        if not text:
            return {}, None
        try:
            data = json.loads(text)
        except RecursionError:
            problem = "is JSON nested too deep to read"
        except json.JSONDecodeError as exc:
            problem = f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        except ValueError:  # an integer of more digits than Python converts
            problem = "holds a number too long to read"
        else:
            if isinstance(data, dict):
                return data, None
            problem = f"is a JSON {_json_kind(data)}, not an object"
    shown = text[:RAW_METADATA_CHARS] + ("…" if len(text) > RAW_METADATA_CHARS else "")
    return {RAW_METADATA_KEY: mask_json_text(shown)}, f"metadata {problem}"


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"
