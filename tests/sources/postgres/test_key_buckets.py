"""How many key-hash buckets a refresh compares: a power of two, about 16 rows each."""

from __future__ import annotations

import pytest

from memtui.sources.postgres.key_buckets import MAX_BUCKETS, bucket_count


@pytest.mark.parametrize(
    ("rows", "buckets"),
    [(0, 64), (34, 64), (1_024, 64), (1_040, 128), (100_000, 8_192), (10**9, MAX_BUCKETS)],
)
def test_buckets_are_a_power_of_two_of_about_sixteen_rows(rows, buckets):
    assert bucket_count(rows) == buckets
    assert buckets & (buckets - 1) == 0
