"""A search result's score, taken apart so that the arithmetic is on screen and adds up.

Pure functions from a ``SearchResult`` (and its response's trace) to Rich ``Text``; no
Textual, so the arithmetic is testable on its own. The digits are
``memtui.core.arithmetic``'s, the very ones ``memtui search --explain`` prints, and
every line redoes from them:

- ``norm N × W = P``: P is the product of the printed N and W, exactly.
- ``norm = (r − min) / (max − min) ≈ N``: that quotient of the printed numbers rounds
  to N.
- ``score P1 + P2 = S ≈ X``: S is the exact sum of the printed parts; X is S rounded
  (half up) to four places, and X is the score the results list shows.
- BM25: the printed per-term contributions (and the rounding remainder, on its own
  line when there is one) add up exactly to the printed Σ, which is the keyword lane's
  raw score to the same places.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from rich.text import Text

from memtui.core import arithmetic as digits
from memtui.core.search import SearchTrace
from memtui.render import safe_text
from memtui.tui.format import plural, share_bar

TOLERANCE_EXACT = 1e-9
RAW_TOLERANCE = 1e-6
"""How close the per-term decomposition must come to FTS5's own ``-bm25()``."""

KEYWORD_STYLE = "magenta"
VECTOR_STYLE = "cyan"


def score_text(score: float) -> str:
    """A score as printed everywhere (list and breakdown): four places, rounded half up."""
    return digits.listed_score(score)


def num(value: float | None) -> str:
    """Four decimals; tiny values (BM25 near its idf floor) in scientific notation."""
    if value is None:
        return "—"
    if value != 0 and abs(value) < 0.001:
        return f"{value:.3e}"
    return f"{value:.4f}"


@dataclass(frozen=True)
class Lane:
    name: str
    raw: float | None
    normalized: float
    weight: float
    pool_size: int
    pool_min: float | None
    pool_max: float | None
    pool_limit: int | None
    field: str | None = None
    """The stored vector's field that scored (a store with a vector per text field)."""

    @property
    def part(self) -> float:
        return self.weight * self.normalized

    @property
    def found(self) -> bool:
        return self.raw is not None


@dataclass(frozen=True)
class Arithmetic:
    keyword: Lane
    vector: Lane
    score: float
    fallback: str | None
    printed: digits.Arithmetic
    """The breakdown's digits (``memtui.core.arithmetic``), lane steps keyword then vector."""

    @property
    def total(self) -> float:
        return self.keyword.part + self.vector.part

    @property
    def adds_up_exactly(self) -> bool:
        return abs(self.total - self.score) <= TOLERANCE_EXACT

    @property
    def adds_up(self) -> bool:
        return self.adds_up_exactly and self.printed.adds_up


def arithmetic(
    result: Any, response_trace: SearchTrace, places: dict[str, int] | None = None
) -> Arithmetic:
    """The numbers a breakdown shows, from the result's trace and its response's pools
    (``places``: ``memtui.core.arithmetic.lane_places`` of the response)."""
    trace = result.trace
    weights = trace.weights or response_trace.weights
    pools = response_trace.pools

    def lane(name: str) -> Lane:
        item = trace.lane(name)
        pool = pools[name]
        return Lane(
            name=name,
            raw=item.raw,
            normalized=float(item.normalized or 0.0),
            weight=float(weights.get(name, 0.0)),
            pool_size=pool.size,
            pool_min=pool.min,
            pool_max=pool.max,
            pool_limit=pool.limit,
            field=item.field,
        )

    return Arithmetic(
        keyword=lane("keyword"),
        vector=lane("vector"),
        score=float(result.score),
        fallback=trace.fallback or response_trace.fallback,
        printed=digits.arithmetic(result, pools, places),
    )


def _label(out: Text, label: str, style: str = "bold") -> None:
    out.append(f"  {label:<8} ", style=style)


INDENT = " " * 11


def _formula(out: Text, step: digits.LaneStep, width: int | None) -> None:
    """``norm = (raw − min) / (max − min) ≈ N``; in two lines, broken before the ``/``, when
    one would not fit ``width``."""
    top = f"norm = ({step.raw} − {step.low})"
    bottom = f"/ ({step.high} − {step.low}) ≈ {step.normalized}"
    if width is None or len(INDENT) + len(top) + 1 + len(bottom) <= width:
        out.append(f"{top} {bottom}", style="dim")
    else:
        out.append(top, style="dim")
        out.append("\n" + INDENT + "     " + bottom, style="dim")


def _lane_lines(
    out: Text, lane: Lane, style: str, step: digits.LaneStep, width: int | None
) -> None:
    _label(out, lane.name, f"bold {style}")
    if not lane.found:
        out.append("not in this lane's pool → norm ", style="dim")
        out.append(step.normalized, style="dim")
    else:
        out.append(f"raw {step.raw} → norm ")
        out.append(step.normalized, style=style)
    out.append(f" × {step.weight} = ")
    out.append(step.part, style="bold")
    out.append("\n")
    if lane.found and lane.field is not None:
        out.append(INDENT)
        out.append("best of its fields: ", style="dim")
        out.append_text(safe_text(lane.field, limit=60))
        out.append("\n")
    if lane.found:
        out.append(INDENT)
        if step.all_equal:
            out.append("norm = 1 (every score in the pool is equal)", style="dim")
        else:
            _formula(out, step, width)
        out.append("\n")
    out.append(INDENT)
    limit = f" (top {lane.pool_limit})" if lane.pool_limit else ""
    low = step.low or digits.fmt(lane.pool_min, step.places)
    high = step.high or digits.fmt(lane.pool_max, step.places)
    out.append(
        f"pool {plural(lane.pool_size, 'candidate')}{limit} · min {low} · max {high}",
        style="dim",
    )
    out.append("\n")


def _names(terms: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(str(t["term"]) for t in terms))


def _joined(names: list[str], style: str) -> Text:
    out = Text()
    for index, name in enumerate(names):
        if index:
            out.append(", ", style="dim")
        out.append_text(safe_text(name, limit=40, style=style))
    return out


def _why_not_keyword(
    out: Text, explanation: dict[str, Any], lane: Lane, response_trace: SearchTrace
) -> None:
    """Why the keyword lane scores this record 0: which query terms occur in it."""
    terms = explanation.get("terms", [])
    present = _names([t for t in terms if t.get("tf")])
    absent = [name for name in _names(terms) if name not in present]
    any_terms = response_trace.any_terms
    if not terms:
        out.append("the query has no searchable term → keyword lane 0\n", style="dim")
        return
    if not present:
        out.append("no query term occurs in this record → keyword lane 0\n", style="dim")
        return
    if absent and not any_terms:
        out.append("occurs: ", style="dim")
        out.append_text(_joined(present, KEYWORD_STYLE))
        out.append(" · missing: ", style="dim")
        out.append_text(_joined(absent, "bold"))
        out.append("\n" + INDENT)
        out.append(
            "every term is required, so it is not a keyword match → keyword lane 0\n",
            style="dim",
        )
        return
    # A match (every term occurs, or any does in any-term mode) the lane did not keep.
    excluded = response_trace.excluded_by_lane.get("keyword", response_trace.excluded)
    matched = response_trace.matched - sum(excluded.values())
    words = "every query term occurs here" if not absent else "some query terms occur here"
    out.append(f"{words}: a keyword match, ", style="dim")
    if lane.pool_limit and matched > lane.pool_size:
        bm25 = float(explanation.get("total", 0.0))
        out.append(f"but outside the keyword pool of {lane.pool_limit}", style="bold")
        out.append("\n" + INDENT)
        out.append(
            f"the lane keeps the top {lane.pool_limit} of {matched:,} matches by BM25 "
            f"(lowest kept {num(lane.pool_min)}; this record {num(bm25)}) → keyword lane 0\n",
            style="dim",
        )
    else:
        out.append("yet the keyword lane did not return it → keyword lane 0\n", style="dim")


def _terms_lines(
    out: Text, explanation: dict[str, Any] | None, lane: Lane, response_trace: SearchTrace
) -> None:
    _label(out, "BM25", f"bold {KEYWORD_STYLE}")
    if response_trace.keyword_lane_error:
        out.append("the keyword lane failed for this search → keyword lane 0\n", style="red")
        return
    if explanation is None:
        what = "the per-term contributions" if lane.found else "which query terms occur here"
        out.append(f"working out {what}…\n", style="dim")
        return
    if "error" in explanation:
        out.append_text(safe_text(f"could not explain: {explanation['error']}", style="red"))
        out.append("\n")
        return
    if not lane.found:
        _why_not_keyword(out, explanation, lane, response_trace)
        return
    terms = explanation.get("terms", [])
    first = terms[0] if terms else {}
    rows, doc_len, avg_len = (
        explanation.get("rows", 0),
        explanation.get("doc_len", 0),
        explanation.get("avg_len", 0.0),
    )
    shown = digits.bm25_digits(explanation)
    out.append(
        f"k1 {first.get('k1', 1.2)} · b {first.get('b', 0.75)} · {rows} rows"
        f" · length {doc_len} tokens (avg {shown.avg_len if terms else f'{avg_len:.2f}'})\n",
        style="dim",
    )
    total = float(explanation.get("total", 0.0))
    assert lane.raw is not None
    width = max((len(t["term"]) for t in terms), default=4)
    width = min(max(width, 10), 18)
    arrow = 0
    for term, idf, contribution in zip(terms, shown.idf, shown.contributions, strict=True):
        out.append(INDENT)
        out.append_text(safe_text(term["term"][:18].ljust(width), style=KEYWORD_STYLE))
        row = f"  df {term['df']:>3}  idf {idf}  tf {term['tf']:>2}  → "
        arrow = max(arrow, width + len(row))
        out.append(row, style="dim")
        out.append(contribution)
        out.append("\n")
    if shown.remainder is not None:  # what rounding each term to the nearest left over
        out.append(INDENT)
        out.append("(rounding)".ljust(arrow - 2) + "→ ", style="dim")
        out.append(shown.remainder, style="dim")
        out.append("\n")
    raw = shown.number(lane.raw)
    adds_up = abs(total - lane.raw) <= RAW_TOLERANCE and shown.total == raw
    out.append(INDENT)
    out.append(f"Σ {shown.total}")
    out.append(" = raw " if adds_up else " ≠ raw ", style="dim")
    out.append(raw)
    out.append(" ✓" if adds_up else " ✗", style="green" if adds_up else "bold red")
    bm25 = explanation.get("bm25")
    if bm25 is not None:
        out.append(f"  (FTS5 bm25() = {shown.number(bm25)})", style="dim")
    out.append("\n")


def share_percent(parts: tuple[str, str]) -> int | None:
    """The keyword lane's share of the printed score, in whole percent (vector: the rest)."""
    keyword, vector = (Decimal(p) for p in parts)
    if keyword + vector <= 0:
        return None
    return int((100 * keyword / (keyword + vector)).quantize(Decimal(1), ROUND_HALF_UP))


def render_breakdown(
    result: Any,
    response_trace: SearchTrace,
    explanation: dict[str, Any] | None,
    places: dict[str, int] | None = None,
    width: int | None = None,
) -> Text:
    """Every number behind one result's score, the check that they add up, and why
    (``places``: ``memtui.core.arithmetic.lane_places`` of the response; ``width``: the
    room a line has, where known)."""
    numbers = arithmetic(result, response_trace, places)
    kw, vec = numbers.keyword, numbers.vector
    shown = numbers.printed
    keyword_step, vector_step = shown.steps
    out = Text(no_wrap=False)
    _lane_lines(out, kw, KEYWORD_STYLE, keyword_step, width)
    _lane_lines(out, vec, VECTOR_STYLE, vector_step, width)
    _label(out, "score")
    out.append(f"{keyword_step.part} + {vector_step.part} = {shown.total} ≈ ")
    out.append(shown.listed, style="bold")
    if numbers.adds_up:
        out.append("   ✓ adds up", style="bold green")  # short: it fits at 80 columns
    else:
        out.append(f"   ✗ does not add up: score is {numbers.score:.6f}", style="bold red reverse")
    out.append("\n")
    _label(out, "share")
    out.append_text(share_bar(kw.part, vec.part, 24))
    kw_pct = share_percent((keyword_step.part, vector_step.part))
    if kw_pct is not None:  # the two shares always sum to 100%
        out.append(f" keyword {kw_pct}%", style=KEYWORD_STYLE)
        out.append(" · ", style="dim")
        out.append(f"vector {100 - kw_pct}%", style=VECTOR_STYLE)
    out.append("\n")
    _terms_lines(out, explanation, kw, response_trace)
    _label(out, "note", "bold dim")
    if numbers.fallback:
        out.append("fallback: ", style="bold yellow")
        out.append_text(safe_text(numbers.fallback, style="yellow"))
        out.append("\n" + INDENT)
    if kw.found and vec.found:
        out.append("found by both lanes (a one-lane record scores 0 in the other)", "dim")
    elif kw.found or vec.found:
        lane = "keyword" if kw.found else "vector"
        other = "vector" if kw.found else "keyword"
        out.append(f"found by the {lane} lane only, so it scores 0 in the {other} lane", "dim")
    else:
        out.append("a record found by one lane only scores 0 in the other", "dim")
    return out
