"""Letta 0.11 SQLite (``~/.letta/sqlite.db``) as a memory source.

- Tier ``archival``: ``archival_passages`` (id ``archival:<passage id>``),
  scoped by ``archive`` (the archive's name) and ``tag`` (any of its tags).
  Soft-deleted passages (``is_deleted``) are ``deleted``: dimmed and left out
  by default, and counted as an erasure gap (their text is still on file);
  ``forget_gaps`` erases them all as ``forget`` erases one (audited, verified).
- Tier ``core``: core memory ``block`` rows (id ``core:<block id>``), scoped by
  ``label`` (human, persona...); the detail pane shows ``block_history``, whose
  rows keep every earlier value of the block.
- Embeddings are float32 zero-padded to 4096 dims; memtui unpads them to the
  real dimension from ``embedding_config.embedding_dim`` for the vector lane.
- No expiry. Forget (with ``--allow-writes``) hard-deletes one archival
  passage and its tag rows (as Letta's passage manager does), with
  ``secure_delete`` on and freed pages purged. Core blocks are the agent's
  working context and are not forgotten from here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from memtui.sources.base import (
    DetailSection,
    SourceError,
    SourceRecord,
    SourceSummary,
    encode_id,
    require_reason,
)
from memtui.sources.cache import FilterSql
from memtui.sources.capabilities import GapClearable
from memtui.sources.foreign import Erasure, GapsOutcome
from memtui.sources.letta_records import (
    BLOCK_REFUSAL,
    EXPIRY_RULE,
    ID_HINT,
    TIERS,
    block_record,
    embedding_dim,
    passage_record,
    record_notes,
    record_sections,
    tag_cache_filter,
    view_key,
)
from memtui.sources.union_view import UnionViewSource


class LettaSource(UnionViewSource, GapClearable):
    kind = "letta"
    kind_label = "Letta 0.11 SQLite"
    tiers = TIERS
    scope_keys = ("archive", "tag", "label")
    extra_scope_keys = ("tag",)  # a JSON list in the view's ``tags`` column
    # Passages only (core blocks are not forgotten); ``agent``: the archives it owns.
    forget_scope_keys = ("archive", "tag", "agent")
    write_capabilities = frozenset({"forget", "forget_scope"})
    hidden_state = "deleted"

    @property
    def expiry_rule(self) -> str:
        return EXPIRY_RULE

    def has_vectors(self) -> bool:
        return "embedding" in self.columns.get("archival_passages", [])

    def has_history(self) -> bool:
        return "block_history" in self.columns

    def _has_blocks(self) -> bool:
        return "block" in self.columns

    def _has_second_table(self) -> bool:
        return self._has_blocks()

    def _archive_name(self, alias: str) -> str:
        if "archives" in self.columns:
            return (
                f"coalesce((SELECT a.name FROM archives AS a WHERE a.id = {alias}.archive_id), "
                f"{alias}.archive_id)"
            )
        return f"{alias}.archive_id"

    def _items(self) -> str:
        passages = (
            "SELECT 0 AS part, p.id AS rid, 'archival' AS tier, 'passage' AS record_type, "
            f"{self._archive_name('p')} AS archive, p.tags AS tags, NULL AS label, "
            "CASE WHEN coalesce(p.is_deleted, 0) THEN 0 ELSE 1 END AS live "
            "FROM archival_passages AS p"
        )
        if not self._has_blocks():
            return passages
        blocks = (
            "SELECT 1, b.id, 'core', 'block', NULL, NULL, b.label, "
            "CASE WHEN coalesce(b.is_deleted, 0) THEN 0 ELSE 1 END FROM block AS b"
        )
        return f"{passages} UNION ALL {blocks}"

    def _extra_filter(self, key: str, value: Any) -> tuple[str, list[Any]]:
        return (
            "EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid(tags) THEN tags "
            "ELSE '[]' END) WHERE json_each.value = ?)",
            [value],
        )

    def _extra_scope_rows(
        self, key: str, items: str, where: str, params: list[Any], tier: str
    ) -> list[tuple[Any, ...]]:
        return self.query(
            f"SELECT j.value, count(*) FROM ({items}) AS i, json_each(CASE WHEN "
            "json_valid(i.tags) THEN i.tags ELSE '[]' END) AS j "
            f"WHERE {where} AND i.tier = ? "
            "AND j.type = 'text' GROUP BY j.value ORDER BY j.value",
            [*params, tier],
        )

    def cache_filter_sql(self) -> FilterSql:
        return tag_cache_filter  # type: ignore[return-value]

    def _data_fingerprint(self) -> Any:
        parts = [
            list(
                self.query(
                    "SELECT count(*), max(rowid), max(updated_at), sum(coalesce(is_deleted, 0)) "
                    "FROM archival_passages"
                )[0]
            )
        ]
        if self._has_blocks():
            parts.append(
                list(self.query("SELECT count(*), max(rowid), max(updated_at) FROM block")[0])
            )
        return parts

    def summary(self) -> SourceSummary:
        base = super().summary()
        counts = dict(base.counts)
        notes = list(base.notes)
        deleted = len(self.gap_ids())
        counts["soft_deleted_passages"] = deleted
        if deleted:
            notes.insert(
                0,
                f"erasure gap: {deleted} soft-deleted passage(s) still hold their text "
                "(is_deleted only hides them); erase them with "
                "`memtui forget-gaps PATH --allow-writes`",
            )
        if self.has_history():
            history = self.query("SELECT count(*) FROM block_history")[0][0]
            counts["block_history_rows"] = history
            if history:
                notes.append(f"{history} block_history row(s) keep earlier values of core memory")
        return SourceSummary(
            kind=base.kind,
            label=base.label,
            path=base.path,
            read_only=base.read_only,
            counts=counts,
            notes=notes,
        )

    # -- reading

    def _key(self, record_id: str) -> tuple[int, str] | None:
        return view_key(record_id)

    def id_hint(self, record_id: str) -> str | None:
        """A bare passage or block id, as Letta names it: say memtui's id of it."""
        if self._key(record_id) is not None:
            return None
        for tier in TIERS:
            candidate = encode_id(tier, str(record_id).strip())
            if self.get(candidate) is not None:
                return f"memtui's id of {record_id} is {candidate}"
        return ID_HINT

    def _load(self, keys: Iterable[tuple[int, str]]) -> dict[tuple[int, str], SourceRecord]:
        keys = list(keys)
        out: dict[tuple[int, str], SourceRecord] = {}
        passages = [k[1] for k in keys if k[0] == 0]
        blocks = [k[1] for k in keys if k[0] == 1]
        for start in range(0, len(passages), 500):
            chunk = passages[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.query(
                f"SELECT p.id, p.text, p.embedding_config, p.metadata_, p.tags, p.created_at, "
                f"p.updated_at, p.is_deleted, p.archive_id, {self._archive_name('p')}, "
                "length(p.embedding) / 4 "
                f"FROM archival_passages AS p WHERE p.id IN ({marks})",
                chunk,
            ):
                out[(0, row[0])] = self._passage(row)
        for start in range(0, len(blocks), 500):
            chunk = blocks[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.query(
                'SELECT id, label, value, "limit", description, metadata_, created_at, '
                f"updated_at, is_deleted, version FROM block WHERE id IN ({marks})",
                chunk,
            ):
                out[(1, row[0])] = self._block(row)
        return out

    def _passage(self, row: tuple[Any, ...]) -> SourceRecord:
        return passage_record(row)

    def _block(self, row: tuple[Any, ...]) -> SourceRecord:
        return block_record(row)

    def notes(self, record: SourceRecord) -> str:
        return record_notes(record)

    def detail(self, record_id: str) -> list[DetailSection]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        history = None
        if record.tier != "archival" and self.has_history():
            history = self.query(
                "SELECT sequence_number, value, actor_type, actor_id, created_at "
                "FROM block_history WHERE block_id = ? ORDER BY sequence_number",
                (record.metadata["block_id"],),
            )
        sections = record_sections(record, history)
        sections.append(self.history_section(record.id))
        return sections

    def vector_dim(self) -> int | None:
        rows = self.query(
            "SELECT json_extract(embedding_config, '$.embedding_dim') FROM archival_passages "
            "WHERE embedding IS NOT NULL LIMIT 1"
        )
        return rows[0][0] if rows else None

    def cache_vectors(self) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for pid, config, blob in self.query(
            "SELECT id, embedding_config, embedding FROM archival_passages "
            "WHERE embedding IS NOT NULL"
        ):
            dim = embedding_dim(config)
            if isinstance(blob, bytes) and dim is not None and dim * 4 <= len(blob):
                out[encode_id("archival", pid)] = bytes(blob[: dim * 4])  # unpadded
        return out

    # -- forget

    def forget_preview(self, record_id: str) -> dict[str, Any]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        if record.tier != "archival":
            raise SourceError(self._block_refusal())
        tags = (
            self.query(
                "SELECT count(*) FROM passage_tags WHERE passage_id = ?",
                (record.metadata["passage_id"],),
            )[0][0]
            if "passage_tags" in self.columns
            else 0
        )
        return {
            "records": [record.id],
            "rule": (
                "The passage row (text and embedding) and its tag rows are deleted, and the "
                "freed pages purged (VACUUM)."
            ),
            "counts": {"passages": 1, "tag_rows": tags},
        }

    def _block_refusal(self) -> str:
        return BLOCK_REFUSAL

    def record_value_columns(self) -> list[tuple[str, str]]:
        return [("archival_passages", "text"), ("archival_passages", "embedding")]

    def _apply_forget(self, record: SourceRecord) -> dict[str, Any]:
        if record.tier != "archival":
            raise SourceError(self._block_refusal())
        pid = record.metadata["passage_id"]
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            text = conn.execute(
                "SELECT text FROM archival_passages WHERE id = ?", (pid,)
            ).fetchone()
            tags = 0
            if "passage_tags" in self.columns:
                tags = conn.execute(
                    "DELETE FROM passage_tags WHERE passage_id = ?", (pid,)
                ).rowcount
            conn.execute("DELETE FROM archival_passages WHERE id = ?", (pid,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        gone = (
            conn.execute("SELECT 1 FROM archival_passages WHERE id = ?", (pid,)).fetchone() is None
        )
        body = str(text[0]) if text and text[0] else ""
        return {
            "removed": [record.id],
            "checks": {"row_gone": gone},
            "probes": [body.encode("utf-8")] if body else [],
            "details": {"tag_rows_removed": tags},
        }

    # -- forget a whole scope

    def scope_records(self, key: str, value: str) -> list[SourceRecord]:
        """``agent``: the passages of the archives the agent (by id or name) is attached to
        in ``archives_agents``; an archive another agent is attached to as well is refused
        (forget it by its name, knowing both agents lose it)."""
        if key != "agent":
            return super().scope_records(key, value)
        if "archives_agents" not in self.columns or "agents" not in self.columns:
            return []
        links = self.query(
            f"SELECT l.archive_id, {self._archive_name('l')} FROM archives_agents AS l "
            "LEFT JOIN agents AS g ON g.id = l.agent_id WHERE l.agent_id = ? OR g.name = ?",
            (value, value),
        )
        records: list[SourceRecord] = []
        for archive_id, name in dict.fromkeys(links):
            others = self.query(
                "SELECT count(*) FROM archives_agents WHERE archive_id = ? AND agent_id NOT IN "
                "(SELECT id FROM agents WHERE id = ? OR name = ?)",
                (archive_id, value, value),
            )[0][0]
            if others:
                raise SourceError(
                    f"archive {name!r} of agent {value!r} is attached to {others} other "
                    f"agent(s) too: forget it with --scope archive={name} if they should lose it"
                )
            records.extend(super().scope_records("archive", str(name)))
        return records

    # -- forget the erasure gap

    def _soft_deleted(self) -> list[str]:
        return [
            r[0]
            for r in self.query(
                "SELECT id FROM archival_passages WHERE coalesce(is_deleted, 0) ORDER BY id"
            )
        ]

    def gap_ids(self) -> list[str]:
        """Record ids of the soft-deleted passages: hidden by Letta, still on file."""
        return [encode_id("archival", pid) for pid in self._soft_deleted()]

    def _tag_rows(self, passage_ids: list[str]) -> int:
        if "passage_tags" not in self.columns or not passage_ids:
            return 0
        total = 0
        for start in range(0, len(passage_ids), 500):
            chunk = passage_ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            total += self.query(
                f"SELECT count(*) FROM passage_tags WHERE passage_id IN ({marks})", chunk
            )[0][0]
        return total

    def forget_gaps_preview(self) -> dict[str, Any]:
        pids = self._soft_deleted()
        ids = [encode_id("archival", pid) for pid in pids]
        tags = self._tag_rows(pids)
        return {
            "records": ids,
            "rule": (
                "every soft-deleted passage (Letta's is_deleted) is deleted with its tag rows, "
                "as forget deletes one; freed pages purged (VACUUM)"
            ),
            "counts": {"passages": len(ids), "tag_rows": tags},
            "nothing": "no erasure gap: no soft-deleted passage is left on file",
            "question": (
                f"Delete the {len(ids)} soft-deleted passage(s) (text, embedding and "
                f"{tags} tag row(s)) and purge the freed pages? This cannot be undone"
            ),
        }

    def _erase_soft_deleted(self, pids: list[str]) -> Erasure:
        """Delete the planned passages still soft-deleted, with their tags, in one
        transaction; then purge the freed pages and check the bytes."""
        conn = self._conn
        conn.execute("PRAGMA secure_delete = ON")
        texts: list[str] = []
        vectors: list[bytes] = []
        gone: list[str] = []
        tags = 0
        conn.execute("BEGIN IMMEDIATE")
        try:
            for pid in pids:
                # Only the planned passages, and only while they are still soft-deleted.
                row = conn.execute(
                    "SELECT text, embedding, embedding_config FROM archival_passages "
                    "WHERE id = ? AND coalesce(is_deleted, 0)",
                    (pid,),
                ).fetchone()
                if row is None:
                    continue
                if row[0]:
                    texts.append(str(row[0]))
                dim = embedding_dim(row[2])
                if isinstance(row[1], bytes) and dim is not None and dim >= 4:
                    vectors.append(bytes(row[1][: dim * 4]))
                if "passage_tags" in self.columns:
                    tags += conn.execute(
                        "DELETE FROM passage_tags WHERE passage_id = ?", (pid,)
                    ).rowcount
                if conn.execute("DELETE FROM archival_passages WHERE id = ?", (pid,)).rowcount:
                    gone.append(encode_id("archival", pid))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        checks = {
            "rows_gone": not any(
                conn.execute("SELECT 1 FROM archival_passages WHERE id = ?", (pid,)).fetchone()
                for pid in pids
            )
        }
        if "passage_tags" in self.columns:
            checks["tags_gone"] = not any(
                conn.execute("SELECT 1 FROM passage_tags WHERE passage_id = ?", (pid,)).fetchone()
                for pid in pids
            )
        # A text or vector another passage also holds stays: the byte check counts it.
        probes = [t.encode("utf-8") for t in texts] + [v for v in vectors if any(v)]
        file_checks, details = self._purge_file(probes)
        checks.update(file_checks)
        return Erasure(
            checks=checks,
            details={"passages_removed": len(gone), "tag_rows_removed": tags, **details},
            removed=gone,
        )

    def forget_gaps(self, *, reason: str, operator: str | None = None) -> GapsOutcome:
        """Hard-delete every passage Letta soft-deleted, with its tags (audited, verified)."""
        self._require_writable()
        require_reason(reason)
        preview = self.forget_gaps_preview()
        ids = list(preview["records"])
        if not ids:
            raise SourceError("no erasure gap: no soft-deleted passage to clear")
        pids = self._soft_deleted()

        intent, event, done = self._audited_erasure(
            ids=ids,
            tier="archival",
            record_type="passage",
            reason=reason,
            operator=operator,
            plan={"rule": preview["rule"], "plan": preview["counts"]},
            erase=lambda: self._erase_soft_deleted(pids),
            failure="forget-gaps failed, nothing was changed",
            operation="forget-gaps",
        )
        return GapsOutcome.of(
            ids,
            (
                f"deleted {done.details['passages_removed']} soft-deleted passage(s) and "
                f"{done.details['tag_rows_removed']} tag row(s)"
            ),
            intent,
            event,
            done,
        )
