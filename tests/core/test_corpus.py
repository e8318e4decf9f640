import ipaddress
import json
import re

import pytest
from conftest import SAMPLE_CORPUS, fixed_clock

from memtui.core.corpus import CorpusError, load_corpus, prepare_corpus
from memtui.core.records import TIERS, anonymize_target
from memtui.core.store import MemoryStore, MemoryStoreError

FLASK = "python:postgresql:waf_present:generic_waf:rest:flask"


def test_sample_corpus_meets_its_brief():
    raw = json.loads(SAMPLE_CORPUS.read_text())
    rows = load_corpus(SAMPLE_CORPUS)
    assert len(rows) >= 60
    assert {r["tier"] for r in rows} == set(TIERS)
    tactics = [r for r in raw if r["record_type"] == "tactic"]
    assert len({t["profile_hash"] for t in tactics}) >= 3
    findings = [r for r in raw if r["record_type"] == "finding"]
    assert len({f["engagement"] for f in findings}) >= 2
    counts = {(t["tool"], t["successes"], t["attempts"]) for t in tactics}
    assert (
        ("nuclei", 1, 1) in counts and ("sqlmap", 12, 23) in counts and ("commix", 0, 8) in counts
    )
    assert any(t.get("refuted") for t in tactics)
    assert any(f.get("false_positive") for f in findings)
    assert any(f["severity"] == "info" for f in findings)
    assert any(r.get("expires_at", "9") < "2026-11-30" for r in raw)
    assert not foreign_hosts(raw), "every host in the sample corpus is under .example"


# Hosts, as the corpus can spell them: inside a URL, after an @, as a dotted IPv4
# address, or bare in prose (``oob.tester.example``).
_URL = re.compile(r"[a-z][a-z0-9+.-]*://(?:[^@/\s?#]*@)?(\[[^\]]*\]|[^/\s?#:]+)", re.IGNORECASE)
_EMAIL = re.compile(r"[\w.+-]+@((?:[\w-]+\.)+[\w-]+)")
_IPV4 = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.])")
_BARE_HOST = re.compile(
    r"(?<![\w.@/-])(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z][a-z0-9-]*(?![\w-])", re.IGNORECASE
)
# A bare dotted word ending in one of these is a file name, not a host (outside URLs).
_FILE_SUFFIXES = {"gz", "tar", "zip", "json", "xml", "php", "js", "html", "txt", "sql", "bak"}
_DOCUMENTATION_NETS = [
    ipaddress.ip_network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")
]


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, inner in value.items():
            yield key
            yield from _strings(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _strings(inner)


def _fictional_host(host: str) -> bool:
    host = host.lower().rstrip(".").strip("[]")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host == "example" or host.endswith(".example")
    return any(address in net for net in _DOCUMENTATION_NETS)


def foreign_hosts(data) -> list[str]:
    """Every host in ``data`` (URLs, e-mail domains, IPv4 addresses, bare host names)
    that is neither under ``.example`` nor in an IPv4 documentation range."""
    found = []
    for text in _strings(data):
        rest = text
        for pattern in (_URL, _EMAIL):
            found += [m.group(1) for m in pattern.finditer(rest)]
            rest = pattern.sub(" ", rest)
        found += _IPV4.findall(rest)
        rest = _IPV4.sub(" ", rest)
        found += [
            m.group(0)
            for m in _BARE_HOST.finditer(rest)
            if m.group(0).rsplit(".", 1)[1].lower() not in _FILE_SUFFIXES
        ]
    return [host for host in found if not _fictional_host(host)]


def test_the_host_check_finds_every_spelling_of_a_real_host():
    raw = json.loads(SAMPLE_CORPUS.read_text())
    hosts = []
    for text in _strings(raw):
        for pattern in (_URL, _BARE_HOST):
            hosts += [m.group(m.lastindex or 0) for m in pattern.finditer(text)]
    assert "shop.acme.example" in hosts and "oob.tester.example" in hosts  # it does look
    for injected in (
        "shop.acme.com",
        "https://shop.acme.com/api/v2/items/1",
        "http://user@intranet.acme.com:8080/",
        "mail ops@acme.com",
        "callback to 10.20.30.40",
        "see Shop.Acme.COM.",
    ):
        note = {"tier": "working", "record_type": "note", "content": f"reached {injected} ok"}
        assert foreign_hosts([*raw, note]), injected
    for old in ('"shop.acme.example"', "https://shop.acme.example/", "host oob.tester.example"):
        text = SAMPLE_CORPUS.read_text()
        assert old in text
        copy = json.loads(text.replace(old, old.replace(".example", ".com"), 1))
        assert foreign_hosts(copy) == ["shop.acme.com" if "shop" in old else "oob.tester.com"]
    fine = "at 192.0.2.7, https://a.b.example:8443/x, ops@c.example and dump.tar.gz"
    assert foreign_hosts([*raw, {"content": fine}]) == []


def test_tactics_carry_counts_grade_and_hashed_targets():
    rows = load_corpus(SAMPLE_CORPUS)
    sqlmap = next(r for r in rows if r.get("tool_name") == "sqlmap" and r["profile_hash"] == FLASK)
    meta = sqlmap["metadata"]
    assert (meta["total_successes"], meta["total_attempts"]) == (12, 23)
    assert round(meta["confidence"], 6) == 0.329624
    assert meta["evidence_grade"] == "proven"
    assert anonymize_target("shop.acme.example") in meta["targets_seen"]
    assert "acme" not in json.dumps(meta["targets_seen"])


def test_ingest_bulk_loads_and_indexes_everything(sample_store):
    assert sample_store.record_count() == 72
    indexed = sample_store.query("SELECT count(*) FROM records_fts_docsize")[0][0]
    assert indexed == 72
    hits = sample_store.query(
        "SELECT rowid FROM records_fts WHERE records_fts MATCH 'zephyrquokka'"
    )
    assert len(hits) == 1
    assert sample_store.vector_count() == 72
    assert sample_store.recorded_embedder() == {"name": "hash-256", "dim": 256}
    trigger = sample_store.query("SELECT name FROM sqlite_master WHERE name = 'records_ai'")
    assert trigger, "the per-row index trigger is restored after a bulk load"


def test_ingest_into_a_non_empty_store_indexes_only_new_rows(store):
    store.add_record(tier="working", record_type="note", content="existing words")
    store.ingest(
        prepare_corpus(
            [{"tier": "knowledge", "record_type": "reference", "content": "fresh words"}]
        )
    )
    rows = store.query("SELECT rowid FROM records_fts WHERE records_fts MATCH 'words'")
    assert len(rows) == 2
    assert store.query("PRAGMA integrity_check")[0][0] == "ok"
    store.query("INSERT INTO records_fts(records_fts) VALUES ('integrity-check')")


def test_ingesting_a_tactic_twice_is_refused_and_loads_nothing(store):
    rows = load_corpus(SAMPLE_CORPUS)
    store.ingest(rows)
    with pytest.raises(MemoryStoreError, match="already in the database"):
        store.ingest(rows)
    assert store.record_count() == 72


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"tier": "working"}, "must be a JSON list"),
        ([{"record_type": "note", "content": "x"}], "record 0: missing field 'tier'"),
        ([{"tier": "hot", "record_type": "note", "content": "x"}], "record 0: unknown tier 'hot'"),
        (
            [
                {"tier": "working", "record_type": "note", "content": "ok"},
                {"tier": "working", "record_type": "note"},
            ],
            "record 1: missing field 'content'",
        ),
        (
            [{"tier": "working", "record_type": "note", "content": "x", "colour": 1}],
            "unknown field",
        ),
        (
            [
                {
                    "tier": "longterm",
                    "record_type": "tactic",
                    "profile_hash": "a",
                    "tool": "t",
                    "endpoint": "/",
                    "param": "p",
                    "successes": 3,
                    "attempts": 2,
                }
            ],
            "must not exceed attempts",
        ),
        (
            [
                {
                    "tier": "longterm",
                    "record_type": "tactic",
                    "profile_hash": "a",
                    "tool": "t",
                    "endpoint": "/",
                    "param": "p",
                    "engagement": "acme",
                }
            ],
            "cannot carry engagement",
        ),
        (
            [
                {
                    "tier": "episodic",
                    "record_type": "finding",
                    "finding_id": "F",
                    "run_id": "r",
                    "engagement": "e",
                    "severity": "urgent",
                    "title": "t",
                    "url": "u",
                    "type": "x",
                }
            ],
            "severity 'urgent'",
        ),
        (
            [{"tier": "working", "record_type": "note", "content": "x", "expires_at": "soon"}],
            "'expires_at'",
        ),
        ([5], "record 0: must be a JSON object"),
        (
            [
                {"tier": "working", "record_type": "note", "content": "ok"},
                {
                    "tier": "knowledge",
                    "record_type": "finding",
                    "finding_id": "F",
                    "run_id": "r",
                    "engagement": "e",
                    "severity": "high",
                    "title": "t",
                    "url": "https://a.example/",
                    "type": "x",
                },
            ],
            "record 1: a finding belongs to the episodic tier",
        ),
        (
            [
                {
                    "tier": "episodic",
                    "record_type": "tactic",
                    "profile_hash": "a",
                    "tool": "t",
                    "endpoint": "/",
                    "param": "p",
                }
            ],
            "record 0: a tactic belongs to the longterm tier",
        ),
    ],
)
def test_malformed_corpora_say_which_record_and_what(data, message):
    with pytest.raises(CorpusError, match=message):
        prepare_corpus(data)


def test_bad_json_says_where(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[\n  {"tier": "working",\n   "content": oops}\n]\n')
    with pytest.raises(CorpusError, match=r"invalid JSON at line 3, column 15"):
        load_corpus(bad)


def test_duplicate_tactics_in_one_corpus_are_refused():
    tactic = {
        "tier": "longterm",
        "record_type": "tactic",
        "profile_hash": "a",
        "tool": "t",
        "endpoint": "/x/1",
        "param": "p",
    }
    with pytest.raises(CorpusError, match="record 1: same tactic"):
        prepare_corpus([tactic, {**tactic, "endpoint": "/x/2"}])


def test_a_failing_ingest_leaves_the_database_untouched(db_path):
    with MemoryStore(db_path, clock=fixed_clock) as st:
        st.add_record(tier="working", record_type="note", content="before")
        rows = prepare_corpus([{"tier": "working", "record_type": "note", "content": "new"}])
        rows.append({"tier": "bogus", "record_type": "note", "content": "x", "metadata": {}})
        with pytest.raises(MemoryStoreError, match="record 1: unknown tier 'bogus'"):
            st.ingest(rows)
        assert st.record_count() == 1
        assert st.audit_events() == []
        assert st.query("SELECT name FROM sqlite_master WHERE name = 'records_ai'")


def test_a_lone_surrogate_in_a_corpus_is_refused():
    data = json.loads('[{"tier": "working", "record_type": "note", "content": "a\\ud800b"}]')
    with pytest.raises(CorpusError, match="record 0: 'content' holds a lone surrogate"):
        prepare_corpus(data)
