"""The page-local erasure of a Postgres forget on a real server: where overwriting the
freed space of the rows' blocks cannot erase (a TOASTed value, a block left with no
live row) the table is rewritten and the outcome says so; a block the vacuum truncated
away is gone without one; the block and vector arithmetic behind the reads."""

from __future__ import annotations

import random
import string
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import NOW

from memtui.sources import open_source
from memtui.sources.base import encode_id
from memtui.sources.postgres.erasure import VectorProbe, count_near
from memtui.sources.postgres.page_erasure import BLOCK, SEGMENT_BLOCKS, read_block

from .conftest import new_database
from .support import open_library, sql

RNG = random.Random(5)
TOASTED = "".join(RNG.choices(string.ascii_letters, k=6000))
"""Letters at random: pglz cannot shrink them, so the value goes out of line whole."""
WIDE = ["".join(RNG.choices(string.ascii_letters, k=1200)) for _ in range(2)]
"""Two values that each fill a block of a table with fillfactor 10 alone."""


@pytest.fixture
def store(pg_server: Any) -> Iterator[str]:
    with new_database(pg_server) as url:
        with open_library(url) as library:
            library.setup()
            for n in range(6):
                library.put(("users", "u1"), f"k{n}", {"text": f"small item number {n} here"})
        yield url


def opened(url: str) -> Any:
    return open_source(url, allow_writes=True, now=NOW, operator="tester")


def file_bytes(source: Any, probe: bytes) -> int:
    erasure = source.erasure()
    root, why = erasure.data_directory()
    assert root is not None, why
    source.pg.query("CHECKPOINT")
    return erasure.scan_files(root, ["store"], [probe])[probe]


def test_a_toasted_value_is_rewritten_and_said(store):
    with open_library(store) as library:
        library.put(("users", "u2"), "long", {"text": TOASTED})
    probe = TOASTED[:64].encode()
    with opened(store) as source:
        assert file_bytes(source, probe) == 1  # in the TOAST table, uncompressed
        outcome = source.forget(encode_id("lg", "users.u2", "long"), reason="r")
        assert outcome.verified, outcome.checks
        assert "TOASTed or compressed" in outcome.remark
        assert "store rewritten (VACUUM FULL)" in outcome.remark
        assert file_bytes(source, probe) == 0
        steps = source.audit_events(limit=1)[0]["details"]["purge"]
    assert "VACUUM (FULL) store" in steps


def test_a_value_compressed_in_its_block_is_rewritten_too(store):
    """A row over the TOAST threshold whose value pglz shrinks stays in its block,
    compressed: the text's bytes are not there to find, so reading the block proves
    nothing and the table is rewritten."""
    text = "the same few words again and again, " * 90
    with open_library(store) as library:
        library.put(("users", "u2"), "packed", {"text": text})
    assert sql(
        store,
        "SELECT pg_column_compression(value) IS NOT NULL, pg_column_size(value) < 1900 "
        "FROM store WHERE key = 'packed'",
    ) == [(True, True)]
    with opened(store) as source:
        outcome = source.forget(encode_id("lg", "users.u2", "packed"), reason="r")
        assert outcome.verified, outcome.checks
        assert "TOASTed or compressed" in outcome.remark


def wide_items(url: str) -> None:
    """Two items alone in a block each (fillfactor 10), after the small ones."""
    sql(url, "ALTER TABLE store SET (fillfactor = 10)")
    with open_library(url) as library:
        for n, text in enumerate(WIDE):
            library.put(("users", "u3"), f"w{n}", {"text": text})
    blocks = sql(url, "SELECT (ctid::text::point)[0] FROM store WHERE prefix = 'users.u3'")
    assert len({b for (b,) in blocks}) == 2


def test_a_block_left_with_no_live_row_is_rewritten_and_said(store):
    wide_items(store)
    probe = WIDE[0][:64].encode()
    with opened(store) as source:
        outcome = source.forget(encode_id("lg", "users.u3", "w0"), reason="r")
        assert outcome.verified, outcome.checks
        assert (
            "stayed in 1 block(s) of store (a block with no live row): rewritten (VACUUM FULL)"
            in outcome.remark
        )
        assert file_bytes(source, probe) == 0
    assert sql(store, "SELECT count(*) FROM store") == [(7,)]


def test_a_last_block_the_vacuum_truncates_needs_no_rewrite(store):
    wide_items(store)
    with opened(store) as source:
        outcome = source.forget(encode_id("lg", "users.u3", "w1"), reason="r")
        assert outcome.verified, outcome.checks
        assert outcome.remark is None
        assert file_bytes(source, WIDE[1][:64].encode()) == 0
        assert file_bytes(source, WIDE[0][:64].encode()) == 1  # the other one stays


def test_a_cosine_index_keeps_the_unit_vector_and_the_forget_finds_and_erases_it(store):
    """pgvector normalizes a vector before it goes into a cosine HNSW index: a vector not
    of length 1 is in the heap as given and in the index as pgvector's unit copy (not
    bit for bit the one Python computes), and the forget looks for both."""
    sql(
        store,
        "UPDATE store_vectors SET embedding = (SELECT array_agg(x * 3) FROM "
        "unnest(embedding::real[]) AS x)::vector WHERE key = 'k0'",
    )
    sql(store, "REINDEX TABLE store_vectors")
    (values,) = sql(store, "SELECT embedding::real[] FROM store_vectors WHERE key = 'k0'")[0]
    probe = VectorProbe("store_vectors", "embedding", tuple(values))
    assert len(probe.heads()) == 2
    with opened(store) as source:
        erasure = source.erasure()
        root, _ = erasure.data_directory()
        source.pg.query("CHECKPOINT")
        ((_, index),) = erasure.vector_index_files("store_vectors", "embedding")
        assert [count_near(root / index, head) for head in probe.heads()] == [0, 1]
        outcome = source.forget(encode_id("lg", "users.u1", "k0"), reason="r")
        assert outcome.verified, outcome.checks
        ((_, index),) = erasure.vector_index_files("store_vectors", "embedding")
        source.pg.query("CHECKPOINT")
        assert [count_near(root / index, head) for head in probe.heads()] == [0, 0]
        assert source.audit_events(limit=1)[0]["details"]["index_copies"] == 0


def test_a_run_of_floats_is_found_within_a_few_units_in_the_last_place(tmp_path):
    path = tmp_path / "floats"
    head = (0.25, -0.5, 0.125)
    near = [float(struct.unpack("=f", struct.pack("=f", v * (1 + 1e-7)))[0]) for v in head]
    path.write_bytes(b"\1\2\3\4" + struct.pack("=3f", *near) + struct.pack("=3f", 0.3, 0.2, 0.1))
    assert count_near(path, head) == 1
    assert count_near(path, (0.25, -0.5, 0.126)) == 0


def test_a_block_is_read_from_its_segment(tmp_path):
    base = tmp_path / "16384"
    base.write_bytes(b"\0" * BLOCK * 3)
    with (tmp_path / "16384.1").open("wb") as handle:  # a sparse second segment
        handle.seek(5 * BLOCK)
        handle.write(b"x" * BLOCK)
    assert read_block(base, SEGMENT_BLOCKS + 5) == b"x" * BLOCK
    assert read_block(base, 2) == b"\0" * BLOCK
    assert read_block(base, 3) == b""  # past the end: truncated away
    assert read_block(base, 2 * SEGMENT_BLOCKS) == b""  # no third segment


def test_an_open_snapshot_that_still_sees_the_row_is_named_and_not_verified(store):
    """Another session's REPEATABLE READ transaction, opened before the forget, may still
    see the deleted row: VACUUM keeps it (and VACUUM FULL would copy it), so no overwrite
    can take its bytes. The forget names the transaction and is not verified."""
    import psycopg

    with psycopg.connect(store) as reader:
        reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        reader.execute("SELECT count(*) FROM store").fetchall()
        (pid,) = reader.execute("SELECT pg_backend_pid()").fetchone()
        with opened(store) as source:
            outcome = source.forget(encode_id("lg", "users.u1", "k5"), reason="r")
            assert not outcome.verified
            assert outcome.checks["dead_rows_removed"] is False and outcome.checks["row_gone"]
            assert "a transaction open since " in outcome.remark
            assert f"(pid {pid}" in outcome.remark
            assert file_bytes(source, b"small item number 5 here") == 1
        reader.rollback()


def test_occurrences_counts_every_probe_in_every_text_column_in_one_scan_a_table(lg_store):
    """The text check's counts equal a count in Python over every text and jsonb column of
    the store's tables, for more probes than one scan takes (probes in values, keys and
    prefixes; one twice in a value; absent ones; a row whose other text column is NULL)."""
    sql(lg_store, "ALTER TABLE store ADD COLUMN note text")
    sql(lg_store, "UPDATE store SET note = 'Rome trip aside' WHERE key = 'stack'")
    with open_source(lg_store, now=NOW) as source:
        erasure = source.erasure()
        columns = {t: erasure.text_columns(t) for t in erasure.store_tables}
        cells = [
            str(value)
            for table, names in columns.items()
            if names
            for row in source.pg.query(
                f"SELECT {', '.join(f'{n}::text' for n in names)} FROM {erasure.qualified(table)}"
            )
            for value in row
            if value is not None
        ]
        present = ["trip", "Paris trip booked", "memories.user-2", "text", "e", "user-1"]
        probes = present + [f"absent probe {n}" for n in range(40)] + ["Rome trip", "aside"]
        found = erasure.occurrences(probes)
    assert "note" in columns["store"]
    assert found == [sum(cell.count(p) for cell in cells) for p in probes]
    assert found[-1] == 1  # only in the note, beside NULL notes
    assert found[present.index("trip")] > found[present.index("Paris trip booked")] > 0
    assert erasure.occurrences([]) == []


def test_a_sparse_vectors_probe_is_its_most_distinctive_run_not_its_leading_zeros():
    sparse = [0.0] * 40 + [0.5, 0.0, -0.25, 0.125] + [0.0] * 20 + [0.75] + [0.0] * 7
    probe = VectorProbe("t", "v", tuple(sparse))
    assert probe.window() == tuple(sparse[40:56])
    assert probe.raw() == struct.pack("=16f", *sparse[40:56])
    unit = probe.heads()[1]
    assert unit[0] == pytest.approx(0.5 / (0.5**2 + 0.25**2 + 0.125**2 + 0.75**2) ** 0.5)
    dense = tuple(float(n + 1) for n in range(20))
    assert VectorProbe("t", "v", dense).window() == dense[:16]  # the first run when all count
    assert VectorProbe("t", "v", (0.0, 0.0, 3.0)).window() == (0.0, 0.0, 3.0)  # shorter than a run
