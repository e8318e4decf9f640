"""One Chroma collection as a memory source: reads (``ChromaReads``), the erasure gap,
forget through chromadb and the removal of every copy its delete leaves.

- Forget (``--allow-writes``) deletes the documents through ``chromadb`` (imported
  only here; refused with the install hint when it is missing), so its HNSW
  index stays consistent; then, with ``secure_delete`` on, the document's
  add/update/upsert rows of ``embeddings_queue`` are deleted (the DELETE row,
  which holds only the id, stays: Chroma replays it), the full-text index is
  merged (``optimize``), the file is VACUUMed, and every file under the folder
  is searched for the text.
- ``forget_gaps`` does the same (without chromadb: the documents are gone from
  the collection already) for every document Chroma deleted whose text is still
  in the file, and VACUUMs away the free pages.
- While another process has the folder's files open (a running chromadb client:
  ``memtui.sources.chroma.live``) every write is refused before anything is
  written: that client holds the collection's HNSW index in memory and writes it
  back (the forgotten vectors with it), and the segment files memtui zeroes are
  the ones it has open.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memtui.sources.base import (
    ForgetOutcome,
    Scope,
    SourceError,
    SourceRecord,
    SourceSummary,
    decode_id,
    require_reason,
    scope_of,
)
from memtui.sources.capabilities import GapClearable
from memtui.sources.chroma.folder import INSTALL_HINT, SQLITE_NAME
from memtui.sources.chroma.hnsw import folder_slacks
from memtui.sources.chroma.live import folder_openers
from memtui.sources.chroma.read import DELETE, ID_PREFIX, ChromaReads
from memtui.sources.foreign import BYTE_CHECK_LIMIT, Erasure, GapsOutcome

#: how a queue row's JSON names the document: the file holding more of these than the
#: queue's rows is holding rows Chroma deleted (or purged), in unused space
FRAGMENT = b'"chroma:document":'


def chromadb_module() -> Any:
    """``chromadb``, imported now (it is slow to import), or the install hint."""
    try:
        import chromadb
    except ImportError:
        raise SourceError(
            "forgetting a Chroma document deletes it through chromadb (so that its vector "
            f"index stays consistent), which is not installed: {INSTALL_HINT}"
        ) from None
    return chromadb


def text_probes(texts: Sequence[str]) -> list[bytes]:
    """What the byte checks look for: each text's first 256 bytes, raw and as Chroma's
    queue JSON writes it (escaped), 8 bytes at least."""
    out: list[bytes] = []
    for text in texts:
        for form in (text, json.dumps(text, ensure_ascii=False)[1:-1]):
            probe = form.encode("utf-8")[:256]
            if len(probe) >= 8 and probe not in out:
                out.append(probe)
    return out


class ChromaSource(ChromaReads, GapClearable):
    """A Chroma collection: read with SQL; forget, forget a scope, clear the gap."""

    forget_scope_keys = ChromaReads.scope_keys
    write_capabilities = frozenset({"forget", "forget_scope"})

    # -- the gap

    def gap_records(self) -> list[SourceRecord]:
        return list(self._current().deleted)

    def gap_ids(self) -> list[str]:
        """Record ids of documents Chroma deleted whose text is still in the file."""
        return [r.id for r in self.gap_records()]

    def _texts_of(self, records: Sequence[SourceRecord]) -> list[str]:
        held = self.queue_texts([str(r.metadata["embedding_id"]) for r in records])
        texts: dict[str, None] = {}
        for record in records:
            if record.content:
                texts[record.content] = None
            for text in held.get(str(record.metadata["embedding_id"]), []):
                texts[text] = None
        return list(texts)

    def _file_bytes(self) -> bytes | None:
        parts = [self.path, Path(f"{self.path}-wal")]
        if sum(p.stat().st_size for p in parts if p.exists()) > BYTE_CHECK_LIMIT:
            return None
        return b"".join(p.read_bytes() for p in parts if p.exists())

    def gap_counts(self) -> dict[str, int]:
        """The erasure gap, counted: deleted documents whose queue rows (with their text)
        are still in the file, deleted ones whose rows Chroma purged (their text may be
        left in unused space), queue fragments beyond the live rows, and free pages.
        Counted once per state of the folder (it reads the whole file)."""
        key = (self.fingerprint(), self._slack_state(), self.audit_head())
        cached = getattr(self, "_gap_cache", None)
        if cached is not None and cached[0] == key:
            return dict(cached[1])
        counts = self._count_gap()
        self._gap_cache = (key, counts)
        return dict(counts)

    def _slack_state(self) -> list[tuple[int, int]]:
        """The HNSW data files' sizes and times (a change there changes the count)."""
        out = []
        for slack in folder_slacks(self.folder):
            for path, _start in slack.regions():
                if path.exists():
                    stat = path.stat()
                    out.append((stat.st_size, stat.st_mtime_ns))
        return out

    def _count_gap(self) -> dict[str, int]:
        snap = self._current()
        gaps = self.gap_records()
        gap_ids = {str(r.metadata["embedding_id"]) for r in gaps}
        held = self.queue_texts(sorted(gap_ids))
        counts = {
            "deleted_with_text": len(gaps),
            "gap_queue_rows": sum(len(held.get(e, [])) for e in gap_ids),
            "deleted_rows_purged": len(snap.deletes - gap_ids - self._forgotten_here()),
            "free_pages": int(self.query("PRAGMA freelist_count")[0][0]),
        }
        data = self._file_bytes()
        if data is not None:
            counts["gap_copies_in_file"] = sum(
                data.count(p) for p in text_probes(self._texts_of(gaps))
            )
            rows = self.query(
                "SELECT count(*) FROM embeddings_queue WHERE instr(metadata, ?) > 0",
                (FRAGMENT.decode(),),
            )[0][0]
            counts["stale_queue_fragments"] = max(0, data.count(FRAGMENT) - int(rows))
        counts["hnsw_files_with_heap_bytes"] = sum(
            1 for slack in folder_slacks(self.folder) if slack.nonzero()
        )
        counts["earlier_versions"] = self.earlier_versions()
        return counts

    def _forgotten_here(self) -> set[str]:
        """Document ids memtui's forgets erased (their queue rows are gone by its hand)."""
        out: set[str] = set()
        for event in self.audit_events():
            if event["action"] != "forget":
                continue
            for record_id in event["record_ids"]:
                parts = decode_id(ID_PREFIX, str(record_id), 1)
                if parts is not None:
                    out.add(parts[0])
        return out

    @staticmethod
    def has_gap(counts: dict[str, int]) -> bool:
        return bool(
            counts["deleted_with_text"]
            or counts["free_pages"]
            or counts.get("stale_queue_fragments")
            or counts.get("hnsw_files_with_heap_bytes")
        )

    def summary(self) -> SourceSummary:
        base = super().summary()
        counts = {**base.counts, **self.gap_counts()}
        head: list[str] = []
        notes = list(base.notes)
        gaps = counts["deleted_with_text"]
        if gaps:
            copies = counts.get("gap_copies_in_file")
            head.append(
                f"erasure gap: {gaps} document(s) deleted by Chroma still have text in "
                f"{SQLITE_NAME} ({counts['gap_queue_rows']} embeddings_queue row(s)"
                + (f", {copies} copies in the file's bytes" if copies is not None else "")
                + f", {counts['free_pages']} free page(s)); clear it with "
                "`memtui forget-gaps PATH --allow-writes`"
            )
        elif self.has_gap(counts):
            head.append(
                f"erasure gap: {counts['free_pages']} free page(s) and "
                f"{counts.get('stale_queue_fragments', 0)} stale embeddings_queue fragment(s) "
                f"in {SQLITE_NAME}, and {counts.get('hnsw_files_with_heap_bytes', 0)} HNSW "
                "segment(s) whose unused capacity holds heap bytes chromadb wrote, may hold "
                "deleted text; `memtui forget-gaps PATH --allow-writes` purges them"
            )
        if counts["deleted_rows_purged"]:
            notes.append(
                f"{counts['deleted_rows_purged']} document(s) deleted by Chroma had their queue "
                "rows purged (their text cannot be found by id; what is left of it in unused "
                "space goes with a VACUUM, which memtui's forget and forget-gaps run)"
            )
        if counts["earlier_versions"]:
            notes.append(
                f"{counts['earlier_versions']} earlier version(s) of live documents are kept "
                "in embeddings_queue (updates); a memtui forget clears them with the document"
            )
        vector_note = self.vector_note()
        if vector_note:
            notes.append(vector_note)
        return SourceSummary(
            kind=base.kind,
            label=base.label,
            path=str(self.folder),
            read_only=base.read_only,
            counts=counts,
            notes=head + notes,
        )

    # -- forget

    def _require_writable(self) -> None:
        super()._require_writable()
        openers = folder_openers(self.folder)
        if openers:
            raise SourceError(
                f"the agent is live: process {', '.join(map(str, openers))} has files of "
                f"{self.folder} open (a running chromadb client); memtui will not write to a "
                "Chroma folder a client holds (it keeps the vector index in memory and writes "
                "it back) - stop the agent first, then run the forget again"
            )

    def forget(self, record_id: str, *, reason: str, operator: str | None = None) -> ForgetOutcome:
        self._require_writable()
        record = self.get(record_id)
        if record is not None and record.state == "live" and not self.read_only:
            chromadb_module()  # refused before any intent when chromadb is missing
        return super().forget(record_id, reason=reason, operator=operator)

    def forget_scope(
        self,
        *,
        engagement: str | None = None,
        scope: Scope | None = None,
        reason: str,
        operator: str | None = None,
    ) -> ForgetOutcome:
        key, value = scope_of(engagement, scope)
        self._require_writable()
        if key in self.scope_keys:
            if any(r.state == "live" for r in self.scope_records(key, value)):
                chromadb_module()
        return super().forget_scope(
            engagement=engagement, scope=scope, reason=reason, operator=operator
        )

    def forget_preview(self, record_id: str) -> dict[str, Any]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(self.missing_record_message(record_id))
        eid = str(record.metadata["embedding_id"])
        rows = len(self.queue_texts([eid]).get(eid, []))
        through = (
            "The document is deleted through chromadb (its vector index stays consistent), "
            if record.state == "live"
            else "Chroma already deleted the document; "
        )
        return {
            "records": [record.id],
            "rule": through
            + f"its {rows} embeddings_queue row(s) with text are deleted, the full-text index "
            "merged and the freed pages purged (VACUUM); every file under the folder is "
            "checked for the text.",
            "counts": {"documents": int(record.state == "live"), "queue_rows": rows},
        }

    def record_value_columns(self) -> list[tuple[str, str]]:
        return [
            ("embedding_metadata", "string_value"),
            ("embedding_fulltext_search_content", "c0"),
            ("embeddings_queue", "metadata"),
            ("embeddings_queue", "vector"),
        ]

    def _apply_forget(self, record: SourceRecord) -> dict[str, Any]:
        return self._erase([record])

    def _apply_forget_many(self, records: Sequence[SourceRecord]) -> dict[str, Any]:
        return self._erase(records)

    def _delete_through_chromadb(self, eids: list[str]) -> None:
        chromadb = chromadb_module()
        from chromadb.config import Settings

        # No telemetry (chromadb's default sends some); its warnings (an embedding function
        # it cannot rebuild, which a delete never calls) would only garble the screen.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            client = chromadb.PersistentClient(
                path=str(self.folder), settings=Settings(anonymized_telemetry=False)
            )
            try:
                collection = client.get_collection(self.info.name, embedding_function=None)
                collection.delete(ids=eids)
            finally:
                client.close()

    def _erase(self, records: Sequence[SourceRecord]) -> dict[str, Any]:
        """Delete ``records`` (through chromadb when live), then every queue row with their
        text, and merge the full-text index; the purge and byte checks follow."""
        eids = [str(r.metadata["embedding_id"]) for r in records]
        live = [str(r.metadata["embedding_id"]) for r in records if r.state == "live"]
        probes = text_probes(self._texts_of(records))
        if live:
            self._delete_through_chromadb(live)
        conn = self._conn
        conn.execute("PRAGMA secure_delete = ON")
        removed_rows = 0
        conn.execute("BEGIN IMMEDIATE")
        try:
            for eid in eids:
                removed_rows += conn.execute(
                    "DELETE FROM embeddings_queue WHERE topic LIKE ? AND id = ? AND operation != ?",
                    (self._topic(), eid, DELETE),
                ).rowcount
            if "embedding_fulltext_search" in self.columns:
                conn.execute(
                    "INSERT INTO embedding_fulltext_search(embedding_fulltext_search) "
                    "VALUES ('optimize')"
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        marks = ",".join("?" * len(eids))
        left_rows = conn.execute(
            f"SELECT count(*) FROM embeddings WHERE segment_id = ? AND embedding_id IN ({marks})",
            (self.segment_id, *eids),
        ).fetchone()[0]
        left_queue = conn.execute(
            f"SELECT count(*) FROM embeddings_queue WHERE topic LIKE ? AND id IN ({marks}) "
            "AND operation != ?",
            (self._topic(), *eids, DELETE),
        ).fetchone()[0]
        return {
            "removed": [r.id for r in records],
            "checks": {"documents_gone": left_rows == 0, "queue_text_gone": left_queue == 0},
            "probes": probes,
            "details": {
                "collection": self.info.name,
                "deleted_through_chromadb": len(live),
                "queue_rows_removed": removed_rows,
            },
        }

    def _purge_applied(self, applied: dict[str, Any]) -> tuple[dict[str, bool], dict[str, Any]]:
        checks, details = self._purge_file(applied.get("probes", []))
        details["hnsw_unused_bytes_zeroed"] = self._zero_slack()
        checks["hnsw_unused_zero"] = not any(s.nonzero() for s in folder_slacks(self.folder))
        checks["folder_files_clean"], details["folder_files_checked"] = self._folder_clean(
            applied.get("probes", [])
        )
        return checks, details

    def _zero_slack(self) -> int:
        """Zero the unused capacity of every HNSW segment (chromadb writes heap memory
        there; hnswlib never reads it); returns how many bytes were not zero."""
        return sum(slack.zero() for slack in folder_slacks(self.folder))

    def _folder_clean(self, probes: Sequence[bytes]) -> tuple[bool, int]:
        """Whether no file under the folder but the SQLite file (checked against its live
        values) holds a forgotten text; and how many files were read."""
        skip = {self.path, Path(f"{self.path}-wal")}
        clean, seen = True, 0
        for root, _dirs, files in os.walk(self.folder):
            for name in files:
                path = Path(root) / name
                if path in skip:
                    continue
                seen += 1
                data = path.read_bytes()
                if any(p in data for p in probes):
                    clean = False
        return clean, seen

    # -- forget the gap

    def forget_gaps_preview(self) -> dict[str, Any]:
        counts = self.gap_counts()
        ids = self.gap_ids()
        return {
            "records": ids,
            # what the gap holds that names no record: free pages, stale fragments, heap bytes
            "unattributed": self.has_gap(counts) and not ids,
            "rule": "the embeddings_queue rows with text of documents Chroma deleted; the "
            "full-text index merged; free pages purged (VACUUM)",
            "counts": counts,
            "nothing": "no erasure gap: no deleted document has text left and no page is free",
            "question": (
                f"Delete the {counts['gap_queue_rows']} embeddings_queue row(s) of {len(ids)} "
                f"deleted document(s), purge {counts['free_pages']} free page(s) and "
                f"{counts.get('stale_queue_fragments', 0)} stale fragment(s) (VACUUM) and zero "
                "the HNSW files' unused capacity? This cannot be undone"
            ),
        }

    def forget_gaps(self, *, reason: str, operator: str | None = None) -> GapsOutcome:
        """Clear the text Chroma's own deletes left in the file (audited, verified)."""
        self._require_writable()
        require_reason(reason)
        records = self.gap_records()
        counts = self.gap_counts()
        if not self.has_gap(counts):
            raise SourceError("no erasure gap: no deleted document has text left to clear")
        ids = [r.id for r in records]

        def erase() -> Erasure:
            if records:
                return self._erasure_of(self._erase(records), ids)
            checks, details = self._purge_file([])
            details["hnsw_unused_bytes_zeroed"] = self._zero_slack()
            checks["hnsw_unused_zero"] = not any(s.nonzero() for s in folder_slacks(self.folder))
            return Erasure(checks=checks, details=details, removed=[])

        intent, event, done = self._audited_erasure(
            ids=ids,
            tier=self.info.name,
            record_type="document",
            reason=reason,
            operator=operator,
            plan={"plan": counts},
            erase=erase,
            failure="forget-gaps failed, nothing was changed",
            operation="forget-gaps",
        )
        return GapsOutcome.of(
            ids,
            (
                f"deleted {done.details.get('queue_rows_removed', 0)} embeddings_queue row(s) of "
                f"{len(ids)} deleted document(s) and purged the free pages"
            ),
            intent,
            event,
            done,
        )
