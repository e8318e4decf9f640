import json

from click.testing import CliRunner
from conftest import ROOT, SAMPLE_CORPUS

from memtui.cli import main
from memtui.walkthrough import render_walkthrough

COMMITTED = ROOT / "sample_corpus" / "walkthrough.json"


def test_committed_walkthrough_regenerates_byte_for_byte(tmp_path):
    out = tmp_path / "walkthrough.json"
    result = CliRunner().invoke(main, ["demo", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == COMMITTED.read_bytes(), (
        "the walkthrough changed: if on purpose, run `memtui demo --out "
        "sample_corpus/walkthrough.json` and review the diff"
    )


def test_walkthrough_shows_what_the_design_promises():
    data = json.loads(render_walkthrough(SAMPLE_CORPUS))
    dedup = data["dedup"]
    assert dedup["records_before"] == dedup["records_after"]
    assert (dedup["before"]["successes"], dedup["after"]["successes"]) == (12, 13)
    hybrid = data["search"]["hybrid"]
    assert hybrid["trace"]["fallback"] is None
    for result in hybrid["results"]:
        weights = result["trace"]["weights"]
        recomputed = (
            weights["keyword"] * result["keyword_score"]
            + weights["vector"] * result["vector_score"]
        )
        assert abs(recomputed - result["score"]) < 1e-5
    keyword_only = data["search"]["keyword_only"]["trace"]
    assert keyword_only["fallback"] and keyword_only["weights"] == {"keyword": 1.0, "vector": 0.0}
    priors = data["lanes"]["priors"]
    assert [p["wilson"] for p in priors] == sorted((p["wilson"] for p in priors), reverse=True)
    assert all(row["advice"] == "deprioritize" for row in data["lanes"]["negative_evidence"])
    fixes = data["corrections"]
    assert fixes["forgotten"]["erasure_verified"] is True and fixes["forgotten_row"] is None
    assert fixes["refuted_row_kept"]["refuted"] is True
    live_after = {t["id"] for t in fixes["tactics_after"]}
    assert fixes["refuted"]["record_id"] not in live_after
    assert fixes["forgotten"]["record_id"] not in live_after
    assert fixes["audit_chain"] == "verified"
