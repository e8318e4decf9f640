"""A search result's score, taken apart so that the arithmetic is on screen and adds up.

Pure functions from a ``SearchResult`` (and its response's trace) to numbers and Rich
``Text``; no Textual, so the arithmetic is testable on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text

from memtui.render import safe_text
from memtui.tui.format import share_bar

TOLERANCE_EXACT = 1e-9
SHOWN_DECIMALS = 4

KEYWORD_STYLE = "magenta"
VECTOR_STYLE = "cyan"


def score_text(score: float) -> str:
    """A score as printed everywhere (list and breakdown), rounded exactly as ``shown``."""
    scale = 10**SHOWN_DECIMALS
    return f"{round(score * scale) / scale:.{SHOWN_DECIMALS}f}"


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

    @property
    def total(self) -> float:
        return self.keyword.part + self.vector.part

    @property
    def adds_up_exactly(self) -> bool:
        return abs(self.total - self.score) <= TOLERANCE_EXACT

    @property
    def shown(self) -> tuple[str, str, str]:
        """The two lane parts and the score as printed (four decimals) so that they add up.

        Rounding each number on its own can break the sum on screen by one unit in the
        last place (0.147154 + 0.524096 = 0.671250 would print as 0.1472 + 0.5241 =
        0.6712). The parts are therefore apportioned (largest remainder): each printed
        part is its true value rounded up or down, and the printed parts sum exactly to
        the printed score.
        """
        parts = apportion([self.keyword.part, self.vector.part], self.score, SHOWN_DECIMALS)
        if parts is None:
            return num(self.keyword.part), num(self.vector.part), num(self.score)
        scale = 10**SHOWN_DECIMALS
        return tuple(f"{units / scale:.{SHOWN_DECIMALS}f}" for units in (*parts, sum(parts)))  # type: ignore[return-value]

    @property
    def adds_up_on_screen(self) -> bool:
        """Recomputed from the printed numbers: the printed parts sum to the printed score."""
        kw, vec, total = (round(float(x) * 10**SHOWN_DECIMALS) for x in self.shown)
        return (
            kw + vec == total
            and abs(total / 10**SHOWN_DECIMALS - self.score) <= 10**-SHOWN_DECIMALS
        )

    @property
    def adds_up(self) -> bool:
        return self.adds_up_exactly and self.adds_up_on_screen


def apportion(values: list[float], total: float, decimals: int) -> list[int] | None:
    """Integer units (10**-decimals) for ``values`` that sum to ``total`` rounded.

    Each value is rounded down, then the missing units go to the values with the largest
    remainders. None when the values do not add up to ``total`` in the first place.
    """
    scale = 10**decimals
    if any(v < 0 for v in values) or abs(sum(values) - total) > TOLERANCE_EXACT:
        return None
    target = round(total * scale)
    floors = [int(v * scale) for v in values]
    missing = target - sum(floors)
    if not 0 <= missing <= len(values):
        return None
    order = sorted(range(len(values)), key=lambda i: values[i] * scale - floors[i], reverse=True)
    for i in order[:missing]:
        floors[i] += 1
    return floors


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
        )

    return Arithmetic(
        keyword=lane("keyword"),
        vector=lane("vector"),
        score=float(result.score),
        fallback=trace.get("fallback") or response_trace.get("fallback"),
    )


def _label(out: Text, label: str, style: str = "bold") -> None:
    out.append(f"  {label:<8} ", style=style)


def _lane_lines(out: Text, lane: Lane, style: str, part: str) -> None:
    _label(out, lane.name, f"bold {style}")
    if not lane.found:
        out.append("not in this lane's pool → norm 0.0000", style="dim")
        out.append(f" × {lane.weight:.2f} = ")
        out.append(part, style="bold")
        out.append("\n")
    else:
        out.append(f"raw {num(lane.raw)} → norm ")
        out.append(f"{lane.normalized:.4f}", style=style)
        out.append(f" × {lane.weight:.2f} = ")
        out.append(part, style="bold")
        out.append("\n")
        out.append(" " * 11)
        if (
            lane.pool_min is not None
            and lane.pool_max is not None
            and lane.pool_max > lane.pool_min
        ):
            out.append(
                f"norm = ({num(lane.raw)} − {num(lane.pool_min)}) / "
                f"({num(lane.pool_max)} − {num(lane.pool_min)})",
                style="dim",
            )
        else:
            out.append("norm = 1 (every score in the pool is equal)", style="dim")
        out.append("\n")
    out.append(" " * 11)
    limit = f" (top {lane.pool_limit})" if lane.pool_limit else ""
    out.append(
        f"pool {lane.pool_size} candidates{limit} · min {num(lane.pool_min)} · "
        f"max {num(lane.pool_max)}",
        style="dim",
    )
    out.append("\n")


def _terms_lines(out: Text, explanation: dict[str, Any] | None, lane: Lane) -> None:
    _label(out, "BM25", f"bold {KEYWORD_STYLE}")
    if not lane.found:
        out.append("no query term occurs in this record (keyword lane 0)\n", style="dim")
        return
    if explanation is None:
        out.append("working out the per-term contributions…\n", style="dim")
        return
    if "error" in explanation:
        out.append_text(safe_text(f"could not explain: {explanation['error']}", style="red"))
        out.append("\n")
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
    width = max((len(t["term"]) for t in terms), default=4)
    width = min(max(width, 4), 18)
    for term in terms:
        out.append(" " * 11)
        out.append_text(safe_text(term["term"][:18].ljust(width), style=KEYWORD_STYLE))
        out.append(
            f"  df {term['df']:>3}  idf {term['idf']:.4f}  tf {term['tf']:>2}  → ",
            style="dim",
        )
        out.append(num(term["contribution"]))
        out.append("\n")
    total = float(explanation.get("total", 0.0))
    out.append(" " * 11)
    out.append(f"Σ {num(total)}")
    same = lane.raw is not None and abs(total - lane.raw) <= 1e-6
    out.append(" = raw " if same else " ≠ raw ", style="dim")
    out.append(num(lane.raw))
    out.append(" ✓" if same else " ✗", style="green" if same else "bold red")
    bm25 = explanation.get("bm25")
    if bm25 is not None:
        out.append(f"  (FTS5 bm25() = {bm25:.4f})", style="dim")
    out.append("\n")


def render_breakdown(
    result: Any, response_trace: dict[str, Any], explanation: dict[str, Any] | None
) -> Text:
    """Every number behind one result's score, the check that they add up, and why."""
    numbers = arithmetic(result, response_trace)
    kw, vec = numbers.keyword, numbers.vector
    kw_part, vec_part, total = numbers.shown
    out = Text(no_wrap=False)
    _lane_lines(out, kw, KEYWORD_STYLE, kw_part)
    _lane_lines(out, vec, VECTOR_STYLE, vec_part)
    _label(out, "score")
    out.append(f"{kw_part} + {vec_part} = ")
    out.append(total, style="bold")
    if numbers.adds_up:
        out.append("   ✓ adds up", style="bold green")
        out.append(f" (score shown {total})", style="dim")
    else:
        out.append(f"   ✗ does not add up: score is {numbers.score:.6f}", style="bold red reverse")
    out.append("\n")
    _label(out, "share")
    out.append_text(share_bar(kw.part, vec.part, 24))
    if numbers.total > 0:
        kw_pct = round(100 * kw.part / numbers.total)  # the two shares always sum to 100%
        out.append(f" keyword {kw_pct}%", style=KEYWORD_STYLE)
        out.append(" · ", style="dim")
        out.append(f"vector {100 - kw_pct}%", style=VECTOR_STYLE)
    out.append("\n")
    _terms_lines(out, explanation, kw)
    _label(out, "note", "bold dim")
    if numbers.fallback:
        out.append("fallback: ", style="bold yellow")
        out.append_text(safe_text(numbers.fallback, style="yellow"))
        out.append("\n" + " " * 11)
    if kw.found and vec.found:
        out.append("found by both lanes (a one-lane record scores 0 in the other)", "dim")
    elif kw.found or vec.found:
        lane = "keyword" if kw.found else "vector"
        other = "vector" if kw.found else "keyword"
        out.append(f"found by the {lane} lane only, so it scores 0 in the {other} lane", "dim")
    else:
        out.append("a record found by one lane only scores 0 in the other", "dim")
    return out
