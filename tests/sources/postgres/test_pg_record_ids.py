"""The database makes the same record ids as ``encode_id`` (a build sends them as text)."""

from __future__ import annotations

import pytest

from memtui.sources.postgres.record_ids import id_sql
from memtui.sources.shapes import encode_id

from .support import sql

PARTS = ["plain", "odd%ns", "a/b", "sp ace", "é€😀", "", "it's", "~._-", "tab\tnl\n", "%41"]


@pytest.mark.parametrize("second", ["k", "é/%", ""])
def test_the_database_encodes_ids_as_encode_id_does(pg_url, second):
    rows = sql(
        pg_url,
        f"SELECT v.a, {id_sql('lg', 'v.a', 'v.b')} FROM unnest(%s::text[]) AS v(a), "
        "(SELECT %s::text AS b) AS w(b)".replace("v.b", "w.b"),
        (PARTS, second),
    )
    assert {a: got for a, got in rows} == {a: encode_id("lg", a, second) for a in PARTS}
