"""What a check reports: findings, the report, a recorded audit head, and the
``Checker`` that collects them while each check runs guarded."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Finding:
    check: str
    severity: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass
class CheckReport:
    path: str
    findings: list[Finding]
    passed: list[str]

    @property
    def ok(self) -> bool:
        return not any(f.severity == "problem" for f in self.findings)

    def to_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "ok": self.ok,
            "passed": self.passed,
            "findings": [f.to_dict() for f in self.findings],
        }


@dataclass(frozen=True)
class AuditHead:
    """A chain head recorded elsewhere (what ``memtui audit head`` printed)."""

    hash: str
    id: int | None = None

    def __str__(self) -> str:
        return f"#{self.id} {self.hash}" if self.id is not None else self.hash


_HEAD = re.compile(r"\s*(?:#?(\d+)\s*[:\s]\s*)?([0-9a-fA-F]{64})\s*")


def parse_audit_head(text: str) -> AuditHead:
    """``ID HASH`` (as ``memtui audit head`` prints it), ``ID:HASH`` or ``HASH``.

    Raises ValueError for anything else.
    """
    match = _HEAD.fullmatch(text)
    if match is None:
        raise ValueError(
            "expected what `memtui audit head` prints: ID HASH (or ID:HASH, or the "
            "64-hex-digit HASH alone)"
        )
    number, digest = match.groups()
    return AuditHead(digest.lower(), int(number) if number is not None else None)


def describe_error(exc: BaseException) -> str:
    """One line for an exception raised while reading a damaged file."""
    if isinstance(exc, UnicodeDecodeError):
        # SQLite's error text quoted bytes of the damaged file that are not UTF-8
        # (e.g. a garbled schema statement): show it with those bytes escaped.
        raw = exc.object if isinstance(exc.object, bytes | bytearray) else b""
        text = bytes(raw).decode("utf-8", "backslashreplace")
        return text or "SQLite reported an error whose text is not UTF-8"
    if isinstance(exc, sqlite3.Error):
        return str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {exc}"


#: What kind of store the file at a path is (a kind ``memtui.sources`` recognizes, such
#: as ``langgraph``); it raises for a file no source recognizes.
Recognizer = Callable[[Path], str]


class Checker:
    def __init__(self, path: Path, store_kind: Recognizer | None = None) -> None:
        self.path = path
        self.store_kind = store_kind
        self.report = CheckReport(str(path), [], [])
        self.errors: dict[str, str] = {}  # each read error, and the check that met it first

    def problem(self, check: str, message: str) -> None:
        self.report.findings.append(Finding(check, "problem", message))

    def note(self, check: str, message: str) -> None:
        self.report.findings.append(Finding(check, "note", message))

    def passed(self, check: str) -> None:
        self.report.passed.append(check)

    def guarded(self, check: str, run: Callable[[], None]) -> None:
        """Run one check; any failure to read becomes one named problem."""
        try:
            run()
        except Exception as exc:  # a damaged file can fail a read in any way
            error = describe_error(exc)
            first = self.errors.setdefault(error, check)
            if first == check:
                self.problem(check, f"could not be read: {error}")
            else:
                self.problem(check, f"could not be read: the same error as {first}")
