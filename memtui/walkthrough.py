"""The byte-stable demo walkthrough of the sample corpus (``memtui demo --out FILE``).

Fixed clock, the deterministic hash embedder, an in-memory store, floats
rounded to six places, keys sorted: the same corpus always gives the same
bytes, so the committed copy is a regression oracle for the whole core.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memtui.core.corpus import load_corpus
from memtui.core.embed import HashEmbedder
from memtui.core.lanes import host_history, learned_tactics, negative_evidence, profile_priors
from memtui.core.records import MemoryRecord
from memtui.core.search import SearchResponse, explain_keyword, hybrid_search
from memtui.core.store import MemoryStore

WALKTHROUGH_NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
PROFILE = "python:postgresql:waf_present:generic_waf:rest:flask"
ENGAGEMENT = "acme-2026-q4"
CURRENT_RUN = "acme-r3"
QUERY = "sql injection items api"
OPERATOR = "memtui-demo"


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {str(k): _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def _tactic_view(record: MemoryRecord) -> dict[str, Any]:
    meta = record.metadata
    return {
        "id": record.id,
        "tool": record.tool_name,
        "profile_hash": record.profile_hash,
        "endpoint": record.url_pattern,
        "successes": meta.get("total_successes"),
        "attempts": meta.get("total_attempts"),
        "evidence_grade": meta.get("evidence_grade"),
        "confidence": meta.get("confidence"),
        "refuted": record.refuted,
    }


def _search_view(store: MemoryStore, response: SearchResponse) -> dict[str, Any]:
    results = []
    for result in response.results:
        entry = {
            "rank": result.rank,
            "record_id": result.record_id,
            "score": result.score,
            "keyword_score": result.keyword_score,
            "vector_score": result.vector_score,
            "trace": result.trace.to_dict(),
        }
        if result.trace.keyword.raw is not None:
            entry["keyword_terms"] = explain_keyword(store, response.trace.query, result.record_id)
        results.append(entry)
    return {"trace": response.trace.to_dict(), "results": results}


def build_walkthrough(corpus: str | Path) -> dict[str, Any]:
    """Run the walkthrough on a fresh in-memory store and return it as plain data."""
    store = MemoryStore(
        None, clock=lambda: WALKTHROUGH_NOW, embedder=HashEmbedder(), operator=OPERATOR
    )
    try:
        store.ingest(load_corpus(corpus), source=Path(corpus).name)
        out: dict[str, Any] = {
            "now": WALKTHROUGH_NOW.isoformat(),
            "corpus": Path(corpus).name,
            "tier_counts": store.tier_counts(),
        }

        tactic = next(
            r for r in store.fetch(record_type="tactic", profile_hash=PROFILE, tool_name="sqlmap")
        )
        before = store.record_count()
        replayed = store.record_success(
            profile_hash=PROFILE,
            tool="sqlmap",
            endpoint="/api/v2/items/31",
            param=tactic.metadata["param_name"],
            proof="replayed: delay 5.1 s against a 0.1 s baseline",
        )
        out["dedup"] = {
            "replayed_success_on": tactic.id,
            "returned_id": replayed,
            "records_before": before,
            "records_after": store.record_count(),
            "before": _tactic_view(tactic),
            "after": _tactic_view(store.get(tactic.id)),
        }

        out["search"] = {
            "query": QUERY,
            "hybrid": _search_view(store, hybrid_search(store, QUERY)),
            "keyword_only": _search_view(store, hybrid_search(store, QUERY, keyword_only=True)),
        }

        out["lanes"] = {
            "profile": PROFILE,
            "priors": profile_priors(store, PROFILE),
            "learned_tactics": learned_tactics(store, PROFILE),
            "negative_evidence": negative_evidence(store, PROFILE),
            "host_history": {
                "engagement": ENGAGEMENT,
                "current_run": CURRENT_RUN,
                "findings": host_history(store, ENGAGEMENT, current_run=CURRENT_RUN),
            },
        }

        tactics_before = [_tactic_view(r) for r in store.fetch(record_type="tactic")]
        victim = next(
            r for r in store.fetch(record_type="tactic", profile_hash=PROFILE, tool_name="dalfox")
        )
        refute_event = store.refute(victim.id, reason="payload blocked after WAF rule update")
        forgotten = next(
            r for r in store.fetch(record_type="tactic", profile_hash=PROFILE, tool_name="commix")
        )
        verified = store.forget(forgotten.id, reason="recorded against the wrong profile")
        out["corrections"] = {
            "refuted": {"record_id": victim.id, "audit_event": refute_event},
            "forgotten": {"record_id": forgotten.id, "erasure_verified": verified},
            "tactics_before": tactics_before,
            "tactics_after": [_tactic_view(r) for r in store.fetch(record_type="tactic")],
            "refuted_row_kept": _tactic_view(store.get(victim.id)),
            "forgotten_row": store.get(forgotten.id),
            "priors_after": profile_priors(store, PROFILE),
            "audit": store.audit_events(),
            "audit_chain": store.verify_audit() or "verified",
        }
        return _rounded(out)
    finally:
        store.close()


def render_walkthrough(corpus: str | Path) -> str:
    """The walkthrough as the exact text committed under ``sample_corpus/``."""
    data = build_walkthrough(corpus)
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
