"""Structured retrieval lanes (design.md section 5), on real SQLite files."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from memtui.cli import main
from memtui.core.corpus import load_corpus, prepare_corpus
from memtui.core.lanes import (
    DEFAULT_MIN_SIMILARITY,
    host_history,
    host_history_count,
    learned_tactics,
    negative_evidence,
    profile_priors,
    profile_similarity,
    similar_profiles,
)
from memtui.core.store import MemoryStore

CORPUS = Path(__file__).resolve().parents[2] / "sample_corpus" / "memory-corpus.json"
NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)

FLASK = "python:postgresql:waf_present:generic_waf:rest:flask"
DJANGO = "python:postgresql:waf_present:generic_waf:rest:django"
SPARSE = "python:unknown:unknown:unknown:rest:unknown"
LARAVEL = "php:mysql:no_waf:none:html:laravel"
EXPRESS = "node:mongodb:waf_present:cloud_waf:graphql:express"

CLI_ENV = {"COLUMNS": "250", "MEMTUI_NOW": "2026-11-30T12:00:00Z"}


def clock() -> datetime:
    return NOW


@pytest.fixture
def lanes_db(tmp_path: Path) -> Path:
    path = tmp_path / "lanes-sample.db"
    with MemoryStore(path, clock=clock, operator="lanes-test") as loader:
        loader.ingest(load_corpus(CORPUS), source="memory-corpus.json")
    return path


@pytest.fixture
def lanes_store(lanes_db: Path):
    with MemoryStore(lanes_db, clock=clock, operator="lanes-test") as opened:
        yield opened


def tactic_id(store: MemoryStore, profile: str, tool: str) -> int:
    found = store.fetch(record_type="tactic", profile_hash=profile, tool_name=tool)
    assert len(found) == 1
    return found[0].id


def by_tool(rows: list[dict]) -> dict[str, dict]:
    return {row["tool"]: row for row in rows}


def tactic(profile: str, tool: str, successes: int, attempts: int, **extra) -> dict:
    return {
        "tier": "longterm",
        "record_type": "tactic",
        "profile_hash": profile,
        "tool": tool,
        "endpoint": extra.pop("endpoint", f"/{tool}"),
        "param": extra.pop("param", "q"),
        "successes": successes,
        "attempts": attempts,
        **extra,
    }


def custom_store(tmp_path: Path, records: list[dict]) -> MemoryStore:
    store = MemoryStore(tmp_path / "custom.db", clock=clock, operator="lanes-test")
    store.ingest(prepare_corpus(records), source="test")
    return store


# ------------------------------------------------------------------ similarity


def test_identical_known_fingerprints_are_fully_similar():
    assert profile_similarity(FLASK, FLASK) == 1.0


def test_one_differing_component_of_six():
    assert profile_similarity(FLASK, DJANGO) == pytest.approx(5 / 6)


@pytest.mark.parametrize("unknown", ["", "unknown", "UNKNOWN", "none", "None", "generic", "*", "?"])
def test_unknown_components_are_skipped_not_counted_as_disagreement(unknown):
    assert profile_similarity(f"a:{unknown}:c:d", "a:x:c:d") == 1.0
    assert profile_similarity("a:x:c:d", f"a:{unknown}:c:d") == 1.0


def test_generic_waf_is_a_known_value_but_generic_is_not():
    # generic_waf is compared (and here disagrees): 3 of 4.
    assert profile_similarity("a:b:c:generic_waf", "a:b:c:cloud_waf") == pytest.approx(0.75)
    # generic is unknown: skipped, the other three agree.
    assert profile_similarity("a:b:c:generic", "a:b:c:cloud_waf") == 1.0


def test_nearly_empty_fingerprint_never_reaches_full_similarity():
    assert profile_similarity(SPARSE, FLASK) == pytest.approx(2 / 3)
    assert profile_similarity(SPARSE, SPARSE) == pytest.approx(2 / 3)
    assert profile_similarity("a", "a") == pytest.approx(1 / 3)


def test_disjoint_and_empty_fingerprints_score_zero():
    assert profile_similarity(FLASK, LARAVEL) == 0.0
    assert profile_similarity("a:b:c", "x:y:z") == 0.0
    assert profile_similarity("unknown:*:?", FLASK) == 0.0
    assert profile_similarity("", "") == 0.0


def test_fingerprints_of_different_lengths_treat_missing_as_unknown():
    assert profile_similarity("a:b:c", "a:b:c:d") == 1.0
    assert profile_similarity("a:b", "a:b:c:d") == pytest.approx(2 / 3)


def test_partial_agreement_is_a_fraction_of_compared_positions():
    assert profile_similarity(FLASK, EXPRESS) == pytest.approx(1 / 6)


_component = st.sampled_from(["a", "b", "c", "unknown", "none", "*", "generic_waf", ""])


@given(st.lists(_component, max_size=7), st.lists(_component, max_size=7))
def test_similarity_is_symmetric_and_bounded(left, right):
    a, b = ":".join(left), ":".join(right)
    score = profile_similarity(a, b)
    assert 0.0 <= score <= 1.0
    assert score == profile_similarity(b, a)


# ------------------------------------------------------------------ priors


def test_default_threshold_pools_one_differing_component_but_not_sparse_profiles():
    assert profile_similarity(FLASK, DJANGO) >= DEFAULT_MIN_SIMILARITY
    assert profile_similarity(FLASK, SPARSE) < DEFAULT_MIN_SIMILARITY


def test_similar_profiles_of_flask(lanes_store):
    found = similar_profiles(lanes_store, FLASK)
    assert [p["profile_hash"] for p in found] == [FLASK, DJANGO]
    assert found[1]["similarity"] == pytest.approx(5 / 6)


def test_priors_pool_similar_profiles_and_not_dissimilar_ones(lanes_store):
    priors = by_tool(profile_priors(lanes_store, FLASK))
    sqlmap = priors["sqlmap"]
    # flask 12/23 + django 3/4; not the sparse profile's 0/3, not laravel's 5/6.
    assert (sqlmap["hits"], sqlmap["n"]) == (15, 27)
    assert sqlmap["rate"] == pytest.approx(15 / 27)
    assert sqlmap["record_ids"] == sorted(
        [tactic_id(lanes_store, FLASK, "sqlmap"), tactic_id(lanes_store, DJANGO, "sqlmap")]
    )
    assert {(p["profile_hash"], p["hits"], p["n"]) for p in sqlmap["profiles"]} == {
        (FLASK, 12, 23),
        (DJANGO, 3, 4),
    }
    assert (priors["dalfox"]["hits"], priors["dalfox"]["n"]) == (3, 8)
    assert (priors["arjun"]["hits"], priors["arjun"]["n"]) == (0, 3)
    assert (priors["commix"]["hits"], priors["commix"]["n"]) == (0, 8)
    assert (priors["ffuf"]["hits"], priors["ffuf"]["n"]) == (7, 10)
    # Nothing from the node, php or java stacks.
    assert set(priors) == {"sqlmap", "dalfox", "arjun", "commix", "ffuf"}


def test_a_lower_threshold_pools_the_sparse_profile_too(lanes_store):
    priors = by_tool(profile_priors(lanes_store, FLASK, min_similarity=0.5))
    assert (priors["sqlmap"]["hits"], priors["sqlmap"]["n"]) == (15, 30)


def test_priors_are_sorted_by_wilson_bound_with_raw_counts(lanes_store):
    priors = profile_priors(lanes_store, FLASK)
    assert [r["tool"] for r in priors] == ["ffuf", "sqlmap", "dalfox", "arjun", "commix"]
    bounds = [r["wilson"] for r in priors]
    assert bounds == sorted(bounds, reverse=True)
    for row in priors:
        assert row["wilson"] <= row["rate"]
        lo, hi = row["interval"]
        assert lo == pytest.approx(row["wilson"]) and lo <= row["rate"] <= hi


def test_bound_ranks_12_of_23_above_a_lucky_1_of_1(tmp_path):
    store = custom_store(
        tmp_path, [tactic("go:x:y:z", "nuclei", 1, 1), tactic("go:x:y:z", "sqlmap", 12, 23)]
    )
    with store:
        priors = profile_priors(store, "go:x:y:z")
    assert [r["tool"] for r in priors] == ["sqlmap", "nuclei"]
    sqlmap, nuclei = priors
    assert nuclei["rate"] > sqlmap["rate"]
    assert round(sqlmap["wilson"], 6) == 0.329624
    assert round(nuclei["wilson"], 6) == 0.206543


def test_ties_break_by_tool_name(tmp_path):
    store = custom_store(
        tmp_path, [tactic("go:x:y:z", "zap", 2, 4), tactic("go:x:y:z", "amass", 2, 4)]
    )
    with store:
        assert [r["tool"] for r in profile_priors(store, "go:x:y:z")] == ["amass", "zap"]


def test_tools_pool_case_insensitively(tmp_path):
    store = custom_store(
        tmp_path,
        [tactic("go:x:y:z", "SQLMap", 1, 2), tactic("go:x:y:q", "sqlmap", 3, 4)],
    )
    with store:
        priors = profile_priors(store, "go:x:y:z", min_similarity=0.5)
    assert len(priors) == 1
    assert (priors[0]["hits"], priors[0]["n"]) == (4, 6)


def test_no_tries_is_no_data_and_ranks_last(tmp_path):
    rows = prepare_corpus([tactic("go:x:y:z", "ghost", 1, 1), tactic("go:x:y:z", "zero", 0, 3)])
    # Stored counts of zero tries (foreign or legacy data): no bound, no rate.
    rows[0]["metadata"]["total_attempts"] = 0
    rows[0]["metadata"]["total_successes"] = 0
    with MemoryStore(tmp_path / "nodata.db", clock=clock) as store:
        store.ingest(rows)
        priors = profile_priors(store, "go:x:y:z")
    assert [r["tool"] for r in priors] == ["zero", "ghost"]
    ghost = priors[1]
    assert (ghost["hits"], ghost["n"], ghost["rate"], ghost["wilson"], ghost["interval"]) == (
        0,
        0,
        None,
        None,
        None,
    )
    # Zero hits over tries is a bound of 0.0, not "no data".
    assert priors[0]["wilson"] == 0.0


def test_priors_for_an_unrecorded_profile_pool_its_neighbours(lanes_store):
    fastapi = "python:postgresql:waf_present:generic_waf:rest:fastapi"
    priors = by_tool(profile_priors(lanes_store, fastapi))
    assert (priors["sqlmap"]["hits"], priors["sqlmap"]["n"]) == (15, 27)
    assert learned_tactics(lanes_store, fastapi) == []


def test_priors_count_in_sql_not_row_by_row(lanes_store):
    statements: list[str] = []
    lanes_store.connection.set_trace_callback(statements.append)
    try:
        profile_priors(lanes_store, FLASK)
    finally:
        lanes_store.connection.set_trace_callback(None)
    reads = [s for s in statements if "FROM records" in s]
    assert reads
    # Every read is either the distinct-profile scan or a grouped sum.
    for sql in reads:
        assert "DISTINCT profile_hash" in sql or ("GROUP BY" in sql and "SUM(" in sql)


# ------------------------------------------------------------------ refuted, forgotten, expired


def test_refuted_tactic_leaves_priors_and_learned_tactics_but_stays_on_file(lanes_store):
    sqlmap_id = tactic_id(lanes_store, FLASK, "sqlmap")
    lanes_store.refute(sqlmap_id, reason="payload blocked after WAF update")
    priors = by_tool(profile_priors(lanes_store, FLASK))
    assert (priors["sqlmap"]["hits"], priors["sqlmap"]["n"]) == (3, 4)  # django only
    assert sqlmap_id not in priors["sqlmap"]["record_ids"]
    assert sqlmap_id not in [t["record_id"] for t in learned_tactics(lanes_store, FLASK)]
    kept = lanes_store.fetch(include_refuted=True, record_type="tactic", profile_hash=FLASK)
    refuted = [r for r in kept if r.id == sqlmap_id]
    assert len(refuted) == 1 and refuted[0].refuted


def test_refuted_tactic_in_the_corpus_is_never_pooled(lanes_store):
    # laravel's ffuf tactic is refuted in the corpus.
    assert "ffuf" not in by_tool(profile_priors(lanes_store, LARAVEL))
    assert "ffuf" not in {t["tool"] for t in learned_tactics(lanes_store, LARAVEL)}


def test_forgotten_tactic_is_gone_everywhere(lanes_store):
    commix_id = tactic_id(lanes_store, FLASK, "commix")
    assert negative_evidence(lanes_store, FLASK)[0]["record_ids"] == [commix_id]
    lanes_store.forget(commix_id, reason="test erasure")
    assert "commix" not in by_tool(profile_priors(lanes_store, FLASK))
    assert "commix" not in {t["tool"] for t in learned_tactics(lanes_store, FLASK)}
    assert negative_evidence(lanes_store, FLASK) == []
    assert lanes_store.get(commix_id) is None
    assert commix_id not in [r.id for r in lanes_store.fetch(include_refuted=True)]


def test_expired_tactics_are_excluded_at_the_strict_boundary(lanes_store):
    lanes_store.record_success(
        profile_hash=FLASK, tool="wapiti", endpoint="/old", param="x", expires_at=NOW
    )
    lanes_store.record_success(
        profile_hash=FLASK,
        tool="nikto",
        endpoint="/new",
        param="x",
        expires_at=NOW + timedelta(seconds=1),
    )
    priors = by_tool(profile_priors(lanes_store, FLASK))
    assert "wapiti" not in priors
    assert (priors["nikto"]["hits"], priors["nikto"]["n"]) == (1, 1)
    tools = {t["tool"] for t in learned_tactics(lanes_store, FLASK)}
    assert "nikto" in tools and "wapiti" not in tools


# ------------------------------------------------------------------ host history


def test_host_history_keeps_to_one_engagement_and_leaves_out_run_fp_and_info(lanes_store):
    rows = host_history(lanes_store, "acme-2026-q4", current_run="acme-r3")
    assert [r["finding_id"] for r in rows] == [
        "F-0001",
        "F-0006",
        "F-0002",
        "F-0008",
        "F-0004",
        "F-0005",
        "F-0009",
    ]
    ids = [r["finding_id"] for r in rows]
    assert "F-0007" not in ids  # false positive
    assert "F-0003" not in ids and "F-0010" not in ids  # info
    assert not {"F-0011", "F-0012", "F-0013"} & set(ids)  # current run
    assert all(r["run_id"] != "acme-r3" for r in rows)
    globex = {r["finding_id"] for r in host_history(lanes_store, "globex-retest")}
    assert not globex & set(ids)
    assert "F-0020" in globex


def test_host_history_without_current_run_includes_every_run(lanes_store):
    rows = host_history(lanes_store, "acme-2026-q4")
    assert [r["finding_id"] for r in rows] == [
        "F-0001",
        "F-0006",
        "F-0002",
        "F-0008",
        "F-0011",
        "F-0004",
        "F-0012",
        "F-0013",
        "F-0005",
        "F-0009",
    ]
    first = rows[0]
    assert set(first) == {
        "record_id",
        "finding_id",
        "title",
        "severity",
        "run_id",
        "url",
        "type",
        "created_at",
    }
    assert first["severity"] == "critical"
    assert first["type"] == "sqli"
    assert first["url"].startswith("https://shop.acme.example/api/v2/items/17")
    assert lanes_store.get(first["record_id"]).content == first["title"]


@pytest.mark.parametrize("current_run", [None, "acme-r3"])
def test_host_history_limit_keeps_the_first_and_the_count_counts_them_all(lanes_store, current_run):
    every = host_history(lanes_store, "acme-2026-q4", current_run)
    assert host_history_count(lanes_store, "acme-2026-q4", current_run) == len(every) > 3
    assert host_history(lanes_store, "acme-2026-q4", current_run, limit=3) == every[:3]
    assert host_history(lanes_store, "acme-2026-q4", current_run, limit=0) == []
    assert host_history_count(lanes_store, "no-such-engagement") == 0


def test_host_history_excludes_expired_and_new_run_findings(lanes_store):
    lanes_store.record_finding(
        finding_id="F-0100",
        run_id="acme-r2",
        engagement="acme-2026-q4",
        severity="critical",
        title="Expired finding",
        url="https://shop.acme.example/x",
        type="sqli",
        expires_at=NOW,
    )
    lanes_store.record_finding(
        finding_id="F-0101",
        run_id="acme-r4",
        engagement="acme-2026-q4",
        severity="high",
        title="Found in the run in progress",
        url="https://shop.acme.example/y",
        type="xss",
    )
    earlier = [r["finding_id"] for r in host_history(lanes_store, "acme-2026-q4", "acme-r4")]
    assert "F-0100" not in earlier and "F-0101" not in earlier
    other_run = [r["finding_id"] for r in host_history(lanes_store, "acme-2026-q4", "acme-r3")]
    assert "F-0101" in other_run and "F-0100" not in other_run


def test_host_history_of_an_unknown_engagement_is_empty(lanes_store):
    assert host_history(lanes_store, "no-such-engagement") == []


# ------------------------------------------------------------------ learned tactics


def test_learned_tactics_exact_profile_proven_first(lanes_store):
    rows = learned_tactics(lanes_store, FLASK)
    assert [(r["tool"], r["evidence_grade"]) for r in rows] == [
        ("ffuf", "proven"),  # 7/10, bound 0.397
        ("sqlmap", "proven"),  # 12/23, bound 0.330
        ("dalfox", "hypothesis"),
        ("commix", "hypothesis"),
    ]
    assert [r["hypothesis"] for r in rows] == [False, False, True, True]
    django_sqlmap = tactic_id(lanes_store, DJANGO, "sqlmap")
    assert django_sqlmap not in [r["record_id"] for r in rows]
    sqlmap = rows[1]
    assert (sqlmap["hits"], sqlmap["n"]) == (12, 23)
    assert round(sqlmap["wilson"], 6) == 0.329624
    assert sqlmap["endpoint"] == "/api/v2/items/*"
    assert sqlmap["param"] == "q"
    assert sqlmap["technique"] == "time-based blind"
    assert set(sqlmap) == {
        "record_id",
        "tool",
        "endpoint",
        "param",
        "technique",
        "evidence_grade",
        "hits",
        "n",
        "rate",
        "wilson",
        "content",
        "hypothesis",
    }


def test_learned_tactics_cap_per_tool(lanes_store):
    proven_new = lanes_store.record_success(
        profile_hash=FLASK, tool="sqlmap", endpoint="/a", param="p", proof="dumped users"
    )
    hyp_ids = [
        lanes_store.record_success(profile_hash=FLASK, tool="sqlmap", endpoint=f"/h{i}", param="p")
        for i in range(3)
    ]
    rows = learned_tactics(lanes_store, FLASK, per_tool_cap=3)
    sqlmap = [r for r in rows if r["tool"] == "sqlmap"]
    assert len(sqlmap) == 3
    assert (sqlmap[0]["hits"], sqlmap[0]["n"]) == (12, 23)
    # Two proven (12/23 before the new 1/1 by confidence), then the oldest hypothesis.
    assert [r["evidence_grade"] for r in sqlmap] == ["proven", "proven", "hypothesis"]
    assert sqlmap[1]["record_id"] == proven_new
    assert sqlmap[2]["record_id"] == hyp_ids[0]
    # Proven rows of every tool come before any hypothesis.
    grades = [r["hypothesis"] for r in rows]
    assert grades == sorted(grades)
    one_each = learned_tactics(lanes_store, FLASK, per_tool_cap=1)
    assert sorted(r["tool"] for r in one_each) == ["commix", "dalfox", "ffuf", "sqlmap"]
    assert next(r for r in one_each if r["tool"] == "sqlmap")["hits"] == 12
    with pytest.raises(ValueError):
        learned_tactics(lanes_store, FLASK, per_tool_cap=0)


# ------------------------------------------------------------------ negative evidence


def test_negative_evidence_needs_a_big_enough_denominator(lanes_store):
    rows = negative_evidence(lanes_store, FLASK, min_denominator=5)
    assert [(r["tool"], r["hits"], r["n"]) for r in rows] == [("commix", 0, 8)]
    assert rows[0]["advice"] == "deprioritize"
    assert rows[0]["record_ids"] == [tactic_id(lanes_store, FLASK, "commix")]
    assert negative_evidence(lanes_store, FLASK, min_denominator=10) == []
    assert negative_evidence(lanes_store, FLASK, min_denominator=8)[0]["tool"] == "commix"


def test_negative_evidence_uses_the_pooled_counts_of_the_priors(lanes_store):
    # arjun: 0/3 on django only, pooled into flask's lanes like the priors.
    rows = by_tool(negative_evidence(lanes_store, FLASK, min_denominator=3))
    assert set(rows) == {"commix", "arjun"}
    assert [p["profile_hash"] for p in rows["arjun"]["profiles"]] == [DJANGO]
    assert all(r["advice"] == "deprioritize" for r in rows.values())
    assert not any("skip" in json.dumps(r) for r in rows.values())


def test_a_hit_on_a_similar_profile_lifts_a_tool_out_of_negative_evidence(lanes_store):
    lanes_store.record_success(profile_hash=DJANGO, tool="commix", endpoint="/x", param="f")
    assert negative_evidence(lanes_store, FLASK, min_denominator=5) == []
    assert (by_tool(profile_priors(lanes_store, FLASK))["commix"]["hits"]) == 1


def test_negative_evidence_rejects_a_zero_denominator_floor(lanes_store):
    with pytest.raises(ValueError):
        negative_evidence(lanes_store, FLASK, min_denominator=0)


# ------------------------------------------------------------------ CLI


def run_lanes(db: Path, *args: str):
    return CliRunner().invoke(main, ["lanes", str(db), *args], env=CLI_ENV)


def test_cli_tables_on_the_sample(lanes_db):
    result = run_lanes(lanes_db, "--profile", FLASK)
    assert result.exit_code == 0, result.output
    out = result.output
    sqlmap_line = next(line for line in out.splitlines() if "sqlmap" in line and "12/23" in line)
    assert "0.3296" in sqlmap_line
    assert "15/27" in out
    assert "deprioritize" in out
    assert "HYPOTHESIS — re-verify" in out
    dalfox_line = next(line for line in out.splitlines() if "dalfox" in line and "2/5" in line)
    assert "HYPOTHESIS — re-verify" in dalfox_line
    ffuf_line = next(
        line for line in out.splitlines() if "ffuf" in line and "/api/v2/users" in line
    )
    assert "proven" in ffuf_line and "HYPOTHESIS" not in ffuf_line
    assert "host history: not shown" in out
    assert DJANGO in out  # the pooled profile is named


def test_cli_host_history(lanes_db):
    result = run_lanes(
        lanes_db,
        "--profile",
        FLASK,
        "--engagement",
        "acme-2026-q4",
        "--current-run",
        "acme-r3",
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "F-0001" in out and "F-0009" in out
    for hidden in ("F-0007", "F-0003", "F-0010", "F-0011", "F-0014", "F-0020"):
        assert hidden not in out


def test_cli_json(lanes_db):
    result = run_lanes(lanes_db, "--profile", FLASK, "--engagement", "acme-2026-q4", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["profile"] == FLASK
    for key in ("priors", "learned_tactics", "negative_evidence", "host_history"):
        assert isinstance(data[key], list)
    sqlmap = next(r for r in data["priors"] if r["tool"] == "sqlmap")
    assert (sqlmap["hits"], sqlmap["n"]) == (15, 27)
    assert len(sqlmap["interval"]) == 2
    assert [r["hypothesis"] for r in data["learned_tactics"]] == [False, False, True, True]
    assert data["negative_evidence"][0]["advice"] == "deprioritize"
    assert data["host_history"][0]["finding_id"] == "F-0001"
    without = json.loads(run_lanes(lanes_db, "--profile", FLASK, "--json").output)
    assert without["host_history"] == []


def test_cli_min_denominator(lanes_db):
    result = run_lanes(lanes_db, "--profile", FLASK, "--min-denominator", "10")
    assert result.exit_code == 0, result.output
    assert "deprioritize" not in result.output.split("negative evidence", 1)[1].split("\n")[0]
    data = json.loads(
        run_lanes(lanes_db, "--profile", FLASK, "--min-denominator", "10", "--json").output
    )
    assert data["negative_evidence"] == []


def test_cli_unknown_profile_is_a_note_not_an_error(lanes_db):
    result = run_lanes(lanes_db, "--profile", "cobol:db2:unknown:unknown:soap:cics")
    assert result.exit_code == 0, result.output
    assert "no record has exactly the profile" in result.output
    assert LARAVEL in result.output
    data = json.loads(
        run_lanes(lanes_db, "--profile", "cobol:db2:unknown:unknown:soap:cics", "--json").output
    )
    assert data["known_profile"] is False
    assert FLASK in data["known_profiles"]
    assert data["priors"] == data["learned_tactics"] == []


def test_cli_no_data_for_zero_tries(tmp_path):
    rows = prepare_corpus([tactic("go:x:y:z", "ghost", 1, 1)])
    rows[0]["metadata"]["total_attempts"] = 0
    rows[0]["metadata"]["total_successes"] = 0
    db = tmp_path / "nodata.db"
    with MemoryStore(db, clock=clock) as store:
        store.ingest(rows)
    result = run_lanes(db, "--profile", "go:x:y:z")
    assert result.exit_code == 0, result.output
    ghost_line = next(line for line in result.output.splitlines() if "ghost" in line)
    assert "no data" in ghost_line


def test_cli_hostile_text_is_inert(tmp_path):
    db = tmp_path / "hostile.db"
    hostile = "\x1b[31mred [bold]loud[/bold] \u202eevil"
    with MemoryStore(db, clock=clock) as store:
        store.ingest(prepare_corpus([tactic("go:x:y:z", "sqlmap", 1, 1, content=hostile)]))
    result = run_lanes(db, "--profile", "go:x:y:z")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\u202e" not in result.output
    assert "\\x1b[31mred [bold]loud[/bold]" in result.output
    assert "\\u202eevil" in result.output
    data = json.loads(run_lanes(db, "--profile", "go:x:y:z", "--json").output)
    assert data["learned_tactics"][0]["content"] == hostile


def test_cli_current_run_needs_engagement(lanes_db):
    result = run_lanes(lanes_db, "--profile", FLASK, "--current-run", "acme-r3")
    assert result.exit_code == 2
    assert "--current-run needs --engagement" in result.output


def test_cli_missing_database_is_one_clear_line(tmp_path):
    result = run_lanes(tmp_path / "absent.db", "--profile", FLASK)
    assert result.exit_code == 1
    assert "no database at" in result.output
    assert "Traceback" not in result.output
