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
4. checks: no version older than the rewrite left, no older data file that no
   version references, the fragments that held the rows gone, and no file under
   the table folder holding the forgotten bytes.

A concurrent writer (an agent appending or deleting while the forget runs) is
expected: its commit conflicts are retried (``RETRIES``), then reported, and what
it commits meanwhile is kept (``verify`` tells its versions and files from the
ones the forget must remove).
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
    """Rewrite every fragment with deletions, then remove every older version.

    ``floor`` (in the details) is the table's version once the rewrite committed: every
    version before it may still reference a fragment that held a deleted row, so none
    may be left; versions another writer commits later reference only fragments made
    after it. Unreferenced files younger than lance's own margin (7 days) are kept
    (``delete_unverified`` off): another writer's files not yet committed look so.
    """
    details: dict[str, Any] = {}

    def compact() -> Any:
        return _dataset(path).optimize.compact_files(
            materialize_deletions=True, materialize_deletions_threshold=0.0
        )

    metrics = _retried("rewriting fragments", path, compact)
    details["fragments_rewritten"] = int(getattr(metrics, "fragments_removed", 0))
    details["floor"] = int(_dataset(path).version)

    def cleanup() -> Any:
        return _dataset(path).cleanup_old_versions(older_than=timedelta(0))

    stats = _retried("removing old versions", path, cleanup)
    details["old_versions_removed"] = int(getattr(stats, "old_versions", 0))
    details["bytes_removed"] = int(getattr(stats, "bytes_removed", 0))
    return details


def held_files(path: Path, column: str, keys: Sequence[Any]) -> set[str]:
    """The data files of the fragments holding the rows of ``keys`` (before their delete)."""
    if not keys:
        return set()
    dataset = _dataset(path)
    out: set[str] = set()
    if column == "_rowid":  # a row id is its fragment's id, then its offset (32 bits each)
        wanted = {int(k) >> 32 for k in keys}
        fragments = [f for f in dataset.get_fragments() if f.fragment_id in wanted]
    else:
        predicate = _predicate(column, keys)
        fragments = [f for f in dataset.get_fragments() if f.count_rows(predicate)]
    for fragment in fragments:
        out.update(Path(f.path).name for f in fragment.data_files())
    return out


def verify(
    path: Path,
    probes: Sequence[bytes],
    *,
    floor: int | None = None,
    since: float | None = None,
    held: set[str] | None = None,
) -> dict[str, bool]:
    """No version older than ``floor`` (None: one version left), no data file older than
    ``since`` that no version references, the fragments that ``held`` the forgotten rows
    gone (None: no deleted row masked in the latest version), no file holding ``probes``.

    Another writer may commit while a forget runs: its versions (after ``floor``) and the
    files it is writing (after ``since``) are its own, and a row it deletes is its gap.
    """
    dataset = _dataset(path)
    versions = [int(v["version"]) for v in dataset.versions()]
    referenced: set[str] = set()
    for version in versions:
        view = dataset if version == dataset.version else dataset.checkout_version(version)
        for fragment in view.get_fragments():
            referenced.update(Path(f.path).name for f in fragment.data_files())
    files = [p for p in (path / "data").glob("*") if p.is_file()]
    stray = [
        p
        for p in files
        if p.name not in referenced and (since is None or p.stat().st_mtime < since)
    ]
    if held is None:
        deletions = [frag.metadata.deletion_file for frag in dataset.get_fragments()]
        rows_gone = not any(d is not None and d.num_deleted_rows for d in deletions)
    else:
        rows_gone = not held & (referenced | {p.name for p in files})
    checks = {
        "older_versions_gone": len(versions) == 1 if floor is None else min(versions) >= floor,
        "no_unreferenced_data_files": not stray,
        "no_deleted_rows_left": rows_gone,
    }
    useful = [p for p in probes if len(p) >= 8]
    if useful:
        checks["bytes_gone"] = not files_holding(path, useful)
    return checks


def files_holding(path: Path, probes: Sequence[bytes]) -> list[Path]:
    """The files under ``path`` that hold any of ``probes`` (one another writer removes
    while they are read, its commit's temporary files, holds nothing)."""
    out = []
    for found in folder_files(path):
        try:
            data = found.read_bytes()
        except FileNotFoundError:
            continue
        if any(p in data for p in probes):
            out.append(found)
    return out


def delete_and_rewrite(
    path: Path, column: str, keys: Sequence[Any], probes: Sequence[bytes]
) -> Result:
    result = Result()
    since = time.time()
    held = held_files(path, column, keys)
    if keys:
        predicate = _predicate(column, keys)
        _retried("deleting rows", path, lambda: _dataset(path).delete(predicate))
    result.details.update(rewrite(path))
    floor = result.details.pop("floor")
    result.checks.update(verify(path, probes, floor=floor, since=since, held=held))
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
    live = source._current().contents(source.text)
    probes = [t.encode("utf-8")[:256] for t in before.values() if t and t not in live]
    if source.key_column != "_rowid":
        probes.extend(k.encode("utf-8") for k in before)
    ids = sorted(f"lance:{k}" for k in before)

    def erase() -> Erasure:
        since = time.time()
        details = rewrite(path)
        checks = verify(path, probes, floor=details.pop("floor"), since=since)
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
