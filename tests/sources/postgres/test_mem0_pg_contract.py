"""The MemorySource contract (``tests/sources/test_sources_contract.py``) on mem0's pgvector
collection: the same tests, with the collection in a database written by mem0's own
``PGVector``. Its forget tests have their forms in ``test_mem0_pg_forget.py`` (a
collection of each test's own: the module's is never changed), all but the rule's
sentence, which reads only."""

from __future__ import annotations

import pytest
from test_sources_contract import (  # noqa: F401 - collected here, on this module's fixtures
    Case,
    test_calls_from_many_threads_agree,
    test_clock_is_injectable,
    test_exclusions_are_counted_in_the_stores_own_words,
    test_facets_add_up_to_page_totals,
    test_hidden_records_exist_and_are_left_out_by_default,
    test_ids_round_trip_through_get_and_json,
    test_paging_visits_every_record_once,
    test_search_returns_the_native_breakdown,
    test_the_forget_rule_is_a_sentence,
    test_unknown_filter_keys_are_refused_loudly,
)

from .conftest import new_database
from .mem0_support import EMBEDDER, MEM0_NOW, write_collection, write_telemetry

pytest.importorskip("mem0")

CASES = [
    Case("mem0-pgvector", "trip", None, embedder=EMBEDDER, now=MEM0_NOW),
    Case("mem0-pgvector-keyword", "coffee", None, now=MEM0_NOW),
]


@pytest.fixture(scope="module")
def m0_contract_url(pg_server):
    with new_database(pg_server) as url:
        write_collection(url).connection_pool.close()
        write_telemetry(url)
        yield url


@pytest.fixture(params=CASES, ids=[c.name for c in CASES])
def case(request) -> Case:
    return request.param


@pytest.fixture
def store_path(m0_contract_url) -> str:
    return m0_contract_url
