"""Key hashes: what the database makes and what memtui counts of them agree bit for bit."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from memtui.sources.postgres.key_buckets import FINE_BUCKETS, fine_counts, hash_sql

from .conftest import new_database
from .support import sql

INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)


@given(st.lists(INT32, max_size=200))
def test_fine_counts_are_the_low_sixteen_bits_of_each_hash(hashes):
    counts = fine_counts(np.asarray(hashes, dtype=np.int32))
    assert len(counts) == FINE_BUCKETS and int(counts.sum()) == len(hashes)
    expected = np.zeros(FINE_BUCKETS, dtype=np.int64)
    for h in hashes:
        expected[h % FINE_BUCKETS] += 1  # Python's % of a negative int: two's complement bits
    assert (counts == expected).all()


def test_a_key_of_parts_hashes_each_part_in_the_c_collation():
    assert hash_sql("t.id::text") == 'hashtext((t.id::text) COLLATE "C")'
    assert hash_sql("s.prefix", "s.key") == (
        'hashtext((s.prefix) COLLATE "C") # hashtext((s.key) COLLATE "C")'
    )


def test_the_databases_buckets_are_the_ones_counted_here(pg_server):
    """Postgres's ``& 65535`` of a negative ``hashtext`` and numpy's agree; the store's
    packed hashes arrive whole (big-endian); ``ids_with`` finds the rows of a hash."""
    from memtui.sources.postgres.key_buckets import StoreBuckets

    with new_database(pg_server) as url:
        keys = [f"key-{n}-ünï" for n in range(300)]
        sql(url, "CREATE TABLE k (id text PRIMARY KEY)")
        sql(url, "INSERT INTO k SELECT unnest(%s::text[])", (keys,))
        made = sql(url, f"SELECT t.id, {hash_sql('t.id')}, {hash_sql('t.id')} & 65535 FROM k AS t")

        class Reads:
            def query(self, text, params=()):
                return sql(url, text, tuple(params))

        store = StoreBuckets(Reads(), "k", ("t.id",), "t.id", lambda row: str(row[0]))
        hashes = store.hashes()
        assert sorted(hashes.tolist()) == sorted(h for _, h, _ in made)
        assert any(h < 0 for _, h, _ in made)  # the sign bit is exercised
        buckets = np.zeros(FINE_BUCKETS, dtype=np.int64)
        for _, _, bucket in made:
            buckets[bucket] += 1
        assert (fine_counts(hashes) == buckets).all()
        negative = [(k, h) for k, h, _ in made if h < 0][:3]
        assert store.ids_with([h for _, h in negative]) == {k for k, _ in negative}
        sql(url, "DELETE FROM k")
        assert len(store.hashes()) == 0
