"""Reading and validating a memory corpus (a JSON list of records) before ingest.

Validation is complete before anything is written: a malformed corpus loads
nothing, and the error names the record and the field.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any

from memtui.core.records import (
    SCOPE_FIELDS,
    SEVERITIES,
    TIERS,
    normalize_endpoint,
    normalize_timestamp,
)
from memtui.core.store import compose_tactic_text, tactic_metadata


class CorpusError(Exception):
    """A corpus that cannot be loaded; the message says where and why."""


_TACTIC_KEYS = {
    "tool",
    "endpoint",
    "param",
    "technique",
    "successes",
    "attempts",
    "proof",
    "refuted",
    "refuted_reason",
    "targets",
}
_FINDING_KEYS = {"finding_id", "severity", "title", "url", "type", "false_positive"}
_COMMON_KEYS = {"tier", "record_type", "content", "metadata", "created_at", "expires_at"}


def load_corpus(path: str | Path) -> list[dict[str, Any]]:
    """Read, validate and prepare every record of a corpus file for ``MemoryStore.ingest``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CorpusError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read it ({exc.strerror})") from None
    return prepare_corpus(parse_corpus_text(text, label=str(path)), label=str(path))


#: how deep a corpus may nest (the list of records is level 1, a record level 2)
MAX_NESTING = 64


class _Refused:
    """What the parser returns for a value the corpus may not hold, to name it after."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what


def _parse_constant(name: str) -> _Refused:
    return _Refused(f"{name}, which JSON does not allow")


def _parse_float(text: str) -> float | _Refused:
    value = float(text)
    return value if math.isfinite(value) else _Refused(f"{text}, beyond the range of a number")


def _parse_int(text: str) -> int | _Refused:
    try:
        return int(text)
    except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
        digits = len(text.lstrip("-"))
        return _Refused(
            f"a whole number of {digits} digits (at most {sys.get_int_max_str_digits()})"
        )


def parse_corpus_text(text: str, *, label: str = "corpus") -> Any:
    """Parse corpus JSON strictly, or raise ``CorpusError`` saying what and where.

    Beyond syntax errors it refuses what JSON does not have (NaN, Infinity, a
    number out of float range), whole numbers too long to convert, and
    nesting deeper than ``MAX_NESTING``, which no record needs and which
    would overflow the recursion of any code that walks it later.
    """
    try:
        data = json.loads(
            text,
            parse_constant=_parse_constant,
            parse_float=_parse_float,
            parse_int=_parse_int,
        )
    except json.JSONDecodeError as exc:
        raise CorpusError(
            f"{label}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        line, column = _too_deep_at(text)
        raise CorpusError(
            f"{label}: JSON nested more than {MAX_NESTING} levels deep at line {line}, "
            f"column {column}"
        ) from None
    _refuse_values(data, label)
    return data


def _too_deep_at(text: str) -> tuple[int, int]:
    """Line and column of the first bracket that opens level ``MAX_NESTING + 1``."""
    depth = 0
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_NESTING:
                start = match.start()
                line = text.count("\n", 0, start) + 1
                return line, start - (text.rfind("\n", 0, start) + 1) + 1
        elif token in "]}":
            depth -= 1
    return 1, 1


_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


class _Found(Exception):
    """Raised from deep in a walk; the path is collected on the way back up."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what
        self.path: list[str | int] = []


def _walk(value: Any, depth: int) -> None:
    """Raise ``_Found`` at the first refused value or too-deep container, in document order."""
    if depth >= MAX_NESTING and value:
        raise _Found(f"nests more than {MAX_NESTING} levels deep")
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        kind = item.__class__
        if kind is dict or kind is list or kind is _Refused:
            try:
                if kind is _Refused:
                    raise _Found(f"is {item.what}")
                _walk(item, depth + 1)
            except _Found as found:
                found.path.append(key)
                raise


def _refuse_values(data: Any, label: str) -> None:
    """Name the first refused value or too-deep nesting: its record and field."""
    if not isinstance(data, list):
        return  # prepare_corpus says what the corpus must be
    try:
        _walk(data, 1)
    except _Found as found:
        record, *parts = reversed(found.path)
        _refuse(label, int(record), parts, found.what)


def _refuse(label: str, record: int, parts: list[str | int], what: str) -> None:
    name = ""
    for key in parts:
        name += f"[{key}]" if isinstance(key, int) else (f".{key}" if name else str(key))
    if len(name) > 60:
        name = name[:60] + "…"
    where = f"record {record}: '{name}'" if name else f"record {record}"
    raise CorpusError(f"{label}: {where} {what}")


def prepare_corpus(data: Any, *, label: str = "corpus") -> list[dict[str, Any]]:
    """Validate parsed corpus data; returns store-ready rows or raises ``CorpusError``."""
    if not isinstance(data, list):
        raise CorpusError(f"{label}: the corpus must be a JSON list of records")
    rows: list[dict[str, Any]] = []
    signatures: dict[str, int] = {}
    for index, item in enumerate(data):
        try:
            row = _prepare_record(item)
        except CorpusError as exc:
            raise CorpusError(f"{label}: record {index}: {exc}") from None
        signature = row.get("signature")
        if signature:
            if signature in signatures:
                raise CorpusError(
                    f"{label}: record {index}: same tactic (profile, tool, endpoint, param) "
                    f"as record {signatures[signature]}; merge their counts"
                )
            signatures[signature] = index
        rows.append(row)
    return rows


def _prepare_record(item: Any) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise CorpusError("must be a JSON object")
    _reject_surrogates(item)
    tier = item.get("tier")
    if tier is None:
        raise CorpusError("missing field 'tier'")
    if tier not in TIERS:
        raise CorpusError(f"unknown tier {tier!r} (tiers: {', '.join(TIERS)})")
    record_type = _text(item, "record_type")
    metadata = item.get("metadata", {})
    if not isinstance(metadata, dict):
        raise CorpusError("'metadata' must be a JSON object")
    row: dict[str, Any] = {"tier": tier, "record_type": record_type}
    for key in SCOPE_FIELDS:
        value = item.get(key)
        if value is not None and not isinstance(value, str):
            raise CorpusError(f"'{key}' must be text")
        row[key] = value
    for key in ("created_at", "expires_at"):
        try:
            row[key] = normalize_timestamp(item.get(key))
        except ValueError as exc:
            raise CorpusError(f"'{key}': {exc}") from None
    if record_type == "tactic":
        _prepare_tactic(item, row, metadata)
    elif record_type == "finding":
        _prepare_finding(item, row, metadata)
    else:
        unknown = set(item) - _COMMON_KEYS - set(SCOPE_FIELDS)
        if unknown:
            raise CorpusError(f"unknown field(s) {', '.join(sorted(unknown))}")
        row["content"] = _text(item, "content")
        row["metadata"] = metadata
    return row


def _prepare_tactic(item: dict[str, Any], row: dict[str, Any], metadata: dict[str, Any]) -> None:
    if row["tier"] != "longterm":
        raise CorpusError("a tactic belongs to the longterm tier")
    unknown = set(item) - _COMMON_KEYS - set(SCOPE_FIELDS) - _TACTIC_KEYS
    if unknown:
        raise CorpusError(f"unknown field(s) {', '.join(sorted(unknown))}")
    bound = [key for key in ("engagement", "run_id", "url_pattern") if item.get(key) is not None]
    if bound:
        raise CorpusError(
            f"a tactic travels across engagements and cannot carry {', '.join(bound)}; "
            "give its 'endpoint', and its target domains in 'targets' (stored hashed)"
        )
    profile = _text(item, "profile_hash")
    tool = _text(item, "tool")
    endpoint = _text(item, "endpoint")
    param = _text(item, "param")
    successes = _count(item, "successes", 1)
    attempts = _count(item, "attempts", max(successes, 1))
    if attempts < 1 or successes > attempts:
        raise CorpusError(
            f"successes ({successes}) must not exceed attempts ({attempts}), "
            "and attempts must be at least 1"
        )
    technique = _optional_text(item, "technique")
    proof = _optional_text(item, "proof")
    targets = item.get("targets", [])
    if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
        raise CorpusError("'targets' must be a list of domain names")
    refuted = item.get("refuted", False)
    if not isinstance(refuted, bool):
        raise CorpusError("'refuted' must be true or false")
    meta = tactic_metadata(
        profile_hash=profile,
        tool=tool,
        endpoint=endpoint,
        param=param,
        successes=successes,
        attempts=attempts,
        proof=proof,
        technique=technique,
        targets=targets,
        refuted=refuted,
        refuted_reason=_optional_text(item, "refuted_reason"),
        extra=metadata,
    )
    url_pattern = normalize_endpoint(endpoint)
    row.update(
        {
            "content": _optional_text(item, "content")
            or compose_tactic_text(tool, url_pattern, param, technique),
            "profile_hash": profile,
            "tool_name": tool,
            "url_pattern": url_pattern,
            "signature": meta["signature"],
            "refuted": refuted,
            "metadata": meta,
        }
    )


def _prepare_finding(item: dict[str, Any], row: dict[str, Any], metadata: dict[str, Any]) -> None:
    if row["tier"] != "episodic":
        raise CorpusError("a finding belongs to the episodic tier (what happened in a run)")
    unknown = set(item) - _COMMON_KEYS - set(SCOPE_FIELDS) - _FINDING_KEYS
    if unknown:
        raise CorpusError(f"unknown field(s) {', '.join(sorted(unknown))}")
    severity = _text(item, "severity")
    if severity not in SEVERITIES:
        raise CorpusError(f"severity {severity!r} is not one of {', '.join(SEVERITIES)}")
    url = _text(item, "url")
    false_positive = item.get("false_positive", False)
    if not isinstance(false_positive, bool):
        raise CorpusError("'false_positive' must be true or false")
    meta = dict(metadata)
    meta.update(
        {
            "finding_id": _text(item, "finding_id"),
            "severity": severity,
            "url": url,
            "type": _text(item, "type"),
            "false_positive": false_positive,
        }
    )
    path = url.split("://", 1)[-1]
    path = "/" + path.split("/", 1)[1] if "/" in path else "/"
    row.update(
        {
            "content": _text(item, "title"),
            "engagement": _text(item, "engagement"),
            "run_id": _text(item, "run_id"),
            "url_pattern": row.get("url_pattern") or normalize_endpoint(path),
            "metadata": meta,
        }
    )


def _reject_surrogates(value: Any, where: str = "") -> None:
    """JSON can spell lone surrogates (``"\\ud800"``), which are not storable text."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise CorpusError(
                f"{where or 'a value'} holds a lone surrogate (invalid Unicode text)"
            ) from None
    elif isinstance(value, dict):
        for key, inner in value.items():
            _reject_surrogates(key, f"a key in '{where}'" if where else "a key")
            _reject_surrogates(inner, f"{where}.{key}" if where else f"'{key}'")
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            _reject_surrogates(inner, f"{where}[{index}]")


def _text(item: dict[str, Any], key: str) -> str:
    value = item.get(key)
    if value is None:
        raise CorpusError(f"missing field '{key}'")
    if not isinstance(value, str) or not value.strip():
        raise CorpusError(f"'{key}' must be non-empty text")
    return value


def _optional_text(item: dict[str, Any], key: str) -> str | None:
    value = item.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise CorpusError(f"'{key}' must be text")
    return value


def _count(item: dict[str, Any], key: str, default: int) -> int:
    value = item.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CorpusError(f"'{key}' must be a whole number, 0 or more")
    return value
