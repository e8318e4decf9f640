"""Property-based tests of the store's writer invariants and of corpus loading."""

import json

from conftest import fixed_clock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtui.core.corpus import CorpusError, prepare_corpus
from memtui.core.stats import wilson_lower_bound
from memtui.core.store import MemoryStore, MemoryStoreError

PROFILES = ["a:b:c", "x:y:z"]
TOOLS = ["sqlmap", "ffuf"]
ENDPOINTS = ["/api/1/items", "/api/2/items", "/search"]

key = st.tuples(st.sampled_from(PROFILES), st.sampled_from(TOOLS), st.sampled_from(ENDPOINTS))
action = st.tuples(
    st.sampled_from(["success", "success_proof", "failure", "refute", "forget"]), key
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(action, max_size=25))
def test_writer_invariants_hold_under_any_sequence(actions):
    with MemoryStore(clock=fixed_clock) as store:
        model: dict[tuple, dict] = {}
        for name, (profile, tool, endpoint) in actions:
            args = dict(profile_hash=profile, tool=tool, endpoint=endpoint, param="q")
            sig = (profile, tool, "/search" if endpoint == "/search" else "/api/*/items")
            entry = model.get(sig)
            if name.startswith("success"):
                proof = "p" if name == "success_proof" else None
                if entry and entry["refuted"]:
                    try:
                        store.record_success(**args, proof=proof)
                        raise AssertionError("a refuted tactic accepted a success")
                    except MemoryStoreError:
                        continue
                rid = store.record_success(**args, proof=proof)
                if entry is None:
                    entry = model[sig] = {
                        "id": rid,
                        "s": 0,
                        "a": 0,
                        "proven": False,
                        "refuted": False,
                    }
                assert rid == entry["id"]
                entry["s"] += 1
                entry["a"] += 1
                entry["proven"] = entry["proven"] or bool(proof)
            elif name == "failure":
                rid = store.record_failure(**args)
                if entry is None:
                    assert rid is None
                else:
                    entry["a"] += 1
            elif name == "refute":
                rid = store.record_refuted(**args, reason="r")
                if entry is None:
                    assert rid is None
                else:
                    entry["refuted"] = True
            elif name == "forget" and entry is not None:
                store.forget(entry["id"], reason="r")
                del model[sig]
        tactics = {r.id: r for r in store.fetch(include_refuted=True)}
        assert set(tactics) == {e["id"] for e in model.values()}
        for entry in model.values():
            meta = tactics[entry["id"]].metadata
            assert meta["total_successes"] == entry["s"]
            assert meta["total_attempts"] == entry["a"]
            assert meta["total_successes"] <= meta["total_attempts"]
            if entry["refuted"]:
                assert meta["evidence_grade"] == "hypothesis" and meta["confidence"] == 0.0
            else:
                assert meta["evidence_grade"] == ("proven" if entry["proven"] else "hypothesis")
                assert meta["confidence"] == wilson_lower_bound(entry["s"], entry["a"])
        live = {r.id for r in store.fetch()}
        assert live == {e["id"] for e in model.values() if not e["refuted"]}
        assert store.verify_audit() is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
record_like = st.dictionaries(
    st.sampled_from(
        [
            "tier",
            "record_type",
            "content",
            "metadata",
            "tool",
            "endpoint",
            "param",
            "profile_hash",
            "successes",
            "attempts",
            "finding_id",
            "severity",
            "title",
            "url",
            "type",
            "engagement",
            "run_id",
            "created_at",
            "expires_at",
            "refuted",
            "targets",
        ]
    ),
    json_values
    | st.sampled_from(["working", "longterm", "episodic", "tactic", "finding", "note", "high"]),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(record_like, max_size=5) | json_values)
def test_corpus_loading_never_tracebacks_and_never_half_loads(data):
    with MemoryStore(clock=fixed_clock) as store:
        try:
            rows = prepare_corpus(data)
        except CorpusError as exc:
            assert str(exc).startswith("corpus")
            assert store.record_count() == 0
            return
        store.ingest(rows)
        assert store.record_count() == len(rows)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_corpus_text_that_is_not_json_is_one_clear_error(tmp_path_factory, text):
    from memtui.core.corpus import load_corpus

    path = tmp_path_factory.mktemp("fuzz") / "c.json"
    path.write_text(text, encoding="utf-8")
    try:
        json.loads(text)
    except ValueError:
        try:
            load_corpus(path)
        except CorpusError as exc:
            assert "invalid JSON" in str(exc) or "must be a JSON list" in str(exc)
        else:
            raise AssertionError("invalid JSON loaded")
