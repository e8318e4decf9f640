"""What `memtui search --explain` and `memtui lanes` print: recomputable, readable at 80 columns.

The arithmetic of --explain is checked the way an auditor would do it: from the
printed numbers only, in exact decimal arithmetic, rounded to the printed
precision.
"""

from __future__ import annotations

import json
import random
import re
from decimal import ROUND_HALF_UP, Decimal, localcontext
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from memtui.cli import main
from memtui.commands import search as search_command
from memtui.commands import search_header
from memtui.commands.lanes import abbreviate_ids
from memtui.core.search import LanePool, LaneScore, ResultTrace, SearchResult
from memtui.core.store import MemoryStore

FLASK = "python:postgresql:waf_present:generic_waf:rest:flask"
QUERY = "sql injection items api"
NUMBER = r"(\d+(?:\.\d+)?)"


def run(*args: str, width: int = 200) -> str:
    env = {"COLUMNS": str(width), "MEMTUI_NOW": "2026-11-30T12:00:00Z"}
    result = CliRunner().invoke(main, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result.stdout


# ---------------------------------------------------------------- recomputing --explain


def places(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def rounded(exact: Decimal, like: str) -> Decimal:
    return exact.quantize(Decimal(1).scaleb(-places(like)), rounding=ROUND_HALF_UP)


def divide(top: Decimal, bottom: Decimal) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 60
        return top / bottom


LANE = re.compile(r"^  (keyword|vector)\s+(.*)$")
FULL = re.compile(
    rf"raw {NUMBER} → \({NUMBER} − {NUMBER}\) / \({NUMBER} − {NUMBER}\) = {NUMBER} "
    rf"× {NUMBER} = {NUMBER}$"
)
EQUAL = re.compile(rf"raw {NUMBER} → all-equal pool → (1\.0+) × {NUMBER} = {NUMBER}$")
ABSENT = re.compile(
    rf"(?:not found by this lane|lane off \(fallback\)) → 0 × {NUMBER} = {NUMBER}"
    r"(?: \(the weights are not re-divided\))?$"
)
SCORE = re.compile(rf"^  score\s+{NUMBER} \+ {NUMBER} = {NUMBER} ≈ {NUMBER}   adds up: yes$")


def logical_lines(out: str) -> list[str]:
    """The output with each breakdown's continuation lines joined to the line they continue."""
    lines: list[str] = []
    for line in out.splitlines():
        if line.startswith(" " * 11) and lines and LANE.match(lines[-1]):
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return lines


def check_breakdowns(out: str) -> list[tuple[str, str, str]]:
    """Recompute every printed breakdown from its printed numbers; return (kind, part, score)
    per lane line, so a test can see which cases it met."""
    seen = []
    parts: list[str] = []
    for line in logical_lines(out):
        lane = LANE.match(line)
        if lane:
            body = lane.group(2)
            if full := FULL.match(body):
                raw, raw2, low, high, low2, norm, weight, part = full.groups()
                assert raw == raw2 and low == low2, line
                exact = divide(Decimal(raw) - Decimal(low), Decimal(high) - Decimal(low))
                assert rounded(exact, norm) == Decimal(norm), line
                assert places(raw) >= 6 and places(norm) >= 6 and places(part) >= 6, line
                kind = "full"
            elif equal := EQUAL.match(body):
                raw, norm, weight, part = equal.groups()
                kind = "all-equal"
            elif absent := ABSENT.match(body):
                weight, part = absent.groups()
                norm = "0"
                kind = "absent"
            else:
                raise AssertionError(f"unreadable lane line: {line!r}")
            assert rounded(Decimal(norm) * Decimal(weight), part) == Decimal(part), line
            parts.append(part)
            seen.append((kind, part, lane.group(1)))
            continue
        score = SCORE.match(line)
        if score:
            first, second, total, about = score.groups()
            assert parts == [first, second], line
            assert Decimal(first) + Decimal(second) == Decimal(total), line  # exactly
            assert places(about) == 6
            assert rounded(Decimal(total), about) == Decimal(about), line
            parts = []
    assert not parts
    return seen


BM25_ROW = re.compile(
    rf"^  │ (\S+)\s+│\s+(\d+) │\s+{NUMBER} │\s+(\d+) │\s+(\d+)/{NUMBER} │\s+{NUMBER} │$"
)
BM25_SUM = re.compile(rf"^  │ sum\s+│.*│\s+{NUMBER} │$")
BM25_ROUNDING = re.compile(r"^  │ \(rounding\)\s+│.*│\s+([+-]\d+\.\d+) │$")
BM25_N = re.compile(r"^  sum \S+ = -bm25\(\) \S+; N = (\d+) rows, k1 = 1\.2, b = 0\.75$")


def check_bm25_tables(out: str) -> int:
    """Recompute every BM25 table from its printed numbers: each idf from N and df, each
    contribution from its row, the sum from the contributions. Returns how many tables."""
    tables = 0
    terms: list[tuple[str, ...]] = []
    total = None
    remainder = Decimal(0)
    for line in out.splitlines():
        if row := BM25_ROW.match(line):
            terms.append(row.groups())
        elif row := BM25_ROUNDING.match(line):
            remainder = Decimal(row.group(1))
        elif row := BM25_SUM.match(line):
            total = row.group(1)
        elif (count := BM25_N.match(line)) and terms:
            rows = Decimal(count.group(1))
            k1, b = Decimal("1.2"), Decimal("0.75")
            contributions = []
            for _term, df, idf, tf, doc_len, avg_len, contribution in terms:
                with localcontext() as ctx:
                    ctx.prec = 60
                    exact_idf = (
                        (rows - int(df) + Decimal("0.5")) / (int(df) + Decimal("0.5"))
                    ).ln()
                    assert rounded(exact_idf, idf) == Decimal(idf), line
                    exact = (
                        Decimal(idf)
                        * int(tf)
                        * (k1 + 1)
                        / (int(tf) + k1 * (1 - b + b * int(doc_len) / Decimal(avg_len)))
                    )
                assert rounded(exact, contribution) == Decimal(contribution), (terms, line)
                contributions.append(Decimal(contribution))
            assert total is not None and places(total) == 6
            # Each contribution is rounded on its own (equal rows print equal numbers);
            # what that leaves over is its own row, and everything adds up exactly.
            assert sum(contributions) + remainder == Decimal(total), (terms, remainder, total)
            assert all(places(row[-1]) == 6 for row in terms) and abs(remainder) < 1e-5
            tables += 1
            terms, total, remainder = [], None, Decimal(0)
    return tables


@pytest.mark.parametrize("width", [80, 200])
def test_explain_recomputes_from_the_printed_numbers(cli_db, width):
    out = run("search", str(cli_db), QUERY, "--explain", "--limit", "12", width=width)
    seen = check_breakdowns(out)
    assert len(seen) == 24
    kinds = {kind for kind, _, _ in seen}
    assert {"full", "absent"} <= kinds  # keyword hits and vector-only results
    assert "  keyword  not found by this lane → 0 × 0.3 = 0 " in out
    # The printed scores are the real scores, rounded: the same as --json has.
    data = json.loads(run("search", str(cli_db), QUERY, "--limit", "12", "--json"))
    scores = [f"{item['search']['score']:.6f}" for item in data["results"]]
    assert re.findall(r"^  score .* ≈ (\S+)   adds up", out, re.M) == scores
    # And each BM25 table recomputes too: idf, contributions, their sum.
    assert check_bm25_tables(out) == 8


def test_explain_recomputes_under_other_weights_and_keyword_only(cli_db):
    out = run("search", str(cli_db), "items", "--explain", "--weights", "0.45,0.55")
    assert len(check_breakdowns(out)) == 20
    assert "× 0.45 = " in out and "× 0.55 = " in out
    out = run("search", str(cli_db), "items", "--explain", "--keyword-only", "--limit", "3")
    seen = check_breakdowns(out)
    assert [kind for kind, _, lane in seen if lane == "vector"] == ["absent"] * 3
    assert "  vector   lane off (fallback) → 0 × 0.0 = 0\n" in out
    assert "vector pool: none (the vector lane is off)" in out


def test_explain_says_all_equal_pool(tmp_path):
    db = tmp_path / "equal.db"
    with MemoryStore(db) as store:
        store.ingest(
            [
                {"tier": "working", "record_type": "note", "content": "puffin colony count"},
                {"tier": "working", "record_type": "note", "content": "gannet colony count"},
            ]
        )
    out = run("search", str(db), "puffin", "--explain")
    assert "keyword pool: 1 match, -bm25 min" in out and "(all-equal pool → 1.0)" in out
    seen = check_breakdowns(out)
    assert ("all-equal", "1.0000000", "keyword") in seen  # 1.000000 × 1.0, exactly


def test_pool_lines_say_how_the_lanes_were_normalized(cli_db):
    out = run("search", str(cli_db), QUERY, "--explain", "--limit", "3", width=80)
    lines = out.splitlines()
    keyword = next(line for line in lines if line.startswith("keyword pool:"))
    vector = next(line for line in lines if line.startswith("vector pool:"))
    assert re.fullmatch(rf"keyword pool: 8 matches, -bm25 min {NUMBER}, max {NUMBER}", keyword)
    assert re.fullmatch(
        rf"vector pool: 43 records with cosine > 0, cosine min {NUMBER}, max {NUMBER}", vector
    )
    # The breakdowns use the very min and max the header shows.
    low, high = re.findall(NUMBER, vector)[-2:]
    assert f"− {low}) / ({high} − {low})" in " ".join(logical_lines(out))
    assert "each lane's pool: its best 100 (--pool)" in out


def fake_result(rng: random.Random, low: float, high: float, weights: dict) -> SearchResult:
    def lane() -> tuple[float | None, float]:
        if rng.random() < 0.15:
            return None, 0.0
        raw = rng.choice([low, high, rng.uniform(low, high)])
        return raw, 1.0 if high == low else (raw - low) / (high - low)

    (kw_raw, kw), (vec_raw, vec) = lane(), lane()
    return SearchResult(
        record_id=1,
        keyword_score=kw,
        vector_score=vec,
        score=weights["keyword"] * kw + weights["vector"] * vec,
        created_at=None,
        expires_at=None,
        rank=1,
        trace=ResultTrace(
            keyword=LaneScore(kw_raw, kw),
            vector=LaneScore(vec_raw, vec),
            weights=weights,
            fallback=None,
            found_by=[],
            created_at=None,
            expires_at=None,
        ),
    )


def test_arithmetic_recomputes_for_any_numbers():
    """Thousands of pools and weights, narrow ranges included: the printed numbers always
    recompute, and they are the true values rounded."""
    rng = random.Random(20261130)
    for _ in range(3000):
        low = rng.choice([0.0, rng.uniform(0, 1), rng.uniform(0, 30)])
        span = rng.choice([0.0, 1e-9, 1e-4, rng.uniform(0, 1), rng.uniform(0, 20)])
        weight = rng.choice([0.3, 0.5, round(rng.random(), rng.randint(1, 4)), 1 / 3])
        weights = {"keyword": weight, "vector": rng.choice([1 - weight, 0.7, 2.0])}
        pools = {lane: LanePool(size=5, min=low, max=low + span) for lane in weights}
        result = fake_result(rng, low, low + span, weights)
        width = rng.choice([80, 120, 400])
        lines = search_command.explanation_lines(result, pools, width)
        lines[-1] += "   adds up: yes"
        check_breakdowns("\n".join(lines))
        assert re.search(rf" = \S+ ≈ {result.score:.6f}   adds up", lines[-1]), lines[-1]


# ---------------------------------------------------------------- the trace, defensively


def printed(trace: dict, width: int = 80) -> str:
    out = Console(width=width, record=True, markup=False, highlight=False)
    with out.capture() as captured:
        search_header.print_left_out(out, trace)
    return captured.get()


def test_missing_vectors_and_per_lane_exclusions_are_said():
    trace = {
        "matched": 8,
        "excluded": {
            "refuted": 1,
            "expired": 0,
            "out_of_scope": 2,
            "vector": {"refuted": 1, "no_vector": 3},
        },
        "pools": {"vector": {"size": 4, "excluded": {"expired": 2}}},
        "vectors_missing": 3,
        "keyword_excluded": {"expired": 4},
    }
    text = printed(trace)
    assert "keyword matches: 8\n" in text
    assert (
        "left out: refuted 1, expired 0, out of scope 2 (vector lane: refuted 1, no vector 3; "
        "vector lane: expired 2; keyword lane: expired 4)" in " ".join(text.split())
    )
    assert "3 live in-scope records have no stored vector" in text
    assert "no stored vector" not in printed({**trace, "vectors_missing": 0})
    assert "keyword matches: 0" in printed({})  # an older or smaller trace prints too
    nothing = {"refuted": 0, "expired": 0, "out_of_scope": 0}
    quiet = {"matched": 2, "excluded": nothing, "excluded_by_lane": {"keyword": nothing}}
    assert printed(quiet) == "keyword matches: 2; left out: refuted 0, expired 0, out of scope 0\n"
    older = {"matched": 8, "excluded": {"refuted": 1, "expired": 0, "out_of_scope": 2}}
    assert printed(older) == "keyword matches: 8; left out: refuted 1, expired 0, out of scope 2\n"
    # The trace as the search gives it now: the distinct records left out by either lane,
    # then each lane's own counts (zeros left out).
    lanes = {
        "matched": 4,
        "excluded": {"refuted": 0, "expired": 1, "out_of_scope": 0},
        "excluded_by_lane": {
            "keyword": {"refuted": 0, "expired": 1, "out_of_scope": 0},
            "vector": {"refuted": 0, "expired": 0, "out_of_scope": 0},
        },
        "vectors_missing": None,
    }
    assert " ".join(printed(lanes).split()) == (
        "keyword matches: 4 left out: refuted 0, expired 1, out of scope 0 "
        "(keyword lane: expired 1; vector lane: none)"
    )


# ---------------------------------------------------------------- 80 columns


def table_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line[:1] and line[0] in "┏┃┡│└"]


def assert_fits(out: str, width: int) -> None:
    for line in out.splitlines():
        assert len(line) <= width, line
    for line in table_lines(out):  # no table is cut at the right edge
        assert line.rstrip()[-1] in "┓┃┩│┘", line


def test_search_table_at_80_columns_keeps_ids_and_content(cli_db):
    out = run("search", str(cli_db), QUERY, "--explain", "--limit", "10", width=80)
    assert_fits(out, 80)
    rows = [line for line in table_lines(out) if re.match(r"│\s+\d+ │", line)]
    assert len(rows) == 10
    first = rows[0]
    assert re.match(r"│\s+1 │\s+38 │ 0\.9805 │", first)
    assert "│ SQL injection in items" in first  # whole words, from the start
    # Each result's content takes at most two lines, cut with an ellipsis.
    assert "…" in out
    wide = run("search", str(cli_db), QUERY, "--limit", "3", width=160)
    assert_fits(wide, 160)
    assert "│ SQL injection in items API of the legacy portal search parameter q exposes" in wide


def test_explain_lines_fit_80_columns(cli_db):
    out = run("search", str(cli_db), QUERY, "--explain", "--limit", "10", width=80)
    assert_fits(out, 80)
    assert "\n  BM25 by term\n" in out
    wide = run("search", str(cli_db), QUERY, "--explain", "--limit", "3", width=140)
    # Wide enough, a lane's whole arithmetic is one line.
    assert re.search(r"^  vector   raw \S+ → \(.*\) / \(.*\) = \S+ × 0\.7 = \S+$", wide, re.M)


def test_hostile_content_stays_inert_in_a_narrow_table(tmp_path):
    db = tmp_path / "hostile.db"
    hostile = "\x1b[31mred [bold]loud[/bold] \u202eevil puffin " + "word " * 40
    with MemoryStore(db) as store:
        store.ingest([{"tier": "working", "record_type": "note", "content": hostile}])
    out = run("search", str(db), "puffin", "--explain", width=80)
    assert "\x1b" not in out and "\u202e" not in out
    assert "│ \\x1b[31mred " in out and "│ [bold]loud[/bold]" in out  # wrapped, escaped
    assert_fits(out, 80)


def lanes_out(db: Path, width: int) -> str:
    return run("lanes", str(db), "--profile", FLASK, "--engagement", "acme-2026-q4", width=width)


def test_lanes_at_80_columns_keep_provenance_content_and_titles(cli_db):
    out = lanes_out(cli_db, 80)
    assert_fits(out, 80)
    lines = out.splitlines()

    def row(*words: str) -> str:
        return next(line for line in lines if all(w in line for w in words))

    # Priors and negative evidence: the record ids stay visible.
    assert row("sqlmap", "15/27").rstrip(" │").endswith("1, 5")
    assert row("commix", "0/8", "deprioritize").rstrip(" │").endswith("2")
    # Learned tactics: the grade, the endpoint, then the content from its start.
    assert "HYPOTHESIS —" in row("dalfox", "2/5")
    ffuf = lines.index(row("ffuf", "7/10", "proven"))
    below = " ".join(line.split("│")[-2].strip() for line in lines[ffuf : ffuf + 4])
    assert "/api/v2/users/*/profile" in below and "Sequential user id" in below
    # Host history: the titles from their start, and the whole URL.
    history = out.split("host history for acme-2026-q4")[1]
    text = " ".join(line.split("│")[-2].strip() for line in table_lines(history)[3:-1])
    assert "SQL injection in items API search parameter q allows" in text
    assert "https://shop.acme.example/api/v2/items/17?q=shoe" in text.replace(" ", "")
    assert "learned tactics for exactly" in out and "at most 3 per tool)" in out


def test_lanes_use_the_width_when_there_is_some(cli_db):
    out = lanes_out(cli_db, 160)
    assert_fits(out, 160)
    assert "95% interval on 0..1" in out
    tactic = next(line for line in out.splitlines() if "sqlmap" in line and "12/23" in line)
    assert "/api/v2/items/* · q · time-based blind" in tactic
    dalfox = next(line for line in out.splitlines() if "dalfox" in line and "2/5" in line)
    assert "HYPOTHESIS — re-verify" in dalfox


def test_long_id_lists_are_abbreviated():
    assert abbreviate_ids([3, 7, 12, 15, 18, 20, 22], 3) == "3, 7, 12 +4"
    assert abbreviate_ids([3, 7], 3) == "3, 7"
    assert abbreviate_ids([], 3) == ""


def test_a_long_foreign_id_folds_and_the_table_still_fits():
    from types import SimpleNamespace

    long_id = "lg:memories.user-1/pref-color-very-long-identifier-here"
    results = [
        SimpleNamespace(id=long_id, rank=1, score=0.5, keyword_score=0.5, vector_score=0.5),
        SimpleNamespace(id="abc", rank=2, score=0.4, keyword_score=0.4, vector_score=0.2),
    ]
    records = {
        long_id: SimpleNamespace(
            tier="longterm", record_type="preference", content="The user prefers dark mode."
        ),
        "abc": SimpleNamespace(tier="working", record_type="note", content="short"),
    }
    out = Console(width=80, record=True, markup=False, highlight=False)
    with out.capture() as captured:
        search_command._print_table(out, SimpleNamespace(results=results), records)
    text = captured.get()
    assert_fits(text, 80)
    ids = "".join(line.split("│")[2].strip() for line in table_lines(text)[3:-1])
    assert ids == long_id + "abc"
    assert "│ The user prefers" in text


def equal_terms_db(path: Path) -> Path:
    """A record where ``puffin`` and ``gannet`` have the same df and tf: equal contributions
    whose six-place roundings add up to 0.000001 more than the sum's."""
    rows = [{"tier": "working", "record_type": "note", "content": "puffin gannet filler"}]
    rows += [
        {"tier": "working", "record_type": "note", "content": f"tern number {k}"} for k in range(12)
    ]
    with MemoryStore(path) as store:
        store.ingest(rows)
    return path


def test_equal_terms_print_equal_contributions(tmp_path):
    """Two terms with equal inputs print equal contributions; what rounding each to the
    nearest leaves over is a row of its own."""
    out = run("search", str(equal_terms_db(tmp_path / "equal.db")), "puffin gannet", "--explain")
    rows_shown = [row.groups() for line in out.splitlines() if (row := BM25_ROW.match(line))]
    assert [row[0] for row in rows_shown] == ["puffin", "gannet"]
    assert rows_shown[0][1:] == rows_shown[1][1:]  # df, idf, tf, length, contribution
    assert rows_shown[0][-1] == "2.120264"
    assert re.search(r"│ \(rounding\)\s+│.*│\s+-0\.000001 │", out), out
    assert re.search(r"│ sum\s+│.*│\s+4\.240527 │", out)
    assert check_bm25_tables(out) == 1
