"""The purge after a forget that recorded its rows' blocks: O(blocks touched), checked.

1. ``VACUUM (INDEX_CLEANUP ON)`` of the changed tables: the dead rows are pruned and
   every index vacuumed (pgvector's HNSW vacuum zeroes the deleted element's vector
   and unlinks it from its neighbours; it reads the whole index, the one cost here
   that grows with the table). ``ANALYZE`` only when the planner's statistics still
   show the text.
2. The live rows are searched, in SQL, for the text (``text_gone``).
3. On a server whose files memtui can read: the recorded blocks are read after a
   ``CHECKPOINT`` and overwritten where they still hold the bytes
   (``memtui.sources.postgres.page_erasure``); a TOASTed value, a block with no live
   row, or bytes that stay are a rewrite (``VACUUM FULL`` of that table, said in the
   outcome) and a read of its whole files. The vector index's files are read too
   when they are at most ``INDEX_SCAN_LIMIT`` bytes; a larger one is named unread.
4. Elsewhere (a remote server): the same vacuum and one overwrite round of the
   recorded blocks, and ``bytes_checked`` fails: nothing says the bytes are gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from memtui.sources.postgres.erasure import PurgeReport, VectorProbe, count_near, text_probes
from memtui.sources.postgres.forget import TOASTED
from memtui.sources.postgres.page_erasure import BlockOverwrite, block_range, read_block
from memtui.sources.postgres.url import quote_identifier
from memtui.sources.shapes import SourceError

if TYPE_CHECKING:
    from memtui.sources.postgres.erasure import PageMap, PgErasure

INDEX_SCAN_LIMIT = 256 * 1024 * 1024
"""The largest vector index (bytes) whose files a forget reads for the vector."""


class PagePurge:
    """One purge (``PgErasure.purge`` with the deleted rows' blocks)."""

    def __init__(
        self,
        erasure: PgErasure,
        changed: Sequence[str],
        texts: Sequence[str],
        vectors: Sequence[VectorProbe],
        pages: PageMap,
    ) -> None:
        self.erasure = erasure
        self.tables = [t for t in changed if t in erasure.columns]
        self.probes = text_probes(texts)
        self.vectors = list(vectors)
        self.toasted = {str(t) for t in pages.get(TOASTED, [])}
        self.pages: dict[str, dict[int, int]] = {}
        for table in self.tables:
            for block, size in pages.get(table, []):
                freed = self.pages.setdefault(table, {})
                freed[int(block)] = freed.get(int(block), 0) + int(size)
        self.report = PurgeReport()
        self.step = erasure._step(self.report)

    def run(self) -> PurgeReport:
        erasure, report = self.erasure, self.report
        report.details["probes"] = len(self.probes) + len(self.vectors)
        report.details["blocks"] = sum(len(b) for b in self.pages.values())
        if not self.step("vacuum", lambda: erasure.vacuum(self.tables, full=False, analyze=False)):
            return report
        if self.probes:
            live = erasure.occurrences(self.probes)
            if erasure.statistics_hold(self.probes):
                self.step("analyze", self.analyze)
            erasure.text_checks(report, self.probes, live)
        root, why = erasure.data_directory()
        if root is None:
            self.blind(why)
            return report
        self.checked(root)
        return report

    def analyze(self) -> str:
        names = ", ".join(self.erasure.qualified(t) for t in self.tables)
        self.erasure.pg.run(lambda conn: conn.execute(f"ANALYZE {names}"))
        return f"ANALYZE {', '.join(self.tables)} (the statistics showed the text)"

    # -- the bytes

    def table_probes(self, table: str) -> list[bytes]:
        """What the blocks of ``table`` are read for: the texts, and its vectors."""
        out = [p.encode("utf-8") for p in self.probes]
        for vector in self.vectors:
            if vector.table == table:
                out.append(vector.raw())
        return out

    def live_in_block(self, table: str, block: int, probe: bytes) -> int:
        """How often the live rows of ``block`` hold the text ``probe``."""
        text = probe.decode("utf-8", "replace")
        total = 0
        for column in self.erasure.text_columns(table):
            cast = f"{quote_identifier(column)}::text"
            rows = self.erasure.pg.query(
                f"SELECT coalesce(sum((length({cast}) - length(replace({cast}, %s, '')))"
                f" / length(%s)), 0) FROM {self.erasure.qualified(table)} "
                f"WHERE {block_range(block)} AND strpos({cast}, %s) > 0",
                [text, text, text],
            )
            total += int(rows[0][0])
        return total

    def equal_in_block(self, vector: VectorProbe, block: int) -> int:
        """How many live rows of ``block`` hold a vector equal to ``vector`` (an item
        stored twice has one embedding twice: its bytes are the live row's, as the index
        check and the text check allow for live copies)."""
        column = quote_identifier(vector.column)
        rows = self.erasure.pg.query(
            f"SELECT count(*) FROM {self.erasure.qualified(vector.table)} "
            f"WHERE {block_range(block)} AND {column} = %s::{self.erasure.vector_type(vector)}",
            [vector.literal()],
        )
        return int(rows[0][0])

    def block_counts(self, root: Path, table: str, blocks: Sequence[int]) -> dict[int, int]:
        """Per block, the probe bytes it holds beyond its live rows' (after a checkpoint)."""
        self.erasure.pg.run(lambda conn: conn.execute("CHECKPOINT"))
        base = root / self.erasure.relation_files_of(table)
        probes = self.table_probes(table)
        texts = {p.encode("utf-8") for p in self.probes}
        vectors = {v.raw(): v for v in self.vectors if v.table == table}
        out: dict[int, int] = {}
        for block in blocks:
            data = read_block(base, block)
            excess = 0
            for probe in probes:
                found = data.count(probe)
                if found and probe in texts:
                    found -= self.live_in_block(table, block, probe)
                elif found and probe in vectors:
                    found -= self.equal_in_block(vectors[probe], block)
                excess += max(0, found)
            out[block] = excess
        return out

    def live_rows(self, table: str, block: int) -> int:
        rows = self.erasure.pg.query(
            f"SELECT count(*) FROM {self.erasure.qualified(table)} WHERE {block_range(block)}"
        )
        return int(rows[0][0])

    def touch(self, table: str, blocks: Sequence[int], freed: dict[int, int]) -> None:
        """The no-op update of live rows of ``blocks`` (enough of them, in ``ctid`` order,
        to cover a freed tuple: each new version goes where the freed bytes are), then a
        vacuum pruning the old versions."""
        qualified = self.erasure.qualified(table)
        column = quote_identifier(next(iter(self.erasure.columns[table])))
        for block in blocks:
            self.erasure.pg.query(
                f"UPDATE {qualified} SET {column} = {column} WHERE ctid = ANY(ARRAY("
                f"SELECT ctid FROM (SELECT ctid, sum(pg_column_size(t.*)) OVER (ORDER BY "
                f"ctid) - pg_column_size(t.*) AS before FROM {qualified} AS t "
                f"WHERE {block_range(block)}) AS s WHERE before < %s))",
                [freed.get(block, 0) + 64],
            )
        self.erasure.pg.run(lambda conn: conn.execute(f"VACUUM {qualified}"))

    def checked(self, root: Path) -> None:
        """Overwrite and read the recorded blocks; rewrite where that cannot erase."""
        report, rewrite = self.report, [t for t in self.tables if t in self.toasted]
        if self.held_back(root):
            return
        left_total, rounds_total = 0, 0
        for table, blocks in self.pages.items():
            if table in rewrite:
                continue
            overwrite = BlockOverwrite(
                partial(self.block_counts, root, table),
                partial(self.live_rows, table),
                partial(self.touch, table, freed=blocks),
            )
            try:
                left, rounds, empty = overwrite.run(sorted(blocks))
            except (SourceError, OSError) as exc:  # a failed check, never a half outcome
                report.checks["overwrite"] = False
                report.details["overwrite_problem"] = str(exc)[:300]
                return
            rounds_total += rounds
            if rounds:
                report.steps.append(
                    f"overwrote the freed space of {len(blocks)} block(s) of {table} "
                    f"(no-op update of live rows, {rounds} round(s))"
                )
            if left:
                rewrite.append(table)
                why = "a block with no live row" if empty else f"{ROUNDS_TEXT}"
                report.remarks.append(
                    f"the forgotten bytes stayed in {len(left)} block(s) of {table} ({why}): "
                    "rewritten (VACUUM FULL)"
                )
            left_total += sum(left.values())
        report.details["overwrite_rounds"] = rounds_total
        report.steps.append(
            f"read the recorded blocks of {', '.join(self.pages) or 'no table'} for the bytes"
        )
        for table in [t for t in self.tables if t in self.toasted]:
            report.remarks.append(
                f"the forgotten value was TOASTed or compressed (its bytes are not the "
                f"text's to find in its block): {table} rewritten (VACUUM FULL)"
            )
        gone = True
        if rewrite:
            gone = self.rewrite(root, rewrite)
        gone = self.index_check(root) and gone
        report.checks["bytes_gone"] = gone

    def held_back(self, root: Path) -> bool:
        """Whether an older snapshot keeps the deleted rows from the vacuum (another
        session's open transaction, a prepared transaction, a replication slot) while
        their blocks still hold the bytes: then no overwrite or rewrite can take them
        (``VACUUM FULL`` copies rows an open snapshot may still see), and the outcome
        names what holds them."""
        holders = self.erasure.snapshot_holders()
        if not holders:
            return False
        if not any(
            n for t, b in self.pages.items() for n in self.block_counts(root, t, sorted(b)).values()
        ):
            return False
        self.report.checks["dead_rows_removed"] = False
        self.report.details["held_by"] = holders
        self.report.remarks.append(
            f"VACUUM could not remove the deleted rows: {'; '.join(holders)} may still see "
            "them; their bytes stay until it ends and the tables are vacuumed again"
        )
        return True

    def rewrite(self, root: Path, tables: list[str]) -> bool:
        """``VACUUM FULL`` of ``tables`` and their whole files read for the bytes."""
        erasure = self.erasure
        if not self.step("vacuum_full", lambda: erasure.vacuum(tables, full=True, analyze=False)):
            return False
        erasure.pg.run(lambda conn: conn.execute("CHECKPOINT"))
        probes = {p: 0 for t in tables for p in self.table_probes(t)}
        for vector in [v for v in self.vectors if v.table in tables]:
            probes[vector.raw()] = erasure.live_equal(vector)
        texts = [p.encode("utf-8") for p in self.probes]
        for probe, live in zip(texts, erasure.occurrences(self.probes), strict=True):
            probes[probe] = live
        found = erasure.scan_files(root, tables, list(probes))
        self.report.steps.append(f"read the files of {', '.join(tables)} for the bytes")
        left = sum(max(0, n - probes[p]) for p, n in found.items())
        self.report.details["copies_after_vacuum_full"] = left
        return not left

    def index_check(self, root: Path) -> bool:
        """The vector index's files read for each forgotten vector (its normalized copy
        too, matched within a few float4 units in the last place: ``count_near``), when
        they are at most ``INDEX_SCAN_LIMIT`` bytes."""
        erasure, report = self.erasure, self.report
        by_table: dict[str, list[VectorProbe]] = {}
        for vector in self.vectors:
            by_table.setdefault(vector.table, []).append(vector)
        gone = True
        for table, vectors in by_table.items():
            files = erasure.vector_index_files(table, vectors[0].column)
            size = sum(erasure.relation_size(root / f) for _, f in files)
            names = ", ".join(name for name, _ in files)
            if not files:
                continue
            if size > INDEX_SCAN_LIMIT:
                report.details["index_scan"] = (
                    f"not read: {names} is {size // (1024 * 1024)} MiB (over "
                    f"{INDEX_SCAN_LIMIT // (1024 * 1024)} MiB); vacuumed with INDEX_CLEANUP ON"
                )
                report.remarks.append(
                    f"the vector index {names} was vacuumed, not read ({size // 2**20} MiB)"
                )
                continue
            erasure.pg.run(lambda conn: conn.execute("CHECKPOINT"))
            left = 0
            for vector in vectors:  # live rows with an equal vector, asked only when found
                held = sum(
                    count_near(part, head)
                    for _name, relative in files
                    for part in erasure.segments(root / relative)
                    for head in vector.heads()
                )
                if held:
                    left += max(0, held - erasure.live_equal(vector) * len(files))
            report.details["index_copies"] = left
            report.steps.append(f"read the files of {names} for the vectors")
            gone = gone and not left
        return gone

    def blind(self, why: str) -> None:
        """A server whose files memtui cannot read: one overwrite round, not checked."""
        report = self.report
        report.details["file_scan"] = f"not possible: {why}"
        for table, blocks in self.pages.items():
            self.step("overwrite", partial(self.blind_touch, table, blocks))
        report.checks["bytes_checked"] = False
        report.remarks.append(
            f"the tables' files cannot be read here ({why}): the freed blocks were "
            "vacuumed and overwritten once, the bytes not checked"
        )

    def blind_touch(self, table: str, blocks: dict[int, int]) -> str:
        targets = [b for b in sorted(blocks) if self.live_rows(table, b)]
        if targets:
            self.touch(table, targets, self.pages[table])
        return f"overwrote the freed space of {len(targets)} block(s) of {table} (not read)"


ROUNDS_TEXT = "an overwrite did not cover them"
