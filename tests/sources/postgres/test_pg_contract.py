"""The MemorySource contract (``tests/sources/test_sources_contract.py``) on a LangGraph
``PostgresStore``: the same tests, with the store in a database instead of a file.

The contract's tests of a file (its bytes unchanged after a read-only open, a path
that names another file) have their Postgres forms in ``test_pg_connection.py``
(a write refused by the database) and ``test_pg_detect.py``; its forget tests have
theirs in ``test_pg_forget.py`` (a store of each test's own: the module's is never
changed), all but the rule's sentence, which reads only.
"""

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

from .support import EMBEDDER, LG_NOW

CASES = [
    Case("langgraph-postgres", "trip", None, embedder=EMBEDDER, now=LG_NOW),
    Case("langgraph-postgres-keyword", "coffee", None, now=LG_NOW),
]


@pytest.fixture(params=CASES, ids=[c.name for c in CASES])
def case(request) -> Case:
    return request.param


@pytest.fixture
def store_path(lg_url) -> str:
    return lg_url
