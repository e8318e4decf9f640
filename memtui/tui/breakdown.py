"""A search result's score, taken apart so that the arithmetic is on screen and adds up.

Pure functions from a ``SearchResult`` (and its response's trace) to numbers and Rich
``Text``; no Textual, so the arithmetic is testable on its own.

Every line of a breakdown is arithmetic a reader can redo from the digits printed:

- ``norm N × W = P``: P is the product of the printed N and W, exactly.
- ``score P1 + P2 = S ≈ X``: S is the exact sum of the printed parts; X is S rounded
  (half up) to four places, and X is the score the results list shows.
- ``norm = (r − min) / (max − min) ≈ q``: q is that quotient of the printed numbers
  rounded to four places; the numbers get more digits when four would not give the
  norm to four places.
- BM25: the printed per-term contributions add up exactly to the printed Σ, which is
  the printed raw score of the keyword lane.

A printed norm is the true norm rounded to five places: to the nearest, unless the
printed parts would then add up to a sum that rounds to another score than the one
listed; then one norm is rounded the other way (still within 0.00001 of the truth).
The per-term contributions are rounded the same way (largest remainder), so that the
rounded terms add up to the rounded total.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_UP, Decimal
from typing import Any

from rich.text import Text

from memtui.render import safe_text
from memtui.tui.format import plural, share_bar

TOLERANCE_EXACT = 1e-9
SHOWN_DECIMALS = 4
"""The score's places, in the results list and at the end of a breakdown."""
NORM_PLACES = 5
"""A lane's normalized score's places in the breakdown (its product with the weight is
then exact at six places)."""
TERM_PLACES = 4
"""The BM25 per-term contributions' places (more when the raw score itself is tiny)."""
MAX_PLACES = 12
RAW_TOLERANCE = 1e-6
"""How close the per-term decomposition must come to FTS5's own ``-bm25()``."""

KEYWORD_STYLE = "magenta"
VECTOR_STYLE = "cyan"


def _quantum(places: int) -> Decimal:
    return Decimal(1).scaleb(-places)


def rounded(value: float, places: int, rounding: str = ROUND_HALF_UP) -> Decimal:
    """``value`` (a float, taken exactly) rounded to ``places`` decimal places."""
    return Decimal(float(value)).quantize(_quantum(places), rounding=rounding)


def score_text(score: float) -> str:
    """A score as printed everywhere (list and breakdown): four places, rounded half up."""
    return f"{rounded(score, SHOWN_DECIMALS):.{SHOWN_DECIMALS}f}"


def num(value: float | None) -> str:
    """Four decimals; tiny values (BM25 near its idf floor) in scientific notation."""
    return "—" if value is None else digits(value, 4)


def digits(value: float, places: int) -> str:
    """``places`` decimals; a tiny value in scientific notation with ``places`` digits."""
    if value != 0 and abs(value) < 0.001:
        return f"{value:.{places - 1}e}"
    return f"{value:.{places}f}"


def weight_places(weight: float) -> int:
    """The fewest decimals that hold a weight exactly (1 for the app's tenths)."""
    for places in range(1, 7):
        if abs(round(weight, places) - weight) <= 1e-12:
            return places
    return 6


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
class Printed:
    """The breakdown's numbers exactly as printed, lane by lane (keyword, vector)."""

    norms: tuple[str, str]
    weights: tuple[str, str]
    parts: tuple[str, str]
    total: str
    """The exact sum of the printed parts."""
    score: str
    """``total`` rounded half up to four places."""
    matches_listed: bool
    """``score`` is the score the results list shows."""


@dataclass(frozen=True)
class Arithmetic:
    keyword: Lane
    vector: Lane
    score: float
    fallback: str | None

    @property
    def total(self) -> float:
        return self.keyword.part + self.vector.part

    @property
    def adds_up_exactly(self) -> bool:
        return abs(self.total - self.score) <= TOLERANCE_EXACT

    @property
    def printed(self) -> Printed:
        """The norms, weights, parts and sum as printed, chosen so that they add up.

        Each norm is printed to five places, its part as the exact product with the
        weight, the sum exactly, then rounded to the four places of the listed score.
        Rounding each norm to the nearest can leave that sum a hair on the other side
        of a rounding edge from the true score; then a norm is rounded the other way
        (the fewest such, keyword first) so the printed sum rounds to the listed score.
        """
        lanes = (self.keyword, self.vector)
        places = [weight_places(lane.weight) for lane in lanes]
        weights = [Decimal(f"{lane.weight:.{p}f}") for lane, p in zip(lanes, places, strict=True)]
        part_places = NORM_PLACES + max(places)
        listed = score_text(self.score)
        options: list[list[Decimal]] = []
        for lane in lanes:
            nearest = rounded(lane.normalized, NORM_PLACES)
            down = rounded(lane.normalized, NORM_PLACES, ROUND_FLOOR)
            up = rounded(lane.normalized, NORM_PLACES, ROUND_CEILING)
            other = up if nearest == down else down
            options.append([nearest] if other == nearest else [nearest, other])
        combos = sorted(
            itertools.product(*options),
            key=lambda combo: sum(n != o[0] for n, o in zip(combo, options, strict=True)),
        )
        chosen = combos[0]
        for combo in combos:
            total = sum((n * w for n, w in zip(combo, weights, strict=True)), Decimal(0))
            if f"{total.quantize(_quantum(SHOWN_DECIMALS), ROUND_HALF_UP)}" == listed:
                chosen = combo
                break
        parts = [n * w for n, w in zip(chosen, weights, strict=True)]
        total = sum(parts, Decimal(0))
        score = f"{total.quantize(_quantum(SHOWN_DECIMALS), ROUND_HALF_UP)}"
        return Printed(
            norms=(f"{chosen[0]:.{NORM_PLACES}f}", f"{chosen[1]:.{NORM_PLACES}f}"),
            weights=tuple(
                f"{lane.weight:.{max(2, p)}f}" for lane, p in zip(lanes, places, strict=True)
            ),  # type: ignore[arg-type]
            parts=(f"{parts[0]:.{part_places}f}", f"{parts[1]:.{part_places}f}"),
            total=f"{total:.{part_places}f}",
            score=score,
            matches_listed=score == listed,
        )

    @property
    def adds_up_on_screen(self) -> bool:
        """Redone from the printed digits: parts = norm × weight, their sum rounds to
        the listed score."""
        shown = self.printed
        parts = [
            Decimal(n) * Decimal(w) == Decimal(p)
            for n, w, p in zip(shown.norms, shown.weights, shown.parts, strict=True)
        ]
        total = Decimal(shown.parts[0]) + Decimal(shown.parts[1])
        return (
            all(parts)
            and total == Decimal(shown.total)
            and shown.matches_listed
            and f"{total.quantize(_quantum(SHOWN_DECIMALS), ROUND_HALF_UP)}" == shown.score
        )

    @property
    def adds_up(self) -> bool:
        return self.adds_up_exactly and self.adds_up_on_screen


def apportion(values: list[float], target: int, places: int) -> list[int] | None:
    """Units of 10**-places for ``values`` that sum to ``target``: each value rounded
    down, then up for the largest remainders until the sum is reached (largest
    remainder). None when that cannot be done by rounding each value up or down."""
    scale = Decimal(1).scaleb(places)
    exact = [Decimal(float(v)) * scale for v in values]
    floors = [int(e.to_integral_value(ROUND_FLOOR)) for e in exact]
    missing = target - sum(floors)
    fractional = [i for i in range(len(values)) if exact[i] != floors[i]]
    if not 0 <= missing <= len(fractional):
        return None
    order = sorted(fractional, key=lambda i: exact[i] - floors[i], reverse=True)
    for i in order[:missing]:
        floors[i] += 1
    return floors


def term_places(raw: float) -> int:
    """Four places; more for a tiny raw score (every term near the idf floor), so that
    it keeps four significant digits."""
    value = abs(raw)
    places = TERM_PLACES
    while value and places < MAX_PLACES and value < 10.0 ** (3 - places):
        places += 1
    return places


@dataclass(frozen=True)
class PrintedTerms:
    """The BM25 block's numbers as printed."""

    contributions: tuple[str, ...]
    total: str
    """The exact sum of the printed contributions."""
    raw: str
    """The keyword lane's raw score at the same places."""
    adds_up: bool


def printed_terms(terms: list[dict[str, Any]], total: float, raw: float) -> PrintedTerms:
    """Per-term contributions rounded (largest remainder) so that they add up to the raw
    score as printed, when the decomposition agrees with FTS5 (to 1e-6)."""
    places = term_places(raw)
    values = [float(t["contribution"]) for t in terms]
    agrees = abs(total - raw) <= RAW_TOLERANCE
    scale = Decimal(1).scaleb(places)
    units = None
    for target in (raw, total) if agrees else (total,):
        units = apportion(values, int(rounded(target, places) * scale), places)
        if units is not None:
            break
    if units is None:
        units = [int(rounded(v, places) * scale) for v in values]
    quantum = _quantum(places)
    shown = tuple(f"{Decimal(u) * quantum:.{places}f}" for u in units)
    printed_total = f"{Decimal(sum(units)) * quantum:.{places}f}"
    printed_raw = f"{rounded(raw, places):.{places}f}"
    return PrintedTerms(
        contributions=shown,
        total=printed_total,
        raw=printed_raw,
        adds_up=agrees and printed_total == printed_raw,
    )


def norm_formula(lane: Lane) -> tuple[str, str, str, str] | None:
    """``(raw, min, max, q)`` as printed in ``norm = (raw − min) / (max − min) ≈ q``.

    Four places where they give the norm to four places; more otherwise (a pool whose
    scores are close together). None when the pool's scores are all equal.
    """
    if lane.raw is None or lane.pool_min is None or lane.pool_max is None:
        return None
    if not lane.pool_max > lane.pool_min:
        return None
    target = rounded(lane.normalized, SHOWN_DECIMALS)
    found: tuple[str, str, str, str] | None = None
    for places in range(4, MAX_PLACES + 1):
        raw, low, high = (digits(v, places) for v in (lane.raw, lane.pool_min, lane.pool_max))
        spread = Decimal(high) - Decimal(low)
        if spread == 0:
            continue
        q = ((Decimal(raw) - Decimal(low)) / spread).quantize(
            _quantum(SHOWN_DECIMALS), ROUND_HALF_UP
        )
        found = (raw, low, high, f"{q:.{SHOWN_DECIMALS}f}")
        if q == target:
            break
    return found


def arithmetic(result: Any, response_trace: dict[str, Any]) -> Arithmetic:
    """The numbers a breakdown shows, from the result's trace and its response's pools."""
    trace = result.trace
    weights = trace.get("weights") or response_trace.get("weights") or {}
    pools = response_trace.get("pools", {})

    def lane(name: str) -> Lane:
        item = trace.get(name, {})
        pool = pools.get(name, {})
        return Lane(
            name=name,
            raw=item.get("raw"),
            normalized=float(item.get("normalized") or 0.0),
            weight=float(weights.get(name, 0.0)),
            pool_size=int(pool.get("size") or 0),
            pool_min=pool.get("min"),
            pool_max=pool.get("max"),
            pool_limit=pool.get("limit"),
            field=item.get("field"),
        )

    return Arithmetic(
        keyword=lane("keyword"),
        vector=lane("vector"),
        score=float(result.score),
        fallback=trace.get("fallback") or response_trace.get("fallback"),
    )


def _label(out: Text, label: str, style: str = "bold") -> None:
    out.append(f"  {label:<8} ", style=style)


INDENT = " " * 11


def _lane_lines(out: Text, lane: Lane, style: str, norm: str, weight: str, part: str) -> None:
    _label(out, lane.name, f"bold {style}")
    if not lane.found:
        out.append("not in this lane's pool → norm ", style="dim")
        out.append(norm, style="dim")
    else:
        out.append(f"raw {num(lane.raw)} → norm ")
        out.append(norm, style=style)
    out.append(f" × {weight} = ")
    out.append(part, style="bold")
    out.append("\n")
    if lane.found and lane.field is not None:
        out.append(INDENT)
        out.append("best of its fields: ", style="dim")
        out.append_text(safe_text(lane.field, limit=60))
        out.append("\n")
    if lane.found:
        out.append(INDENT)
        formula = norm_formula(lane)
        if formula is not None:
            raw, low, high, q = formula
            out.append(f"norm = ({raw} − {low}) / ({high} − {low}) ≈ {q}", style="dim")
        else:
            out.append("norm = 1 (every score in the pool is equal)", style="dim")
        out.append("\n")
    out.append(INDENT)
    limit = f" (top {lane.pool_limit})" if lane.pool_limit else ""
    out.append(
        f"pool {plural(lane.pool_size, 'candidate')}{limit} · min {num(lane.pool_min)} · "
        f"max {num(lane.pool_max)}",
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
    out: Text, explanation: dict[str, Any], lane: Lane, response_trace: dict[str, Any]
) -> None:
    """Why the keyword lane scores this record 0: which query terms occur in it."""
    terms = explanation.get("terms", [])
    present = _names([t for t in terms if t.get("tf")])
    absent = [name for name in _names(terms) if name not in present]
    any_terms = bool(response_trace.get("any_terms"))
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
    by_lane = response_trace.get("excluded_by_lane") or {}
    excluded = by_lane.get("keyword", response_trace.get("excluded")) or {}
    matched = int(response_trace.get("matched") or 0) - sum(excluded.values())
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
    out: Text, explanation: dict[str, Any] | None, lane: Lane, response_trace: dict[str, Any]
) -> None:
    _label(out, "BM25", f"bold {KEYWORD_STYLE}")
    if response_trace.get("keyword_lane_error"):
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
    out.append(
        f"k1 {first.get('k1', 1.2)} · b {first.get('b', 0.75)} · {rows} rows"
        f" · length {doc_len} tokens (avg {avg_len:.2f})\n",
        style="dim",
    )
    total = float(explanation.get("total", 0.0))
    assert lane.raw is not None
    shown = printed_terms(terms, total, lane.raw)
    width = max((len(t["term"]) for t in terms), default=4)
    width = min(max(width, 4), 18)
    for term, contribution in zip(terms, shown.contributions, strict=True):
        out.append(INDENT)
        out.append_text(safe_text(term["term"][:18].ljust(width), style=KEYWORD_STYLE))
        out.append(
            f"  df {term['df']:>3}  idf {num(term['idf'])}  tf {term['tf']:>2}  → ",
            style="dim",
        )
        out.append(contribution)
        out.append("\n")
    out.append(INDENT)
    out.append(f"Σ {shown.total}")
    out.append(" = raw " if shown.adds_up else " ≠ raw ", style="dim")
    out.append(shown.raw)
    out.append(" ✓" if shown.adds_up else " ✗", style="green" if shown.adds_up else "bold red")
    bm25 = explanation.get("bm25")
    if bm25 is not None:
        out.append(f"  (FTS5 bm25() = {num(bm25)})", style="dim")
    out.append("\n")


def share_percent(parts: tuple[str, str]) -> int | None:
    """The keyword lane's share of the printed score, in whole percent (vector: the rest)."""
    keyword, vector = (Decimal(p) for p in parts)
    if keyword + vector <= 0:
        return None
    return int((100 * keyword / (keyword + vector)).quantize(Decimal(1), ROUND_HALF_UP))


def render_breakdown(
    result: Any, response_trace: dict[str, Any], explanation: dict[str, Any] | None
) -> Text:
    """Every number behind one result's score, the check that they add up, and why."""
    numbers = arithmetic(result, response_trace)
    kw, vec = numbers.keyword, numbers.vector
    shown = numbers.printed
    out = Text(no_wrap=False)
    _lane_lines(out, kw, KEYWORD_STYLE, shown.norms[0], shown.weights[0], shown.parts[0])
    _lane_lines(out, vec, VECTOR_STYLE, shown.norms[1], shown.weights[1], shown.parts[1])
    _label(out, "score")
    out.append(f"{shown.parts[0]} + {shown.parts[1]} = {shown.total} ≈ ")
    out.append(shown.score, style="bold")
    if numbers.adds_up:
        out.append("   ✓ adds up", style="bold green")  # short: it fits at 80 columns
    else:
        out.append(f"   ✗ does not add up: score is {numbers.score:.6f}", style="bold red reverse")
    out.append("\n")
    _label(out, "share")
    out.append_text(share_bar(kw.part, vec.part, 24))
    kw_pct = share_percent(shown.parts)
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
