"""Hostile record text through every CLI command: rendered inert, and --json exact and inert.

Each command's output is asserted on: no raw control character (C0 but newline,
DEL, C1, bidi controls, line separators) reaches stdout; the escapes show as
visible text (``\\x1b``); Rich markup shows literally; --json parses back to
the exact raw values.
"""

import json
import re

import pytest
from click.testing import CliRunner

from memtui.cli import main
from memtui.core.corpus import prepare_corpus
from memtui.core.embed import HashEmbedder
from memtui.core.store import MemoryStore
from memtui.render import escape_controls

HOSTILE = {
    "clear": "\x1b[2J\x1b[H CLEARSCREEN",
    "osc52": "\x1b]52;c;SGVsbG8=\x07 CLIPBOARD",
    "osc8": "\x1b]8;;https://evil.example\x1b\\OSC8LINK\x1b]8;;\x1b\\",
    "title": "\x1b]0;PWNED-TITLE\x07 TITLE",
    "c1": "\u009b2J C1CSI",
    "bidi": "abc\u202eexe.evil BIDI",
    "nul": "NUL\x00HERE DEL\x7f",
    "isolates": "LS\u2028PS\u2029 ISO\u2066x\u2069",
    "markup": "[bold red]x[/] MARKUP",
    "link": "[link=https://x.example]y[/link] LINKMARKUP",
}
ENGAGEMENT = "eng\x1b[2J\u009b\u202e[bold]E[/]"
OPERATOR = "op\x1b]0;T\x07\u202e"
REASON = "why\x1b]52;c;eA==\x07\u009b[link=https://x.example]r[/link]"
PROFILE = "a:b:c:d:e:f"
TOOL = "sqlmap\x1b[31m\u009b"
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def assert_inert(text):
    found = sorted({f"U+{ord(c):04X}" for c in RAW_CONTROL.findall(text)})
    assert not found, f"raw controls reached the terminal: {found}"


@pytest.fixture
def hostile_db(tmp_path):
    rows = [
        {
            "tier": "episodic",
            "record_type": "observation",
            "content": f"{value} marker",
            "engagement": ENGAGEMENT,
            "run_id": f"run-{name}\x1b[1A",
            "metadata": {f"key\x1b[2J{name}": value, "session_cookie": f"secret {value}"},
        }
        for name, value in HOSTILE.items()
    ]
    rows.append(
        {
            "tier": "longterm",
            "record_type": "tactic",
            "profile_hash": PROFILE,
            "tool": TOOL,
            "endpoint": "/login",
            "param": "user\u202e",
            "technique": HOSTILE["osc52"],
            "content": f"{HOSTILE['clear']} tactic marker",
            "successes": 1,
            "attempts": 3,
        }
    )
    rows.append({**rows[-1], "endpoint": "/search", "content": "refuted tactic marker"})
    rows.append(
        {
            "tier": "episodic",
            "record_type": "finding",
            "finding_id": "F-1",
            "severity": "high",
            "title": f"{HOSTILE['title']} finding marker",
            "url": "https://shop.example/login",
            "type": "sqli\u009b",
            "engagement": ENGAGEMENT,
            "run_id": "run-1",
            "profile_hash": PROFILE,
        }
    )
    path = tmp_path / "hostile.db"
    with MemoryStore(path, embedder=HashEmbedder(), operator=OPERATOR) as store:
        store.ingest(prepare_corpus(rows))
        tactic = store.fetch(record_type="tactic")[-1].id
        store.refute(tactic, reason=REASON, operator=OPERATOR)
    return path


@pytest.fixture
def cli(monkeypatch):
    monkeypatch.setenv("MEMTUI_NOW", "2026-11-30T12:00:00Z")
    monkeypatch.setenv("MEMTUI_OPERATOR", OPERATOR)
    monkeypatch.setenv("COLUMNS", "400")
    runner = CliRunner()

    def invoke(*args, input=None, code=0):
        result = runner.invoke(main, [str(a) for a in args], input=input)
        assert result.exit_code == code, result.output
        assert "Traceback" not in result.output
        assert_inert(result.output)
        return result

    return invoke


def assert_visible(output, *values):
    for value in values:
        assert escape_controls(value) in output, value


def parse(result):
    assert_inert(result.stdout)
    return json.loads(result.stdout)


def strings(data):
    """Every string in parsed JSON, keys included."""
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield key
            yield from strings(value)
    elif isinstance(data, list):
        for value in data:
            yield from strings(value)


# ---------------------------------------------------------------- rendered output


def test_records_shows_every_escape_and_markup_as_text(cli, hostile_db):
    out = cli("records", hostile_db).output
    assert_visible(out, *HOSTILE.values())
    assert "[bold red]x[/] MARKUP" in out and "[link=https://x.example]y[/link]" in out


def test_records_in_a_narrow_terminal_lists_each_record_with_its_content(
    cli, hostile_db, monkeypatch
):
    """Below 110 columns a record is a line of fields and its content below it: the
    content is never squeezed out, and hostile text stays inert there too."""
    monkeypatch.setenv("COLUMNS", "80")
    out = cli("records", hostile_db).output
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert lines[0].startswith("12 records")
    assert "#1 · episodic observation" in out
    assert "[bold red]x[/] MARKUP" in out
    assert escape_controls(HOSTILE["clear"]) in out.replace("\n", "")
    with MemoryStore(hostile_db) as store:
        for record in store.fetch():
            assert f"#{record.id} · {record.tier} {record.record_type}" in out


def test_search_explain_shows_hostile_results_and_query_as_text(cli, hostile_db):
    out = cli("search", hostile_db, "marker", "--explain", "--limit", "20").output
    assert_visible(out, *(f"{value} marker" for value in HOSTILE.values()))
    query = cli("search", hostile_db, "\x1b]52;c;x\x07 \u009b\u202e [bold]marker[/]", "--explain")
    assert "\\x9b" in query.output and "\\u202e" in query.output


def test_audit_shows_hostile_operator_and_reason_as_text(cli, hostile_db):
    out = cli("audit", hostile_db).output
    assert_visible(out, OPERATOR, REASON)
    assert "chain verified" in out


def test_info_shows_hostile_scopes_as_text(cli, hostile_db):
    out = cli("info", hostile_db).output
    assert_visible(out, ENGAGEMENT)


def test_lanes_shows_hostile_tools_and_findings_as_text(cli, hostile_db):
    out = cli("lanes", hostile_db, "--profile", PROFILE, "--engagement", ENGAGEMENT).output
    assert_visible(out, TOOL, HOSTILE["clear"], f"{HOSTILE['title']} finding marker")


def test_reveal_prints_the_value_with_its_escapes_visible(cli, hostile_db):
    result = cli("reveal", hostile_db, "1", "session_cookie", "--reason", REASON, input="y\n")
    assert result.stdout == escape_controls(f"secret {HOSTILE['clear']}") + "\n"


def test_check_names_a_hostile_path_as_text(cli, tmp_path, hostile_db):
    path = tmp_path / "evil\x1b]0;T\x07\u009b\u202e.db"
    path.write_bytes(hostile_db.read_bytes())
    with MemoryStore(path) as store:
        store.connection.execute("DROP TRIGGER records_au")
        store.connection.execute("UPDATE records SET content = 'changed' WHERE id = 1")
    out = cli("check", path, code=1).output
    assert f"memtui reindex-text {escape_controls(str(path))}" in out
    report = parse(cli("check", path, "--json", code=1))
    assert report["path"] == str(path)


def test_forget_prompt_shows_the_content_escaped_once(cli, hostile_db):
    out = cli("forget", hostile_db, "1", "--reason", "r", input="n\n", code=1).output
    assert "Forget episodic observation" in out


def test_forget_prompt_escapes_are_not_doubled(cli, hostile_db):
    out = cli("forget", hostile_db, "1", "--reason", "r", input="n\n", code=1).output
    assert "('\\x1b[2J\\x1b[H CLEARSCREEN marker')" in out


def test_forget_scope_prompt_shows_the_engagement_escaped(cli, hostile_db):
    out = cli(
        "forget-scope", hostile_db, "--engagement", ENGAGEMENT, "--reason", "r", input="n\n", code=1
    ).output
    assert "Forget all 11 records?" in out


def test_forget_scope_prompt_escapes_are_not_doubled(cli, hostile_db):
    out = cli(
        "forget-scope", hostile_db, "--engagement", ENGAGEMENT, "--reason", "r", input="n\n", code=1
    ).output
    assert f"engagement '{escape_controls(ENGAGEMENT)}': 11 records" in out


# ---------------------------------------------------------------- --json


def test_records_json_is_inert_and_exact(cli, hostile_db):
    data = parse(cli("records", hostile_db, "--json"))
    contents = {r["content"] for r in data}
    assert {f"{value} marker" for value in HOSTILE.values()} <= contents
    assert {r["scope"]["engagement"] for r in data if r["record_type"] == "observation"} == {
        ENGAGEMENT
    }
    assert {f"key\x1b[2J{name}" for name in HOSTILE} <= set(strings(data))
    assert not any("secret" in s for s in strings(data))  # masked, hostile or not


def test_search_json_is_inert_and_exact(cli, hostile_db):
    data = parse(cli("search", hostile_db, "marker", "--explain", "--json", "--limit", "20"))
    contents = {r["content"] for r in data["results"]}
    assert {f"{value} marker" for value in HOSTILE.values()} <= contents
    query = "\u009b\u202e marker"
    assert parse(cli("search", hostile_db, query, "--json"))["query"] == query


def test_audit_json_is_inert_and_exact(cli, hostile_db):
    events = parse(cli("audit", hostile_db, "--json"))
    assert events[0]["operator"] == OPERATOR and events[0]["reason"] == REASON


def test_lanes_json_is_inert_and_exact(cli, hostile_db):
    data = parse(
        cli("lanes", hostile_db, "--profile", PROFILE, "--engagement", ENGAGEMENT, "--json")
    )
    found = set(strings(data))
    assert TOOL in found and f"{HOSTILE['title']} finding marker" in found


def test_info_json_is_inert_and_exact(cli, hostile_db):
    data = parse(cli("info", hostile_db, "--json"))
    assert ENGAGEMENT in set(strings(data))


def test_json_escapes_only_what_a_terminal_acts_on(cli, hostile_db):
    out = cli("records", hostile_db, "--json").stdout
    assert "\\u009b2J C1CSI" in out and "\\u202e" in out and "\\u007f" in out
    assert "\\u2028" in out and "\\u2066" in out
    assert "[bold red]x[/]" in out
