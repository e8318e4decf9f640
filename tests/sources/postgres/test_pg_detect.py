"""Opening a postgresql:// URL: a database with no memory store is one line naming what
it holds; a schema that does not exist names those that do."""

from __future__ import annotations

import psycopg
import pytest

from memtui.sources import SourceError, open_source


def test_a_database_with_other_tables_says_what_it_holds(pg_url):
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for table in ("invoices", "customers", "audit"):
            conn.execute(f"CREATE TABLE {table} (id int)")
    with pytest.raises(SourceError) as raised:
        open_source(pg_url)
    message = str(raised.value)
    assert "\n" not in message
    assert message.endswith(
        "(schema public) holds 3 tables (audit, customers, invoices) but no LangGraph store, "
        "mem0 pgvector collection or Letta server passages"
    )


def test_an_empty_database_and_a_missing_schema(pg_url):
    with pytest.raises(SourceError, match=r"\(schema public\) holds no tables but no LangGraph"):
        open_source(pg_url)
    with pytest.raises(SourceError, match=r"has no schema 'agents' \(schemas: public\)"):
        open_source(pg_url, pg_schema="agents")
