"""``memtui check``: is this memory database whole, in step, and untampered?

Each check yields findings with a severity: ``problem`` (the file is damaged,
out of step or tampered with) or ``note`` (worth knowing, not a fault).
Nothing here changes the database: the FTS5 integrity check is a write
statement, so it runs inside a transaction that is always rolled back.

A damaged file can make any read fail, in any way (SQLite's "database disk
image is malformed", an error text that is not even UTF-8, a column of the
wrong type). Every check runs guarded: a failure becomes one named problem
("vectors: could not be read: ...") and the findings of the other checks stay.
"""

from memtui.core.check.audit import head_problem
from memtui.core.check.database import check_database
from memtui.core.check.report import (
    AuditHead,
    CheckReport,
    Finding,
    Recognizer,
    describe_error,
    parse_audit_head,
)

__all__ = [
    "AuditHead",
    "CheckReport",
    "Finding",
    "Recognizer",
    "check_database",
    "describe_error",
    "head_problem",
    "parse_audit_head",
]
