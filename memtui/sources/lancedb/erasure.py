"""Erasing rows from a LanceDB table so that no file under it still holds them.

``table.delete()`` writes only a deletion file: the row stays in its data file,
and every older version keeps referencing that file. A forget therefore

1. deletes the rows (a new version with a deletion file),
2. rewrites every fragment that has deletions (pylance ``compact_files`` with
   ``materialize_deletions_threshold=0.0``: a fragment is rewritten even when
   one row of a hundred is deleted, crewAI's case; the default rewrites only
   above 10%),
3. removes every older version and the files only they referenced
   (``cleanup_old_versions(older_than=0)``), and
4. checks: one version left, every data and deletion file referenced by it,
   and no file under the table folder holding the forgotten bytes.

A concurrent writer's commit conflict is retried (``RETRIES``), then reported.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtui.sources.base import SourceError
from memtui.sources.foreign_erasure import Erasure, GapsOutcome
from memtui.sources.lancedb.folder import folder_files

if TYPE_CHECKING:
    from memtui.sources.lancedb.source import LanceSource

RETRIES = 5
#: older versions read to find the rows they alone still hold
VERSIONS_READ = 500
RULE = (
    "The row is deleted from the table; every fragment with deleted rows is rewritten "
    "without them, and every older version (and the files only it held) is removed."
)
GAPS_RULE = (
    "Every fragment with deleted rows is rewritten without them, and every older version "
    "(and the files only it held) is removed; live rows are kept as they are."
)


@dataclass
class Result:
    checks: dict[str, bool] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


def _dataset(path: Path) -> Any:
    import lance

    return lance.dataset(str(path))


def version_listing(path: Path) -> tuple[Any, ...]:
    """What changes whenever a writer commits (the manifests, by name and size)."""
    try:
        return tuple(sorted((p.name, p.stat().st_size) for p in (path / "_versions").iterdir()))
    except OSError:
        return ()


def _conflict(exc: Exception) -> bool:
    text = str(exc).lower()
    return "conflict" in text or "retryable" in text


def _retried(what: str, path: Path, step: Any) -> Any:
    """``step()``, retried while another writer's commit conflicts with it."""
    for attempt in range(RETRIES):
        try:
            return step()
        except (OSError, RuntimeError, ValueError) as exc:
            if not _conflict(exc):
                raise SourceError(f"{what} in {path.name} failed: {exc}") from None
            if attempt == RETRIES - 1:
                raise SourceError(
                    f"{what} in {path.name}: another writer kept committing ({RETRIES} tries); "
                    "stop the agent and run the forget again"
                ) from None
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


def _predicate(column: str, keys: Sequence[Any]) -> str:
    if column == "_rowid":
        return "_rowid IN (" + ", ".join(str(int(k)) for k in keys) + ")"
    quoted = ", ".join("'" + str(k).replace("'", "''") + "'" for k in keys)
    return f"{column} IN ({quoted})"


def rewrite(path: Path) -> dict[str, Any]:
    """Rewrite every fragment with deletions, then remove every older version."""
    details: dict[str, Any] = {}

    def compact() -> Any:
        return _dataset(path).optimize.compact_files(
            materialize_deletions=True, materialize_deletions_threshold=0.0
        )

    metrics = _retried("rewriting fragments", path, compact)
    details["fragments_rewritten"] = int(getattr(metrics, "fragments_removed", 0))

    def cleanup() -> Any:
        return _dataset(path).cleanup_old_versions(older_than=timedelta(0))

    stats = _retried("removing old versions", path, cleanup)
    details["old_versions_removed"] = int(getattr(stats, "old_versions", 0))
    details["bytes_removed"] = int(getattr(stats, "bytes_removed", 0))
    return details


def verify(path: Path, probes: Sequence[bytes]) -> dict[str, bool]:
    """One version left, no file it does not reference, no file holding ``probes``."""
    dataset = _dataset(path)
    fragments = dataset.get_fragments()
    referenced = {f.path for frag in fragments for f in frag.data_files()}
    deletions = [frag.metadata.deletion_file for frag in fragments]
    data_files = {p.name for p in (path / "data").glob("*") if p.is_file()}
    checks = {
        "one_version_left": len(dataset.versions()) == 1,
        "no_unreferenced_data_files": data_files <= {Path(r).name for r in referenced},
        "no_deleted_rows_left": not any(d is not None and d.num_deleted_rows for d in deletions),
    }
    useful = [p for p in probes if len(p) >= 8]
    if useful:
        checks["bytes_gone"] = not files_holding(path, useful)
    return checks


def files_holding(path: Path, probes: Sequence[bytes]) -> list[Path]:
    """The files under ``path`` that hold any of ``probes``."""
    return [f for f in folder_files(path) if any(p in f.read_bytes() for p in probes)]


def delete_and_rewrite(
    path: Path, column: str, keys: Sequence[Any], probes: Sequence[bytes]
) -> Result:
    result = Result()
    if keys:
        predicate = _predicate(column, keys)
        _retried("deleting rows", path, lambda: _dataset(path).delete(predicate))
    result.details.update(rewrite(path))
    result.checks.update(verify(path, probes))
    return result


def _fragment_key(fragment: Any) -> tuple[Any, ...]:
    deletion = fragment.metadata.deletion_file
    files = tuple(f.path for f in fragment.data_files())
    return (files, None if deletion is None else (deletion.id, deletion.read_version))


def deleted_rows(path: Path, column: str, text: str | None) -> dict[str, str]:
    """The rows older versions hold that the latest does not (key to text).

    Each fragment an older version holds (its data files and deletion file) is read
    once, and none the latest version holds as it is: appends make one version per
    write, but a fragment seldom changes.
    """
    dataset = _dataset(path)
    key = column if column != "_rowid" else (text or column)
    wanted = [c for c in dict.fromkeys([key, text]) if c and c != "_rowid"]
    if not wanted:
        return {}
    live = set(dataset.to_table(columns=[key]).column(key).to_pylist())
    seen = {_fragment_key(f) for f in dataset.get_fragments()}
    found: dict[str, str] = {}
    versions = [v["version"] for v in dataset.versions()][:-1][-VERSIONS_READ:]
    for version in reversed(versions):
        for fragment in dataset.checkout_version(version).get_fragments():
            fragment_key = _fragment_key(fragment)
            if fragment_key in seen:
                continue
            seen.add(fragment_key)
            for row in fragment.to_table(columns=wanted).to_pylist():
                if row[key] not in live:
                    found[str(row[key])] = str(row.get(text) or "") if text else ""
    return found


def gap_ids(path: Path, column: str, text: str | None) -> list[str]:
    """memtui's ids of the deleted rows the table's files still hold."""
    return sorted(f"lance:{k}" for k in deleted_rows(path, column, text))


def gaps(path: Path, column: str = "id", text: str | None = "content") -> dict[str, int]:
    """What the table's files hold beyond its live rows, counted."""
    dataset = _dataset(path)
    deleted = sum(
        (frag.metadata.deletion_file.num_deleted_rows or 0)
        for frag in dataset.get_fragments()
        if frag.metadata.deletion_file is not None
    )
    schema = set(dataset.schema.names)
    column = column if column in schema else "_rowid"
    text = text if text in schema else None
    return {
        "old_versions": len(dataset.versions()) - 1,
        "deleted_rows_in_fragments": deleted,
        "deleted_rows_on_file": len(deleted_rows(path, column, text)),
    }


def gap_notes(counts: dict[str, int]) -> list[str]:
    if not counts.get("deleted_rows_on_file") and not counts.get("deleted_rows_in_fragments"):
        return []
    return [
        f"erasure gap: {counts['deleted_rows_on_file']} deleted row(s) still on file "
        f"({counts['deleted_rows_in_fragments']} masked by deletion files, "
        f"{counts['old_versions']} older version(s) kept); "
        "`memtui forget-gaps --allow-writes` rewrites them"
    ]


def forget_gaps(source: LanceSource, *, reason: str, operator: str | None) -> GapsOutcome:
    """Rewrite what still holds deleted rows (audited, verified by the bytes)."""
    from memtui.sources.shapes import require_reason

    source._require_writable()
    require_reason(reason)
    path = source.table_path
    before = deleted_rows(path, source.key_column, source.text)
    counts = gaps(path, source.key_column, source.text or "")
    if not before and not counts["deleted_rows_in_fragments"]:
        raise SourceError("no erasure gap: no deleted row is left on file")
    live = {r.content for r in source._current().records}
    probes = [t.encode("utf-8")[:256] for t in before.values() if t and t not in live]
    if source.key_column != "_rowid":
        probes.extend(k.encode("utf-8") for k in before)
    ids = sorted(f"lance:{k}" for k in before)

    def erase() -> Erasure:
        details = rewrite(path)
        checks = verify(path, probes)
        source._reload()
        return Erasure(checks=checks, details={**counts, **details}, removed=[])

    intent, event, done = source._audited_erasure(
        ids=ids,
        tier=source.tiers[0],
        record_type="memory" if source.crewai else "row",
        reason=reason,
        operator=operator,
        plan={"rule": GAPS_RULE, "plan": counts},
        erase=erase,
        failure="forget-gaps failed",
        operation="forget-gaps",
    )
    return GapsOutcome.of(
        ids,
        f"rewrote {done.details.get('fragments_rewritten', 0)} fragment(s) and removed "
        f"{done.details.get('old_versions_removed', 0)} older version(s)",
        intent,
        event,
        done,
    )
