"""The Postgres benchmark runs end to end on a tiny store, so it cannot rot.

No timing is asserted: only that the generator makes LangGraph's schema and every
row of the table is produced (on the session's server), the forget's verified.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from conftest import ROOT

from .conftest import admin
from .support import sql


def _module(name: str) -> Any:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(name)


def test_the_benchmark_runs_at_a_tiny_size(pg_server, tmp_path, capsys):
    bench = _module("benchmarks.postgres")
    gen = _module("benchmarks.pg_generate")
    url = pg_server.get_uri()
    try:
        made = gen.find_or_make(url, 300, 7, log=lambda _line: None)
        assert not made.reused
        assert gen.find_or_make(url, 300, 7).reused
        assert sql(made.url, "SELECT count(*) FROM store") == [(300,)]
        assert sql(made.url, "SELECT count(*) FROM store_vectors") == [(300,)]
        assert sql(
            made.url,
            "SELECT indexdef LIKE '%USING hnsw (embedding vector_cosine_ops)%' FROM pg_indexes "
            "WHERE indexname = 'store_vectors_embedding_idx'",
        ) == [(True,)]
        code = bench.main(
            [
                "--sizes",
                "300",
                "--repeats",
                "1",
                "--server-url",
                url,
                "--out-dir",
                str(tmp_path),
            ]
        )
        assert code == 0
        out = capsys.readouterr().out
        assert "300 items (reused" in out
        for name in (
            "first screen",
            "page of 200",
            "tier facets",
            "namespace facets",
            "keyword index build",
            "refresh after 1,000 changes",
            "vector lane (HNSW)",
            "vector lane (exact scan)",
        ):
            assert f"\n{name} " in out
        forget = next(line for line in out.splitlines() if line.startswith("forget one item"))
        assert forget.endswith("raw: DELETE + VACUUM (INDEX_CLEANUP ON); verified 1/1"), out
        assert sql(made.url, "SELECT count(*) FROM store") == [(300,)]
    finally:
        admin(pg_server, 'DROP DATABASE IF EXISTS "memtui_bench_lg_300_s7" WITH (FORCE)')
