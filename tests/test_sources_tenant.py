"""Tenant evidence stores: tenants and revisions as scopes, logical-time expiry, scoped forget."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner
from fixtures.sources_support import CANARY, TENANT, copy_fixture, occurrences

from memtui.cli import main
from memtui.sources import SourceError, open_source
from memtui.sources.tenant import TenantEvidenceSource


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("MEMTUI_CACHE_DIR", raising=False)


@pytest.fixture
def evidence(tmp_path):
    return copy_fixture(TENANT, tmp_path / "store")


def test_kinds_are_tiers_tenants_and_revisions_scopes(evidence):
    with open_source(evidence) as source:
        assert isinstance(source, TenantEvidenceSource)
        assert source.table == "evidence" and source.id_column == "record_id"
        facets = {f.tier: f for f in source.facets()}
        assert list(facets) == ["working", "incident", "runbook"]
        assert facets["runbook"].scopes == {
            "tenant": {"acme": 1, "globex": 1},
            "revision": {"1": 1, "2": 1},
        }
        assert [r.id for r in source.page({"revision": "2"}).records] == [
            "ev:acme/r-2",
            "ev:globex/r-2",
        ]
        odd = source.get("ev:acme/r%2F4%20odd%3Aid")
        assert odd.metadata == {"record_id": "r/4 odd:id", "citation": "notes://shift-7"}
        assert source.notes(odd) == "cites notes://shift-7 · expiry 20"
        assert "no --now" in source.expiry_rule
        assert all(r.state == "live" for r in source.iter_records(include_hidden=True))


@pytest.mark.parametrize(("now", "state"), [(49, "live"), (50, "expired"), (51, "expired")])
def test_logical_expiry_is_strict(evidence, now, state):
    with open_source(evidence, now=now) as source:
        assert source.get("ev:acme/r-2").state == state  # expiry 50
        listed = {r.id for r in source.page().records}
        assert ("ev:acme/r-2" in listed) == (state == "live")
        response = source.search("payment queue")
        assert ({r.id for r in response.results} == {"ev:acme/r-2"}) == (state == "live")
        assert response.trace["excluded"]["expired"] == (0 if state == "live" else 1)
        assert response.trace["now"] == str(now)


def test_now_must_be_a_whole_number(evidence):
    with pytest.raises(SourceError, match="whole number"):
        open_source(evidence, now="2026-11-30T12:00:00Z")
    result = CliRunner().invoke(main, ["records", str(evidence), "--now", "soon"])
    assert result.exit_code == 1 and "whole number" in result.output


def test_forget_is_scoped_to_one_tenant(evidence):
    with open_source(evidence, now=10, allow_writes=True) as source:
        assert source.forget_preview("ev:globex/r-1")["rule"].endswith(
            "the same id in other tenants stays."
        )
        assert occurrences(evidence, CANARY)["word"] == 1
        outcome = source.forget("ev:globex/r-1", reason="tenant offboarded")
        assert outcome.verified and outcome.removed == ("ev:globex/r-1",)
        assert source.get("ev:globex/r-1") is None
        assert source.get("ev:acme/r-1").content == "queue depth alarm fires at 10k messages"
        event = source.audit_events()[0]
        assert event["details"]["tenant"] == "globex"
        assert source.search("disk").results[0].id == "ev:globex/r-2"
    assert occurrences(evidence, CANARY) == {"word": 0, "tail": 0}
    conn = sqlite3.connect(evidence)
    assert conn.execute("SELECT tenant FROM evidence WHERE record_id = 'r-1'").fetchall() == [
        ("acme",)
    ]
    conn.close()


def test_cli_lists_with_now_and_citations(evidence):
    runner = CliRunner()
    result = runner.invoke(
        main, ["records", str(evidence), "--now", "50", "--filter", "tenant=acme", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [r["id"] for r in data] == ["ev:acme/r-1", "ev:acme/r-3"]
    assert data[0]["metadata"]["citation"] == "runbook://queue/v1"
    assert data[0]["expires_at"] == 100 and data[0]["scope"] == {"tenant": "acme", "revision": 1}
    table = runner.invoke(
        main, ["records", str(evidence), "--now", "50", "--all"], env={"COLUMNS": "250"}
    )
    assert "cites pager://INC-42" in table.output and "expired" in table.output
    assert "live while expiry > now (strict); now = 50" in table.output


def test_another_table_name_and_key_are_recognized(tmp_path):
    path = tmp_path / "kb"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE tenant_facts (tenant TEXT, fact_key TEXT, revision INTEGER, kind TEXT, "
        "body TEXT, source TEXT, expiry INTEGER, PRIMARY KEY (tenant, fact_key))"
    )
    conn.execute(
        "INSERT INTO tenant_facts VALUES ('t1', 'k1', 1, 'runbook', 'drain first', 'rb://1', 9)"
    )
    conn.commit()
    conn.close()
    with open_source(path, now=3) as source:
        assert source.table == "tenant_facts" and source.id_column == "fact_key"
        assert [r.id for r in source.iter_records()] == ["ev:t1/k1"]
        assert source.search("drain").results[0].id == "ev:t1/k1"


def test_the_clock_label_is_the_logical_now(evidence, tmp_path):
    """A header clock shows the store's own time: a tenant store's logical now, never
    the wall clock; stores on wall-clock time leave the label to the app (None)."""
    from fixtures.sources_support import LANGGRAPH

    with open_source(evidence, now=100) as source:
        assert source.clock_label() == "100 (logical time)"
    with open_source(evidence) as source:
        assert source.clock_label() == "none given (logical time; pass --now N)"
    with open_source(copy_fixture(LANGGRAPH, tmp_path / "lg"), now="2026-11-30T12:00:00Z") as lg:
        assert lg.clock_label() is None
