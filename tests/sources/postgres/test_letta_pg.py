"""Letta's server in Postgres: recognized, browsed (tiers, archives, tags, labels), searched
(keyword lane on memtui's index, vector lane in SQL on zero-padded vectors)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from conftest import fixed_clock

from memtui.sources import open_source

from .conftest import new_database
from .letta_support import write_letta


@pytest.fixture(scope="module")
def letta_url(pg_server: Any) -> Iterator[str]:
    """A Letta server database for a module's read-only tests: written once, never changed."""
    with new_database(pg_server) as url:
        write_letta(url)
        yield url


def opened(url: str, **options: Any) -> Any:
    return open_source(url, clock=fixed_clock, **options)


def test_scratch(letta_url):
    with opened(letta_url) as source:
        print(source.label, source.kind)
        print(source.facets())
        print(source.facets(include_hidden=True))
        print(source.page(limit=3))
        print(source.summary())
        r = source.search("trip", embedder=EMBEDDER)
        print(r.trace.vector_search, r.trace.fallback, [(x.id, x.trace.vector.raw) for x in r.results])
    assert 0

from .letta_support import EMBEDDER  # noqa
