"""The MemorySource contract (``tests/sources/test_sources_contract.py``) on a Letta
server's Postgres: the same tests, on Letta's schema with passages written as its
passage manager writes them. Its forget tests have their forms in
``test_letta_pg_forget.py`` (a database of each test's own: the module's is never
changed), all but the rule's sentence, which reads only."""

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
from .letta_support import EMBEDDER, record_id, write_letta

CASES = [
    Case("letta-postgres", "trip", record_id(2), embedder=EMBEDDER),
    Case("letta-postgres-keyword", "coffee", None),
]


@pytest.fixture(scope="module")
def letta_contract_url(pg_server):
    with new_database(pg_server) as url:
        write_letta(url)
        yield url


@pytest.fixture(params=CASES, ids=[c.name for c in CASES])
def case(request) -> Case:
    return request.param


@pytest.fixture
def store_path(letta_contract_url) -> str:
    return letta_contract_url
